"""Trimmer on TVM MetaSchedule (``tvm.s_tir.meta_schedule``, apache-tvm 0.27): a task scheduler,
a candidate filter and per-round energy attribution. Registered as scheduler ``"trimmer"``.

Paper: Borowiec et al., "Trimmer: Cost-Efficient Deep Learning Auto-tuning for Cloud
Datacenters", IEEE CLOUD 2022. The rules themselves are in :mod:`tuning.core.trimmer`.

How it plugs into MetaSchedule
------------------------------
:class:`TrimmerScheduler` is a ``PyTaskScheduler`` whose ``tune`` does four things, then
hands over to :class:`_TrimmerLoop` (a second ``PyTaskScheduler`` that runs MetaSchedule's own
C++ tuning loop; calling the C++ loop from an overridden ``tune`` of the same object recurses
into it):

1. wraps every task's search strategy in :class:`TrimmerSearch`, the candidate filter;
2. appends an :class:`EnergyLedgerCallback` to the measure callbacks, which reads the energy
   meter when a round's results are joined and attributes the energy since the previous round
   to it (and equally to its candidates);
3. seeds each task's best latency from the database (:func:`database_best_seconds`), so a
   tuning resumed after an interruption judges its rounds against what it already found;
4. runs the loop, whose ``next_task_id`` first joins the running round, then preempts tasks
   that reached ``patience`` non-improving rounds (``terminate_task``; rounds searched before
   the run measured ``preempt_warmup`` candidates, the cost model's warm-up, do not count),
   stops the whole tuning on the model-level plateau or a budget (returns -1), and otherwise
   picks the next task with MetaSchedule's gradient rule. Preemption is done here, after the
   join, and never from a measure callback: terminating a task inside ``JoinRunningTask``
   trips MetaSchedule's check that a task chosen by the loop is not terminated.

Because the loop always joins the previous round before starting the next, rounds do not
overlap, and the energy between two joins belongs to exactly one round (its search, build and
measurement). MetaSchedule's gradient scheduler overlaps a round's measurement with the next
task's search and build, so under it the same ledger attributes by join interval only.

The candidate filter
--------------------
:class:`TrimmerSearch` wraps a search strategy (normally ``EvolutionarySearch``) and asks it for
``oversample`` times the batch. Once the run has measured ``filter_warmup`` candidates (XGBoost's
``num_warmup_samples``, 100: before that its predictions are random numbers and the batch is
passed through unchanged), it ranks the pool by predicted score and keeps the best
``batch - floor`` candidates plus ``floor = ceil(exploration_floor * batch)`` drawn at random
from the rest, so poorly-ranked candidates (including the strategy's epsilon-greedy random
picks) are replaced by better-ranked ones from the same population while some exploration
remains. The pool's other candidates are never measured (the inner strategy counts them as
seen, so it does not propose them again).

Before the filter acts, the first batch is the unwrapped strategy's first batch when the batch
is under 20: EvolutionarySearch keeps the best-scored candidates in a heap of the requested size
and puts them first, and its epsilon-greedy random picks (``int(0.05 * n)`` of ``n``, so none
below 20) come last, so the first ``batch`` of a pool of ``oversample x batch`` are the
candidates a plain request returns (from 20 on, the plain request's last pick or picks are
random ones and the pool's are not). Later warm-up batches can differ, because the strategy
counts the pool's unmeasured candidates as seen and never proposes them again. All this holds
only if the inner strategy has the random state it would have unwrapped: the wrapper therefore
never initializes it with its own context, only through the task's original one (see
:func:`make_trimmer_search`; ``tests/unit/tuning/test_trimmer_search.py`` checks the first batch
against the plain strategy's). Earlier code initialized it with the wrapper's context, so with
the same seed Trimmer searched other candidates than the baseline from its first round on.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Optional

import numpy as np

from tuning.core.trimmer import TrimmerConfig, TrimmerState, select_candidates

from .registry import TuningSetup, register_scheduler


def runner_latencies(runner_results: list, builder_results: Optional[list] = None) -> list[Optional[float]]:
    """Mean run time (seconds) per candidate from MetaSchedule ``RunnerResult`` objects; ``None``
    for a candidate whose build or run failed."""
    out: list[Optional[float]] = []
    for i, res in enumerate(runner_results):
        berr = builder_results[i].error_msg if builder_results is not None and i < len(builder_results) else None
        secs = [float(x) for x in (res.run_secs or [])]
        if berr or res.error_msg or not secs:
            out.append(None)
        else:
            out.append(float(np.mean(secs)))
    return out


def database_best_seconds(database: Any, mod: Any) -> Optional[float]:
    """Best mean run time (seconds) of ``mod``'s workload among the valid records already in a
    MetaSchedule ``database``, or ``None`` when it holds none (a fresh tuning). Used when an
    interrupted tuning resumes on its database, so Trimmer's per-task best does not restart
    from infinity."""
    if database is None or not database.has_workload(mod):
        return None
    best = None
    for rec in database.get_top_k(database.commit_workload(mod), 1):
        secs = [float(x) for x in (rec.run_secs or [])]
        if secs and all(np.isfinite(secs)) and min(secs) > 0 and max(secs) < 1e9:
            m = float(np.mean(secs))
            best = m if best is None else min(best, m)
    return best


class EnergyLedger:
    """Attributes energy-meter intervals to rounds and feeds them to a :class:`TrimmerState`.

    meter: a :class:`tuning.backends.energy.EnergyMeter` (cumulative joules since start).
    state: the :class:`TrimmerState` that records rounds.
    :meth:`start` takes the reference reading (call it right before tuning starts); each
    :meth:`on_round` reads the meter and attributes the interval since the previous reading.
    """

    def __init__(self, meter: Any, state: TrimmerState) -> None:
        self.meter = meter
        self.state = state
        self._last = None
        self.source: Optional[str] = None
        self.measured: Optional[bool] = None

    def start(self) -> None:
        self._last = self.meter.read()
        self.source, self.measured = self._last.source, self._last.measured

    def on_round(self, task_id: int, latencies: list[Optional[float]]):
        if self._last is None:
            self.start()
        now = self.meter.read()
        delta = now - self._last
        self._last = now
        return self.state.record_round(task_id, latencies, joules=max(0.0, delta.joules), seconds=max(0.0, delta.seconds))


def _ms():
    from tvm.s_tir import meta_schedule as ms

    return ms


def make_ledger_callback(ledger: EnergyLedger):
    """A MetaSchedule ``PyMeasureCallback`` that calls ``ledger.on_round`` for every joined round
    (task id, per-candidate mean latency in seconds or None on error). Usable with any task
    scheduler (the benchmark puts it under MetaSchedule's gradient scheduler too)."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

    @derived_object
    class EnergyLedgerCallback(PyMeasureCallback):
        def __init__(self, ledger: EnergyLedger) -> None:
            self.ledger = ledger

        def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results) -> None:
            self.ledger.on_round(int(task_id), runner_latencies(list(runner_results), list(builder_results)))

    return EnergyLedgerCallback(ledger)


