"""CUDA tuning path (GPU nodes only): a tiny tuning on the ``gpu`` queue with the NVML meter."""
from __future__ import annotations

import pytest

from tests.conftest import wait_for
from webapp.models import Experiment
from webapp.services import experiment_create
from webapp.states import State


def _has_gpu() -> bool:
    try:
        import tvm

        return bool(tvm.cuda(0).exist)
    except Exception:  # noqa: BLE001
        return False


pytestmark = [pytest.mark.integration, pytest.mark.gpu,
              pytest.mark.skipif(not _has_gpu(), reason="needs an NVIDIA GPU (none on this machine)")]


def test_cuda_tuning_on_gpu_queue(start_worker, django_user_model, settings, tmp_path, monkeypatch):
    from tuning.models import TuningRecord, TuningResult

    settings.VAR_DIR = tmp_path / "var"
    monkeypatch.setenv("TANDEM_VAR_DIR", str(settings.VAR_DIR))
    start_worker(queues="gpu")
    owner = django_user_model.objects.create_user("gpu-tuner", password="pw")
    exp = experiment_create(owner=owner, kind="tuning", parameters={"model": "matmul", "target": "cuda", "trials": 8, "trials_per_round": 4})
    wait_for(lambda: Experiment.objects.get(pk=exp.pk).is_terminal, timeout=900, what="CUDA tuning")
    done = Experiment.objects.get(pk=exp.pk)
    assert done.state == State.SUCCEEDED, done.error
    assert done.result["target"]["kind"] == "cuda" and done.result["energy_source"] == "nvml"
    assert TuningRecord.objects.filter(experiment=exp).count() == 8
    r = TuningResult.objects.get(experiment=exp)
    assert r.tuned_latency["median_s"] < r.untuned_latency["median_s"]
