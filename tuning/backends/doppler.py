"""DOPpler's parallel execution engine for TVM MetaSchedule: a persistent builder and a parallel
measurement runner with an automatic degree of parallelism (DOP), registered as runner
``"doppler"`` in :mod:`tuning.backends.registry`.

Source: Borowiec et al., "DOPpler: Parallel Measurement Infrastructure for Auto-Tuning Deep
Learning Tensor Programs", IEEE TPDS 34(7), 2023; Tandem SPEC section 3. The DOP rules are in
:mod:`tuning.core.doppler`; this module runs them against real devices.

Pieces
------
:class:`DopplerEngine`
    Owns the worker processes, shared by the builder and the runner of one tuning:

    * **measurement slots**, one long-lived TVM ``PopenWorker`` process per device, pinned in the
      worker itself: a CPU core set (``os.sched_setaffinity`` + ``TVM_NUM_THREADS`` = its size),
      a GPU (``CUDA_VISIBLE_DEVICES`` = its index; TVM's ``time_evaluator`` on a CUDA device times
      with CUDA events, ``CUDATimerNode`` in ``src/runtime/cuda/cuda_device_api.cc``, so time
      queued behind other processes is not counted), or a TVM RPC server granted by a tracker
      (the worker keeps its session, so one slot = one server, several measured at once).
      Timing happens inside the pinned worker (``time_evaluator``), with adaptive repeats
      (:func:`tuning.core.doppler.repeats_sufficient`);
    * **warm build workers**: a persistent ``PopenPoolExecutor`` whose processes import
      ``tvm.s_tir.tensor_intrin`` once, at start, instead of MetaSchedule's ``LocalBuilder``
      which starts fresh processes (about 15 s of imports each on the reference machine) for
      every batch. They export shared libraries (``.so``), so loading a candidate in a
      measurement slot needs no linking;
    * **overlap**: when the build workers' cores are disjoint from the measurement devices (GPU or
      remote RPC slots, or spare CPU cores), :meth:`DopplerRunner.run` returns at once and the
      batch is measured in the background while MetaSchedule searches and builds the next one;
      otherwise (this 2-core machine: measuring uses every core) measuring and building take
      turns so that building never disturbs a measurement.
:class:`DopplerBuilder`, :class:`DopplerRunner`
    The MetaSchedule ``PyBuilder`` / ``PyRunner`` faces of the engine. ``run`` returns all
    futures of a batch at once.

Per batch of a task (a task is recognised by its argument signature, shapes and dtypes), the
runner measures the candidates on ``dop`` slots in parallel; at DOP > 1 it re-measures the
controller's sample (MAD outliers + random fill to ~20%, plus failures) and the candidates that
rank in the task's best 10% so far serially on one slot with the others idle, returns the serial
numbers for every candidate that has one (so the best candidates' serial numbers decide), and
lets the controller pick the next DOP. A batch at DOP 1 is already serial: nothing is
re-measured (decision ``check="serial-equivalent"``). The spec re-measures the best 10% "at the
end of each task"; MetaSchedule commits every batch to the database as it comes, so the runner
re-measures each candidate that enters the task's best 10% in the batch that found it, which
covers every candidate that is ever the task's best. Every candidate is timed after
:func:`_measure_in_worker`: one repeat first, no more if it is clearly worse than the task's
best so far (early termination), else adaptive repeats. **Paired timing** (option ``paired``,
off by default, an experiment): the first candidate of a task that loads and runs becomes the
task's *reference kernel* (its library copied out of MetaSchedule's artifact, kept loaded in every
measurement worker); every candidate repeat is timed between two repeats of the reference and
recorded as the reference's quiet time (lower quartile of 31 repeats, once) times the ratio
(:func:`tuning.core.doppler.bracketed_ratios`). Meant to cancel the machine's speed drifting
between measurements; measured here it does not pay (docs/engines/tuning.md "DOPpler", paired timing): a ratio's
noise is two-sided, so a burst during the reference's repeats makes a candidate look up to 2x
*faster* and a false best enters the database, where plain timing's noise only ever slows a
candidate down; and the once-measured scale can be off by 2x for the whole tuning. Each decision (DOP, relative error, induced failures, back-off, timeout, which
device or server ran each parallel measurement (``measured_by``) and each serial one
(``serial_by``), time in parallel and serial measurement) is kept in :attr:`DopplerEngine.decisions`,
appended to ``doppler_decisions.jsonl`` in the work directory, and handed to a callback.

Options (``TuningSetup.options["doppler"]``, all optional): ``devices`` (default: environment
variable ``TANDEM_DOPPLER_DEVICES``, else ``"cpu"``; ``"cpu"``: core sets
of ``num_threads`` cores; ``"cpu:0-1|2-3"``: explicit core sets; ``"cuda"`` / ``"cuda:0,1"``;
``"rpc://HOST:PORT/KEY"``: every server of that key on the tracker), ``overlap``
(``"auto"``, true, false), ``paired`` (false, true), ``build_workers``, ``build_timeout_s`` (30), ``min_repeat_ms`` (10, floor of
one timed repeat), ``max_process_uses`` (recycle a build worker after this many builds, 256), and any
:class:`tuning.core.doppler.DopplerConfig` field (``max_dop`` defaults to the number of slots).
"""
from __future__ import annotations

import concurrent.futures
import hashlib
import json
import logging
import math
import os
import queue
import re
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from tuning.core.doppler import DopController, DopplerConfig, best_fraction_indices, repeats_sufficient

from .registry import TuningSetup, register_runner

logger = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[2]


def _ensure_importable_in_workers() -> None:
    """TVM's popen workers run ``python -m tvm.exec.popen_worker`` with the parent's environment
    and unpickle our worker functions by module name, so the repository root must be on their
    ``PYTHONPATH``."""
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(REPO_ROOT) not in parts:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), *parts])


