"""Faults with real Celery workers on PostgreSQL + Redis: a run longer than the visibility timeout
(Redis hands the task to a second worker while the first still runs), and a worker killed with
SIGKILL mid-run. Afterwards the experiment ended true, ran at most once at a time (one lease
holder), its progress never went backwards, and its result was written once."""
from __future__ import annotations

import os
import signal
import threading

import pytest

from tests.conftest import token_client, wait_for
from webapp.models import Experiment
from webapp.states import State

pytestmark = [pytest.mark.integration, pytest.mark.slow]

#: Short enough that Redis redelivers within a test: kombu restores unacknowledged messages older
#: than the visibility timeout on a sweep every 1 s here (10 x 10 s by default).
FAST = {"CELERY_VISIBILITY_TIMEOUT": "2", "CELERY_UNACKED_RESTORE_S": "1", "CELERY_UNACKED_RESTORE_THROTTLE": "1",
        "TANDEM_LEASE_S": "3", "TANDEM_TORCH_THREADS": "1"}
PROBE = {"model_name": "resnet18", "batch_size": 2, "steps": 120, "image_size": 96}


class ProgressWatch(threading.Thread):
    """Samples an experiment's progress and lease holder every 0.1 s from its own connection."""

    def __init__(self, pk: int) -> None:
        super().__init__(daemon=True)
        self.pk, self.samples, self.holders = pk, [], set()
        self.done = threading.Event()

    def run(self) -> None:
        from django.db import connection

        try:
            while not self.done.wait(0.1):
                row = Experiment.objects.filter(pk=self.pk).values("progress", "lease_owner", "state").first()
                self.samples.append(row["progress"])
                if row["lease_owner"]:
                    self.holders.add(row["lease_owner"])
        finally:
            connection.close()


@pytest.fixture
def api(django_user_model, transactional_db):
    return token_client(django_user_model.objects.create_user("erin", password="pw-erin-1"))


def submit(api) -> int:
    r = api.post("/api/v1/experiments/", {"kind": "training-probe", "parameters": PROBE}, format="json")
    assert r.status_code == 201, r.content
    return r.json()["id"]


def test_run_longer_than_the_visibility_timeout_runs_once(start_worker, api):
    first = start_worker(queues="cpu", env=FAST)
    second = start_worker(queues="cpu", env=FAST)
    pk = submit(api)
    watch = ProgressWatch(pk)
    watch.start()
    wait_for(lambda: Experiment.objects.get(pk=pk).is_terminal, timeout=400, interval=0.5, what="the probe to finish")
    watch.done.set()
    watch.join()
    exp = Experiment.objects.get(pk=pk)
    assert exp.state == State.SUCCEEDED, exp.error
    assert exp.attempts == 1 and exp.result["attempt"] == 1 and exp.result["steps"] == PROBE["steps"]
    assert len(watch.holders) == 1, watch.holders  # one run held it throughout
    assert watch.samples == sorted(watch.samples), "progress went backwards"
    logs = first.log_path.read_text() + second.log_path.read_text()
    # the redelivery happened and was left to the running holder
    received = [ln for ln in logs.splitlines() if "Task tandem.run_experiment" in ln or "delivery" in ln]
    # (it may also see the holder finish while it waits, on a fast machine)
    assert "this delivery waits for that run to end or lose its lease" in logs, received


def test_worker_killed_mid_run_is_resumed_by_another(start_worker, api):
    victim = start_worker(queues="cpu", env=FAST)
    pk = submit(api)
    watch = ProgressWatch(pk)
    watch.start()
    wait_for(lambda: Experiment.objects.get(pk=pk).progress >= 10, timeout=300, interval=0.2, what="progress 10 %")
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait()
    killed_at = Experiment.objects.get(pk=pk).progress
    start_worker(queues="cpu", env=FAST)
    wait_for(lambda: Experiment.objects.get(pk=pk).is_terminal, timeout=400, interval=0.5, what="the resumed probe to finish")
    watch.done.set()
    watch.join()
    exp = Experiment.objects.get(pk=pk)
    assert exp.state == State.SUCCEEDED, exp.error
    assert exp.attempts == 2 and exp.result["attempt"] == 2
    assert len(watch.holders) == 2  # the killed run, then the one that took its expired lease over
    assert watch.samples == sorted(watch.samples) and min(s for s in watch.samples if s) <= killed_at


def test_worker_with_another_visibility_timeout_refuses_to_start(start_worker):
    start_worker(queues="cpu", env=FAST)  # records 2 s on the broker
    with pytest.raises(RuntimeError, match="CELERY_VISIBILITY_TIMEOUT is 3600 s but the workers on this broker use 2 s"):
        start_worker(queues="cpu", env={"CELERY_VISIBILITY_TIMEOUT": "3600"})
