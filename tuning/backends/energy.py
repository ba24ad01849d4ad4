"""Energy meter for tuning rounds: measured where the hardware exposes a counter, estimated
otherwise, and always labelled which.

Sources, in the order :func:`make_energy_meter` tries them:

``"nvml"`` (device ``"cuda"``)
    NVIDIA's cumulative board energy counter ``nvmlDeviceGetTotalEnergyConsumption``
    (millijoules since the driver loaded; Volta and newer), read through ``pynvml``
    (nvidia-ml-py). Measured.
``"rapl"`` (device ``"cpu"``)
    Linux powercap RAPL package domains ``/sys/class/powercap/intel-rapl:N/energy_uj``
    (microjoules, wraps at ``max_energy_range_uj``; AMD Zen exposes the same interface).
    Only top-level package domains are summed (sub-domains such as ``intel-rapl:0:0`` are part
    of their package). Measured; needs read permission on ``energy_uj``.
``"estimate"`` (fallback)
    CPU seconds used by this process tree since the meter started (psutil: user + system of
    this process, of its live descendants, and of exited, waited-for children via the
    ``children_user``/``children_system`` fields of ``cpu_times``) times a configured power per
    busy core. Not measured: the reading says ``measured=False``.

The default power per core is an ASSUMPTION, not a measurement: :data:`DEFAULT_WATTS_PER_CORE`
= 280 W TDP / 64 cores = 4.375 W per busy core, the TDP-per-core of a typical dual-socket
server CPU (AMD EPYC 7763, 64 cores, 280 W TDP; Trimmer, Borowiec et al., IEEE CLOUD 2022,
likewise attributes energy per CPU-busy time where no counter is available). Override it with
``watts_per_core=`` or the environment variable ``TANDEM_WATTS_PER_CORE``.
"""
from __future__ import annotations

import glob
import os
import re
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

#: Assumed power of one busy CPU core, watts (280 W TDP / 64 cores of an AMD EPYC 7763).
DEFAULT_WATTS_PER_CORE = 280.0 / 64.0

RAPL_ROOT = "/sys/class/powercap"


class EnergyMeterError(RuntimeError):
    """Raised when a requested measured source cannot be read (e.g. no NVIDIA GPU)."""


@dataclass(frozen=True)
class EnergyReading:
    """One reading of an :class:`EnergyMeter`.

    joules: energy used since the meter started, joules (cumulative, never decreases).
    seconds: wall time since the meter started, seconds.
    source: ``"nvml"``, ``"rapl"`` or ``"estimate"``.
    measured: ``True`` for a hardware counter, ``False`` for the CPU-time estimate.
    """

    joules: float
    seconds: float
    source: str
    measured: bool

    def __sub__(self, other: "EnergyReading") -> "EnergyReading":
        """The interval between two readings of the same meter (joules and seconds differences)."""
        return EnergyReading(self.joules - other.joules, self.seconds - other.seconds, self.source, self.measured)


class EnergyMeter(ABC):
    """Cumulative energy since construction from one counter function.

    ``counter()`` returns a raw monotone-ish cumulative value in joules (subclasses handle
    wrap-around). :meth:`read` is thread-safe.
    """

    source: str = "estimate"
    measured: bool = False

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._t0 = time.monotonic()
        self._j0 = self._counter_joules()

    @property
    def sources(self) -> str:
        """Human-readable description of what is read (e.g. the RAPL files or the assumed watts)."""
        return self.source

    @abstractmethod
    def _counter_joules(self) -> float:
        """Cumulative energy counter in joules (any origin; :meth:`read` subtracts the start value)."""

    def read(self) -> EnergyReading:
        """Energy (joules) and wall time (seconds) since the meter started, with the source label."""
        with self._lock:
            joules = self._counter_joules() - self._j0
            return EnergyReading(max(0.0, joules), time.monotonic() - self._t0, self.source, self.measured)


class NvmlEnergyMeter(EnergyMeter):
    """NVML total-energy counter of one GPU (``nvmlDeviceGetTotalEnergyConsumption``, mJ)."""

    source, measured = "nvml", True

    def __init__(self, index: int = 0) -> None:
        import pynvml

        try:
            pynvml.nvmlInit()
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            self._nvml = pynvml
            self._index = index
            self._name = pynvml.nvmlDeviceGetName(self._handle)
            pynvml.nvmlDeviceGetTotalEnergyConsumption(self._handle)
        except pynvml.NVMLError as err:
            raise EnergyMeterError(f"NVML energy counter of GPU {index} unavailable: {err}") from err
        super().__init__()

    @property
    def sources(self) -> str:
        return f"nvml: GPU {self._index} ({self._name}) total energy counter"

    def _counter_joules(self) -> float:
        return self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle) / 1000.0