# --------------------------------------------------------------------------------------------
# Device slots
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SlotSpec:
    """One measurement device. kind: ``"cpu"`` (``cores``: CPU ids), ``"cuda"`` (``gpu``: index)
    or ``"rpc"`` (``tracker``: (host, port), ``key``); ``num_threads``: TVM runtime threads."""

    kind: str
    name: str
    num_threads: int = 1
    cores: tuple[int, ...] = ()
    gpu: int | None = None
    tracker: tuple[str, int] | None = None
    key: str = ""


def _parse_cores(text: str) -> tuple[int, ...]:
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            a, b = part.split("-", 1)
            out.extend(range(int(a), int(b) + 1))
        else:
            out.append(int(part))
    return tuple(out)


def count_rpc_servers(host: str, port: int, key: str, timeout_s: float = 10.0) -> int:
    """Number of servers registered under ``key`` (free or busy) on the tracker at host:port."""
    from tvm.s_tir.meta_schedule.runner.config import RPCConfig

    cfg = RPCConfig(tracker_host=host, tracker_port=port, tracker_key=key, session_timeout_sec=int(timeout_s))
    return cfg.count_num_servers(allow_missing=True)


def parse_devices(devices: str, num_threads: int) -> list[SlotSpec]:
    """Measurement slots from a device string (see module docstring).

    ``"cpu"`` splits the cores this process may use into sets of ``num_threads`` (at least one
    set, of all the cores, when there are fewer); raises ``ValueError`` on a malformed string, a
    core this process may not use, or a tracker with no server of that key.
    """
    devices = devices.strip()
    if devices == "cpu" or devices.startswith("cpu:"):
        allowed = sorted(os.sched_getaffinity(0))
        if devices == "cpu":
            n = max(1, min(num_threads, len(allowed)))
            sets = [tuple(allowed[i:i + n]) for i in range(0, len(allowed) - n + 1, n)] or [tuple(allowed)]
        else:
            sets = [_parse_cores(s) for s in devices[4:].split("|")]
            bad = sorted({c for s in sets for c in s} - set(allowed))
            if bad or any(not s for s in sets):
                raise ValueError(f"core sets {devices!r} name cores this process may not use: {bad}; allowed {allowed}")
        return [SlotSpec(kind="cpu", name=f"cpu{'-'.join(map(str, s))}", num_threads=len(s), cores=s) for s in sets]
    if devices == "cuda" or devices.startswith("cuda:"):
        if devices == "cuda":
            import tvm

            ids, i = [], 0
            while tvm.cuda(i).exist:
                ids.append(i)
                i += 1
            if not ids:
                raise ValueError("devices 'cuda': no CUDA device is visible")
        else:
            ids = [int(x) for x in devices[5:].split(",") if x.strip()]
        return [SlotSpec(kind="cuda", name=f"cuda{i}", gpu=i, num_threads=num_threads) for i in ids]
    m = re.fullmatch(r"rpc://([^:/]+):(\d+)/(.+)", devices)
    if m:
        host, port, key = m.group(1), int(m.group(2)), m.group(3)
        n = count_rpc_servers(host, port, key)
        if n == 0:
            raise ValueError(f"no RPC server with key {key!r} is registered at tracker {host}:{port}")
        return [SlotSpec(kind="rpc", name=f"rpc{i}", tracker=(host, port), key=key, num_threads=num_threads)
                for i in range(n)]
    raise ValueError(f"unknown devices {devices!r}; use 'cpu', 'cpu:0-1|2-3', 'cuda', 'cuda:0,1' or 'rpc://HOST:PORT/KEY'")


# ---- code that runs inside the worker processes -------------------------------------------------

_WORKER: dict[str, Any] = {}  # per worker process: its slot and, for RPC, its session


def _measure_worker_init(slot: SlotSpec) -> None:
    """Initializer of a measurement worker: pin it to its device before TVM starts threads."""
    _WORKER["slot"] = slot
    os.environ["TVM_NUM_THREADS"] = str(slot.num_threads)
    os.environ["OMP_NUM_THREADS"] = str(slot.num_threads)
    if slot.kind == "cpu" and slot.cores:
        os.sched_setaffinity(0, set(slot.cores))
    if slot.kind == "cuda":
        os.environ["CUDA_VISIBLE_DEVICES"] = str(slot.gpu)
    import tvm  # noqa: F401  (once, at start, not in the first measurement)


def _rpc_session(slot: SlotSpec):
    """The worker's RPC session, requested from the tracker once and kept (the tracker grants a
    free server per request, so each slot holds its own server). Returns (session, "host:port")."""
    if "session" not in _WORKER:
        from tvm import rpc
        from tvm.rpc import base

        tracker = rpc.connect_tracker(*slot.tracker)
        base.sendjson(tracker._sock, [base.TrackerCode.REQUEST, slot.key, "", 1])
        value = base.recvjson(tracker._sock)
        if value[0] != base.TrackerCode.SUCCESS:
            raise RuntimeError(f"tracker refused a {slot.key!r} server: {value}")
        url, port, matchkey = value[1]
        tracker.close()
        _WORKER["session"] = rpc.connect(url, port, matchkey, session_timeout=0)
        _WORKER["server"] = f"{url}:{port}"
    return _WORKER["session"], _WORKER["server"]


def _open_slot_in_worker() -> str:
    """Warm-up call: returns the worker's device label (for RPC, opens the session now, so the
    first measurement's timeout does not include connecting)."""
    slot: SlotSpec = _WORKER["slot"]
    if slot.kind == "rpc":
        return _rpc_session(slot)[1]
    return slot.name


def _load_in_worker(artifact_path: str, device_type: str, remote_name: str | None = None):
    """Load a built candidate on this worker's device: (runtime module, device, random-fill
    function, remote file name or None). For RPC the library is uploaded first, as
    ``remote_name`` or else a name unique to ``artifact_path``: MetaSchedule names every
    artifact ``tvm_tmp_mod.so`` (in its own directory), and a server that loads a second
    library under a path whose first one is still open gets the first one back from
    ``dlopen``, so a candidate could be timed as another (found when weight prepacking made
    their signatures differ: "Mismatched lv_global.ndim")."""
    import tvm

    slot: SlotSpec = _WORKER["slot"]
    if slot.kind == "rpc":
        session, _ = _rpc_session(slot)
        remote_name = remote_name or ("tandem-cand-" + hashlib.sha1(artifact_path.encode()).hexdigest()[:16] + ".so")
        session.upload(artifact_path, remote_name)
        return (session.load_module(remote_name), session.device(device_type, 0),
                session.get_function("tvm.contrib.random.random_fill_for_measure"), remote_name)
    return (tvm.runtime.load_module(artifact_path), tvm.runtime.device(device_type, 0),
            tvm.get_global_func("tvm.contrib.random.random_fill_for_measure"), None)


