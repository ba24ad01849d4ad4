"""The reconciler: brings the database and the broker back into agreement (Celery beat runs
:func:`reconcile` every ``RECONCILE_EVERY_S`` seconds as task ``tandem.reconcile``).

- A ``running`` experiment whose lease expired (its worker died; :mod:`webapp.leases`) is
  re-enqueued so another worker resumes it, or marked ``failed`` once it has been started
  :data:`webapp.leases.MAX_ATTEMPTS` times; either way ``progress_message`` / ``error`` says why.
- A ``queued`` experiment older than ``QUEUED_GRACE_S`` whose task message is in no broker queue
  (lost: a broker restart without persistence, a purge) is enqueued again.

Re-enqueueing is safe: a delivery of an experiment whose lease is live leaves it to its holder,
and a terminal experiment is never run again (:func:`webapp.services.experiment_run`).
"""
from __future__ import annotations

import json
import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from .leases import MAX_ATTEMPTS
from .models import Experiment
from .states import State

log = logging.getLogger(__name__)

TASK = "tandem.run_experiment"


def pending_experiment_ids(broker_url: str, queues=("cpu", "gpu")) -> set[int] | None:
    """Experiment ids with a ``tandem.run_experiment`` message waiting in, or delivered but not
    acknowledged from, the Redis broker at ``broker_url`` (kombu's Redis layout: a list per queue
    and the ``unacked`` hash). ``None`` for a broker this cannot read (the filesystem broker):
    then queued rows are left alone."""
    if not broker_url.startswith(("redis://", "rediss://")):
        return None
    import redis

    def ids(raw) -> set[int]:
        out = set()
        for item in raw:
            try:
                msg = json.loads(item)
                if isinstance(msg, list):  # unacked: [message, exchange, routing_key]
                    msg = msg[0]
                headers = msg.get("headers") or {}
                if headers.get("task") == TASK:
                    out.add(int(str(headers.get("argsrepr", "")).strip("(),[] ")))
            except (ValueError, TypeError, AttributeError, IndexError):
                continue
        return out

    r = redis.Redis.from_url(broker_url, socket_timeout=10)
    found: set[int] = set()
    for q in queues:
        found |= ids(r.lrange(q, 0, -1))
    found |= ids(r.hvals("unacked"))
    return found


def reconcile(*, now=None, broker_url: str | None = None) -> dict[str, list[int]]:
    """One pass (see the module docstring). Returns the ids acted on:
    ``{"resumed": [...], "failed": [...], "requeued": [...]}``."""
    from .services import experiment_enqueue

    now = now or timezone.now()
    done: dict[str, list[int]] = {"resumed": [], "failed": [], "requeued": []}
    stale = Experiment.objects.filter(state=State.RUNNING, lease_expires_at__lt=now).values_list("pk", flat=True)
    for pk in list(stale):
        with transaction.atomic():
            exp = Experiment.objects.select_for_update().get(pk=pk)
            if exp.state != State.RUNNING or not exp.lease_expires_at or exp.lease_expires_at >= now:
                continue  # it moved on meanwhile
            since = exp.lease_expires_at.isoformat(timespec="seconds")
            if exp.attempts >= MAX_ATTEMPTS:
                exp.transition_to(State.FAILED, error=f"worker lost: no heartbeat since {since}, after {exp.attempts} attempts")
                exp.lease_owner, exp.lease_expires_at = "", None
                exp.save()
                done["failed"].append(pk)
            else:
                exp.progress_message = f"worker lost (no heartbeat since {since}); re-enqueued to resume"[:255]
                exp.save(update_fields=["progress_message", "updated_at"])
                transaction.on_commit(lambda exp=exp: experiment_enqueue(experiment=exp))
                done["resumed"].append(pk)
    pending = pending_experiment_ids(broker_url or settings.CELERY_BROKER_URL)
    if pending is not None:
        old = now - timedelta(seconds=float(getattr(settings, "QUEUED_GRACE_S", 300.0)))
        for exp in Experiment.objects.filter(state=State.QUEUED, created_at__lt=old, cancel_requested=False).exclude(pk__in=pending):
            Experiment.objects.filter(pk=exp.pk, state=State.QUEUED).update(progress_message="task message lost; enqueued again")
            experiment_enqueue(experiment=exp)
            done["requeued"].append(exp.pk)
    if any(done.values()):
        log.warning("reconciler: %s", done)
    return done
