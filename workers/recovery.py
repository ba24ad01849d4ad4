"""Recovery of work lost with a worker when the broker cannot redeliver it.

With Redis, a task is acknowledged only when done (``acks_late``), so the work of a killed
worker is redelivered and the idempotent services resume it. kombu's ``filesystem://``
transport (the single-machine demo default, see ``webapp/settings/base.py``) acknowledges by
deleting the message file when a worker takes it: a worker killed mid-task loses the message,
and its experiment or job would stay ``running`` forever. The demo runs ONE worker, so when a
worker starts on the filesystem broker, anything still ``running`` belonged to a dead worker:
it is marked ``failed`` with :data:`WORKER_LOST_ERROR` so the user can resubmit it.

That is true only if no other worker is alive on the same broker folder, so a worker on the
filesystem broker first takes an exclusive lock (``flock``) on ``<broker>/worker.lock``, held for
its life, before it consumes anything (``celeryd_init``); a second worker (a second ``serve``)
exits at once with :class:`AnotherWorkerRunning` and fails nothing. Use Redis for several workers.
A worker on the ``control`` queue alone (``serve``'s scheduling-pass worker) runs no experiment
or job: it takes a lock of its own (``control.lock``) and fails nothing at start.
"""
from __future__ import annotations

import fcntl
import logging
import os
from pathlib import Path
from typing import IO, Any

from celery.signals import celeryd_init, worker_ready

log = logging.getLogger(__name__)

#: The open lock file of this worker process (kept open: the lock lives as long as it does).
_LOCK: IO | None = None


class AnotherWorkerRunning(SystemExit):
    """Raised at worker start on the filesystem broker when another live worker holds the
    broker folder's lock (a ``SystemExit``: the worker stops before it consumes a message)."""

WORKER_LOST_ERROR = "worker lost (filesystem broker has no redelivery); resubmit"


def fail_running_work(*, broker_url: str) -> dict[str, int]:
    """If ``broker_url`` is the filesystem transport, mark every ``running`` experiment and job
    ``failed`` with :data:`WORKER_LOST_ERROR` (jobs' GPUs are freed and the job scheduler asked
    for the next jobs), in one transaction. Any other broker: nothing changes.

    Returns ``{"experiments": n, "jobs": m}``, the numbers marked failed.
    """
    if not broker_url.startswith("filesystem://"):
        return {"experiments": 0, "jobs": 0}
    from django.db import transaction

    from webapp.models import Experiment, Job
    from webapp.services import job_schedule_soon
    from webapp.states import State

    counts = {"experiments": 0, "jobs": 0}
    with transaction.atomic():
        for exp in Experiment.objects.select_for_update().filter(state=State.RUNNING):
            exp.transition_to(State.FAILED, error=WORKER_LOST_ERROR)
            exp.save()
            counts["experiments"] += 1
        for job in Job.objects.select_for_update().filter(state=State.RUNNING):
            job.transition_to(State.FAILED, error=WORKER_LOST_ERROR)
            job.save()
            job.gpus.clear()
            counts["jobs"] += 1
        if counts["jobs"]:
            transaction.on_commit(job_schedule_soon)
    if any(counts.values()):
        log.warning("marked %(experiments)d experiment(s) and %(jobs)d job(s) failed: " + WORKER_LOST_ERROR, counts)
    return counts


#: Whether this worker consumes only the ``control`` queue (scheduling passes): it runs no
#: experiment or job, so it neither takes the single-worker lock nor fails ``running`` work.
_CONTROL_ONLY = False


def control_only(queues: Any) -> bool:
    """Whether a worker's ``-Q`` option (``"control"``, ``"cpu,gpu"``, a list, or ``None`` for
    the default queue) names the ``control`` queue and nothing else."""
    if not queues:
        return False
    names = queues.split(",") if isinstance(queues, str) else [str(q) for q in queues]
    return {n.strip() for n in names if n.strip()} == {"control"}


@worker_ready.connect
def _on_worker_ready(sender=None, **_kwargs) -> None:
    if _CONTROL_ONLY:
        return
    app = getattr(sender, "app", None)
    url = (app.conf.broker_url if app is not None else None) or ""
    fail_running_work(broker_url=str(url))


def broker_lock_path(transport_options: dict[str, Any]) -> Path:
    """``worker.lock`` beside the filesystem broker's queue folder (``data_folder_in`` of the
    transport options, ``webapp/settings/base.py``; kombu's default ``data_in`` in the working
    directory when not set). Raises nothing."""
    folder = (transport_options or {}).get("data_folder_in") or "data_in"
    return Path(folder).absolute().parent / "worker.lock"


def take_single_worker_lock(path: Path) -> IO:
    """Take the exclusive, non-blocking ``flock`` on ``path`` (created if missing) for this
    process and return the open file (keep it open). Raises :class:`AnotherWorkerRunning`
    naming the lock file if another process holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fh = open(path, "a+")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.close()
        raise AnotherWorkerRunning(
            f"another worker is running on this filesystem broker (it holds {path}); this worker stops without "
            "touching its work. Stop the other one first, or use Redis (CELERY_BROKER_URL) for several workers") from None
    fh.seek(0)
    fh.truncate()
    fh.write(f"{os.getpid()}\n")
    fh.flush()
    return fh


@celeryd_init.connect
def _on_worker_init(sender=None, conf=None, options=None, **_kwargs) -> None:
    global _LOCK, _CONTROL_ONLY
    url = str(getattr(conf, "broker_url", "") or "")
    if not url.startswith("filesystem://") or _LOCK is not None:
        return
    path = broker_lock_path(dict(getattr(conf, "broker_transport_options", None) or {}))
    if control_only((options or {}).get("queues")):
        # ``serve``'s second worker: scheduling passes only, beside the one worker that runs the
        # work; one of its kind per broker folder too (its lock file is its own)
        _CONTROL_ONLY = True
        path = path.with_name("control.lock")
    try:
        _LOCK = take_single_worker_lock(path)
    except AnotherWorkerRunning as err:
        log.critical("%s", err.code)
        raise
