"""Round accounting for MetaSchedule tuning: wall time and energy of every tuning round, split
into search, build and measurement, handed to a plain Python observer (the Django mirror in
:mod:`tuning.services`, Trimmer's bookkeeping, a test).

How the split is measured. The tuner's wall clock is cut at phase boundaries and every slice
goes to exactly one round and one phase, so the rounds' splits add up to the tuning's wall time
(and the energy meter's readings at the same boundaries split the energy the same way):

- **build**: inside ``Builder.build`` (:class:`TimedBuilder`), for the round being built;
- **measurement**: inside ``Runner.run`` and ``RunnerFuture.result()`` (:class:`TimedRunner`),
  i.e. the time the tuner is *blocked* on measurements of that round. TVM 0.27's ``LocalRunner``
  measures every candidate inside ``run`` (it waits on each worker future there); DOPpler measures
  when the tuner waits on a future, or in the background. Measurement that overlaps later builds
  (an asynchronous runner under the gradient scheduler's warm-up) is hidden behind them and not
  counted twice;
- **search**: everything else: candidate generation (search strategy + cost model) before a
  build goes to the round being built; database commit and cost-model update after the wait go
  to the round just measured (the slice ending at :class:`RoundAccountingCallback`).

Rounds are identified by build order, and a runner's futures belong to the round built last
(``Runner.run`` follows its ``Builder.build`` directly in MetaSchedule's task scheduler). The
builder and runner are wrapped, not replaced, so any registered pair (``local``, DOPpler's) is
accounted the same way.
"""
from __future__ import annotations

import hashlib
import json
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.builder import PyBuilder
from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback
from tvm.s_tir.meta_schedule.runner import PyRunner, PyRunnerFuture

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


class _Slices:
    """Accumulated seconds and joules of one round, per phase."""

    def __init__(self) -> None:
        self.seconds = {"search": 0.0, "build": 0.0, "measure": 0.0}
        self.joules = {"search": 0.0, "build": 0.0, "measure": 0.0}


class RoundClock:
    """Cuts the tuner's wall clock (and the energy meter) into per-round phase slices."""

    def __init__(self, meter: EnergyMeter) -> None:
        self.meter = meter
        self._lock = threading.Lock()
        self._mark = meter.read()
        self._rounds: dict[int, _Slices] = {}
        self._built: deque[int] = deque()  # rounds built and not yet accounted, in build order
        self._next = 0
        self._in_wait = 0

    def _slice(self, seq: int, phase: str) -> EnergyReading:
        now = self.meter.read()
        sl = self._rounds.setdefault(seq, _Slices())
        sl.seconds[phase] += max(0.0, now.seconds - self._mark.seconds)
        sl.joules[phase] += max(0.0, now.joules - self._mark.joules)
        self._mark = now
        return now

    def build_started(self) -> int:
        """A round's build starts: the time since the last boundary was its search. Returns its id."""
        with self._lock:
            seq = self._next
            self._next += 1
            self._slice(seq, "search")
            return seq

    def build_finished(self, seq: int) -> None:
        with self._lock:
            self._slice(seq, "build")
            self._built.append(seq)

    def last_built(self) -> int:
        with self._lock:
            return self._next - 1

    def wait_started(self, seq: int) -> None:
        """The tuner blocks on a measurement of round ``seq``: the gap before it is that round's search."""
        with self._lock:
            if self._in_wait == 0:
                self._slice(seq, "search")
            self._in_wait += 1

    def wait_finished(self, seq: int) -> None:
        with self._lock:
            self._in_wait -= 1
            if self._in_wait == 0:
                self._slice(seq, "measure")

    def round_finished(self) -> tuple[int, _Slices, EnergyReading]:
        """The measure callback of the oldest built round: closes its search slice and returns
        ``(round id, its slices, reading now)``."""
        with self._lock:
            seq = self._built.popleft() if self._built else self._next - 1
            now = self._slice(seq, "search")
            return seq, self._rounds.pop(seq, _Slices()), now


@derived_object
class TimedBuilder(PyBuilder):
    """Wraps any MetaSchedule ``Builder`` and marks the start and end of each ``build``."""

    def __init__(self, inner: Any, clock: RoundClock) -> None:
        super().__init__()
        self.inner = inner
        self.clock = clock

    def build(self, build_inputs):
        seq = self.clock.build_started()
        try:
            return self.inner.build(build_inputs)
        finally:
            self.clock.build_finished(seq)


@derived_object
class TimedRunnerFuture(PyRunnerFuture):
    """Wraps a runner future; the time blocked in ``result()`` is the round's measurement."""

    def __init__(self, inner: Any, clock: RoundClock, seq: int) -> None:
        super().__init__()
        self.inner = inner
        self.clock = clock
        self.seq = seq

    def done(self) -> bool:
        return bool(self.inner.done())

    def result(self):
        self.clock.wait_started(self.seq)
        try:
            return self.inner.result()
        finally:
            self.clock.wait_finished(self.seq)


@derived_object
class TimedRunner(PyRunner):
    """Wraps any MetaSchedule ``Runner``; its futures are :class:`TimedRunnerFuture`."""

    def __init__(self, inner: Any, clock: RoundClock) -> None:
        super().__init__()
        self.inner = inner
        self.clock = clock

    def run(self, runner_inputs):
        seq = self.clock.last_built()
        self.clock.wait_started(seq)  # a synchronous runner (LocalRunner) measures in here
        try:
            futures = self.inner.run(runner_inputs)
        finally:
            self.clock.wait_finished(seq)
        return [TimedRunnerFuture(f, self.clock, seq) for f in futures]


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

    def __init__(self, clock: RoundClock, on_round: Callable[[RoundSummary], None], *, first_round_index: int = 0,
                 round_details: Callable[[list[str]], dict[str, Any]] | None = None) -> None:
        super().__init__()
        self.round_details = round_details  # runner-specific details by artifact paths (DOPpler's decisions)
        self.clock = clock
        self.on_round = on_round
        self.round_index = first_round_index
        self.summaries: list[RoundSummary] = []

    def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results) -> None:
        import tvm_ffi

        _seq, sl, now = self.clock.round_finished()
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
            search_seconds=sl.seconds["search"], build_seconds=sl.seconds["build"], measure_seconds=sl.seconds["measure"],
            search_joules=sl.joules["search"], build_joules=sl.joules["build"], measure_joules=sl.joules["measure"],
            wall_seconds=now.seconds, joules_total=now.joules, energy_source=now.source,
            energy_measured=now.measured, task_terminated=bool(task.is_terminated),
        )
        if self.round_details is not None:
            summary.details.update(self.round_details([str(br.artifact_path or "") for br in builder_results]))
        self.round_index += 1
        self.summaries.append(summary)
        self.on_round(summary)
