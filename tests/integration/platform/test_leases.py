"""Experiment leases and the reconciler, in-process against PostgreSQL and Redis (the real-worker
fault tests are in test_worker_faults.py)."""
from __future__ import annotations

import time
from datetime import timedelta

import pytest
import redis
from django.utils import timezone

from webapp.experiments import ProgressReporter
from webapp.leases import Heartbeat, LeaseLost
from webapp.models import Experiment
from webapp.reconcile import pending_experiment_ids, reconcile
from webapp.services import experiment_run
from webapp.states import State

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

PROBE = {"model_name": "resnet18", "batch_size": 2, "steps": 2, "image_size": 64}


@pytest.fixture
def owner(django_user_model, settings):
    redis.Redis.from_url(settings.CELERY_BROKER_URL).flushdb()
    yield django_user_model.objects.create_user("dora")
    redis.Redis.from_url(settings.CELERY_BROKER_URL).flushdb()


def probe(owner, **fields):
    return Experiment.objects.create(owner=owner, kind="training-probe", parameters=PROBE, **fields)


def test_a_delivery_leaves_a_live_lease_to_its_holder(owner, settings):
    settings.EXPERIMENT_LEASE_S = 0.4
    exp = probe(owner, state=State.RUNNING, attempts=1, progress=30, lease_owner="other:1:x",
                lease_expires_at=timezone.now() + timedelta(seconds=30))
    t0 = time.monotonic()
    out = experiment_run(experiment_id=exp.pk)
    assert 0.7 < time.monotonic() - t0 < 5  # waited about two lease periods, then left it
    assert (out.state, out.attempts, out.progress, out.lease_owner) == (State.RUNNING, 1, 30, "other:1:x")


def test_an_expired_lease_is_taken_over_and_the_run_resumes(owner, settings):
    settings.EXPERIMENT_LEASE_S = 5
    exp = probe(owner, state=State.RUNNING, attempts=1, progress=30, lease_owner="dead:1:x",
                lease_expires_at=timezone.now() - timedelta(seconds=1))
    out = experiment_run(experiment_id=exp.pk)
    assert out.state == State.SUCCEEDED and out.attempts == 2 and out.result["attempt"] == 2
    assert out.lease_owner == "" and out.lease_expires_at is None


def test_progress_never_goes_backwards(owner):
    exp = probe(owner, state=State.RUNNING, progress=50)
    rep = ProgressReporter(exp)
    rep.report(20, "resumed at step 1")
    exp.refresh_from_db()
    assert (exp.progress, exp.progress_message) == (50, "resumed at step 1")
    rep.report(70, "step 7")
    exp.refresh_from_db()
    assert exp.progress == 70


def test_a_run_whose_lease_was_taken_stops_and_writes_nothing(owner, settings):
    exp = probe(owner, state=State.RUNNING, progress=10, lease_owner="me:1:a", lease_expires_at=timezone.now() + timedelta(seconds=60))
    hb = Heartbeat(exp.pk, "me:1:a")
    assert hb.renew() and not hb.lost
    Experiment.objects.filter(pk=exp.pk).update(lease_owner="new:2:b")  # the reconciler's resumption took it
    assert not hb.renew() and hb.lost
    with pytest.raises(LeaseLost):
        ProgressReporter(exp, heartbeat=hb).report(90, "late")
    exp.refresh_from_db()
    assert exp.progress == 10


def test_reconciler_resumes_or_fails_expired_runs_and_requeues_lost_messages(owner, settings):
    settings.QUEUED_GRACE_S = 60
    past = timezone.now() - timedelta(seconds=5)
    lost_once = probe(owner, state=State.RUNNING, attempts=1, lease_owner="dead:1:a", lease_expires_at=past)
    lost_thrice = probe(owner, state=State.RUNNING, attempts=3, lease_owner="dead:1:b", lease_expires_at=past)
    alive = probe(owner, state=State.RUNNING, attempts=1, lease_owner="w:1:c", lease_expires_at=timezone.now() + timedelta(seconds=60))
    orphan = probe(owner)  # queued, its message lost
    fresh = probe(owner)  # queued just now: within the grace period
    Experiment.objects.filter(pk=orphan.pk).update(created_at=timezone.now() - timedelta(minutes=5))
    from webapp.services import experiment_enqueue

    queued_ok = probe(owner)
    Experiment.objects.filter(pk=queued_ok.pk).update(created_at=timezone.now() - timedelta(minutes=5))
    experiment_enqueue(experiment=queued_ok)  # its message is in the queue: left alone
    assert pending_experiment_ids(settings.CELERY_BROKER_URL) == {queued_ok.pk}

    done = reconcile()
    assert done == {"resumed": [lost_once.pk], "failed": [lost_thrice.pk], "requeued": [orphan.pk]}
    lost_once.refresh_from_db(), lost_thrice.refresh_from_db(), alive.refresh_from_db(), orphan.refresh_from_db()
    assert lost_once.state == State.RUNNING and "worker lost" in lost_once.progress_message
    assert lost_thrice.state == State.FAILED and "after 3 attempts" in lost_thrice.error
    assert alive.progress_message == ""
    assert orphan.progress_message == "task message lost; enqueued again"
    assert pending_experiment_ids(settings.CELERY_BROKER_URL) == {queued_ok.pk, lost_once.pk, orphan.pk}
    assert fresh.pk not in pending_experiment_ids(settings.CELERY_BROKER_URL)
    # a delivery of the resumed experiment takes the expired lease over and finishes it
    assert experiment_run(experiment_id=lost_once.pk).state == State.SUCCEEDED
    assert reconcile()["resumed"] == []  # nothing expired any more
