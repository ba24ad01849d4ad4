"""Platform tasks: run an experiment of any registered kind."""
from __future__ import annotations

from celery import shared_task


@shared_task(name="tandem.run_experiment", acks_late=True, reject_on_worker_lost=True)
def run_experiment(experiment_id: int) -> None:
    """Load the experiment, run it to a terminal state (idempotent; see
    :func:`webapp.services.experiment_run`)."""
    from webapp.services import experiment_run

    experiment_run(experiment_id=experiment_id)
