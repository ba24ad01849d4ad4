"""DOPpler's engine in the tuning process: the measurement slots' worker processes, the warm
build pool and the per-task DOP controllers, with the record of every decision. See
:mod:`tuning.backends.doppler`."""
from __future__ import annotations

import concurrent.futures
import hashlib
import json
import logging
import math
import os
import queue
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from tuning.core.doppler import DopController, DopplerConfig, best_fraction_indices

from .slots import SlotSpec
from .worker import _build_in_worker, _build_worker_init, _measure_worker_init, _open_slot_in_worker, measure_in_worker

logger = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[3]


def _ensure_importable_in_workers() -> None:
    """TVM's popen workers run ``python -m tvm.exec.popen_worker`` with the parent's environment
    and unpickle our worker functions by module name, so the repository root must be on their
    ``PYTHONPATH``."""
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(REPO_ROOT) not in parts:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), *parts])


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

    def measure(self, cand: "Candidate", timeout_s: float, evalcfg: dict) -> tuple[list[float] | None, str | None, dict]:
        try:
            if self.cold:  # after a timeout the process was killed: restart it outside the timeout
                self.warm()
            self.worker.send(measure_in_worker, (cand.artifact_path, cand.device_type, cand.args_info, evalcfg),
                             None, timeout_s)
            costs, info = self.worker.recv()
            self.measured += 1
            return costs, None, info
        except TimeoutError:
            self.cold = True
            return None, f"DopplerRunner: timeout, killed after {timeout_s:.1f} s on {self.spec.name}", {"slot": self.spec.name}
        except Exception as exc:  # noqa: BLE001 - a runner reports errors as data
            return None, f"DopplerRunner: error on {self.spec.name}\n{exc}", {"slot": self.spec.name}

    def kill(self) -> None:
        try:
            self.worker.kill()
        except Exception:  # noqa: BLE001
            pass


@dataclass
class Candidate:
    """One built candidate as the runner hands it to a slot: the shared library MetaSchedule's
    builder exported, its device type (``"cpu"``, ``"cuda"``) and its arguments
    (``TensorInfo.as_json()`` per argument)."""

    artifact_path: str
    device_type: str
    args_info: list


@dataclass
class _TaskState:
    """Per task: its DOP controller, the latencies recorded so far and how many batches it had."""

    controller: DopController
    history: list[float] = field(default_factory=list)  # recorded latencies so far (mean of run_secs, s; nan = error)
    batches: int = 0


class DopplerEngine:
    """Worker processes and DOP controllers of one tuning (see module docstring).

    slots: measurement devices (:func:`parse_devices`); config: DOP thresholds (``max_dop`` is
    capped at ``len(slots)``); build_workers: persistent build processes; overlap: measure in the
    background while the next batch is searched and built (``None``: automatic);
    work_dir: where ``doppler_decisions.jsonl`` and the build artifacts go;
    on_decision: called with each decision dict; seed: of the serial-sample generator;
    intrinsics: the TVM tensor-intrinsic modules the build workers register
    (:mod:`tuning.backends.intrinsics`; None: every backend's, about 22 s per worker here).
    Call :meth:`close` (or use as a context manager) to stop every worker process.
    """

    def __init__(self, slots: list[SlotSpec], *, config: DopplerConfig | None = None, build_workers: int | None = None,
                 build_timeout_s: float = 30.0, min_repeat_ms: int = 10, overlap: bool | None = None,
                 work_dir: str | os.PathLike | None = None, seed: int = 0, max_process_uses: int = 256,
                 on_decision: Callable[[dict], None] | None = None,
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
        build_cores = spare if (self.overlap and spare) else tuple(all_cores)
        self.build_workers = int(build_workers or len(build_cores))
        self.build_timeout_s = float(build_timeout_s)
        self.build_pool = PopenPoolExecutor(max_workers=self.build_workers, timeout=self.build_timeout_s,
                                            initializer=_build_worker_init, initargs=(build_cores, intrinsics),
                                            maximum_process_uses=max_process_uses)
        self.timing = {"build_s": 0.0, "measure_parallel_s": 0.0, "measure_serial_s": 0.0, "batches": 0}
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
    def task_key(cand: Candidate) -> str:
        """A task is recognised by its device type and argument signature: per argument its
        dtype and element count, not its shape. With weight prepacking (layout-free weights,
        ``tuning.backends.frontends.prepare_for_tuning``) each candidate of one task may give its
        weights another layout, i.e. another shape of the same elements (MetaSchedule's
        ``RewriteLayout`` follows the candidate's perfect tiling); keyed by shape, one task's
        state (degree of parallelism, history) split per layout."""
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
                "screen_repeats": c.screen_repeats, "estimator": c.estimator, "best_s": None}

    def _run_on_slots(self, cands: list[Candidate], idx: list[int], nslots: int, timeout_s: float,
                      best: list[float]) -> dict[int, tuple]:
        """Measure ``cands[i]`` for i in idx on the first ``nslots`` slots at once (a shared queue).

        best: one-element list, the task's best recorded latency so far (seconds, the mean of a
        candidate's recorded run seconds; ``inf`` if none); each measurement is screened against
        it (:func:`tuning.core.doppler.screen`) and it is lowered as candidates finish, so later
        candidates of the same batch see earlier ones."""
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
                    evalcfg = {**self._evalcfg(), "best_s": best[0] if math.isfinite(best[0]) else None}
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

    def measure_batch(self, cands: list[Candidate]) -> list[tuple[list[float] | None, str | None]]:
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
            t0 = time.perf_counter()
            par = self._run_on_slots(cands, list(range(n)), dop, timeout, best)
            t1 = time.perf_counter()
            par_lat = np.array([np.mean(par[i][0]) if par[i][0] else np.nan for i in range(n)], dtype=float)
            check = ctl.plan_sample(par_lat, self.rng)
            top = best_fraction_indices(st.history, par_lat, self.config.top_fraction) if dop > 1 else []
            serial_idx = sorted(set(check) | set(top))
            ser = self._run_on_slots(cands, serial_idx, 1, ctl.timeout_s(1), best) if serial_idx else {}
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
        return {"slots": [s.name for s in self.slot_specs], "overlap": self.overlap,
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
