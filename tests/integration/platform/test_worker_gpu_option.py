"""A real worker started with --gpu on this machine (no NVIDIA driver) says why and keeps working;
on a GPU machine (marked gpu) it stores its GPUs."""
from __future__ import annotations

import pytest

from tests.conftest import wait_for
from webapp.models import GPUDevice

pytestmark = pytest.mark.integration


def _has_nvidia() -> bool:
    from workers.gpu import read_gpus

    return read_gpus()[1] is None


@pytest.mark.skipif(_has_nvidia(), reason="this machine has an NVIDIA GPU: see the gpu-marked test")
def test_worker_with_gpu_option_without_driver(start_worker):
    proc = start_worker(extra_args=("--gpu",))
    wait_for(lambda: "no NVIDIA GPU:" in proc.log_path.read_text(), timeout=30, what="the no-GPU message")
    assert proc.poll() is None  # still running
    assert GPUDevice.objects.count() == 0


@pytest.mark.gpu
def test_worker_with_gpu_option_reports_gpus(start_worker, monkeypatch):
    from workers.gpu import read_gpus

    monkeypatch.setenv("TANDEM_NODE_NAME", "gpu-test-node")
    gpus, reason = read_gpus()
    assert gpus, reason
    start_worker(extra_args=("--gpu",))
    wait_for(lambda: GPUDevice.objects.filter(node__name="gpu-test-node").count() == len(gpus), timeout=60, what="GPU rows")
    rows = list(GPUDevice.objects.filter(node__name="gpu-test-node").order_by("index").values("index", "model", "memory_mib", "uuid"))
    assert rows == gpus and all(g["memory_mib"] > 1024 for g in rows)
