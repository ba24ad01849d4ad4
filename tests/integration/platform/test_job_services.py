"""Job services on PostgreSQL, without a worker: dispatch-once, idempotent run, cancel, scheduler hook."""
from __future__ import annotations

import pytest
from django.test import override_settings

from webapp import services
from webapp.jobs import JobRejected, register_job_scheduler, get_job_scheduler
from webapp.models import Cluster, GPUDevice, Job, Node
from webapp.states import IllegalTransition, State

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="pw")


class Queued:
    """The run_job messages waiting in the real Redis broker (no worker consumes them here)."""

    def __init__(self):
        import redis
        from django.conf import settings

        self.r = redis.Redis.from_url(settings.CELERY_BROKER_URL)
        self.r.flushdb()

    def __call__(self, queue: str = "cpu") -> list[int]:
        import json

        msgs = [json.loads(m) for m in self.r.lrange(queue, 0, -1)]
        return [json.loads(__import__("base64").b64decode(m["body"]))[0][0] for m in msgs]

    def tasks(self, queue: str) -> list[str]:
        """Task names of the messages waiting in ``queue``."""
        import json

        return [json.loads(m)["headers"]["task"] for m in self.r.lrange(queue, 0, -1)]


@pytest.fixture
def sent():
    q = Queued()
    yield q
    q.r.flushdb()


def test_dispatch_once(alice, sent, django_capture_on_commit_callbacks):
    """A submission asks the control queue for a pass and sends nothing else; the pass (run here
    as the control worker runs it) dispatches the job once."""
    with django_capture_on_commit_callbacks(execute=True):
        job = services.job_submit(owner=alice, model_name="resnet18", batch_size=2, steps=1, num_gpus=0)
    assert sent.tasks("control") == ["tandem.schedule_jobs"] and sent("cpu") == []
    with django_capture_on_commit_callbacks(execute=True):
        assert [j.pk for j in services.job_schedule_requested()] == [job.pk]
    assert sent("cpu") == [job.pk]
    with django_capture_on_commit_callbacks(execute=True):
        assert services.job_schedule() == []  # already dispatched: not sent again
    assert sent("cpu") == [job.pk] and sent("gpu") == []


def test_pass_requests_are_debounced(alice, sent, django_capture_on_commit_callbacks):
    """While a requested pass has not started, more submissions send no more messages (it will
    read their jobs); once it starts (clears the mark), the next submission asks again."""
    for _ in range(3):
        with django_capture_on_commit_callbacks(execute=True):
            services.job_submit(owner=alice, model_name="resnet18", batch_size=2, steps=1, num_gpus=0)
    assert sent.tasks("control") == ["tandem.schedule_jobs"]
    sent.r.lpop("control")  # the control worker takes the message ...
    assert len(services.job_schedule_requested()) == 3  # ... and its pass places all three
    with django_capture_on_commit_callbacks(execute=True):
        late = services.job_submit(owner=alice, model_name="resnet18", batch_size=2, steps=1, num_gpus=0)
    assert sent.tasks("control") == ["tandem.schedule_jobs"]
    assert [j.pk for j in services.job_schedule_requested()] == [late.pk]


def test_unreachable_broker_keeps_the_submission(alice, settings, django_capture_on_commit_callbacks, caplog):
    """With the broker down when a submission commits, the job stays stored and queued (the
    reconciler's pass places it later) and the caller gets no error."""
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    with django_capture_on_commit_callbacks(execute=True):
        job = services.job_submit(owner=alice, model_name="resnet18", batch_size=2, steps=1, num_gpus=0)
    assert Job.objects.get(pk=job.pk).state == State.QUEUED
    assert "scheduling pass not requested" in caplog.text


@override_settings(JOB_IMAGE_SIZE=32, TORCH_THREADS=1)
def test_run_is_idempotent_and_frees_gpus(alice, sent, django_capture_on_commit_callbacks):
    node = Node.objects.create(cluster=Cluster.objects.create(name="c"), name="n", cpu_cores=4, memory_mib=1024)
    gpu = GPUDevice.objects.create(node=node, index=0, model="T4", memory_mib=16384)
    job = Job.objects.create(owner=alice, model_name="resnet18", batch_size=2, steps=2)
    job.gpus.add(gpu)
    with django_capture_on_commit_callbacks(execute=True):
        done = services.job_run(job_id=job.pk)
    assert done.state == State.SUCCEEDED and done.attempts == 1
    assert done.result["steps"] == 2 and done.result["gpus"] == [gpu.pk]
    assert done.result["device"] == "cpu"  # no CUDA on this machine: falls back to CPU
    assert done.gpus.count() == 0  # freed
    first = dict(done.result), done.finished_at
    again = services.job_run(job_id=job.pk)  # a duplicate delivery of a finished job changes nothing
    assert (again.result, again.finished_at, again.attempts) == (first[0], first[1], 1)


