"""Idempotency-Key on submissions: a retried POST never creates a second job or experiment,
also when the twin requests race (real PostgreSQL, real HTTP through the live server); and a
submission past the write deadline commits nothing."""
from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

pytestmark = [pytest.mark.integration]

JOB = {"model_name": "resnet18", "batch_size": 1, "num_gpus": 0, "steps": 1}


@pytest.fixture
def carol(django_user_model):
    return django_user_model.objects.create_user("carol", password="pw-carol-1")


@pytest.fixture
def api(carol):
    c = APIClient()
    c.force_authenticate(carol)
    return c


@pytest.mark.django_db
def test_retry_with_the_same_key_replays_and_creates_nothing(api):
    from webapp.models import Experiment, Job

    first = api.post("/api/v1/jobs/", JOB, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    again = api.post("/api/v1/jobs/", JOB, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    assert first.status_code == again.status_code == 201
    assert again["Idempotent-Replayed"] == "true" and again.json()["id"] == first.json()["id"]
    assert Job.objects.count() == 1
    other = api.post("/api/v1/jobs/", {**JOB, "steps": 2}, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    assert other.status_code == 422 and Job.objects.count() == 1
    assert api.post("/api/v1/jobs/", JOB, format="json").status_code == 201  # no key: a new job
    assert Job.objects.count() == 2
    exp = {"kind": "training-probe", "parameters": {"model_name": "resnet18", "batch_size": 1, "steps": 1}}
    ids = {api.post("/api/v1/experiments/", exp, format="json", HTTP_IDEMPOTENCY_KEY="e-1").json()["id"] for _ in range(3)}
    assert len(ids) == 1 and Experiment.objects.count() == 1
    bad = api.post("/api/v1/jobs/", JOB, format="json", HTTP_IDEMPOTENCY_KEY="k\x01")
    assert bad.status_code == 400 and Job.objects.count() == 2


@pytest.mark.django_db
def test_a_refused_submission_stores_no_key(api):
    from webapp.models import IdempotencyKey, Job

    assert api.post("/api/v1/jobs/", {"model_name": "resnet18"}, format="json", HTTP_IDEMPOTENCY_KEY="k-2").status_code == 400
    assert IdempotencyKey.objects.count() == 0
    assert api.post("/api/v1/jobs/", JOB, format="json", HTTP_IDEMPOTENCY_KEY="k-2").status_code == 201  # corrected retry
    assert Job.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_racing_twins_create_one_job(live_server, carol, settings):
    from webapp.models import Job

    import redis

    key = Token.objects.create(user=carol).key
    answers: list[tuple[int, int]] = []
    start = threading.Barrier(6)

    def post():
        req = urllib.request.Request(f"{live_server.url}/api/v1/jobs/", data=json.dumps(JOB).encode(), method="POST",
                                     headers={"Authorization": f"Token {key}", "Content-Type": "application/json",
                                              "Idempotency-Key": "twin-1"})
        start.wait()
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                answers.append((r.status, json.loads(r.read())["id"]))
        except urllib.error.HTTPError as err:
            answers.append((err.code, -1))

    threads = [threading.Thread(target=post) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    redis.Redis.from_url(settings.CELERY_BROKER_URL).flushdb()
    assert Job.objects.count() == 1
    assert {a for a in answers} == {(201, Job.objects.get().pk)}, answers


@pytest.mark.django_db
def test_past_the_write_deadline_nothing_is_committed(api, settings):
    from webapp.models import IdempotencyKey, Job

    settings.WRITE_DEADLINE_S = 0.0
    r = api.post("/api/v1/jobs/", JOB, format="json", HTTP_IDEMPOTENCY_KEY="late-1")
    assert r.status_code == 503 and "not stored" in r.json()["detail"]
    assert Job.objects.count() == 0 and IdempotencyKey.objects.count() == 0
    settings.WRITE_DEADLINE_S = 10.0
    assert api.post("/api/v1/jobs/", JOB, format="json", HTTP_IDEMPOTENCY_KEY="late-1").status_code == 201
    assert Job.objects.count() == 1
