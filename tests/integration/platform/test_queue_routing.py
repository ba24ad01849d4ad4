"""Real workers on different queues: a job given GPUs goes to the ``gpu`` worker, a CPU job to the
``cpu`` worker, and the scheduling passes that place and dispatch them run on the ``control``
worker (docs/deployment.md)."""
from __future__ import annotations

import pytest

from tests.conftest import token_client, wait_for
from webapp.models import Cluster, GPUDevice, Job, Node
from webapp.states import State

pytestmark = pytest.mark.integration


def test_tasks_go_to_the_worker_of_their_queue(start_worker, django_user_model, monkeypatch):
    monkeypatch.setenv("TANDEM_JOB_IMAGE_SIZE", "32")
    node = Node.objects.create(cluster=Cluster.objects.create(name="lab"), name="g0", cpu_cores=8, memory_mib=65536)
    GPUDevice.objects.create(node=node, index=0, model="V100", memory_mib=16384)
    cpu = start_worker(queues="cpu", name="cpu-only@%h", env={"TANDEM_TORCH_THREADS": "1", "TANDEM_NODE_NAME": "cpu-box"})
    gpu = start_worker(queues="gpu", name="gpu-only@%h", env={"TANDEM_TORCH_THREADS": "1", "TANDEM_NODE_NAME": "gpu-box"})
    control = start_worker(queues="control", name="control@%h")  # the scheduling passes (placement, dispatch)
    api = token_client(django_user_model.objects.create_user("fay", password="pw-fay-1"))
    on_gpu = api.post("/api/v1/jobs/", {"model_name": "resnet18", "batch_size": 2, "steps": 1, "num_gpus": 1}, format="json").json()["id"]
    on_cpu = api.post("/api/v1/jobs/", {"model_name": "resnet18", "batch_size": 2, "steps": 1, "num_gpus": 0}, format="json").json()["id"]
    wait_for(lambda: Job.objects.filter(pk__in=[on_gpu, on_cpu], state=State.SUCCEEDED).count() == 2, timeout=240,
             what="both jobs to succeed")
    cpu_log, gpu_log = cpu.log_path.read_text(), gpu.log_path.read_text()
    assert cpu_log.count("Task tandem.run_job[") >= 1 and gpu_log.count("Task tandem.run_job[") >= 1
    assert Job.objects.get(pk=on_gpu).gpus.count() == 0  # freed when it ended
    assert Job.objects.get(pk=on_gpu).result["worker"] == "gpu-box"
    assert Job.objects.get(pk=on_cpu).result["worker"] == "cpu-box"
    # each worker received exactly one job (the GPU job on gpu-only, the CPU job on cpu-only)
    assert cpu_log.count("] received") == 1 and gpu_log.count("] received") == 1, (cpu_log[-1500:], gpu_log[-1500:])
    control_log = control.log_path.read_text()
    assert "Task tandem.schedule_jobs[" in control_log and "Task tandem.run_job[" not in control_log
