"""GPU profiler: runs training steps of a zoo model on an NVIDIA GPU and samples NVML.

A background thread reads ``nvmlDeviceGetUtilizationRates(handle).gpu`` (percent of the last
sample period in which a kernel ran, NVML's "GPU busy") and ``nvmlDeviceGetMemoryInfo(handle)
.used`` (bytes) every ``interval_s`` while the steps run. Aggregation (:func:`aggregate`):
utilisation mean and peak over the samples taken after the warm-up steps, memory = peak used
minus the memory used before the model was loaded (MiB). Source label ``nvml:<GPU name>``.

The NVML module is passed in (``pynvml`` by default), so the sampling and aggregation code is
tested with a fake in unit tests; the real path needs a GPU (tests marked ``gpu``).
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any


@dataclass
class Sample:
    t: float          # seconds since sampling started
    util_pct: float   # NVML GPU utilisation, percent
    used_mib: float   # device memory used, MiB


def aggregate(samples: list[Sample], *, baseline_mib: float, after_s: float = 0.0) -> dict[str, float]:
    """Mean and peak utilisation (%) of samples at ``t >= after_s`` and peak memory above
    ``baseline_mib`` (MiB). Raises ``ValueError`` when no sample falls in the window."""
    window = [s for s in samples if s.t >= after_s]
    if not window:
        raise ValueError(f"no NVML samples after {after_s:.2f} s (got {len(samples)} in all); run more steps")
    utils = [s.util_pct for s in window]
    return {"util_mean_pct": sum(utils) / len(utils), "util_peak_pct": max(utils),
            "memory_mib": max(0.0, max(s.used_mib for s in samples) - baseline_mib), "samples": len(window)}


class NVMLSampler:
    """Samples one GPU in a daemon thread between :meth:`start` and :meth:`stop`."""

    def __init__(self, nvml: Any, index: int = 0, interval_s: float = 0.05) -> None:
        self.nvml, self.index, self.interval_s = nvml, index, interval_s
        self.handle = nvml.nvmlDeviceGetHandleByIndex(index)
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0

    def read(self) -> Sample:
        u = self.nvml.nvmlDeviceGetUtilizationRates(self.handle)
        m = self.nvml.nvmlDeviceGetMemoryInfo(self.handle)
        return Sample(time.monotonic() - self._t0, float(u.gpu), m.used / 2**20)

    def used_mib(self) -> float:
        return self.nvml.nvmlDeviceGetMemoryInfo(self.handle).used / 2**20

    def name(self) -> str:
        n = self.nvml.nvmlDeviceGetName(self.handle)
        return n.decode() if isinstance(n, bytes) else str(n)

    def start(self) -> None:
        self._t0 = time.monotonic()
        self._stop.clear()

        def loop():
            while not self._stop.is_set():
                self.samples.append(self.read())
                self._stop.wait(self.interval_s)

        self._thread = threading.Thread(target=loop, daemon=True, name="nvml-sampler")
        self._thread.start()

    def stop(self) -> list[Sample]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        return self.samples


def _build(name: str, batch_size: int, device):
    import torch

    from .features import TRANSFORMERS_ZOO, SEQ_LEN, _transformers_model

    if name in TRANSFORMERS_ZOO:
        model = _transformers_model(name).to(device)
        x = torch.randint(0, 1000, (batch_size, SEQ_LEN), device=device)
        return model, lambda: _loss(model(x))
    import torchvision

    model = torchvision.models.get_model(name, **({"aux_logits": False, "init_weights": False} if name == "googlenet" else {})).to(device)
    x = torch.randn(batch_size, 3, 224, 224, device=device)
    y = torch.randint(0, 1000, (batch_size,), device=device)
    return model, lambda: torch.nn.functional.cross_entropy(model(x), y)


def _loss(out):
    from .features import _first_tensor

    return _first_tensor(out).float().mean()


def profile_model(name: str, batch_size: int, *, steps: int = 200, warmup: int = 20, index: int = 0,
                  nvml: Any = None, interval_s: float = 0.05) -> dict[str, Any]:
    """Train ``name`` at ``batch_size`` for ``warmup + steps`` SGD steps on ``cuda:index`` and
    return a profile row (model, batch_size, gpu_type, util_mean_pct, util_peak_pct, memory_mib,
    source, samples). Raises ``RuntimeError`` without CUDA."""
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("CUDA is not available: profile_gpu needs an NVIDIA GPU and driver")
    if nvml is None:
        import pynvml as nvml
    nvml.nvmlInit()
    try:
        sampler = NVMLSampler(nvml, index, interval_s)
        device = torch.device(f"cuda:{index}")
        torch.cuda.empty_cache()
        baseline = sampler.used_mib()
        model, step_loss = _build(name, batch_size, device)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        sampler.start()
        t_warm = None
        for i in range(warmup + steps):
            if i == warmup:
                torch.cuda.synchronize(device)
                t_warm = time.monotonic() - sampler._t0
            opt.zero_grad(set_to_none=True)
            step_loss().backward()
            opt.step()
        torch.cuda.synchronize(device)
        samples = sampler.stop()
        agg = aggregate(samples, baseline_mib=baseline, after_s=t_warm or 0.0)
        gpu = sampler.name()
        del model, opt
        torch.cuda.empty_cache()
        return {"model": name, "batch_size": batch_size, "gpu_type": gpu_type_of(gpu), **agg, "source": f"nvml:{gpu}"}
    finally:
        nvml.nvmlShutdown()


def gpu_type_of(nvml_name: str) -> str:
    """Short GPU type from an NVML name: "NVIDIA H200" -> "H200", "Tesla V100-SXM2-16GB" -> "V100"."""
    for tok in nvml_name.replace("-", " ").split():
        if any(c.isdigit() for c in tok) and tok[0].isalpha():
            return tok.upper()
    return nvml_name