def _reference_in_worker(ref_path: str, device_type: str, args_info: list, min_repeat_ms: float):
    """The task's reference kernel in this worker, loaded once and kept: returns a function that
    times one repeat of it (seconds per run; the runs per repeat fixed at loading so that one
    repeat lasts at least ``min_repeat_ms``). Its own argument buffers, allocated once."""
    import math

    from tvm.s_tir.meta_schedule.runner.utils import alloc_argument_common

    refs = _WORKER.setdefault("refs", {})
    if ref_path not in refs:
        remote = "tandem-ref-" + hashlib.sha1(ref_path.encode()).hexdigest()[:12] + ".so"
        rt_mod, dev, f_fill, _ = _load_in_worker(ref_path, device_type, remote)
        args = alloc_argument_common(f_fill, dev, args_info, 1)[0]
        probe = rt_mod.time_evaluator(rt_mod.entry_name, dev, number=1, repeat=1, min_repeat_ms=int(min_repeat_ms))
        dev.sync()
        cost = float(probe(*args).results[0])
        number = max(1, math.ceil(min_repeat_ms / max(cost * 1e3, 1e-6)))
        ev = rt_mod.time_evaluator(rt_mod.entry_name, dev, number=number, repeat=1, min_repeat_ms=0)
        refs[ref_path] = (lambda: float(ev(*args).results[0]), rt_mod)  # the module stays loaded
    return refs[ref_path][0]


def _reference_level_in_worker(ref_path: str, device_type: str, args_info: list, min_repeat_ms: float,
                               repeats: int) -> list[float]:
    """Time the task's reference kernel ``repeats`` times in a row (loading it first if needed);
    returns seconds per run of each repeat, shape (repeats,). Its lower quartile sets the task's
    scale (see :meth:`DopplerEngine.measure_batch`)."""
    one = _reference_in_worker(ref_path, device_type, args_info, min_repeat_ms)
    return [one() for _ in range(int(repeats))]


def _measure_in_worker(artifact_path: str, device_type: str, args_info: list, evalcfg: dict) -> tuple[list[float], dict]:
    """Load one built candidate on this worker's device and time it there.

    evalcfg: ``min_repeat_ms`` (floor of one timed repeat, ms), ``min_repeats``, ``max_repeats``,
    ``ci_rel_halfwidth`` (see :func:`tuning.core.doppler.repeats_sufficient`), ``screen_ratio``,
    ``screen_repeats``, ``estimator`` (see :class:`tuning.core.doppler.DopplerConfig`) and
    ``best_s`` (the task's best recorded latency so far in seconds, or ``None``; see
    :func:`tuning.core.doppler.clearly_worse`), and ``reference`` (``None``, or
    ``{"path", "level_s"}``: the task's reference kernel and its time in seconds; see paired
    timing below).

    Procedure (every timing is TVM's ``time_evaluator`` on the device, which runs the kernel once
    untimed before each call's repeats):

    1. one timed repeat of at least ``min_repeat_ms`` (the evaluator finds the number of runs);
    2. the screen: while every repeat so far is ``clearly_worse`` than ``best_s``, time another,
       up to ``screen_repeats`` in all; if they all are, stop and return them (``early_stop``);
    3. else more repeats with the number of runs per repeat fixed from step 1 (to
       ``min_repeats``, then until the 95% confidence interval of the mean is within
       ``ci_rel_halfwidth`` or ``max_repeats`` is reached);
    4. the repeats are returned as :func:`tuning.core.doppler.estimate_run_secs` gives them for
       ``estimator`` (all of them, or the fastest alone).

    **Paired timing** (with a ``reference``): one repeat of the reference kernel is timed before
    the first candidate repeat and after every candidate repeat, and each candidate repeat is
    returned as ``level_s * cand_i / mean(ref_i, ref_{i+1})``
    (:func:`tuning.core.doppler.bracketed_ratios`): the candidate's time relative to the
    reference measured within tens of milliseconds of it, on the task's fixed scale. Steps 2 and 3
    use these values. If the reference cannot be loaded the candidate is timed plainly
    (``paired`` False, ``paired_error`` says why).

    Returns (run seconds to record, info with the slot name, server address for RPC, pid,
    ``repeats`` (how many were timed), ``early_stop``, ``paired``). Raises on any TVM error of the candidate.
    """
    import math

    from tvm.s_tir.meta_schedule.runner.utils import alloc_argument_common

    from tuning.core.doppler import bracketed_ratios, estimate_run_secs, screen

    slot: SlotSpec = _WORKER["slot"]
    info: dict[str, Any] = {"slot": slot.name, "pid": os.getpid(), "paired": False}
    floor_ms = float(evalcfg["min_repeat_ms"])
    ref_one = None
    reference = evalcfg.get("reference")
    if reference:
        try:
            ref_one = _reference_in_worker(reference["path"], device_type, reference.get("args_info") or args_info,
                                           floor_ms)
        except Exception as exc:  # noqa: BLE001 - fall back to plain timing, say so
            info["paired_error"] = f"{type(exc).__name__}: {exc}"[:300]
    rt_mod, dev, f_fill, remote_name = _load_in_worker(artifact_path, device_type)
    if slot.kind == "rpc":
        info["server"] = _WORKER.get("server")
    try:
        args = alloc_argument_common(f_fill, dev, args_info, 1)[0]
        first = rt_mod.time_evaluator(rt_mod.entry_name, dev, number=1, repeat=1, min_repeat_ms=int(floor_ms))
        dev.sync()
        raw: list[float] = []
        refs: list[float] = []

        def values() -> list[float]:
            if ref_one is None:
                return list(raw)
            return [float(reference["level_s"]) * q for q in bracketed_ratios(raw, refs)]

        if ref_one is not None:
            refs.append(ref_one())
        raw.append(float(first(*args).results[0]))
        if ref_one is not None:
            refs.append(ref_one())
            info["paired"] = True
        costs = values()
        evaluators: list = []  # the fixed-runs evaluator, made on the first repeat after the first

        def one_more() -> list[float]:
            if not evaluators:
                # runs per repeat so that one repeat lasts >= floor_ms, from the first repeat's time
                number = max(1, math.ceil(floor_ms / max(raw[0] * 1e3, 1e-6)))
                evaluators.append(rt_mod.time_evaluator(rt_mod.entry_name, dev, number=number, repeat=1,
                                                        min_repeat_ms=0))
            raw.append(float(evaluators[0](*args).results[0]))
            if ref_one is not None:
                refs.append(ref_one())
            return values()

        def screened(c: list[float]) -> str:
            return screen(c, evalcfg.get("best_s"), evalcfg["screen_ratio"], int(evalcfg.get("screen_repeats", 1)))

        while screened(costs) == "more":
            costs = one_more()
        info["early_stop"] = screened(costs) == "stop"
        if not info["early_stop"]:
            while not repeats_sufficient(costs, min_repeats=evalcfg["min_repeats"], max_repeats=evalcfg["max_repeats"],
                                         ci_rel_halfwidth=evalcfg["ci_rel_halfwidth"]):
                costs = one_more()
            costs = costs[:max(int(evalcfg["max_repeats"]), 1)]
        info["repeats"] = len(costs)
        costs = estimate_run_secs(costs, evalcfg.get("estimator", "mean"))
    finally:
        if remote_name is not None:
            try:
                _rpc_session(slot)[0].remove(remote_name)
            except Exception:  # noqa: BLE001 - cleanup only
                pass
    return costs, info


