"""Code that runs inside DOPpler's worker processes (TVM ``PopenWorker`` / ``PopenPoolExecutor``
children, which unpickle these functions by module name): a measurement slot's initializer and
its timing of one candidate (:func:`measure_in_worker`), and a warm build worker's initializer
and build. See :mod:`tuning.backends.doppler`."""
from __future__ import annotations

import hashlib
import math
import os
import tempfile
from typing import Any

from tuning.core.doppler import repeats_sufficient

from .slots import SlotSpec

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


def measure_in_worker(artifact_path: str, device_type: str, args_info: list, evalcfg: dict) -> tuple[list[float], dict]:
    """Load one built candidate on this worker's device and time it there.

    evalcfg: ``min_repeat_ms`` (floor of one timed repeat, ms), ``min_repeats``, ``max_repeats``,
    ``ci_rel_halfwidth`` (see :func:`tuning.core.doppler.repeats_sufficient`), ``screen_ratio``,
    ``screen_repeats``, ``estimator`` (see :class:`tuning.core.doppler.DopplerConfig`) and
    ``best_s`` (the task's best recorded latency so far in seconds, or ``None``; see
    :func:`tuning.core.doppler.clearly_worse`).

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

    Returns (run seconds to record, info with the slot name, server address for RPC, pid,
    ``repeats`` (how many were timed), ``early_stop``). Raises on any TVM error of the candidate.
    """
    from tvm.s_tir.meta_schedule.runner.utils import alloc_argument_common

    from tuning.core.doppler import estimate_run_secs, screen

    slot: SlotSpec = _WORKER["slot"]
    info: dict[str, Any] = {"slot": slot.name, "pid": os.getpid()}
    floor_ms = float(evalcfg["min_repeat_ms"])
    rt_mod, dev, f_fill, remote_name = _load_in_worker(artifact_path, device_type)
    if slot.kind == "rpc":
        info["server"] = _WORKER.get("server")
    try:
        args = alloc_argument_common(f_fill, dev, args_info, 1)[0]
        first = rt_mod.time_evaluator(rt_mod.entry_name, dev, number=1, repeat=1, min_repeat_ms=int(floor_ms))
        dev.sync()
        costs: list[float] = [float(first(*args).results[0])]
        evaluators: list = []  # the fixed-runs evaluator, made on the first repeat after the first

        def one_more() -> None:
            if not evaluators:
                # runs per repeat so that one repeat lasts >= floor_ms, from the first repeat's time
                number = max(1, math.ceil(floor_ms / max(costs[0] * 1e3, 1e-6)))
                evaluators.append(rt_mod.time_evaluator(rt_mod.entry_name, dev, number=number, repeat=1,
                                                        min_repeat_ms=0))
            costs.append(float(evaluators[0](*args).results[0]))

        def screened() -> str:
            return screen(costs, evalcfg.get("best_s"), evalcfg["screen_ratio"], int(evalcfg.get("screen_repeats", 1)))

        while screened() == "more":
            one_more()
        info["early_stop"] = screened() == "stop"
        if not info["early_stop"]:
            while not repeats_sufficient(costs, min_repeats=evalcfg["min_repeats"], max_repeats=evalcfg["max_repeats"],
                                         ci_rel_halfwidth=evalcfg["ci_rel_halfwidth"]):
                one_more()
        kept = costs if info["early_stop"] else costs[:max(int(evalcfg["max_repeats"]), 1)]
        info["repeats"] = len(kept)
        recorded = estimate_run_secs(kept, evalcfg.get("estimator", "mean"))
    finally:
        if remote_name is not None:
            try:
                _rpc_session(slot)[0].remove(remote_name)
            except Exception:  # noqa: BLE001 - cleanup only
                pass
    return recorded, info


def _build_worker_init(cores: tuple[int, ...], intrinsics: tuple[str, ...] | None = None) -> None:
    """Initializer of a warm build worker: pay TVM's heavy imports once, pin to the build cores.
    ``intrinsics``: the tensor-intrinsic modules to register
    (:func:`tuning.backends.intrinsics.intrinsic_modules` of the target; None: all of them)."""
    from ..intrinsics import ALL_MODULES, import_tensor_intrinsics

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
