"""Round accounting for MetaSchedule tuning: wall time and energy of every tuning round, split
into search, build and measurement, handed to a plain Python observer (the Django mirror in
:mod:`tuning.services`, Trimmer's bookkeeping, a test).

How the split is measured. MetaSchedule's task scheduler runs each round as: the search
strategy generates candidates (search, including cost-model prediction), the builder builds
them (``Builder.build``, blocking), the runner starts them (``Runner.run`` returns futures),
and after the futures are joined the measure callbacks run. So with

- ``t_prev``: end of the previous round's callbacks (tuning start for the first round),
- ``t_b0`` / ``t_b1``: start / end of ``Builder.build`` (recorded by :class:`TimedBuilder`),
- ``t_cb``: this round's callback (:class:`RoundAccountingCallback`),

search = ``t_b0 - t_prev``, build = ``t_b1 - t_b0``, measurement = ``t_cb - t_b1``, and each
energy share is the meter's difference over the same interval. The builder and runner are
wrapped, not replaced, so any registered pair (``local``, DOPpler's) is accounted the same way.
Rounds are matched first-in first-out, which is exact for schedulers that join a task's
measurement before starting the next round (``gradient`` and Trimmer); with ``round-robin``
the measurement interval of one task overlaps the next task's search.
"""
from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.builder import PyBuilder
from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback
from tvm.s_tir.meta_schedule.runner import PyRunner

from .energy import EnergyMeter, EnergyReading


@dataclass
class CandidateResult:
    """One measured candidate: ``run_seconds`` (empty on error), ``error`` text or ``""``,
    ``trace`` (schedule trace as JSON), ``trace_hash`` (sha1 of it)."""

    index: int
    run_seconds: list[float]
    error: str
    trace: Any
    trace_hash: str

    @property
    def mean_seconds(self) -> float | None:
        return sum(self.run_seconds) / len(self.run_seconds) if self.run_seconds and not self.error else None


@dataclass
class RoundSummary:
    """What a tuning round did and cost. Seconds and joules split into search, build and
    measurement (see the module docstring); ``wall_seconds`` / ``joules_total`` are cumulative
    since tuning started; ``energy_source`` is the meter's label."""

    round_index: int
    task_id: int
    task_name: str
    workload_hash: str
    flop: float
    candidates: list[CandidateResult]
    search_seconds: float
    build_seconds: float
    measure_seconds: float
    search_joules: float
    build_joules: float
    measure_joules: float
    wall_seconds: float
    joules_total: float
    energy_source: str
    energy_measured: bool
    task_terminated: bool = False
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def best_seconds(self) -> float | None:
        vals = [c.mean_seconds for c in self.candidates if c.mean_seconds is not None]
        return min(vals) if vals else None


class RoundClock:
    """Shared time stamps and meter readings of the builder wrapper and the callback."""

    def __init__(self, meter: EnergyMeter) -> None:
        self.meter = meter
        self._lock = threading.Lock()
        self._pending: deque[tuple[EnergyReading, EnergyReading, EnergyReading]] = deque()
        self.last = meter.read()

    def build_started(self) -> EnergyReading:
        return self.meter.read()

    def build_finished(self, started: EnergyReading) -> None:
        with self._lock:
            self._pending.append((self.last, started, self.meter.read()))

    def round_finished(self) -> tuple[EnergyReading, EnergyReading, EnergyReading, EnergyReading]:
        """``(previous round end, build start, build end, now)``; the next round's search
        starts now. With no recorded build (a builder not wrapped) build is empty."""
        now = self.meter.read()
        with self._lock:
            if self._pending:
                prev, b0, b1 = self._pending.popleft()
            else:
                prev, b0, b1 = self.last, now, now
            self.last = now
        return prev, b0, b1, now


@derived_object
class TimedBuilder(PyBuilder):
    """Wraps any MetaSchedule ``Builder`` and stamps the start and end of each ``build``."""

    def __init__(self, inner: Any, clock: RoundClock) -> None:
        super().__init__()
        self.inner = inner
        self.clock = clock

    def build(self, build_inputs):
        started = self.clock.build_started()
        try:
            return self.inner.build(build_inputs)
        finally:
            self.clock.build_finished(started)


@derived_object
class PassThroughRunner(PyRunner):
    """Wraps any MetaSchedule ``Runner`` unchanged (kept so a run's components are all
    Python-visible; measurement time is taken between build end and the callback)."""

    def __init__(self, inner: Any) -> None:
        super().__init__()
        self.inner = inner

    def run(self, runner_inputs):
        return self.inner.run(runner_inputs)


def _floats(xs: Any) -> list[float]:
    return [float(getattr(x, "value", x)) for x in (xs or [])]


def trace_json(candidate: Any) -> Any:
    """The schedule trace of a measure candidate as plain JSON (lists, strings, numbers)."""
    from tvm.ir import save_json  # noqa: F401 - keeps tvm.ir loaded

    trace = candidate.sch.trace
    obj = trace.as_json(remove_postproc=False) if trace is not None else None
    return json.loads(json.dumps(obj, default=str))


@derived_object
class RoundAccountingCallback(PyMeasureCallback):
    """Measure callback that builds a :class:`RoundSummary` for every round and passes it to
    ``on_round``. Exceptions from ``on_round`` propagate and stop the tuning (so a failed
    mirror write or a cancellation is not silently ignored)."""

    def __init__(self, clock: RoundClock, on_round: Callable[[RoundSummary], None], *, first_round_index: int = 0) -> None:
        super().__init__()
        self.clock = clock
        self.on_round = on_round
        self.round_index = first_round_index
        self.summaries: list[RoundSummary] = []

    def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results) -> None:
        import tvm_ffi

        prev, b0, b1, now = self.clock.round_finished()
        task = task_scheduler.tasks_[task_id]
        cands = []
        for i, (cand, br, rr) in enumerate(zip(measure_candidates, builder_results, runner_results)):
            err = br.error_msg or rr.error_msg or ""
            tj = trace_json(cand)
            cands.append(CandidateResult(
                index=i, run_seconds=[] if err else _floats(rr.run_secs), error=str(err), trace=tj,
                trace_hash=hashlib.sha1(json.dumps(tj, sort_keys=True).encode()).hexdigest()))
        summary = RoundSummary(
            round_index=self.round_index, task_id=int(task_id), task_name=str(task.ctx.task_name),
            workload_hash=str(tvm_ffi.structural_hash(task.ctx.mod) & 0xFFFFFFFFFFFFFFFF),
            flop=float(task.flop), candidates=cands,
            search_seconds=max(0.0, b0.seconds - prev.seconds), build_seconds=max(0.0, b1.seconds - b0.seconds),
            measure_seconds=max(0.0, now.seconds - b1.seconds),
            search_joules=max(0.0, b0.joules - prev.joules), build_joules=max(0.0, b1.joules - b0.joules),
            measure_joules=max(0.0, now.joules - b1.joules),
            wall_seconds=now.seconds, joules_total=now.joules, energy_source=now.source,
            energy_measured=now.measured, task_terminated=bool(task.is_terminated),
        )
        self.round_index += 1
        self.summaries.append(summary)
        self.on_round(summary)