def make_trimmer_search(inner, config: TrimmerConfig, seed: int, stats: list, measured=lambda: 0,
                        inner_context=None):
    """Wrap the search strategy ``inner`` in the cost-model candidate filter (see module doc).

    stats: list that receives one dict per generated batch
    (``{"pool", "kept", "replaced", "filtered"}``); measured: callable returning how many
    candidates the whole run has measured (the filter waits for ``config.filter_warmup``).

    inner_context: None, or the task's own ``TuneContext`` whose ``search_strategy`` is ``inner``
    (the constructor of that context initialized it). Given, the inner strategy goes through
    exactly the initializations it would go through unwrapped: the wrapper's first
    initialization (the new context's constructor) leaves it alone, and every later one (a task
    scheduler's ``tune`` initializes each task's context again; in apache-tvm 0.27 it does)
    initializes ``inner_context`` as well, with its own ``rand_state``: its space generator
    first, then ``inner``, the order of ``TuneContext``'s own initialization, so the shared space
    generator also ends up initialized with ``inner_context``, as unwrapped. Initializing ``inner``
    with the wrapper's context instead would fork its random state from another seed, so the
    same seed would search other candidates than the unwrapped strategy (the benchmark's
    baseline). The inner strategy points at ``inner_context`` without owning it; the wrapper
    holds it alive."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule import _ffi_api
    from tvm.s_tir.meta_schedule.search_strategy import PySearchStrategy

    @derived_object
    class TrimmerSearch(PySearchStrategy):
        def __init__(self, inner, config: TrimmerConfig, seed: int, stats: list, measured, inner_context,
                     inits: int = 0) -> None:
            self.measured = measured
            self.inner = inner
            self.inner_context = inner_context
            self.inits = inits  # initializations so far (the first is the wrapping context's constructor)
            self.config = config
            self.seed = seed
            self.rng = np.random.default_rng(seed)
            self.stats = stats
            self.context = None
            self.cost_model = None
            self.max_trials = 0
            self.batch = 0
            self.done = 0

        def _initialize_with_tune_context(self, context) -> None:
            self.context = context
            self.inits += 1
            if self.inner_context is None:
                self.inner._initialize_with_tune_context(context)
            elif self.inits > 1:
                _ffi_api.TuneContextInitialize(self.inner_context)

        def pre_tuning(self, max_trials, num_trials_per_iter, design_spaces, database=None, cost_model=None) -> None:
            self.max_trials, self.batch, self.done = int(max_trials), int(num_trials_per_iter), 0
            self.cost_model = cost_model
            k = self.config.oversample
            self.inner.pre_tuning(self.max_trials * k, self.batch * k, design_spaces, database, cost_model)

        def post_tuning(self) -> None:
            self.inner.post_tuning()

        def _model_ready(self) -> bool:
            return self.cost_model is not None and self.measured() >= self.config.filter_warmup

        def generate_measure_candidates(self):
            if self.done >= self.max_trials:
                return None
            want = min(self.batch, self.max_trials - self.done)
            pool = self.inner.generate_measure_candidates()
            if pool is None:
                return None
            pool = list(pool)
            if len(pool) <= want or self.config.oversample == 1 or not self._model_ready():
                self.stats.append({"pool": len(pool), "kept": min(want, len(pool)), "replaced": 0, "filtered": False})
                return pool[:want]
            scores = np.asarray(self.cost_model.predict(self.context, pool), dtype=float)
            keep = select_candidates(scores, want, self.config.exploration_floor, self.rng)
            keep_set = set(int(i) for i in keep)
            # how many of the strategy's own first `want` picks were replaced
            replaced = sum(1 for i in range(want) if i not in keep_set)
            self.stats.append({"pool": len(pool), "kept": len(keep), "replaced": replaced, "filtered": True})
            return [pool[i] for i in keep]

        def notify_runner_results(self, measure_candidates, results) -> None:
            self.done += len(results)
            self.inner.notify_runner_results(measure_candidates, results)

        def clone(self):
            # A clone belongs to a new context (TuneContext.clone initializes it): its inner
            # strategy is a fresh clone with no postprocessors or mutators until initialized, so
            # it is initialized with the wrapper's context like any wrapped strategy; mirroring
            # the original context here would re-initialize (and reset) the original's search.
            return TrimmerSearch(self.inner.clone(), self.config, self.seed, self.stats, self.measured, None)

    return TrimmerSearch(inner, config, seed, stats, measured, inner_context)


def wrap_task_context(ctx, config: TrimmerConfig, seed: int, stats: list, measured=lambda: 0):
    """A new ``TuneContext`` for task ``ctx`` whose search strategy is ``ctx``'s own wrapped in
    the candidate filter (:func:`make_trimmer_search`); mod, target, space generator, name and
    threads are ``ctx``'s. The inner strategy is initialized through ``ctx`` only (see
    ``inner_context`` of :func:`make_trimmer_search`), so with the same seed the wrapper's first
    batch, before the filter acts and for batches under 20, is the unwrapped strategy's (module
    doc). The wrapper holds ``ctx`` alive."""
    ms = _ms()
    search = make_trimmer_search(ctx.search_strategy, config, seed, stats, measured, inner_context=ctx)
    return ms.TuneContext(mod=ctx.mod, target=ctx.target, space_generator=ctx.space_generator,
                          search_strategy=search, task_name=ctx.task_name, rand_state=int(ctx.rand_state),
                          num_threads=int(ctx.num_threads))


def _make_classes():
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.task_scheduler import PyTaskScheduler

    @derived_object
    class _TrimmerLoop(PyTaskScheduler):
        """Runs MetaSchedule's C++ loop; decides in ``next_task_id`` (see module doc)."""

        def __init__(self, state: TrimmerState) -> None:
            super().__init__()
            self.state = state
            self.running: Optional[int] = None

        def next_task_id(self) -> int:
            sched = self._outer()
            tasks = sched.tasks_
            if self.running is not None:
                rec = tasks[self.running]
                if not rec.is_terminated and rec.measure_candidates is not None:
                    sched.join_running_task(self.running)  # the ledger callback records the round
                self.running = None
            st = self.state
            for t in range(len(tasks)):
                if st.is_preempted(t) and not tasks[t].is_terminated:
                    sched.terminate_task(t)
            if st.check_stop() is not None:
                return -1
            alive = [t for t in range(len(tasks)) if not tasks[t].is_terminated]
            t = st.choose_task(alive)
            self.running = t if t >= 0 else None
            return t

    @derived_object
    class TrimmerScheduler(PyTaskScheduler):
        """Trimmer's MetaSchedule task scheduler (see module doc).

        config: :class:`TrimmerConfig`; energy_meter: an EnergyMeter (None: a CPU meter from
        ``make_energy_meter("cpu")``); seed: tie-breaking and exploration randomness;
        report_path: where :meth:`report` is also written as JSON after tuning (optional).
        After ``tune``: ``self.state`` (TrimmerState) and :meth:`report` (dict).
        """

        def __init__(self, config: Optional[TrimmerConfig] = None, energy_meter: Any = None, seed: int = 0,
                     report_path: Optional[str] = None) -> None:
            super().__init__()
            self.config = config or TrimmerConfig()
            self.energy_meter = energy_meter
            self.seed = int(seed)
            self.report_path = report_path
            self.state: Optional[TrimmerState] = None
            self.ledger: Optional[EnergyLedger] = None
            self.filter_stats: list[list[dict]] = []
            self.task_names: list[str] = []
            self.wall_seconds = 0.0

        def tune(self, tasks, task_weights, max_trials_global, max_trials_per_task, num_trials_per_iter,
                 builder, runner, measure_callbacks, database, cost_model) -> None:
            _ms()  # imports MetaSchedule before the search starts
            if self.energy_meter is None:
                from .energy import make_energy_meter

                self.energy_meter = make_energy_meter("cpu")
            self.state = TrimmerState(len(tasks), [float(w) for w in task_weights], self.config,
                                      np.random.default_rng(self.seed))
            self.task_names = [str(t.task_name) for t in tasks]
            for i, ctx in enumerate(tasks):  # resume: judge rounds against the database's best
                self.state.seed_best(i, database_best_seconds(database, ctx.mod))
            wrapped = []
            self.filter_stats = []
            for i, ctx in enumerate(tasks):
                stats: list[dict] = []
                self.filter_stats.append(stats)
                wrapped.append(wrap_task_context(ctx, self.config, self.seed + i, stats,
                                                 lambda: self.state.n_candidates))
            self.ledger = EnergyLedger(self.energy_meter, self.state)
            callbacks = list(measure_callbacks) + [make_ledger_callback(self.ledger)]
            loop = _TrimmerLoop(self.state)
            t0 = time.monotonic()
            self.ledger.start()
            try:
                loop.tune(tasks=wrapped, task_weights=[float(w) for w in task_weights],
                          max_trials_global=int(max_trials_global), max_trials_per_task=int(max_trials_per_task),
                          num_trials_per_iter=int(num_trials_per_iter), builder=builder, runner=runner,
                          measure_callbacks=callbacks, database=database, cost_model=cost_model)
            finally:
                self.wall_seconds = time.monotonic() - t0
                if self.report_path:
                    Path(self.report_path).write_text(json.dumps(self.report(), indent=1))

        def next_task_id(self) -> int:
            # Required by PyTaskScheduler's constructor; never called, because ``tune`` hands the
            # loop to _TrimmerLoop.
            return -1

        def report(self) -> dict:
            """The state's report (see :meth:`TrimmerState.report`) plus task names, the candidate
            filter's per-batch statistics, the energy source label, the config and wall seconds."""
            if self.state is None:
                return {}
            rep = self.state.report()
            for t, entry in enumerate(rep["tasks"]):
                entry["name"] = self.task_names[t] if t < len(self.task_names) else str(t)
                fs = self.filter_stats[t] if t < len(self.filter_stats) else []
                entry["filter_replaced"] = sum(s["replaced"] for s in fs)
                entry["filter_batches"] = sum(1 for s in fs if s["filtered"])
            rep["energy_source"] = self.ledger.source if self.ledger else None
            rep["energy_measured"] = self.ledger.measured if self.ledger else None
            rep["config"] = {k: getattr(self.config, k) for k in self.config.__dataclass_fields__}
            rep["wall_seconds"] = self.wall_seconds
            rep["scheduler"] = "trimmer"
            return rep

    return _TrimmerLoop, TrimmerScheduler


