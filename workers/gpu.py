"""GPU discovery of a worker node through NVML (``pynvml``, from the ``nvidia-ml-py`` package)
and the worker bootstep behind ``celery -A workers worker --gpu``.

With ``--gpu`` the worker reads its GPUs (model, memory MiB, UUID) at start and every
``TANDEM_GPU_HEARTBEAT_S`` seconds (default 60) and stores them as the Node/GPUDevice rows of
node ``TANDEM_NODE_NAME`` (default: the host name) in cluster ``TANDEM_WORKER_CLUSTER``
(default ``workers``). On a machine without an NVIDIA driver it logs
``no NVIDIA GPU: <reason>``, stores nothing, and keeps running.
"""
from __future__ import annotations

import logging
import os
import socket
from typing import Any

from celery import bootsteps

log = logging.getLogger("tandem.gpu")


def read_gpus(nvml: Any = None) -> tuple[list[dict[str, Any]], str | None]:
    """The GPUs NVML sees: ``([{"index", "model", "memory_mib", "uuid"}], None)``, or
    ``([], reason)`` when NVML cannot be used (no driver, no library, no device). Memory is
    ``nvmlDeviceGetMemoryInfo().total`` in MiB (bytes // 2**20). ``nvml`` replaces the
    ``pynvml`` module (for tests)."""
    if nvml is None:
        try:
            import pynvml as nvml
        except ImportError as err:  # pragma: no cover - nvidia-ml-py is a pinned dependency
            return [], f"pynvml not installed ({err})"
    try:
        nvml.nvmlInit()
    except Exception as err:  # noqa: BLE001 - NVMLError subclasses, OSError for a missing library
        return [], f"{type(err).__name__}: {err}"
    try:
        gpus = []
        for i in range(nvml.nvmlDeviceGetCount()):
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            name = nvml.nvmlDeviceGetName(h)
            uuid = nvml.nvmlDeviceGetUUID(h)
            gpus.append({
                "index": i,
                "model": name.decode() if isinstance(name, bytes) else str(name),
                "memory_mib": int(nvml.nvmlDeviceGetMemoryInfo(h).total) // 2**20,
                "uuid": uuid.decode() if isinstance(uuid, bytes) else str(uuid),
            })
        if not gpus:
            return [], "NVML found no GPU devices"
        return gpus, None
    except Exception as err:  # noqa: BLE001
        return [], f"{type(err).__name__}: {err}"
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def report_gpus(nvml: Any = None) -> list[dict[str, Any]]:
    """Read the GPUs and store them for this node (see module docstring); log why when none."""
    gpus, reason = read_gpus(nvml)
    if reason:
        log.warning("no NVIDIA GPU: %s", reason)
        return []
    import psutil
    from django.db import close_old_connections

    from webapp.services import node_report_gpus

    close_old_connections()
    node_report_gpus(
        cluster_name=os.environ.get("TANDEM_WORKER_CLUSTER", "workers"),
        node_name=os.environ.get("TANDEM_NODE_NAME", socket.gethostname()),
        gpus=gpus, cpu_cores=float(os.cpu_count() or 1), memory_mib=psutil.virtual_memory().total // 2**20,
    )
    log.info("reported %d GPU(s): %s", len(gpus), ", ".join(f"{g['index']}:{g['model']} {g['memory_mib']} MiB" for g in gpus))
    return gpus


class GPUReporter(bootsteps.StartStopStep):
    """Worker bootstep: with ``--gpu``, report the node's GPUs at start and on a heartbeat."""

    requires = {"celery.worker.components:Timer"}

    def __init__(self, worker, gpu: bool = False, **options):
        super().__init__(worker, **options)
        self.enabled = bool(gpu)
        self.tref = None

    def start(self, worker):
        self._safe_report()
        interval = float(os.environ.get("TANDEM_GPU_HEARTBEAT_S", "60"))
        self.tref = worker.timer.call_repeatedly(interval, self._safe_report)

    def stop(self, worker):
        if self.tref is not None:
            self.tref.cancel()

    @staticmethod
    def _safe_report():
        try:
            report_gpus()
        except Exception:  # noqa: BLE001 - a failed heartbeat must not kill the worker
            log.exception("GPU report failed")
