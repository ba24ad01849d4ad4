"""Recovery of work lost with a worker when the broker cannot redeliver it.

With Redis, a task is acknowledged only when done (``acks_late``), so the work of a killed
worker is redelivered and the idempotent services resume it. kombu's ``filesystem://``
transport (the single-machine demo default, see ``webapp/settings/base.py``) acknowledges by
deleting the message file when a worker takes it: a worker killed mid-task loses the message,
and its experiment or job would stay ``running`` forever. The demo runs ONE worker, so when a
worker starts on the filesystem broker, anything still ``running`` belonged to a dead worker:
it is marked ``failed`` with :data:`WORKER_LOST_ERROR` so the user can resubmit it.
Do not run several workers on the filesystem broker (use Redis for that).
"""
from __future__ import annotations

import logging

from celery.signals import worker_ready

log = logging.getLogger(__name__)

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
    from webapp.services import job_schedule
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
            transaction.on_commit(job_schedule)
    if any(counts.values()):
        log.warning("marked %(experiments)d experiment(s) and %(jobs)d job(s) failed: " + WORKER_LOST_ERROR, counts)
    return counts


@worker_ready.connect
def _on_worker_ready(sender=None, **_kwargs) -> None:
    app = getattr(sender, "app", None)
    url = (app.conf.broker_url if app is not None else None) or ""
    fail_running_work(broker_url=str(url))
