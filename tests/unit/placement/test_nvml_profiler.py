"""NVML sampling and aggregation around a fake NVML (the real path is the gpu-marked test)."""
import time
from types import SimpleNamespace

import pytest

from placement.backends.nvml_profiler import NVMLSampler, Sample, aggregate, gpu_type_of


class FakeNVML:
    """Scripted readings: utilisation cycles through ``utils``; memory rises by 100 MiB a read."""

    def __init__(self, utils):
        self.utils, self.i = utils, 0

    def nvmlDeviceGetHandleByIndex(self, i):
        return ("h", i)

    def nvmlDeviceGetUtilizationRates(self, h):
        u = self.utils[self.i % len(self.utils)]
        self.i += 1
        return SimpleNamespace(gpu=u, memory=0)

    def nvmlDeviceGetMemoryInfo(self, h):
        return SimpleNamespace(used=(1000 + 100 * self.i) * 2**20)

    def nvmlDeviceGetName(self, h):
        return b"Tesla V100-SXM2-16GB"


def test_aggregate_by_hand():
    s = [Sample(0.0, 0, 500), Sample(0.1, 40, 900), Sample(0.2, 80, 1500), Sample(0.3, 60, 1400)]
    agg = aggregate(s, baseline_mib=500, after_s=0.1)
    assert agg == {"util_mean_pct": 60.0, "util_peak_pct": 80, "memory_mib": 1000.0, "samples": 3}
    with pytest.raises(ValueError, match="no NVML samples"):
        aggregate(s, baseline_mib=0, after_s=9)


def test_sampler_thread_collects_readings():
    nv = FakeNVML([10, 90])
    sm = NVMLSampler(nv, 0, interval_s=0.001)
    sm.start()
    deadline = time.monotonic() + 5
    while len(sm.samples) < 6 and time.monotonic() < deadline:
        time.sleep(0.005)
    samples = sm.stop()
    n = len(samples)
    time.sleep(0.01)
    assert len(sm.samples) == n >= 6  # stopped: no more readings
    assert [s.util_pct for s in samples[:4]] == [10, 90, 10, 90]
    assert samples[1].used_mib - samples[0].used_mib == pytest.approx(100)
    assert sm.name() == "Tesla V100-SXM2-16GB"


@pytest.mark.parametrize("name,short", [("NVIDIA H200", "H200"), ("Tesla V100-SXM2-16GB", "V100"),
                                        ("Tesla K80", "K80"), ("NVIDIA A100-SXM4-80GB", "A100")])
def test_gpu_type_of(name, short):
    assert gpu_type_of(name) == short


@pytest.mark.gpu
def test_real_profile_on_gpu():
    from placement.backends.nvml_profiler import profile_model

    row = profile_model("resnet18", 32, steps=30, warmup=5)
    assert 0 < row["util_mean_pct"] <= row["util_peak_pct"] <= 100
    assert row["memory_mib"] > 100 and row["source"].startswith("nvml:")
