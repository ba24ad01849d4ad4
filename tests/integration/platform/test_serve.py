"""``manage.py serve`` (``make serve``): starts the web server and a worker on the embedded
defaults (SQLite and the filesystem broker in a fresh TANDEM_VAR_DIR) without the demo, answers
/healthz, and stops both, exiting 0, on SIGTERM (also sent twice), SIGHUP and Ctrl-C (SIGINT to
the terminal's process group); a SIGKILLed serve leaves no child running."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[3]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("stop", ["SIGTERM", "Ctrl-C", "SIGHUP", "SIGTERM twice", "SIGKILL"])
def test_serve_starts_web_and_worker_and_stops_both(tmp_path, stop):
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env.update(DJANGO_SETTINGS_MODULE="webapp.settings.dev", TANDEM_VAR_DIR=str(tmp_path / "var"), PYTHONUNBUFFERED="1")
    log = open(tmp_path / "serve.log", "w")
    proc = subprocess.Popen([sys.executable, "manage.py", "serve", "--addr", f"127.0.0.1:{port}"], cwd=REPO, env=env,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    children = []
    try:
        deadline, body = time.monotonic() + 120, ""
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as resp:
                    body = resp.read().decode()
                    break
            except OSError:
                time.sleep(0.5)
        assert '"database": "ok"' in body, (tmp_path / "serve.log").read_text()[-2000:]
        children = psutil.Process(proc.pid).children(recursive=True)
        cmdlines = [" ".join(c.cmdline()) for c in children]
        assert any("runserver" in c for c in cmdlines) and any("celery" in c and "worker" in c for c in cmdlines), cmdlines
        assert any("-Q control" in c for c in cmdlines), cmdlines  # the job scheduling passes have a worker
        assert (tmp_path / "var" / "tandem.sqlite3").exists()  # migrated on its own, no demo needed
        if stop in ("SIGTERM", "SIGHUP", "SIGKILL"):  # SIGHUP: the terminal closed
            proc.send_signal(getattr(signal, stop))
        elif stop == "SIGTERM twice":  # `kill -TERM -- -<make's group>`: make forwards it to serve
            proc.send_signal(signal.SIGTERM)
            time.sleep(0.3)
            proc.send_signal(signal.SIGTERM)
        else:  # what a terminal does on Ctrl-C: SIGINT to its foreground process group
            os.killpg(proc.pid, signal.SIGINT)
        # found by a new user's try: Ctrl-C reached the worker too, which could exit first and
        # was then reported as "the worker exited with code 1" with exit status 1
        want = -signal.SIGKILL if stop == "SIGKILL" else 0  # killed: its children stop anyway
        assert proc.wait(timeout=60) == want, (tmp_path / "serve.log").read_text()[-2000:]
        assert "exited with code" not in (tmp_path / "serve.log").read_text()
        gone, alive = psutil.wait_procs(children, timeout=30)
        assert alive == []
        with pytest.raises(OSError):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for child in children:  # each in a session of its own
            if child.is_running():
                child.kill()
        log.close()


@pytest.mark.parametrize("addr, needle", [
    ("garbage", "must be HOST:PORT"),
    ("127.0.0.1:99999", "port from 1 to 65535"),
    ("no-such-host.invalid:8000", "does not resolve"),
    ("busy", "cannot listen there"),
])
def test_serve_refuses_a_bad_or_busy_address_before_starting_anything(tmp_path, addr, needle):
    """Found by a fresh-clone try: a bad or busy --addr printed "dashboard: http://garbage/",
    still started a worker (whose start-up recovery then failed the live server's work) and
    exited 0. Now it exits 1 naming the problem, and no process is started."""
    listener = None
    if addr == "busy":
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        addr = f"127.0.0.1:{listener.getsockname()[1]}"
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env.update(DJANGO_SETTINGS_MODULE="webapp.settings.dev", TANDEM_VAR_DIR=str(tmp_path / "var"))
    try:
        proc = subprocess.run([sys.executable, "manage.py", "serve", "--addr", addr], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=120)
    finally:
        if listener is not None:
            listener.close()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert needle in proc.stderr and "dashboard:" not in proc.stdout
    assert not (tmp_path / "var" / "tandem.sqlite3").exists()  # refused before migrating
