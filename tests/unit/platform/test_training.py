"""Real training steps (webapp/backends/training.py) on CPU, and on CUDA where a GPU is present."""
from __future__ import annotations

import pytest

from webapp.backends.training import pick_device, train_steps


def test_cpu_steps_and_callback():
    seen = []
    r = train_steps(model_name="resnet18", batch_size=2, steps=3, image_size=32, threads=1, on_step=seen.append)
    assert seen == [1, 2, 3]
    assert (r.steps, r.batch_size, r.device) == (3, 2, "cpu")
    assert r.samples_per_second == pytest.approx(3 * 2 / r.seconds)


@pytest.mark.parametrize("kwargs, message", [
    ({"model_name": "no-such-net", "batch_size": 1, "steps": 1}, "unknown torchvision model"),
    ({"model_name": "resnet18", "batch_size": 1, "steps": 0}, "at least 1"),
])
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        train_steps(**kwargs)


@pytest.mark.gpu
def test_cuda_steps_on_assigned_gpu():
    assert pick_device([0]) == "cuda:0"
    r = train_steps(model_name="resnet18", batch_size=8, steps=5, device="cuda:0", image_size=64)
    assert r.device == "cuda:0" and r.steps == 5
