"""DOPpler's MetaSchedule faces: ``DopplerRunner`` (a ``PyRunner``), its futures and
``DopplerBuilder`` (a ``PyBuilder``) over one :class:`tuning.backends.doppler.engine.DopplerEngine`,
made on first use because defining them imports TVM. See :mod:`tuning.backends.doppler`."""
from __future__ import annotations

import concurrent.futures
import threading
from typing import Callable

from .engine import Candidate, DopplerEngine


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
            cands = [Candidate(str(ri.artifact_path), str(ri.device_type),
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