_CLASSES: Optional[tuple] = None


def trimmer_scheduler_class():
    """The ``TrimmerScheduler`` class (built on first use so importing this module needs no TVM)."""
    global _CLASSES
    if _CLASSES is None:
        _CLASSES = _make_classes()
    return _CLASSES[1]


def config_from_options(options: dict) -> TrimmerConfig:
    """TrimmerConfig from ``setup.options``: a ``"trimmer"`` sub-dict (strict: unknown names raise
    ValueError) and/or top-level keys named like TrimmerConfig fields (other keys belong to other
    components and are ignored). The sub-dict wins where both name a field; every value given is
    checked either way. Raises ValueError on a bad value."""
    fields = set(TrimmerConfig.__dataclass_fields__)
    merged = {k: v for k, v in options.items() if k in fields}
    sub = options.get("trimmer", {})
    if not isinstance(sub, dict):  # 0, false, null or a list are not "no sub-options"
        raise ValueError(f"options['trimmer'] must be a dict, got {type(sub).__name__}")
    if merged and set(merged) & set(sub):
        # a top-level value the sub-dict overrides is still stored with the tuning: check it too
        TrimmerConfig.from_options(merged)
    merged.update(sub)
    return TrimmerConfig.from_options(merged)


def _factory(setup: TuningSetup):
    cls = trimmer_scheduler_class()
    report_path = str(Path(setup.work_dir) / "trimmer_report.json") if setup.work_dir else None
    return cls(config_from_options(setup.options), setup.energy_meter, setup.seed, report_path)


register_scheduler("trimmer", _factory)
