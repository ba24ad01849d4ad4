"""The job-scheduler hook: how the platform asks an engine where and when jobs run.

The placement engine registers its live scheduler in ``PlacementConfig.ready()``::

    register_job_scheduler(LivePlacementScheduler())

Flow (implemented in :mod:`webapp.services`):

1. ``job_submit`` builds the Job, calls ``scheduler.validate(job)`` before saving: a job that can
   never run (e.g. more GPUs than any node has) raises :class:`JobRejected` and nothing is stored
   (the API answers 400 with the message under the offending field).
2. After commit, ``scheduler.schedule()`` places the queued jobs that fit now (assigning
   ``job.gpus`` and recording its decision) and returns them; each is sent to the worker
   (``run_job``). Jobs that must wait stay ``queued``.
3. When a job reaches a terminal state its GPUs free up and ``schedule()`` is called again.

Without a registered scheduler, :class:`ImmediateScheduler` runs every job at once, unplaced.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # pragma: no cover
    from .models import Job


class JobRejected(ValueError):
    """A job that can never run as submitted. ``field`` names the offending field for the API."""

    def __init__(self, message: str, *, field: str = "num_gpus") -> None:
        super().__init__(message)
        self.field = field


class JobScheduler(Protocol):
    def validate(self, job: "Job") -> None:
        """Raise :class:`JobRejected` if ``job`` (unsaved) can never be placed."""

    def schedule(self) -> list["Job"]:
        """Place the queued, unplaced jobs that fit now; return those placed (to be started)."""


class ImmediateScheduler:
    """Fallback: accepts every job and starts queued jobs at once, with no GPUs assigned."""

    def validate(self, job: "Job") -> None:
        return None

    def schedule(self) -> list["Job"]:
        from .models import Job
        from .states import State

        return list(Job.objects.filter(state=State.QUEUED, gpus__isnull=True))


_scheduler: JobScheduler = ImmediateScheduler()


def register_job_scheduler(scheduler: JobScheduler) -> None:
    """Make ``scheduler`` the one live placement uses."""
    global _scheduler
    _scheduler = scheduler


def get_job_scheduler() -> JobScheduler:
    """The registered job scheduler (``ImmediateScheduler`` if none)."""
    return _scheduler
