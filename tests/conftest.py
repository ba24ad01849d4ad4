"""Root fixtures.

``celery_worker_process``: a real Celery worker (``celery -A workers worker``) in a subprocess,
consuming queues ``control``, ``cpu`` and ``gpu`` from the test Redis, writing to the same PostgreSQL test
database as the test (use it with ``transactional_db`` so rows are committed and visible).
``start_worker()`` starts more (or restarts after a kill); each is stopped at teardown.
"""
from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

REPO = Path(__file__).resolve().parent.parent


def _nvidia_gpu_present() -> bool:
    """True when NVML (pynvml) initialises and sees at least one GPU."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return pynvml.nvmlDeviceGetCount() > 0
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no driver, no library
        return False


def _services_missing(need_browser: bool) -> list[str]:
    """What the integration/browser tests need and this machine lacks, each with how to fix it."""
    from django.conf import settings

    missing = []
    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("postgresql"):
        import psycopg

        try:
            psycopg.connect(host=db.get("HOST") or "127.0.0.1", port=db.get("PORT") or 5432, user=db.get("USER") or "postgres",
                            password=db.get("PASSWORD") or None, dbname="postgres", connect_timeout=3).close()
        except Exception as err:  # noqa: BLE001
            missing.append(f"PostgreSQL at {db.get('HOST')}:{db.get('PORT')} does not answer ({type(err).__name__}: {str(err).strip()[:200]}); "
                           "start it (.ci/run does) or set DATABASE_URL")
    else:
        missing.append(f"integration tests need PostgreSQL, DATABASE_URL points at {db['ENGINE']}")
    try:
        import redis

        redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_connect_timeout=3).ping()
    except Exception as err:  # noqa: BLE001
        missing.append(f"Redis at {settings.CELERY_BROKER_URL} does not answer ({type(err).__name__}: {err}); start it (.ci/run does) or set CELERY_BROKER_URL")
    if need_browser and not Path("/usr/bin/chromium").exists():
        missing.append("Debian chromium is not installed at /usr/bin/chromium: apt-get install -y chromium (.ci/run does)")
    return missing


def pytest_collection_modifyitems(config, items):
    """Deselect tests marked ``gpu`` where no NVIDIA GPU is present (as pytest.ini says), and stop
    the run with a clear error (never a skip) when integration or browser tests are selected but
    PostgreSQL, Redis or chromium are missing."""
    gpu_items = [i for i in items if i.get_closest_marker("gpu")]
    if gpu_items and not _nvidia_gpu_present():
        config.hook.pytest_deselected(items=gpu_items)
        items[:] = [i for i in items if not i.get_closest_marker("gpu")]
    need_services = any(i.get_closest_marker("integration") or i.get_closest_marker("browser") for i in items)
    if need_services:
        missing = _services_missing(need_browser=any(i.get_closest_marker("browser") for i in items))
        if missing:
            raise pytest.UsageError("integration/browser tests selected but their services are missing:\n  - " + "\n  - ".join(missing))


def _worker_env() -> dict[str, str]:
    from django.conf import settings

    db = settings.DATABASES["default"]
    url = f"postgres://{db.get('USER') or 'postgres'}"
    if db.get("PASSWORD"):
        url += f":{db['PASSWORD']}"
    url += f"@{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="webapp.settings.test",
        DATABASE_URL=url,
        CELERY_BROKER_URL=settings.CELERY_BROKER_URL,
        PYTHONUNBUFFERED="1",
    )
    return env


def _purge_broker() -> None:
    from django.conf import settings

    import redis

    redis.Redis.from_url(settings.CELERY_BROKER_URL).flushdb()


def spawn_ready(cmd: list[str], *, env: dict[str, str], log: Path, procs: list[subprocess.Popen],
                ready: str = "ready.", timeout: float = 90.0) -> subprocess.Popen:
    """Start ``cmd`` in the repository root in its own session (so :func:`stop_processes` ends it
    and its children together), output to ``log``, append it to ``procs``, and wait until ``ready``
    appears in the log. Raises ``RuntimeError`` with the log's tail when it exits first or is not
    ready after ``timeout`` seconds. The process gets ``log_path``."""
    fh = open(log, "w")
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    fh.close()
    proc.log_path = log  # type: ignore[attr-defined]
    procs.append(proc)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{shlex.join(cmd[1:])} exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        if ready in log.read_text():
            return proc
        time.sleep(0.3)
    raise RuntimeError(f"{shlex.join(cmd[1:])} not ready after {timeout:.0f} s:\n{log.read_text()[-3000:]}")


def stop_processes(procs: list[subprocess.Popen]) -> None:
    """SIGTERM each still-running process's group, SIGKILL it after 20 s (teardown of
    :func:`spawn_ready`'s processes)."""
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait(timeout=20)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()


@pytest.fixture
def start_worker(transactional_db, tmp_path) -> Iterator[Callable[..., subprocess.Popen]]:
    """Factory: ``start_worker(queues="control,cpu,gpu", concurrency=1, extra_args=(), env=None)`` starts a
    real worker (``env``: extra environment variables) and waits until it is ready (its log says
    so). All are killed at teardown."""
    _purge_broker()
    procs: list[subprocess.Popen] = []

    def _start(queues: str = "control,cpu,gpu", concurrency: int = 1, extra_args: tuple[str, ...] = (), name: str | None = None,
               env: dict[str, str] | None = None) -> subprocess.Popen:
        n = len(procs)
        cmd = [
            sys.executable, "-m", "celery", "-A", "workers", "worker", "-Q", queues,
            "-c", str(concurrency), "--pool", "prefork", "-l", "INFO",
            # as `manage.py serve` starts its worker: no start-up sync with other workers (mingle
            # waits a second for replies; nothing here uses revokes or worker events)
            "--without-mingle", "--without-gossip",
            "-n", name or f"test{n}-{os.getpid()}@%h", *extra_args,
        ]
        return spawn_ready(cmd, env={**_worker_env(), **(env or {})}, log=tmp_path / f"worker{n}.log", procs=procs)

    yield _start
    stop_processes(procs)


@pytest.fixture
def celery_worker_process(start_worker) -> subprocess.Popen:
    """One real worker on queues ``control`` (job scheduling passes), ``cpu`` and ``gpu``."""
    return start_worker()


def wait_for(predicate: Callable[[], bool], timeout: float = 120.0, interval: float = 0.5, what: str = "condition") -> None:
    """Poll ``predicate`` until true; raise ``AssertionError`` naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def token_client(user):
    """A DRF ``APIClient`` authenticated with a fresh token of ``user`` (as a script would be)."""
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return client