def _build_worker_init(cores: tuple[int, ...], intrinsics: tuple[str, ...] | None = None) -> None:
    """Initializer of a warm build worker: pay TVM's heavy imports once, pin to the build cores.
    ``intrinsics``: the tensor-intrinsic modules to register
    (:func:`tuning.backends.intrinsics.intrinsic_modules` of the target; None: all of them)."""
    from .intrinsics import ALL_MODULES, import_tensor_intrinsics

    if cores:
        os.sched_setaffinity(0, set(cores))
    import tvm  # noqa: F401

    import_tensor_intrinsics(intrinsics or ALL_MODULES)  # once per worker, not per batch
    from tvm.driver import build  # noqa: F401


def _build_in_worker(mod, target, out_dir: str) -> str:
    """Build one candidate (as MetaSchedule's ``default_build``) and export a shared library.
    Returns the artifact path; raises on a build error."""
    from tvm.driver import build as tvm_build
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    rt_mod = tvm_build(mod, target=target)
    path = os.path.join(tempfile.mkdtemp(dir=out_dir or None), "tvm_tmp_mod.so")
    rt_mod.export_library(path)
    return path


# --------------------------------------------------------------------------------------------
# The engine (parent process)
# --------------------------------------------------------------------------------------------


class _Slot:
    """Parent-side handle of one measurement worker process (a TVM ``PopenWorker``)."""

    def __init__(self, spec: SlotSpec) -> None:
        from tvm.support.popen_pool import PopenWorker

        self.spec = spec
        self.worker = PopenWorker(initializer=_measure_worker_init, initargs=(spec,),
                                  stderr=None if logger.isEnabledFor(logging.DEBUG) else open(os.devnull, "w"))
        self.measured = 0
        self.label = spec.name
        self.cold = True

    def warm(self) -> str:
        """Start the worker process (imports TVM, pins, opens its RPC session) with no timeout."""
        self.worker.send(_open_slot_in_worker)
        self.label = self.worker.recv()
        self.cold = False
        return self.label

    def measure(self, cand: "_Candidate", timeout_s: float, evalcfg: dict) -> tuple[list[float] | None, str | None, dict]:
        try:
            if self.cold:  # after a timeout the process was killed: restart it outside the timeout
                self.warm()
            self.worker.send(_measure_in_worker, (cand.artifact_path, cand.device_type, cand.args_info, evalcfg),
                             None, timeout_s)
            costs, info = self.worker.recv()
            self.measured += 1
            return costs, None, info
        except TimeoutError:
            self.cold = True
            return None, f"DopplerRunner: timeout, killed after {timeout_s:.1f} s on {self.spec.name}", {"slot": self.spec.name}
        except Exception as exc:  # noqa: BLE001 - a runner reports errors as data
            return None, f"DopplerRunner: error on {self.spec.name}\n{exc}", {"slot": self.spec.name}

    def reference_level(self, path: str, cand: "_Candidate", min_repeat_ms: float, repeats: int,
                        timeout_s: float) -> list[float]:
        """Time the reference kernel at ``path`` ``repeats`` times in this worker (which keeps it
        loaded for paired timing). Returns seconds per run, shape (repeats,); raises on an error
        or a timeout (then the worker is restarted on its next use)."""
        if self.cold:
            self.warm()
        self.worker.send(_reference_level_in_worker, (path, cand.device_type, cand.args_info, min_repeat_ms, repeats),
                         None, timeout_s)
        try:
            return self.worker.recv()
        except TimeoutError:
            self.cold = True
            raise

    def kill(self) -> None:
        try:
            self.worker.kill()
        except Exception:  # noqa: BLE001
            pass


@dataclass
class _Candidate:
    artifact_path: str
    device_type: str
    args_info: list


@dataclass
class _TaskState:
    controller: DopController
    history: list[float] = field(default_factory=list)  # recorded latencies so far (mean of run_secs, s; nan = error)
    batches: int = 0
    reference: dict | None = None  # paired timing: {"path", "level_s", "level_repeats_s"} once chosen


