"""NVML GPU discovery (workers/gpu.py) against a fake pynvml module: the success and error paths."""
from __future__ import annotations

import logging
from types import SimpleNamespace

from workers.gpu import read_gpus, report_gpus


class NVMLError(Exception):
    pass


def fake_nvml(devices, init_error=None):
    return SimpleNamespace(
        nvmlInit=lambda: (_ for _ in ()).throw(init_error) if init_error else None,
        nvmlShutdown=lambda: None,
        nvmlDeviceGetCount=lambda: len(devices),
        nvmlDeviceGetHandleByIndex=lambda i: devices[i],
        nvmlDeviceGetName=lambda h: h["name"],
        nvmlDeviceGetUUID=lambda h: h["uuid"],
        nvmlDeviceGetMemoryInfo=lambda h: SimpleNamespace(total=h["bytes"]),
    )


def test_reads_model_memory_uuid():
    nvml = fake_nvml([
        {"name": b"Tesla T4", "uuid": b"GPU-1", "bytes": 15 * 1024**3 + 360 * 1024**2},
        {"name": "NVIDIA H200", "uuid": "GPU-2", "bytes": 150_754_820_096},
    ])
    gpus, reason = read_gpus(nvml)
    assert reason is None
    assert gpus == [
        {"index": 0, "model": "Tesla T4", "memory_mib": 15720, "uuid": "GPU-1"},
        {"index": 1, "model": "NVIDIA H200", "memory_mib": 143771, "uuid": "GPU-2"},  # 150754820096 // 2**20
    ]


def test_no_driver_reports_none_with_reason(caplog):
    nvml = fake_nvml([], init_error=NVMLError("Driver Not Loaded"))
    assert read_gpus(nvml) == ([], "NVMLError: Driver Not Loaded")
    with caplog.at_level(logging.WARNING, logger="tandem.gpu"):
        assert report_gpus(nvml) == []  # no database touched: this is a unit test without services
    assert "no NVIDIA GPU: NVMLError: Driver Not Loaded" in caplog.text


def test_zero_devices_is_a_reason():
    assert read_gpus(fake_nvml([])) == ([], "NVML found no GPU devices")


def test_real_pynvml_never_raises():
    gpus, reason = read_gpus()  # on a machine without a driver: a reason; with one: the GPUs
    assert (gpus and reason is None) or (gpus == [] and reason)
