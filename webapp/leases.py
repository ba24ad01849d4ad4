"""Experiment leases: at most one run of an experiment at a time, and a dead run noticed.

A run holds a *lease* on its experiment: ``lease_owner`` (``host:pid:nonce`` of the run) and
``lease_expires_at``, renewed every ``EXPERIMENT_LEASE_S / 3`` seconds by a heartbeat thread
while the runner works (``EXPERIMENT_LEASE_S``, env ``TANDEM_LEASE_S``, default 60 s).

- A delivery of an experiment whose lease is live and held by another run (the broker handed the
  task out again after ``CELERY_VISIBILITY_TIMEOUT`` while the first still runs, or a duplicate
  message) waits up to two lease periods: if the holder finishes, the delivery returns; if the
  lease expires (the holder died), it takes the experiment over and the runner resumes from
  what was recorded; if the lease is still live, the delivery exits and the holder carries on.
- A run that finds its lease taken over (it was presumed dead) stops at its next progress
  report (:class:`LeaseLost`) and writes nothing more.
- :func:`webapp.reconcile.reconcile` (Celery beat) re-enqueues a ``running`` experiment whose
  lease expired, or fails it after ``MAX_ATTEMPTS`` runs, saying why in the experiment.

Source of the pattern: lease-based mutual exclusion as in Chubby (Burrows, OSDI 2006, section
2.8: a lock holder's session lease, renewed by keep-alives, lost when they stop).
"""
from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from .plug import Cancelled

log = logging.getLogger(__name__)

#: Runs of one experiment (first run plus resumptions after a lost worker) before the
#: reconciler gives up and marks it failed.
MAX_ATTEMPTS = 3


class LeaseLost(Cancelled):
    """Raised at a progress report when another run took this experiment's lease over."""


def lease_seconds() -> float:
    """Lease period, seconds (``EXPERIMENT_LEASE_S``)."""
    return float(getattr(settings, "EXPERIMENT_LEASE_S", 60.0))


def new_holder() -> str:
    """A name for one run: ``host:pid:nonce``."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def expiry(now=None):
    return (now or timezone.now()) + timedelta(seconds=lease_seconds())


class Heartbeat(threading.Thread):
    """Renews ``holder``'s lease on experiment ``pk`` every third of a lease period until
    :meth:`stop`. ``lost`` becomes true when the lease is no longer ``holder``'s."""

    def __init__(self, pk: int, holder: str) -> None:
        super().__init__(name=f"lease-{pk}", daemon=True)
        self.pk, self.holder = pk, holder
        self.lost = False
        self._stop_event = threading.Event()

    def renew(self) -> bool:
        from .models import Experiment

        if Experiment.objects.filter(pk=self.pk, lease_owner=self.holder).update(lease_expires_at=expiry()):
            return True
        # lost only when the row shows another holder (this thread's connection may not see a row
        # its run's connection has not committed yet, e.g. inside a caller's transaction)
        if Experiment.objects.filter(pk=self.pk).exclude(lease_owner=self.holder).exists():
            self.lost = True
            return False
        return True

    def run(self) -> None:
        from django.db import connection

        try:
            while not self._stop_event.wait(lease_seconds() / 3):
                try:
                    if not self.renew():
                        log.warning("experiment %s: lease taken over by another run; this run stops", self.pk)
                        return
                except Exception:  # noqa: BLE001 - database down: try again next period
                    log.warning("experiment %s: lease renewal failed; retrying", self.pk, exc_info=True)
                    connection.close()
        finally:
            connection.close()

    def stop(self) -> None:
        self._stop_event.set()
        if self.is_alive():
            self.join(timeout=10)