class DopplerEngine:
    """Worker processes and DOP controllers of one tuning (see module docstring).

    slots: measurement devices (:func:`parse_devices`); config: DOP thresholds (``max_dop`` is
    capped at ``len(slots)``); build_workers: persistent build processes; overlap: measure in the
    background while the next batch is searched and built (``None``: automatic);
    work_dir: where ``doppler_decisions.jsonl`` and the build artifacts go;
    paired: time every candidate against its task's reference kernel (module docstring; default
    False: measured here, it hurt more than it helped);
    on_decision: called with each decision dict; seed: of the serial-sample generator;
    intrinsics: the TVM tensor-intrinsic modules the build workers register
    (:mod:`tuning.backends.intrinsics`; None: every backend's, about 22 s per worker here).
    Call :meth:`close` (or use as a context manager) to stop every worker process.
    """

    def __init__(self, slots: list[SlotSpec], *, config: DopplerConfig | None = None, build_workers: int | None = None,
                 build_timeout_s: float = 30.0, min_repeat_ms: int = 10, overlap: bool | None = None,
                 work_dir: str | os.PathLike | None = None, seed: int = 0, max_process_uses: int = 256,
                 paired: bool = False, on_decision: Callable[[dict], None] | None = None,
                 intrinsics: tuple[str, ...] | None = None) -> None:
        from tvm.support.popen_pool import PopenPoolExecutor

        if not slots:
            raise ValueError("DopplerEngine needs at least one measurement slot")
        _ensure_importable_in_workers()
        cfg = config or DopplerConfig(max_dop=len(slots))
        if cfg.max_dop > len(slots):
            cfg = DopplerConfig(**{**cfg.__dict__, "max_dop": len(slots),
                                   "start_dop": min(cfg.start_dop, len(slots))})
        self.config = cfg
        self.slot_specs = slots
        self.slots = [_Slot(s) for s in slots]
        self.min_repeat_ms = int(min_repeat_ms)
        self.work_dir = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="doppler-"))
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.artifact_dir = Path(tempfile.mkdtemp(prefix="doppler-artifacts-"))
        self.rng = np.random.default_rng(seed)
        self.on_decision = on_decision
        self.decisions: list[dict] = []
        self._tasks: dict[str, _TaskState] = {}
        self._measuring = threading.Lock()
        self._idle = threading.Event()
        self._idle.set()
        self._bg = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="doppler-measure")
        all_cores = sorted(os.sched_getaffinity(0))
        used = {c for s in slots if s.kind == "cpu" for c in s.cores}
        spare = tuple(c for c in all_cores if c not in used)
        remote = all(s.kind == "rpc" and s.tracker and s.tracker[0] not in ("127.0.0.1", "localhost", "::1")
                     for s in slots)
        cpu_only = all(s.kind == "cpu" for s in slots)
        auto = (cpu_only and bool(spare)) or all(s.kind == "cuda" for s in slots) or remote
        self.overlap = auto if overlap is None else bool(overlap)
        self.paired = bool(paired)
        build_cores = spare if (self.overlap and spare) else tuple(all_cores)
        self.build_workers = int(build_workers or len(build_cores))
        self.build_timeout_s = float(build_timeout_s)
        self.build_pool = PopenPoolExecutor(max_workers=self.build_workers, timeout=self.build_timeout_s,
                                            initializer=_build_worker_init, initargs=(build_cores, intrinsics),
                                            maximum_process_uses=max_process_uses)
        self.timing = {"build_s": 0.0, "measure_parallel_s": 0.0, "measure_serial_s": 0.0, "reference_s": 0.0, "batches": 0}
        self._closed = False

    # ---- building ---------------------------------------------------------------------------

    def warm_up(self) -> float:
        """Start every build worker now (each imports TVM's tensor intrinsics once) and every
        measurement worker. Returns the seconds it took."""
        t0 = time.perf_counter()
        futs = [self.build_pool.submit(os.getpid) for _ in range(self.build_workers)]
        for f in futs:
            f.result()
        threads = [threading.Thread(target=s.warm, daemon=True) for s in self.slots]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return time.perf_counter() - t0

    def build(self, build_inputs: list) -> list:
        """Build candidates on the warm workers; returns MetaSchedule ``BuilderResult``s (errors as data).
        Waits for an in-flight background measurement first unless overlap is allowed."""
        from tvm.s_tir.meta_schedule.builder import BuilderResult
        from tvm.support.popen_pool import StatusKind

        if not self.overlap:
            self._idle.wait()
        t0 = time.perf_counter()
        results = []
        jobs = [(bi.mod, bi.target, str(self.artifact_dir)) for bi in build_inputs]
        for r in self.build_pool.map_with_error_catching(lambda a: _build_in_worker(*a), jobs):
            if r.status == StatusKind.COMPLETE:
                results.append(BuilderResult(r.value, None))
            elif r.status == StatusKind.TIMEOUT:
                results.append(BuilderResult(None, f"DopplerBuilder: timeout, killed after {self.build_timeout_s} s"))
            else:
                results.append(BuilderResult(None, f"DopplerBuilder: an exception occurred\n{r.value}"))
        self.timing["build_s"] += time.perf_counter() - t0
        return results

    # ---- measuring --------------------------------------------------------------------------

    @staticmethod
    def task_key(cand: _Candidate) -> str:
        """A task is recognised by its device type and argument signature: per argument its
        dtype and element count, not its shape. With weight prepacking (layout-free weights,
        ``tuning.backends.frontends.prepare_for_tuning``) each candidate of one task may give its
        weights another layout, i.e. another shape of the same elements (MetaSchedule's
        ``RewriteLayout`` follows the candidate's perfect tiling); keyed by shape, one task's
        state (degree of parallelism, reference) split per layout."""
        sig = []
        for arg in cand.args_info:
            # TensorInfo.as_json(): ["TENSOR", dtype, shape]; anything else is kept whole
            if isinstance(arg, (list, tuple)) and len(arg) == 3 and arg[0] == "TENSOR":
                sig.append([arg[1], int(np.prod([int(d) for d in arg[2]], dtype=np.int64))])
            else:
                sig.append(arg)
        return hashlib.sha1(json.dumps([cand.device_type, sig], default=str).encode()).hexdigest()[:12]

    def _evalcfg(self) -> dict:
        c = self.config
        return {"min_repeat_ms": self.min_repeat_ms, "min_repeats": c.min_repeats, "max_repeats": c.max_repeats,
                "ci_rel_halfwidth": c.ci_rel_halfwidth, "screen_ratio": c.screen_ratio,
                "screen_repeats": c.screen_repeats, "estimator": c.estimator, "best_s": None, "reference": None}

    #: repeats of a task's reference kernel that set its scale (lower quartile), once per task
    REFERENCE_LEVEL_REPEATS = 31
    #: candidates of a batch tried as the task's reference before the batch is timed plainly
    REFERENCE_TRIES = 3

    def _choose_reference(self, key: str, cands: list[_Candidate], timeout_s: float) -> dict | None:
        """Make one of the batch's candidates (the first that loads and runs, of the first
        :data:`REFERENCE_TRIES`) the task's reference kernel for paired timing: its library is
        copied out of MetaSchedule's artifact (which ``RemoveBuildArtifact`` deletes after the
        round) and timed :data:`REFERENCE_LEVEL_REPEATS` times in a row on the first slot; the
        lower quartile of those repeats is the task's scale (``level_s``, seconds; the lower
        quartile because slow repeats here come in bursts, see docs/engines/tuning.md "Trimmer" benchmark).
        Returns ``{"path", "level_s", "level_repeats_s"}`` or None when no candidate worked (the
        batch is then timed plainly and the next batch tries again)."""
        for i, cand in enumerate(cands[:self.REFERENCE_TRIES]):
            path = self.artifact_dir / f"reference-{key}-{self._tasks[key].batches}-{i}.so"
            try:
                shutil.copyfile(cand.artifact_path, path)
                times = self.slots[0].reference_level(str(path), cand, self.min_repeat_ms, self.REFERENCE_LEVEL_REPEATS,
                                                      max(60.0, 4 * timeout_s))
            except Exception as exc:  # noqa: BLE001 - try the next candidate; the runner reports errors as data
                logger.info("DOPpler: candidate %d of task %s cannot be its reference: %s", i, key, exc)
                path.unlink(missing_ok=True)
                continue
            if times and all(math.isfinite(t) and t > 0 for t in times):
                # its own argument signature: with weight prepacking each candidate may lay its
                # weights out differently, so the reference never runs on another's buffers
                return {"path": str(path), "level_s": float(np.percentile(times, 25)),
                        "level_repeats_s": [float(t) for t in times], "args_info": cand.args_info}
            path.unlink(missing_ok=True)
        return None

    def _run_on_slots(self, cands: list[_Candidate], idx: list[int], nslots: int, timeout_s: float,
                      best: list[float], reference: dict | None = None) -> dict[int, tuple]:
        """Measure ``cands[i]`` for i in idx on the first ``nslots`` slots at once (a shared queue).

        best: one-element list, the task's best recorded latency so far (seconds, the mean of a
        candidate's recorded run seconds; ``inf`` if none); each measurement is screened against
        it (:func:`tuning.core.doppler.screen`) and it is lowered as candidates finish, so later
        candidates of the same batch see earlier ones.
        reference: the task's reference kernel (``{"path", "level_s"}``) for paired timing, or None."""
        q: queue.Queue[int] = queue.Queue()
        for i in idx:
            q.put(i)
        out: dict[int, tuple] = {}
        lock = threading.Lock()

        def drain(slot: _Slot) -> None:
            while True:
                try:
                    i = q.get_nowait()
                except queue.Empty:
                    return
                with lock:
                    evalcfg = {**self._evalcfg(), "best_s": best[0] if math.isfinite(best[0]) else None,
                               "reference": ({"path": reference["path"], "level_s": reference["level_s"],
                                              "args_info": reference.get("args_info")}
                                             if reference else None)}
                out[i] = slot.measure(cands[i], timeout_s, evalcfg)
                costs = out[i][0]
                if costs:
                    with lock:
                        best[0] = min(best[0], float(np.mean(costs)))

        threads = [threading.Thread(target=drain, args=(s,), daemon=True) for s in self.slots[:max(1, nslots)]]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return out

    def measure_batch(self, cands: list[_Candidate]) -> list[tuple[list[float] | None, str | None]]:
        """Measure one batch of one task under its controller; returns (run seconds, error) per candidate."""
        with self._measuring:
            if not cands:
                return []
            key = self.task_key(cands[0])
            st = self._tasks.setdefault(key, _TaskState(DopController(self.config)))
            ctl = st.controller
            dop = min(ctl.dop, len(self.slots))
            timeout = ctl.timeout_s(dop)
            n = len(cands)
            finite = [v for v in st.history if math.isfinite(v)]
            best = [min(finite) if finite else math.inf]
            t_ref = time.perf_counter()
            if self.paired and st.reference is None:
                st.reference = self._choose_reference(key, cands, ctl.timeout_s(1))
            ref = st.reference
            t0 = time.perf_counter()
            self.timing["reference_s"] += t0 - t_ref
            par = self._run_on_slots(cands, list(range(n)), dop, timeout, best, ref)
            t1 = time.perf_counter()
            par_lat = np.array([np.mean(par[i][0]) if par[i][0] else np.nan for i in range(n)], dtype=float)
            check = ctl.plan_sample(par_lat, self.rng)
            top = best_fraction_indices(st.history, par_lat, self.config.top_fraction) if dop > 1 else []
            serial_idx = sorted(set(check) | set(top))
            ser = self._run_on_slots(cands, serial_idx, 1, ctl.timeout_s(1), best, ref) if serial_idx else {}
            t2 = time.perf_counter()
            ser_lat = {i: (float(np.mean(ser[i][0])) if ser[i][0] else float("nan")) for i in serial_idx}
            decision = ctl.observe(par_lat, {i: ser_lat[i] for i in check})
            results: list[tuple[list[float] | None, str | None]] = []
            for i in range(n):
                costs, err, info = ser[i] if i in ser else par[i]
                if i in ser and par[i][0] and not costs and i not in top:
                    costs, err, info = par[i]  # serial check failed, parallel ran: keep parallel
                results.append((costs, err))

            def by_device(measurements: dict[int, tuple]) -> dict[str, int]:
                counts: dict[str, int] = {}
                for _, _, info in measurements.values():
                    label = info.get("server") or info.get("slot", "?")
                    counts[label] = counts.get(label, 0) + 1
                return counts
            final = [float(np.mean(c)) if c else float("nan") for c, _ in results]
            st.history.extend(final)
            st.batches += 1
            self.timing["measure_parallel_s"] += t1 - t0
            self.timing["measure_serial_s"] += t2 - t1
            self.timing["batches"] += 1
            rec = {
                "task": key, "task_batch": st.batches - 1, "batch": len(self.decisions), **decision.as_dict(),
                "dop": dop, "serial_top": top, "n_serial": len(serial_idx),
                "n_errors": int(sum(1 for c, _ in results if not c)),
                "parallel_s": t1 - t0, "serial_s": t2 - t1,
                "measured_by": by_device(par), "serial_by": by_device(ser),
                "early_stops": int(sum(1 for _, _, info in par.values() if info.get("early_stop"))),
                "repeats": int(sum(info.get("repeats", 0) for _, _, info in par.values())),
                "paired": int(sum(1 for _, _, info in par.values() if info.get("paired"))),
                "reference_level_s": ref["level_s"] if ref else None,
                "artifacts": [c.artifact_path for c in cands],
            }
            self.decisions.append(rec)
            try:
                with open(self.work_dir / "doppler_decisions.jsonl", "a") as fh:
                    fh.write(json.dumps({k: v for k, v in rec.items() if k != "artifacts"}) + "\n")
            except OSError:
                logger.warning("could not append to %s", self.work_dir / "doppler_decisions.jsonl")
            if self.on_decision is not None:
                self.on_decision(rec)
            return results

    def decision_for(self, artifact_paths: list[str]) -> dict | None:
        """The decision of the batch that measured these artifacts (for measure callbacks)."""
        want = set(p for p in artifact_paths if p)
        for rec in reversed(self.decisions):
            if want and want <= set(rec["artifacts"]):
                return rec
        return None

    def summary(self) -> dict:
        """Timing split and per-task DOP trajectories, JSON-serialisable."""
        traj: dict[str, list[int]] = {}
        for rec in self.decisions:
            traj.setdefault(rec["task"], []).append(rec["dop"])
        return {"slots": [s.name for s in self.slot_specs], "overlap": self.overlap, "paired": self.paired,
                "build_workers": self.build_workers,
                **self.timing, "dop_trajectories": traj,
                "backoffs": sum(1 for r in self.decisions if r["action"] == "backoff"),
                "serial_equivalent_batches": sum(1 for r in self.decisions if r.get("check") == "serial-equivalent"),
                "candidates": sum(r["n_candidates"] for r in self.decisions),
                "early_stops": sum(r.get("early_stops", 0) for r in self.decisions),
                "timed_repeats": sum(r.get("repeats", 0) for r in self.decisions)}

    def close(self) -> None:
        """Stop every worker process this engine started and remove its build-artifact directory
        (a temporary directory of its own; ``work_dir`` and its decision log are kept)."""
        if self._closed:
            return
        self._closed = True
        self._bg.shutdown(wait=True)
        for s in self.slots:
            s.kill()
        self.build_pool.shutdown(wait=True)
        shutil.rmtree(self.artifact_dir, ignore_errors=True)

    def __enter__(self) -> "DopplerEngine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# --------------------------------------------------------------------------------------------
