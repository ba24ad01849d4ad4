"""Jobs and experiments through the API, run by a real Celery worker on PostgreSQL + Redis."""
from __future__ import annotations

import os
import signal

import pytest

from tests.conftest import wait_for
from webapp.models import Experiment, Job
from webapp.states import State
from tests.conftest import token_client

pytestmark = pytest.mark.integration


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user("alice", password="pw-alice")


@pytest.fixture
def api(user):
    client = token_client(user)
    return client


def test_job_and_experiment_through_api_run_on_real_worker(monkeypatch, start_worker, api):
    """One worker: a job submitted through the API and a training-probe experiment both run to
    success; their state, progress and results are read back from PostgreSQL."""
    monkeypatch.setenv("TANDEM_JOB_IMAGE_SIZE", "32")
    monkeypatch.setenv("TANDEM_TORCH_THREADS", "1")  # no thread oversubscription on a busy 2-core box
    start_worker()
    resp = api.post("/api/v1/jobs/", {"model_name": "resnet18", "batch_size": 2, "steps": 4, "num_gpus": 0}, format="json")
    assert resp.status_code == 201, resp.content
    job_pk = resp.json()["id"]
    resp = api.post(
        "/api/v1/experiments/",
        {"kind": "training-probe", "parameters": {"model_name": "resnet18", "batch_size": 2, "steps": 3, "image_size": 32}},
        format="json",
    )
    assert resp.status_code == 201, resp.content
    exp_pk = resp.json()["id"]
    wait_for(lambda: Job.objects.get(pk=job_pk).is_terminal, timeout=120, what="job to finish")
    wait_for(lambda: Experiment.objects.get(pk=exp_pk).is_terminal, timeout=120, what="experiment to finish")

    job = Job.objects.get(pk=job_pk)  # written by the worker process
    assert job.state == State.SUCCEEDED, job.error
    assert (job.progress, job.attempts) == (100, 1)
    assert job.result["steps"] == 4 and job.result["batch_size"] == 2 and job.result["device"] == "cpu"
    assert job.result["samples_per_second"] > 0 and job.started_at <= job.finished_at
    body = api.get(f"/api/v1/jobs/{job_pk}/").json()
    assert body["state"] == "succeeded" and body["result"]["steps"] == 4

    exp = Experiment.objects.get(pk=exp_pk)
    assert exp.state == State.SUCCEEDED, exp.error
    assert (exp.progress, exp.attempts) == (100, 1)
    assert exp.result["steps"] == 3 and exp.result["device"] == "cpu"
    assert api.get(f"/api/v1/experiments/{exp_pk}/result/").json()["result"]["steps"] == 3


def test_worker_killed_mid_job_task_is_redelivered_and_runs_once(monkeypatch, start_worker, api):
    """SIGKILL the worker while it trains; a second worker gets the redelivered task after
    the (shortened) Redis visibility timeout; each job ends succeeded exactly once."""
    monkeypatch.setenv("TANDEM_JOB_IMAGE_SIZE", "32")
    monkeypatch.setenv("CELERY_VISIBILITY_TIMEOUT", "3")
    monkeypatch.setenv("TANDEM_TORCH_THREADS", "1")
    first = start_worker()
    victim = api.post("/api/v1/jobs/", {"model_name": "resnet18", "batch_size": 2, "steps": 200, "num_gpus": 0}, format="json").json()["id"]
    other = api.post("/api/v1/jobs/", {"model_name": "resnet18", "batch_size": 2, "steps": 3, "num_gpus": 0}, format="json").json()["id"]
    wait_for(lambda: Job.objects.get(pk=victim).progress >= 3, timeout=120, interval=0.1, what="victim job to be mid-training")
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(timeout=30)
    mid = Job.objects.get(pk=victim)
    assert mid.state == State.RUNNING and 0 < mid.progress < 100 and mid.attempts == 1

    start_worker()
    for pk in (victim, other):
        wait_for(lambda pk=pk: Job.objects.get(pk=pk).is_terminal, timeout=180, what=f"job {pk} to finish")
    done = Job.objects.get(pk=victim)
    assert done.state == State.SUCCEEDED, done.error
    assert done.attempts == 2  # started twice: killed, then redelivered
    assert done.result["steps"] == 200 and done.result["attempt"] == 2
    assert Job.objects.get(pk=other).state == State.SUCCEEDED
    assert Job.objects.count() == 2
    assert Job.objects.filter(state=State.SUCCEEDED).count() == 2
