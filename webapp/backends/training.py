"""Real SGD training steps of a torchvision model on synthetic data (the work of a Job).

torch and torchvision are imported inside the functions so that importing this module is cheap.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable


@lru_cache(maxsize=1)
def torchvision_model_names() -> frozenset[str]:
    """Names of torchvision's classification models (``torchvision.models.list_models``)."""
    import torchvision

    return frozenset(torchvision.models.list_models(module=torchvision.models))


@dataclass(frozen=True)
class TrainingResult:
    """Outcome of :func:`train_steps`. ``seconds``: wall time of the steps (model build and the
    first warm-up excluded, nothing excluded otherwise); ``samples_per_second`` =
    ``steps * batch_size / seconds``; ``final_loss``: cross-entropy of the last step."""

    steps: int
    batch_size: int
    seconds: float
    samples_per_second: float
    device: str
    final_loss: float

    def as_dict(self) -> dict:
        return {
            "steps": self.steps,
            "batch_size": self.batch_size,
            "seconds": round(self.seconds, 4),
            "samples_per_second": round(self.samples_per_second, 3),
            "device": self.device,
            "final_loss": round(self.final_loss, 5),
        }


def pick_device(gpu_indices: list[int]) -> str:
    """``"cuda:<i>"`` for the first assigned GPU index when CUDA is available, else ``"cpu"``."""
    import torch

    if gpu_indices and torch.cuda.is_available() and gpu_indices[0] < torch.cuda.device_count():
        return f"cuda:{gpu_indices[0]}"
    return "cpu"


def train_steps(
    *,
    model_name: str,
    batch_size: int,
    steps: int,
    device: str = "cpu",
    image_size: int = 224,
    seed: int = 0,
    on_step: Callable[[int], None] | None = None,
) -> TrainingResult:
    """Run ``steps`` SGD steps (lr 0.01, momentum 0.9) of torchvision ``model_name`` (random
    weights, 1000 classes) on one synthetic batch of shape ``(batch_size, 3, image_size,
    image_size)`` with random labels, on ``device``. ``on_step(i)`` is called after step ``i``
    (1-based); it may raise to stop the run.

    Raises ``ValueError`` for a model name torchvision does not know or ``steps < 1``.
    """
    import torch
    import torchvision

    if model_name not in torchvision_model_names():
        raise ValueError(f"unknown torchvision model {model_name!r}")
    if steps < 1 or batch_size < 1:
        raise ValueError("steps and batch_size must be at least 1")
    torch.manual_seed(seed)
    dev = torch.device(device)
    model = torchvision.models.get_model(model_name, weights=None, num_classes=1000).to(dev)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.randn(batch_size, 3, image_size, image_size, device=dev)
    y = torch.randint(0, 1000, (batch_size,), device=dev)
    loss_val = float("nan")
    t0 = time.perf_counter()
    for i in range(1, steps + 1):
        opt.zero_grad(set_to_none=True)
        out = model(x)
        if isinstance(out, tuple):  # inception/googlenet aux outputs in train mode
            out = out[0]
        elif hasattr(out, "logits"):
            out = out.logits
        loss = loss_fn(out, y)
        loss.backward()
        opt.step()
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        loss_val = float(loss.detach().cpu())
        if on_step is not None:
            on_step(i)
    seconds = time.perf_counter() - t0
    return TrainingResult(
        steps=steps,
        batch_size=batch_size,
        seconds=seconds,
        samples_per_second=steps * batch_size / seconds if seconds > 0 else float("inf"),
        device=str(dev),
        final_loss=loss_val,
    )