# MetaSchedule faces
# --------------------------------------------------------------------------------------------


class _LazyBatch:
    """A batch measured when the tuner first asks for a result (so measurement happens while the
    tuner is blocked on it, never while it searches or builds). ``done()`` is True: asking is
    what runs it. Same ``done``/``result`` interface as ``concurrent.futures.Future``."""

    def __init__(self, fn: Callable[[], list]) -> None:
        self._fn = fn
        self._lock = threading.Lock()
        self._value: list | None = None
        self._error: BaseException | None = None

    def done(self) -> bool:
        return True

    def result(self) -> list:
        with self._lock:
            if self._value is None and self._error is None:
                try:
                    self._value = self._fn()
                except Exception as exc:  # noqa: BLE001 - re-raised to every future of the batch
                    self._error = exc
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]


def _meta_classes():
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.builder import PyBuilder
    from tvm.s_tir.meta_schedule.runner import PyRunner, PyRunnerFuture, RunnerResult

    @derived_object
    class DopplerRunnerFuture(PyRunnerFuture):
        """Future of one candidate; resolves when its batch (parallel + serial checks) is done."""

        def __init__(self, batch: concurrent.futures.Future, index: int) -> None:
            super().__init__()
            self.batch = batch
            self.index = index

        def done(self) -> bool:
            return self.batch.done()

        def result(self) -> RunnerResult:
            try:
                costs, err = self.batch.result()[self.index]
            except Exception as exc:  # noqa: BLE001
                return RunnerResult(None, f"DopplerRunner: batch failed\n{exc}")
            return RunnerResult(costs, err)

    @derived_object
    class DopplerRunner(PyRunner):
        """MetaSchedule runner over a :class:`DopplerEngine`: ``run`` returns all futures of the
        batch at once; the batch is measured in the background when the engine allows overlap,
        otherwise when the tuner first waits on one of its futures."""

        def __init__(self, engine: DopplerEngine) -> None:
            super().__init__()
            self.engine = engine

        def run(self, runner_inputs: list) -> list:
            eng = self.engine
            cands = [_Candidate(str(ri.artifact_path), str(ri.device_type),
                                [a.as_json() for a in ri.args_info]) for ri in runner_inputs]
            if eng.overlap:
                eng._idle.clear()

                def job():
                    try:
                        return eng.measure_batch(cands)
                    finally:
                        eng._idle.set()

                fut = eng._bg.submit(job)
            else:
                fut = _LazyBatch(lambda: eng.measure_batch(cands))
            return [DopplerRunnerFuture(fut, i) for i in range(len(cands))]

        def round_details(self, artifact_paths: list) -> dict:
            """``{"doppler": decision}`` of the batch that measured these artifacts (JSON-ready:
            task, dop, rel_error, induced_failures, action, next_dop, timeout_s, sample, serial_top,
            measured_by, parallel_s, serial_s), or ``{}``; for a tuning round's ``details``."""
            rec = self.engine.decision_for([str(p) for p in artifact_paths if p])
            if rec is None:
                return {}
            return {"doppler": {k: v for k, v in rec.items() if k != "artifacts"}}

        def close(self) -> None:
            """Stop the engine's worker processes."""
            self.engine.close()

    @derived_object
    class DopplerBuilder(PyBuilder):
        """MetaSchedule builder on the engine's warm, persistent build workers."""

        def __init__(self, engine: DopplerEngine) -> None:
            super().__init__()
            self.engine = engine

        def build(self, build_inputs: list) -> list:
            return self.engine.build(build_inputs)

    return DopplerRunnerFuture, DopplerRunner, DopplerBuilder