class RaplEnergyMeter(EnergyMeter):
    """Sum of the RAPL package domains under ``root`` (default ``/sys/class/powercap``).

    Each domain's ``energy_uj`` wraps to 0 after ``max_energy_range_uj``; a reading lower than
    the previous one adds ``max_energy_range_uj + 1`` (Linux powercap ABI, counter range
    inclusive). At least one reading per wrap period (minutes at full load) is needed for exact
    accounting, so read it at least once per tuning round.

    Raises :class:`EnergyMeterError` when no readable package domain exists.
    """

    source, measured = "rapl", True

    def __init__(self, root: str | os.PathLike[str] = RAPL_ROOT) -> None:
        self._domains = rapl_domains(root)
        if not self._domains:
            raise EnergyMeterError(f"no readable RAPL package domain under {root}")
        self._last = [self._raw(p) for p, _ in self._domains]
        self._wrapped = [0] * len(self._domains)
        super().__init__()

    @property
    def sources(self) -> str:
        return "rapl: " + ", ".join(str(p) for p, _ in self._domains)

    @staticmethod
    def _raw(path: Path) -> int:
        return int(path.read_text().strip())

    def _counter_joules(self) -> float:
        total_uj = 0
        for i, (path, max_range) in enumerate(self._domains):
            raw = self._raw(path)
            if raw < self._last[i]:
                self._wrapped[i] += max_range + 1
            self._last[i] = raw
            total_uj += self._wrapped[i] + raw
        return total_uj / 1e6


def rapl_domains(root: str | os.PathLike[str] = RAPL_ROOT) -> list[tuple[Path, int]]:
    """Readable top-level RAPL domains under ``root``: ``[(energy_uj path, max_energy_range_uj)]``."""
    out = []
    for d in sorted(glob.glob(os.path.join(str(root), "intel-rapl:*"))):
        if not re.fullmatch(r"intel-rapl:\d+", os.path.basename(d)):
            continue  # sub-domain (core, uncore, dram) is inside its package
        energy, rng = Path(d) / "energy_uj", Path(d) / "max_energy_range_uj"
        try:
            int(energy.read_text().strip())
            max_range = int(rng.read_text().strip())
        except (OSError, ValueError):
            continue
        out.append((energy, max_range))
    return out


def process_tree_cpu_seconds(psutil_module: Any = None, pid: int | None = None, pids: list[int] | None = None) -> float:
    """CPU seconds (user + system) of the process ``pid`` (default: this one), its live
    descendants, and its exited children it waited for (``children_user + children_system``),
    plus the trees of any extra ``pids``. Processes that vanish mid-walk are skipped."""
    psutil = psutil_module
    if psutil is None:
        import psutil  # noqa: PLC0415

    total, seen = 0.0, set()
    roots = [pid if pid is not None else os.getpid(), *(pids or [])]
    for root in roots:
        try:
            proc = psutil.Process(root)
            procs = [proc, *proc.children(recursive=True)]
        except psutil.Error:
            continue
        for p in procs:
            if p.pid in seen:
                continue
            seen.add(p.pid)
            try:
                t = p.cpu_times()
            except psutil.Error:
                continue
            total += t.user + t.system + getattr(t, "children_user", 0.0) + getattr(t, "children_system", 0.0)
    return total


class EstimatedEnergyMeter(EnergyMeter):
    """Energy estimate = CPU seconds of the process tree since start x watts per busy core.

    ``cpu_seconds``: a callable returning the tree's cumulative CPU seconds (default
    :func:`process_tree_cpu_seconds`); injectable for tests.
    """

    source, measured = "estimate", False

    def __init__(self, watts_per_core: float | None = None, *, pids: list[int] | None = None,
                 cpu_seconds: Callable[[], float] | None = None) -> None:
        if watts_per_core is None:
            watts_per_core = float(os.environ.get("TANDEM_WATTS_PER_CORE", DEFAULT_WATTS_PER_CORE))
        if not watts_per_core > 0:
            raise ValueError(f"watts_per_core must be > 0, not {watts_per_core}")
        self.watts_per_core = watts_per_core
        self._pids = list(pids or [])
        self._cpu_seconds = cpu_seconds or (lambda: process_tree_cpu_seconds(pids=self._pids))
        self._max_seen = 0.0
        super().__init__()

    @property
    def sources(self) -> str:
        return (f"estimate: process-tree CPU seconds x {self.watts_per_core:.3f} W per busy core "
                "(assumed, not measured; set TANDEM_WATTS_PER_CORE)")

    def _counter_joules(self) -> float:
        # exited children not waited for drop out of the tree sum; never let the total go back
        self._max_seen = max(self._max_seen, self._cpu_seconds())
        return self._max_seen * self.watts_per_core


def make_energy_meter(device: str = "cpu", *, watts_per_core: float | None = None, pids: list[int] | None = None,
                      rapl_root: str | os.PathLike[str] = RAPL_ROOT) -> EnergyMeter:
    """The best meter for ``device`` (``"cpu"`` or ``"cuda"``/``"cuda:N"``): NVML for CUDA,
    RAPL for CPU where readable, otherwise the CPU-time estimate (see the module docstring).

    Raises ``ValueError`` for an unknown device or a non-positive ``watts_per_core``.
    """
    kind, _, idx = device.partition(":")
    if kind == "cuda":
        try:
            return NvmlEnergyMeter(int(idx or 0))
        except (ImportError, EnergyMeterError):
            pass
    elif kind in ("cpu", "llvm"):
        try:
            return RaplEnergyMeter(rapl_root)
        except EnergyMeterError:
            pass
    else:
        raise ValueError(f"unknown device {device!r}; use 'cpu' or 'cuda[:N]'")
    return EstimatedEnergyMeter(watts_per_core, pids=pids)
