"""Platform tasks: run an experiment of any registered kind; run a job; the job scheduling pass and
the reconciler (queue ``control``)."""
from __future__ import annotations

from celery import shared_task
from django.db import InterfaceError, OperationalError

#: A lost database connection (database restart) is retried with back-off; the services are
#: idempotent, so a retry resumes or restarts the work and the result is still written once.
DB_RETRY = dict(autoretry_for=(OperationalError, InterfaceError), retry_backoff=5, retry_backoff_max=120, max_retries=8)


@shared_task(name="tandem.run_experiment", acks_late=True, reject_on_worker_lost=True, **DB_RETRY)
def run_experiment(experiment_id: int) -> None:
    """Load the experiment, run it to a terminal state (idempotent; see
    :func:`webapp.services.experiment_run`)."""
    from webapp.services import experiment_run

    experiment_run(experiment_id=experiment_id)


@shared_task(name="tandem.run_job", acks_late=True, reject_on_worker_lost=True, **DB_RETRY)
def run_job(job_id: int) -> None:
    """Run a job's training steps to a terminal state (idempotent; see
    :func:`webapp.services.job_run`). Acknowledged only when done, so a lost worker's job is
    redelivered to another worker."""
    from webapp.services import job_run

    job_run(job_id=job_id)


@shared_task(name="tandem.schedule_jobs", acks_late=True, reject_on_worker_lost=True, **DB_RETRY)
def schedule_jobs() -> int:
    """One job scheduling pass (placement and dispatch of the queued jobs that start now), asked
    for by :func:`webapp.services.job_schedule_soon`; runs on the ``control`` queue. Returns the
    number of jobs dispatched."""
    from webapp.services import job_schedule_requested

    return len(job_schedule_requested())


@shared_task(name="tandem.reconcile", ignore_result=True)
def reconcile() -> dict:
    """Celery beat's periodic pass of :func:`webapp.reconcile.reconcile` (lost workers, lost
    messages), then a coalesced job scheduling pass: a job whose request for a pass was lost (the
    broker was down when it committed) is placed within one period."""
    from webapp.reconcile import reconcile as run
    from webapp.services import job_schedule_coalesced

    done = run()
    done["dispatched"] = [j.pk for j in job_schedule_coalesced()]
    return done