_CLASSES: tuple | None = None


def meta_classes():
    """(DopplerRunnerFuture, DopplerRunner, DopplerBuilder), created on first use (imports TVM)."""
    global _CLASSES
    if _CLASSES is None:
        _CLASSES = _meta_classes()
    return _CLASSES


#: DOPpler options the engine reads itself (the others are :class:`DopplerConfig` fields)
ENGINE_OPTION_NAMES = ("devices", "overlap", "build_workers", "build_timeout_s", "min_repeat_ms", "max_process_uses",
                       "paired")


def engine_settings(options: Any, num_threads: int) -> tuple[list[SlotSpec], DopplerConfig, dict[str, Any]]:
    """Parse DOPpler's options (``TuningSetup.options["doppler"]``, a dict or None) without
    starting anything: returns (measurement slots, :class:`DopplerConfig`, the remaining
    :class:`DopplerEngine` keyword arguments). Used by :func:`make_engine` and by the tuning
    API's validation, so a bad value is refused before an experiment is stored.

    Raises ``ValueError`` naming the option on a non-dict, an unknown key, a value of the wrong
    type or out of range, or a device string :func:`parse_devices` rejects."""
    if options is None:
        options = {}
    if not isinstance(options, dict):
        raise ValueError(f"options['doppler'] must be an object of DOPpler settings, got {type(options).__name__}")
    opts = dict(options)
    try:
        devices = str(opts.pop("devices", None) or os.environ.get("TANDEM_DOPPLER_DEVICES") or "cpu")
        overlap = opts.pop("overlap", "auto")
        if overlap not in (None, "auto", True, False):
            raise ValueError(f"overlap must be 'auto', true or false, got {overlap!r}")
        overlap = None if overlap in (None, "auto") else bool(overlap)
        build_workers = opts.pop("build_workers", None)
        if build_workers is not None and (not isinstance(build_workers, int) or build_workers < 1):
            raise ValueError(f"build_workers must be an integer >= 1, got {build_workers!r}")
        build_timeout_s = float(opts.pop("build_timeout_s", 30.0))
        min_repeat_ms = int(opts.pop("min_repeat_ms", 10))
        paired = opts.pop("paired", False)
        if not isinstance(paired, bool):
            raise ValueError(f"paired must be true or false, got {paired!r}")
        max_process_uses = int(opts.pop("max_process_uses", 256))
        if not (build_timeout_s > 0 and math.isfinite(build_timeout_s)):
            raise ValueError(f"build_timeout_s must be a finite number > 0, got {build_timeout_s!r}")
        if min_repeat_ms < 1 or max_process_uses < 1:
            raise ValueError("min_repeat_ms and max_process_uses must be >= 1")
        unknown = sorted(set(opts) - set(DopplerConfig.__dataclass_fields__))
        if unknown:  # the engine's own keys were popped above; the rest must be DopplerConfig fields
            known = sorted(set(ENGINE_OPTION_NAMES) | set(DopplerConfig.__dataclass_fields__))
            raise ValueError(f"unknown DOPpler option(s) {unknown}; known: {known}")
        slots = parse_devices(devices, num_threads)
        max_dop = int(opts.pop("max_dop", len(slots)))
        config = DopplerConfig.from_options(opts, max_dop=max_dop)
    except (TypeError, OverflowError) as err:  # e.g. a string where a number belongs
        raise ValueError(f"DOPpler options: {err}") from None
    return slots, config, {"build_workers": build_workers, "build_timeout_s": build_timeout_s,
                           "min_repeat_ms": min_repeat_ms, "overlap": overlap, "paired": paired,
                           "max_process_uses": max_process_uses}


def make_engine(setup: TuningSetup, on_decision: Callable[[dict], None] | None = None) -> DopplerEngine:
    """Build a :class:`DopplerEngine` from a :class:`TuningSetup` (options under ``"doppler"``) and
    warm it up (every worker started, imports paid, RPC sessions open) before tuning starts."""
    slots, config, kwargs = engine_settings((setup.options or {}).get("doppler"), setup.num_threads)
    from .intrinsics import intrinsic_modules

    engine = DopplerEngine(slots, config=config, work_dir=setup.work_dir, seed=setup.seed,
                           intrinsics=intrinsic_modules(setup.target),
                           on_decision=on_decision, **kwargs)
    try:
        engine.warm_up()
    except BaseException:
        engine.close()
        raise
    return engine


def doppler_components(setup: TuningSetup):
    """Registry factory: (DopplerBuilder, DopplerRunner) sharing one engine (``runner.engine``)."""
    _, runner_cls, builder_cls = meta_classes()
    engine = make_engine(setup)
    return builder_cls(engine), runner_cls(engine)


register_runner("doppler", doppler_components)
