"""``manage.py serve``: start the dashboard's web server and one Celery worker again (after
``make demo DEMO_ARGS=--no-serve``, or after stopping the demo), without redoing the demo or
touching any account. Migrates first (a no-op when the database is current)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.core.management.color import color_style


class Command(BaseCommand):
    help = "Serve the dashboard and run one Celery worker until Ctrl-C (make serve)."

    def add_arguments(self, parser):
        parser.add_argument("--addr", default="127.0.0.1:8000", help="host:port the web server listens on (default %(default)s)")

    def handle(self, *args, **opts):
        call_command("migrate", interactive=False, verbosity=0)
        serve(opts["addr"], stdout=self.stdout, style=self.style)


def serve(addr: str, *, stdout, style=None) -> None:
    """Run the web server (``runserver --noreload`` on ``addr``) and one Celery worker (queues
    ``cpu`` and ``gpu``) in the foreground; Ctrl-C or SIGTERM stops both. Returns when either
    exits (the other is then stopped too)."""
    style = style or color_style()
    env = dict(os.environ)
    env.setdefault("DJANGO_SETTINGS_MODULE", os.environ.get("DJANGO_SETTINGS_MODULE", "webapp.settings.dev"))
    root = str(settings.BASE_DIR)
    procs = [
        subprocess.Popen([sys.executable, "manage.py", "runserver", addr, "--noreload"], cwd=root, env=env),
        subprocess.Popen([sys.executable, "-m", "celery", "-A", "workers", "worker", "-Q", "cpu,gpu", "-c", "1",
                          "-l", "INFO", "--without-mingle", "--without-gossip"], cwd=root, env=env),
    ]
    stdout.write(style.SUCCESS(f"dashboard: http://{addr}/   (Ctrl-C stops the web server and the worker)"))
    def on_sigterm(signum, frame):  # stop like Ctrl-C does
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        while all(p.poll() is None for p in procs):
            time.sleep(0.5)
        stdout.write(style.ERROR("a server process exited; stopping the other"))
    except KeyboardInterrupt:
        stdout.write("stopping web server and worker")
    finally:
        signal.signal(signal.SIGTERM, previous)
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
