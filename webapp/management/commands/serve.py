"""``manage.py serve``: start the dashboard's web server and one Celery worker again (after
``make demo DEMO_ARGS=--no-serve``, or after stopping the demo), without redoing the demo or
touching any account. Migrates first (a no-op when the database is current)."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.core.management.color import color_style


class Command(BaseCommand):
    help = "Serve the dashboard and run one Celery worker until Ctrl-C (make serve)."

    def add_arguments(self, parser):
        parser.add_argument("--addr", default="127.0.0.1:8000", help="host:port the web server listens on (default %(default)s)")

    def handle(self, *args, **opts):
        check_addr(opts["addr"])  # before anything starts: a bad or busy address changes nothing
        call_command("migrate", interactive=False, verbosity=0)
        serve(opts["addr"], stdout=self.stdout, style=self.style)


def parse_addr(addr: str) -> tuple[str, int]:
    """``HOST:PORT`` (IPv6 hosts in brackets) -> ``(host, port)``, a port from 1 to 65535.
    Raises ``CommandError`` naming the problem. Nothing is resolved or bound."""
    host, sep, port = addr.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise CommandError(f"--addr must be HOST:PORT with a port from 1 to 65535, got {addr!r}")
    return host, int(port)


def check_addr(addr: str) -> tuple[str, int]:
    """Check that the web server can listen on ``addr`` (:func:`parse_addr`, a host that
    resolves, and the address free now: a test bind). Returns ``(host, port)``. Raises
    ``CommandError`` naming the problem."""
    host, port = parse_addr(addr)
    try:
        family, kind, proto, _, sockaddr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as err:
        raise CommandError(f"--addr {addr!r}: host {host!r} does not resolve ({err.strerror})") from None
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(sockaddr)
        except OSError as err:
            raise CommandError(f"--addr {addr}: cannot listen there ({err.strerror}); is another server running? "
                               "Stop it or choose another --addr") from None
    return host, port


def _stop_with_parent() -> None:
    """``preexec_fn`` of serve's children (Linux): the kernel sends the child SIGTERM when this
    process dies, whatever kills it (``prctl(PR_SET_PDEATHSIG)``), so a SIGKILLed ``serve`` leaves
    no web server or worker behind. Elsewhere a no-op."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)


def serve(addr: str, *, stdout, style=None) -> None:
    """Run the web server (``runserver --noreload`` on ``addr``), one Celery worker (queues
    ``cpu`` and ``gpu``) and one for job scheduling passes (queue ``control``) in the foreground;
    Ctrl-C, SIGTERM or SIGHUP stops them all. Returns when one exits (the others are then stopped
    too); raises ``CommandError`` when one exited on its own, not when the operator stopped them."""
    style = style or color_style()
    check_addr(addr)
    env = dict(os.environ)
    env.setdefault("DJANGO_SETTINGS_MODULE", os.environ.get("DJANGO_SETTINGS_MODULE", "webapp.settings.dev"))
    root = str(settings.BASE_DIR)
    # each child in a session of its own: Ctrl-C in the terminal reaches only this process, which
    # then stops both in order (before, the terminal's SIGINT also hit the worker, which could
    # exit first and be reported as a failure)
    child = {"cwd": root, "env": env, "start_new_session": True, "preexec_fn": _stop_with_parent}
    procs = [
        subprocess.Popen([sys.executable, "manage.py", "runserver", addr, "--noreload"], **child),
        subprocess.Popen([sys.executable, "-m", "celery", "-A", "workers", "worker", "-Q", "cpu,gpu", "-c", "1",
                          "-l", "INFO", "--without-mingle", "--without-gossip", "-n", "cpu@%h"], **child),
        # job scheduling passes, in a process of their own so a long run on the worker above
        # never holds up placement (one process, no pool: a pass is short and they are serial)
        subprocess.Popen([sys.executable, "-m", "celery", "-A", "workers", "worker", "-Q", "control", "--pool", "solo",
                          "-l", "INFO", "--without-mingle", "--without-gossip", "-n", "control@%h"], **child),
    ]
    stdout.write(style.SUCCESS(f"dashboard: http://{addr}/   (Ctrl-C stops the web server and the workers)"))
    def on_sigterm(signum, frame):  # stop like Ctrl-C does
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    # the children are not in the terminal's session, so a closed terminal (SIGHUP) must stop
    # them through this process too
    previous_hup = signal.signal(signal.SIGHUP, on_sigterm)
    # Ctrl-C raises KeyboardInterrupt here whatever handler an earlier step (the demo's) left
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    exited = None
    try:
        while all(p.poll() is None for p in procs):
            time.sleep(0.5)
        exited = next(p for p in procs if p.poll() is not None)
        stdout.write(style.ERROR("a server process exited; stopping the others"))
    except KeyboardInterrupt:
        exited = None  # stopped by the operator: not a failure, whatever a child did meanwhile
        stdout.write("stopping web server and workers")
    finally:
        # a second signal must not cut the stopping short: `kill -TERM -- -<make's group>` reaches
        # this process twice (once directly, once forwarded by make), and with the default
        # handler back the second killed it before its children were stopped (a new user's try)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        try:
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            for p in procs:
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        finally:
            signal.signal(signal.SIGTERM, previous)
            signal.signal(signal.SIGINT, previous_int)
            signal.signal(signal.SIGHUP, previous_hup)
    if exited is not None:
        which = {0: "web server", 1: "worker", 2: "control worker"}[procs.index(exited)]
        raise CommandError(f"the {which} exited with code {exited.returncode} (its output is above)")
