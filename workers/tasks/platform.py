"""Platform tasks: run an experiment of any registered kind; run a job."""
from __future__ import annotations

from celery import shared_task


@shared_task(name="tandem.run_experiment", acks_late=True, reject_on_worker_lost=True)
def run_experiment(experiment_id: int) -> None:
    """Load the experiment, run it to a terminal state (idempotent; see
    :func:`webapp.services.experiment_run`)."""
    from webapp.services import experiment_run

    experiment_run(experiment_id=experiment_id)


@shared_task(name="tandem.run_job", acks_late=True, reject_on_worker_lost=True)
def run_job(job_id: int) -> None:
    """Run a job's training steps to a terminal state (idempotent; see
    :func:`webapp.services.job_run`). Acknowledged only when done, so a lost worker's job is
    redelivered to another worker."""
    from webapp.services import job_run

    job_run(job_id=job_id)