def test_unknown_model_fails_job_cleanly(alice, sent):
    job = Job.objects.create(owner=alice, model_name="not-a-model", batch_size=2, steps=2)
    done = services.job_run(job_id=job.pk)
    assert done.state == State.FAILED and "unknown torchvision model" in done.error


def test_cancel_queued_then_illegal(alice, sent):
    job = Job.objects.create(owner=alice, model_name="resnet18", batch_size=2)
    assert services.job_cancel(job=job).state == State.CANCELLED
    with pytest.raises(IllegalTransition):
        services.job_cancel(job=job)


def test_registered_scheduler_rejects_and_nothing_is_stored(alice, sent):
    class MaxTwoGPUs:
        def validate(self, job):
            if job.num_gpus > 2:
                raise JobRejected(f"no node has {job.num_gpus} GPUs", field="num_gpus")

        def schedule(self):
            return []

    before = get_job_scheduler()
    register_job_scheduler(MaxTwoGPUs())
    try:
        with pytest.raises(JobRejected, match="no node has 3 GPUs"):
            services.job_submit(owner=alice, model_name="resnet18", batch_size=2, num_gpus=3)
        assert Job.objects.count() == 0
    finally:
        register_job_scheduler(before)


def test_failed_experiment_error_is_type_and_message_only(alice, sent):
    from webapp.models import Experiment

    # stored without validation (as an older row could be): the runner reads p["steps"]
    exp = Experiment.objects.create(owner=alice, kind="training-probe", parameters={"model_name": "resnet18", "batch_size": 1})
    done = services.experiment_run(experiment_id=exp.pk)
    assert done.state == State.FAILED
    assert done.error == "KeyError: 'steps'"  # no traceback (it is logged instead)


def test_scheduling_passes_after_submissions_coalesce(monkeypatch):
    """At most one pass runs and one waits (webapp.services.job_schedule_coalesced): a caller that
    finds a pass waiting returns without running one; a caller that finds the slots free runs
    one. The slots are PostgreSQL advisory locks, held here from another connection."""
    import psycopg
    from django.db import connection

    runs = []
    monkeypatch.setattr(services, "job_schedule", lambda: runs.append(1) or [])
    s = connection.settings_dict
    other = psycopg.connect(host=s["HOST"] or "127.0.0.1", port=s["PORT"] or 5432, user=s["USER"] or "postgres",
                            dbname=s["NAME"], autocommit=True)
    try:
        other.execute("SELECT pg_advisory_lock(%s)", [services._PASS_NEXT])  # a pass is already waiting
        services.job_schedule_coalesced()
        assert runs == []  # that waiting pass will read the queue after this submission's commit
        other.execute("SELECT pg_advisory_unlock(%s)", [services._PASS_NEXT])
        services.job_schedule_coalesced()
        assert runs == [1]
        # the slots were freed: another process can take both at once
        assert other.execute("SELECT pg_try_advisory_lock(%s), pg_try_advisory_lock(%s)",
                             [services._PASS_NEXT, services._PASS_RUNNING]).fetchone() == (True, True)
    finally:
        other.close()


def test_pass_that_leaves_placeable_jobs_asks_for_the_next(alice, sent, django_capture_on_commit_callbacks):
    """A burst larger than the policy's window (Horus looks at the first 256 queued jobs) is
    placed by passes that ask for each other, without a further submission: a pass that sent
    jobs and left some queued requests one more pass; the pass that empties the queue does not."""
    from webapp.services import SCHEDULE_PENDING_KEY

    cluster = Cluster.objects.create(name="burst")
    nodes = Node.objects.bulk_create([Node(cluster=cluster, name=f"n{i}", cpu_cores=32, memory_mib=262144) for i in range(40)])
    GPUDevice.objects.bulk_create([GPUDevice(node=n, index=g, model="V100", memory_mib=16384) for n in nodes for g in range(8)])
    Job.objects.bulk_create([Job(owner=alice, model_name="resnet18", batch_size=2, num_gpus=1, steps=1, name=f"b{i}")
                             for i in range(300)])
    with django_capture_on_commit_callbacks(execute=True):
        first = services.job_schedule_requested()
    assert 0 < len(first) < 300, len(first)  # the window, not the whole queue
    assert sent.tasks("control") == ["tandem.schedule_jobs"] and sent.r.exists(SCHEDULE_PENDING_KEY)
    sent.r.delete("control")  # the control worker takes that message ...
    with django_capture_on_commit_callbacks(execute=True):
        second = services.job_schedule_requested()  # ... and runs the pass it asked for
    assert sorted(j.pk for j in first + second) == sorted(Job.objects.values_list("pk", flat=True))
    assert sent.tasks("control") == [] and not sent.r.exists(SCHEDULE_PENDING_KEY)  # nothing left: no more passes
    assert sorted(sent("gpu")) == sorted(Job.objects.values_list("pk", flat=True))  # each sent once
    assert Job.objects.filter(gpus__isnull=True).count() == 0
