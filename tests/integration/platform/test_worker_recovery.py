"""Filesystem broker (demo): work left ``running`` by a killed worker is failed at worker start."""
from __future__ import annotations

import pytest
from celery.signals import worker_ready

from webapp.models import Cluster, Experiment, GPUDevice, Job, Node
from webapp.states import State
from workers.recovery import fail_running_work

pytestmark = [pytest.mark.integration, pytest.mark.django_db]
LOST = "worker lost (filesystem broker has no redelivery); resubmit"


@pytest.fixture
def work(django_user_model):
    u = django_user_model.objects.create_user("alice", password="pw")
    node = Node.objects.create(cluster=Cluster.objects.create(name="c", kind="other"), name="n", cpu_cores=8, memory_mib=1024)
    gpu = GPUDevice.objects.create(node=node, index=0, model="T4", memory_mib=16384)
    running_exp = Experiment.objects.create(owner=u, kind="training-probe", state=State.RUNNING)
    queued_exp = Experiment.objects.create(owner=u, kind="training-probe")
    done_exp = Experiment.objects.create(owner=u, kind="training-probe", state=State.SUCCEEDED)
    running_job = Job.objects.create(owner=u, model_name="resnet18", batch_size=2, state=State.RUNNING,
                                     dispatched_at="2026-01-01T00:00:00Z")
    running_job.gpus.add(gpu)
    return running_exp, queued_exp, done_exp, running_job


def _states(objs):
    return [(type(o).__name__, *type(o).objects.values_list("state", "error").get(pk=o.pk)) for o in objs]


def test_filesystem_broker_fails_running_work(work):
    assert fail_running_work(broker_url="filesystem://") == {"experiments": 1, "jobs": 1}
    assert _states(work) == [
        ("Experiment", "failed", LOST), ("Experiment", "queued", ""), ("Experiment", "succeeded", ""), ("Job", "failed", LOST),
    ]
    assert work[3].gpus.count() == 0  # freed for the next jobs


def test_redis_broker_leaves_running_work_to_redelivery(work):
    assert fail_running_work(broker_url="redis://127.0.0.1:6379/11") == {"experiments": 0, "jobs": 0}
    assert [s[1] for s in _states(work)] == ["running", "queued", "succeeded", "running"]


def test_worker_ready_signal_runs_the_recovery(work):
    import workers.celery  # noqa: F401 - connects the handler

    from types import SimpleNamespace

    class Consumer:  # what the worker sends: its consumer, holding the app and its configuration
        app = SimpleNamespace(conf=SimpleNamespace(broker_url="filesystem://"))

    worker_ready.send(sender=Consumer())
    assert [s[1] for s in _states(work)] == ["failed", "queued", "succeeded", "failed"]


def _hold_lock(lock):
    """A process holding ``flock`` on ``lock`` (as a live worker does) for up to 120 s."""
    import subprocess
    import sys

    return subprocess.Popen([sys.executable, "-c", (
        "import fcntl, sys, time; f = open(sys.argv[1], 'a+'); fcntl.flock(f, fcntl.LOCK_EX); "
        "print('held', flush=True); time.sleep(120)"), str(lock)], stdout=subprocess.PIPE, text=True)


def test_second_worker_on_the_filesystem_broker_stops_and_fails_nothing(work, tmp_path):
    """A second ``serve`` (second worker on the same broker folder) used to fail the first
    worker's running work and lose its result; now it exits before consuming anything."""
    import os
    import subprocess
    import sys

    from tests.conftest import REPO, _worker_env

    var = tmp_path / "var"
    lock = var / "broker" / "worker.lock"
    lock.parent.mkdir(parents=True)
    holder = _hold_lock(lock)
    try:
        assert holder.stdout.readline().strip() == "held"
        env = {**_worker_env(), "CELERY_BROKER_URL": "filesystem://", "TANDEM_VAR_DIR": str(var),
               "DJANGO_SETTINGS_MODULE": "webapp.settings.dev"}  # the demo's settings: broker under var/
        proc = subprocess.run([sys.executable, "-m", "celery", "-A", "workers", "worker", "--pool", "solo",
                               "--loglevel", "INFO"], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode != 0
        assert "another worker is running on this filesystem broker" in proc.stdout + proc.stderr
        # the live worker's work is untouched
        assert [s[1] for s in _states(work)] == ["running", "queued", "succeeded", "running"]
    finally:
        holder.kill()
        holder.wait()
    # with the other worker gone, the lock is free again and this process takes it
    from workers.recovery import AnotherWorkerRunning, take_single_worker_lock

    fh = take_single_worker_lock(lock)
    try:
        assert lock.read_text().strip() == str(os.getpid())
        with pytest.raises(AnotherWorkerRunning):  # flock is per open file: a second open is refused
            take_single_worker_lock(lock)
    finally:
        fh.close()


def test_control_worker_runs_beside_the_worker_and_fails_nothing(work, tmp_path):
    """``serve``'s scheduling-pass worker (``-Q control``) starts while the one worker holds the
    broker folder's lock, takes a lock of its own, and marks nothing failed (it runs no work)."""
    import sys

    from tests.conftest import _worker_env, spawn_ready, stop_processes
    from workers.recovery import control_only

    assert control_only("control") and control_only(["control"]) and control_only(" control, ")
    assert not control_only("control,cpu") and not control_only(None) and not control_only(["cpu"])
    var = tmp_path / "var"
    lock = var / "broker" / "worker.lock"
    lock.parent.mkdir(parents=True)
    holder = _hold_lock(lock)
    procs: list = []
    try:
        assert holder.stdout.readline().strip() == "held"
        env = {**_worker_env(), "CELERY_BROKER_URL": "filesystem://", "TANDEM_VAR_DIR": str(var),
               "DJANGO_SETTINGS_MODULE": "webapp.settings.dev"}
        spawn_ready([sys.executable, "-m", "celery", "-A", "workers", "worker", "-Q", "control", "--pool", "solo",
                     "--loglevel", "INFO"], env=env, log=tmp_path / "control.log", procs=procs)
        assert (var / "broker" / "control.lock").exists()
        assert [s[1] for s in _states(work)] == ["running", "queued", "succeeded", "running"]
    finally:
        stop_processes(procs)
        holder.kill()
        holder.wait()
