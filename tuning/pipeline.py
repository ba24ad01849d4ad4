"""The tuning engine's Django-free pipeline (the engine plug, :mod:`webapp.plug`).

``run(params, *, report, record, resume=None, hooks=None) -> dict`` imports the model, extracts its tuning
tasks, tunes them with MetaSchedule ``tune_tasks`` using the builder/runner and task scheduler
registered under the requested names (:mod:`tuning.backends.registry`), then compiles the model
with the database applied and measures tuned, untuned, PyTorch-eager and onnxruntime latency
with the same threads, interleaved (:func:`measure_result`). The Celery runner (:func:`tuning.experiment.tuning_experiment_run`), ``manage.py tune``
and the benchmarks all call it; none drives MetaSchedule's task loop itself.

Rows handed to ``record(table, rows)`` as soon as they exist:

``tasks``
    one row per selected task at the start of an attempt: ``task_index``, ``name``,
    ``workload_hash`` (unsigned 64-bit structural hash, as a string), ``weight``, ``flop_count``,
    ``trials_done`` (records already in the database).
``rounds``
    one row per measured round (MetaSchedule batch), from the first one: ``round_index``,
    ``task_index``, per-phase seconds/joules, cumulative ``wall_seconds``/``joules_total`` (over
    attempts), ``best_seconds`` (this round's best mean run time, s), ``candidates`` (``index``,
    ``trace_hash``, ``trace``, ``run_seconds``, ``mean_seconds``, ``error``).
``task_states``
    at the end of tuning: ``task_index``, ``state`` (``finished``/``preempted``), ``preempted``.
``trimmer``
    Trimmer's report (one row) with ``first_round_index``, for the trimmer scheduler only.

Resumable: the MetaSchedule JSON database in ``params["work_dir"]`` is the state; a run that
starts again counts the records already there per task and only spends the rest of the trial
budget; ``resume["rounds"]`` (rows recorded by an earlier attempt) continues round numbering,
wall time and energy.

Parameters: :data:`DEFAULTS` plus ``work_dir`` (required, a directory path), ``lock_dir``
(per-device ``flock`` files; default ``<work_dir>/../locks``), ``databases_dir`` (where
``seed_database`` names live), ``onnx_path`` (an already-resolved ONNX file; the caller resolves
upload ids and data paths). Raises :class:`tuning.backends.frontends.ModelImportError`,
:class:`tuning.backends.targets.TargetMismatch`, :class:`tuning.backends.registry.UnknownComponent`,
``ValueError`` (a model without tunable tasks, a missing ``work_dir``), and lets
:class:`webapp.plug.Cancelled` from ``report`` propagate after keeping what it measured.
"""
from __future__ import annotations

import fcntl
import json
import logging
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from webapp.plug import Record, Report

log = logging.getLogger(__name__)

#: Defaults of a tuning experiment's parameters (see :class:`tuning.api.TuningParameters`).
DEFAULTS: dict[str, Any] = {
    "target": "llvm", "trials": 64, "trials_per_round": 32, "max_trials_per_task": None,
    "min_trials_per_task": None, "runner": "local", "scheduler": "gradient", "cost_model": "xgb", "seed": 0,
    "num_threads": None, "repeats": 20, "max_tasks": None, "force_target": False,
    "seed_database": None, "measure_eager": True, "measure_onnxruntime": True, "input_shape": None, "options": {},
    "weight_prepack": None,
}


def weight_prepack_for(params: Mapping[str, Any], target: Mapping[str, Any]) -> bool:
    """Whether a tuning prepacks weights (:func:`tuning.backends.frontends.prepare_for_tuning`):
    ``params["weight_prepack"]`` when given, else on for CPU (``llvm``) targets, as TVM
    recommends for CPU (``static_shape_tuning_pipeline`` docstring), off otherwise. Every
    registered runner measures prepacked candidates (DOPpler keys a task by its arguments'
    dtypes and element counts, :meth:`tuning.backends.doppler.DopplerEngine.task_key`)."""
    given = params.get("weight_prepack")
    return bool(given) if given is not None else target.get("kind") == "llvm"


def default_num_threads() -> int:
    """The deployment's measurement thread count: ``TANDEM_TUNING_THREADS`` or all usable cores."""
    from .backends.targets import available_cores

    return int(os.environ.get("TANDEM_TUNING_THREADS") or available_cores())


@contextmanager
def device_lock(device: str, lock_dir: Path, report: Report | None = None) -> Iterator[None]:
    """One tuning per device at a time on this machine: an exclusive ``flock`` on
    ``<lock_dir>/<device>.lock``, waited for while reporting (so a cancel stops the wait)."""
    lock_dir.mkdir(parents=True, exist_ok=True)
    with open(lock_dir / f"{device}.lock", "w") as fh:
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if report is not None:
                    report(0, f"waiting for the {device} device (another tuning holds it)")
                time.sleep(2)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def load_model(params: Mapping[str, Any]):
    """Import the model named by ``params``: ``onnx_path`` (with optional ``onnx_shapes``) or
    ``model`` (with optional ``input_shape``), in a child process
    (:mod:`tuning.backends.import_child`: a crash in TVM's importer fails the import, this
    process lives on). Returns :class:`tuning.backends.frontends.ImportedModel`; raises
    :class:`tuning.backends.frontends.ModelImportError` (the child's message, the signal that
    killed it, or the timeout)."""
    from .backends.frontends import ModelImportError
    from .backends.import_child import import_onnx_isolated, import_torch_model_isolated

    if params.get("onnx_path"):
        return import_onnx_isolated(Path(params["onnx_path"]), shape_dict=params.get("onnx_shapes") or None)
    if not params.get("model"):
        raise ModelImportError("give a model name or an ONNX file")
    return import_torch_model_isolated(params["model"], params.get("input_shape"))


def extract_tasks(model: Any, target: Mapping[str, Any], weight_prepack: bool = False) -> list[Any]:
    """The model's MetaSchedule tuning tasks (``ExtractedTask`` list) under ``target`` (a TVM
    target dict), after the engine's tuning pipeline (:func:`tuning.backends.frontends.prepare_for_tuning`
    with ``weight_prepack``)."""
    import tvm

    from .backends.frontends import extract_tuning_tasks, prepare_for_tuning

    return extract_tuning_tasks(prepare_for_tuning(model.mod, weight_prepack), tvm.target.Target(dict(target)))


def select_tasks(extracted: list[Any], max_tasks: int | None) -> list[int]:
    """Indices of the tasks to tune: all, or the ``max_tasks`` with the largest weight x FLOP
    (``ExtractedTask.weight`` x ``estimate_tir_flops``; ties by order), kept in extraction order."""
    from tvm.s_tir.analysis import estimate_tir_flops

    idx = list(range(len(extracted)))
    if max_tasks is None or max_tasks >= len(idx):
        return idx
    cost = {i: extracted[i].weight * float(estimate_tir_flops(extracted[i].dispatched[0])) for i in idx}
    keep = sorted(idx, key=lambda i: (-cost[i], i))[:max_tasks]
    return sorted(keep)


def budget_plan(costs: list[float], trials: int, minimum: int) -> dict[str, Any]:
    """Spread ``trials`` over tasks of cost ``costs`` (task weight x FLOPs, one per task): each
    task gets ``minimum`` trials, the rest in proportion to its cost (largest remainders). When
    ``trials < len(costs) * minimum`` the plan is ``short``: only ``trials // minimum`` tasks (the
    costliest) can get their minimum, the next one the remainder, and ``warning`` says so with
    the numbers (the share of weighted FLOPs with no trial, as the summary's
    ``untuned_flop_share``). Returns
    ``{"per_task": [int, ...], "needed": int, "short": bool, "warning": str | None}``; ``ValueError``
    for ``minimum < 1`` or a negative cost."""
    if minimum < 1:
        raise ValueError(f"minimum trials per task must be >= 1, got {minimum}")
    if any(c < 0 for c in costs):
        raise ValueError("task costs must be >= 0")
    n = len(costs)
    needed = n * minimum
    if trials < needed:
        order = sorted(range(n), key=lambda i: (-costs[i], i))
        per = [0] * n
        for i in order[: trials // minimum]:
            per[i] = minimum
        if trials % minimum and trials // minimum < n:
            per[order[trials // minimum]] = trials % minimum
        covered = sum(1 for x in per if x >= minimum)
        partial = [x for x in per if 0 < x < minimum]
        total = sum(costs) or 1.0
        untuned = sum(costs[i] for i in range(n) if per[i] == 0) / total
        part = f" and {partial[0]} trials to 1 more" if partial else ""
        return {"per_task": per, "needed": needed, "short": True,
                "warning": f"a budget of {trials} trials gives {minimum} trials each to {covered} of {n} tasks{part}; "
                           f"{needed} trials are needed to tune every task ({untuned:.0%} of the model's weighted "
                           f"FLOPs would get no trial)"}
    extra = trials - needed
    total = sum(costs) or 1.0
    exact = [extra * c / total for c in costs]
    per = [minimum + int(x) for x in exact]
    left = trials - sum(per)
    for i in sorted(range(n), key=lambda i: (-(exact[i] - int(exact[i])), i))[:left]:
        per[i] += 1
    return {"per_task": per, "needed": needed, "short": False, "warning": None}


@dataclass
class TuningStart:
    """What :attr:`TuningHooks.on_start` and :attr:`TuningHooks.on_end` see of one tuning: the
    energy ``meter`` (:class:`tuning.backends.energy.EnergyMeter`, started when the components
    were made), the registry's ``builder``, ``runner`` and task ``scheduler`` (unwrapped), the
    MetaSchedule tune ``contexts``, their ``task_weights`` (calls per inference) and
    ``task_indices`` (positions in the model's extracted tasks), and the ``setup``
    (:class:`tuning.backends.registry.TuningSetup`)."""

    meter: Any
    builder: Any
    runner: Any
    scheduler: Any
    contexts: list[Any]
    task_weights: list[float]
    task_indices: list[int]
    setup: Any


@dataclass
class TuningHooks:
    """A caller's view into one :func:`run`, for the benchmarks (not an experiment parameter:
    nothing here is stored or reachable from the API).

    ``on_start(start) -> callbacks``: called once the components and tune contexts exist, right
    before MetaSchedule's ``tune_tasks``; the MetaSchedule measure callbacks it returns run after
    the product's own (an observing energy ledger, say). ``on_end(start)``: called when
    ``tune_tasks`` returned normally, before the runner's workers are released (to read a
    runner's own summary). Neither is called when nothing is left to tune.
    ``measure_model=False`` skips the final whole-model builds and the peer measurement: the
    summary then has no ``tuned``/``untuned``/``eager``/``onnxruntime`` entries (a benchmark
    that times the kernels itself saves minutes per arm)."""

    on_start: Callable[[TuningStart], Sequence[Any]] | None = None
    on_end: Callable[[TuningStart], None] | None = None
    measure_model: bool = True


def run(params: Mapping[str, Any], *, report: Report, record: Record,
        resume: Mapping[str, list[dict[str, Any]]] | None = None, hooks: TuningHooks | None = None) -> dict[str, Any]:
    """Run (or resume) one tuning; returns the JSON-serialisable summary. See the module docstring;
    ``hooks`` (:class:`TuningHooks`) let a benchmark observe the tuning without driving it."""
    from .backends.targets import device_of, make_target

    params = {**DEFAULTS, **dict(params)}
    if not params.get("work_dir"):
        raise ValueError("tuning pipeline: params['work_dir'] (the database directory) is required")
    work_dir = Path(params["work_dir"])
    num_threads = int(params["num_threads"] or default_num_threads())
    target = make_target(params["target"], num_threads)
    lock_dir = Path(params.get("lock_dir") or work_dir.parent / "locks")
    with device_lock(device_of(target), lock_dir, report):
        return _run(params, report, record, dict(resume or {}), target, num_threads, work_dir, hooks or TuningHooks())


def _run(params: dict[str, Any], report: Report, record: Record, resume: dict[str, list[dict[str, Any]]],
         target: dict[str, Any], num_threads: int, work_dir: Path, hooks: TuningHooks) -> dict[str, Any]:
    import numpy as np
    import tvm_ffi
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.analysis import estimate_tir_flops

    from .backends import database as dbmod
    from .backends.callbacks import RoundAccountingCallback, RoundClock, TimedBuilder, TimedRunner
    from .backends.components import set_num_threads
    from .backends.energy import make_energy_meter
    from .backends.frontends import prepare_for_tuning
    from .backends.registry import TuningSetup, make_runner, make_scheduler, release_runner
    from .backends.targets import TargetMismatch, check_same_target, device_of

    set_num_threads(num_threads)  # this process's own TVM runtime (compile-time checks) too
    from .backends.intrinsics import import_tensor_intrinsics, intrinsic_modules

    import_tensor_intrinsics(intrinsic_modules(target))  # not every backend's (~22 s here)
    report(1, "importing the model")
    model = load_model(params)  # before the work dir exists: a failed import leaves nothing behind
    work_dir.mkdir(parents=True, exist_ok=True)
    prepack = weight_prepack_for(params, target)
    extracted = extract_tasks(model, target, prepack)
    if not extracted:
        raise ValueError(f"model {model.name} has no tunable tasks")
    selected = select_tasks(extracted, params["max_tasks"])

    # --- the database: seed, target check, meta ------------------------------------------
    force = bool(params["force_target"])
    if params.get("seed_database") and not (work_dir / dbmod.RECORD_FILE).exists():
        if not params.get("databases_dir"):
            raise ValueError("seed_database given but params['databases_dir'] is not set")
        dbmod.check_database_name(str(params["seed_database"]), Path(params["databases_dir"]))  # never a path
        src = Path(params["databases_dir"]) / str(params["seed_database"])
        for tgt in dbmod.record_targets(src):
            check_same_target(tgt, target, force=force, what=f"seed database {params['seed_database']!r}")
        dbmod.export_database(src, work_dir)
    meta = dbmod.read_meta(work_dir)
    if meta is not None:
        check_same_target(meta["target"], target, force=force, what=f"the database in {work_dir}")
        if int(meta.get("num_threads", num_threads)) != num_threads and not force:
            raise TargetMismatch(f"the database in {work_dir} was measured with {meta['num_threads']} threads, "
                                 f"this run uses {num_threads}; pass force_target to reuse it")
    for tgt in dbmod.record_targets(work_dir):
        check_same_target(tgt, target, force=force, what=f"the database in {work_dir}")
    dbmod.write_meta(work_dir, target=target, num_threads=num_threads)
    database = dbmod.open_database(work_dir)

    # --- tasks and what is already done ----------------------------------------------------
    done_by_hash = dbmod.count_records_by_workload(database)
    trials = int(params["trials"])
    per_task_cap = int(params["max_trials_per_task"]) if params["max_trials_per_task"] else None
    task_info: dict[int, dict[str, Any]] = {}
    done_total = 0
    for i in selected:
        mod = extracted[i].dispatched[0]
        h = int(tvm_ffi.structural_hash(mod))
        done = done_by_hash.get(h, 0)
        done_total += done
        task_info[i] = {"task_index": i, "name": extracted[i].task_name, "workload_hash": str(h & 0xFFFFFFFFFFFFFFFF),
                        "weight": float(extracted[i].weight), "flop_count": float(estimate_tir_flops(mod)),
                        "trials_done": done}
    tasks_now = [task_info[i] for i in selected]
    if tasks_now != list(resume.get("tasks") or [])[-len(tasks_now):]:  # a rerun that measured nothing: recorded already
        record("tasks", tasks_now)
    # the budget over every task: weight x FLOPs, at least one round each (issue 20)
    minimum = int(params.get("min_trials_per_task") or params["trials_per_round"])
    plan = budget_plan([task_info[i]["weight"] * task_info[i]["flop_count"] for i in selected], trials, minimum)
    if plan["warning"]:
        log.warning("tuning %s: %s", model.name, plan["warning"])
        report(2, plan["warning"][:200])
    remaining = max(0, trials - done_total)
    to_tune = [i for i in selected if per_task_cap is None or task_info[i]["trials_done"] < per_task_cap]
    resumed_from = done_total
    log.info("tuning %s: %d tasks, %d trials already in the database, %d to go", model.name, len(to_tune), done_total, remaining)

    # --- components --------------------------------------------------------------------------
    meter = make_energy_meter(device_of(target))
    setup = TuningSetup(target=target, num_threads=num_threads, work_dir=work_dir, seed=int(params["seed"]),
                        max_trials_global=trials, num_trials_per_iter=int(params["trials_per_round"]),
                        energy_meter=meter, options=dict(params.get("options") or {}))
    earlier = list(resume.get("rounds") or [])
    first_round = (max(int(r["round_index"]) for r in earlier) + 1) if earlier else 0
    wall_offset = float(earlier[-1]["wall_seconds"]) if earlier else 0.0
    joule_offset = float(earlier[-1]["joules_total"]) if earlier else 0.0
    rounds: list[dict[str, Any]] = list(earlier)
    # trials an interrupted attempt committed to the database but did not live to record (its
    # worker or the Django database was lost between MetaSchedule's commit and the callback):
    # recorded now, so the mirror holds every trial the database holds
    for row in _unrecorded_rounds(dbmod.records_in_commit_order(work_dir), task_info, selected, resume, earlier,
                                  first_round, wall_offset, joule_offset):
        record("rounds", [row])
        rounds.append(row)
        first_round += 1
    stopped: list[BaseException] = []
    trials_seen = [done_total]
    index_of = {pos: i for pos, i in enumerate(to_tune)}
    last_pct = [1.0]

    def progress(pct: float, msg: str) -> None:
        last_pct[0] = pct
        report(pct, msg)

    def on_round(summary) -> None:
        # TVM's FFI re-raises a callback's exception as a RuntimeError with its message only, so
        # what stops the tuning here (Cancelled, a lost lease, a lost database connection) is kept
        # and raised as itself once TVM has unwound its loop
        try:
            row = _round_row(summary, index_of[summary.task_id], wall_offset, joule_offset)
            record("rounds", [row])  # committed before the next batch is built
            rounds.append(row)
            trials_seen[0] += len(summary.candidates)
            progress(5 + 80 * min(1.0, trials_seen[0] / max(1, trials)),
                     f"{trials_seen[0]}/{trials} trials, round {summary.round_index}")
        except BaseException as err:
            stopped.append(err)
            raise

    tuning_seconds = tuning_joules = 0.0
    scheduler_rep = None
    if remaining > 0 and to_tune:
        builder, runner = make_runner(params["runner"], setup)
        scheduler = make_scheduler(params["scheduler"], setup)
        clock = RoundClock(meter)
        callback = RoundAccountingCallback(clock, on_round, first_round_index=first_round,
                                           round_details=getattr(runner, "round_details", None))
        options = params.get("options") or {}
        contexts, weights = tune_contexts([extracted[i] for i in to_tune], work_dir,
                                          int(options.get("search_threads") or num_threads),
                                          int(params["seed"]), options.get("search"))
        start = TuningStart(meter=meter, builder=builder, runner=runner, scheduler=scheduler, contexts=contexts,
                            task_weights=[float(w) for w in weights], task_indices=list(to_tune), setup=setup)
        progress(5 + 80 * min(1.0, done_total / max(1, trials)),
                 f"tuning {len(to_tune)} tasks, {remaining} trials" + (f" (resumed: {done_total} done)" if done_total else ""))
        try:
            extra_callbacks = list(hooks.on_start(start) or []) if hooks.on_start else []
            # XGBoost's model scores candidates with numpy's global generator until its warm-up
            # ends: seeded here, two tunings of one seed start alike (bench/tuning_energy.py)
            np.random.seed(int(params["seed"]) % (2 ** 32))
            ms.tune_tasks(
                tasks=contexts, task_weights=weights, work_dir=str(work_dir), max_trials_global=remaining,
                max_trials_per_task=per_task_cap, num_trials_per_iter=int(params["trials_per_round"]),
                builder=TimedBuilder(builder, clock), runner=TimedRunner(runner, clock), database=database,
                cost_model=params["cost_model"],
                measure_callbacks=[*ms.measure_callback.MeasureCallback.create("default"), callback, *extra_callbacks],
                task_scheduler=scheduler,
            )
            if hooks.on_end:
                hooks.on_end(start)
        except Exception:
            if stopped:
                raise stopped[0] from None
            raise
        finally:
            release_runner(runner)  # its worker processes end with the tuning, cancelled or not
        end = meter.read()
        tuning_seconds, tuning_joules = end.seconds, end.joules
        scheduler_rep = scheduler_report(scheduler)  # Trimmer: preemptions and energy attribution
        if scheduler_rep is not None:
            record("trimmer", [{**scheduler_rep, "first_round_index": first_round,
                                "task_indices": list(to_tune)}])
        states = []
        for pos, i in enumerate(to_tune):
            entry = scheduler_rep["tasks"][pos] if scheduler_rep is not None and len(scheduler_rep["tasks"]) > pos else None
            pre = bool(entry is not None and entry.get("preempted_at_round") is not None)
            states.append({"task_index": i, "state": "preempted" if pre else "finished", "preempted": pre})
        record("task_states", states)
    else:
        record("task_states", [{"task_index": i, "state": "finished", "preempted": False} for i in selected])

    # --- result ------------------------------------------------------------------------------------
    if hooks.measure_model:
        progress(88, "compiling tuned and untuned builds")
        result = measure_result(model, prepare_for_tuning(model.mod, prepack), target, num_threads, database, work_dir,
                                params, progress, weight_prepack=prepack)
    else:
        result = {}
    split = {k: sum(float(r[k]) for r in rounds) for k in
             ("search_seconds", "build_seconds", "measure_seconds", "search_joules", "build_joules", "measure_joules")}
    last = rounds[-1] if rounds else None
    summary = {
        "model": model.name, "source": model.source, "target": target, "num_threads": num_threads,
        "host_cpu": target.get("mcpu") or (target.get("host") or {}).get("mcpu"),
        "tasks": len(selected), "tasks_in_model": len(extracted),
        "trials_budget": trials, "trials_in_database": sum(dbmod.count_records_by_workload(database).values()),
        "trials_mirrored": sum(len(r["candidates"]) for r in rounds), "resumed_from_trials": resumed_from,
        "trials_this_attempt": trials_seen[0] - done_total,
        "rounds": len(rounds), "runner": params["runner"], "scheduler": params["scheduler"],
        "weight_prepack": prepack,
        "tuning_wall_seconds": float(last["wall_seconds"]) if last else 0.0,
        "tuning_joules": float(last["joules_total"]) if last else 0.0,
        "this_attempt_seconds": tuning_seconds, "this_attempt_joules": tuning_joules,
        "energy_source": meter.source, "energy_measured": meter.measured, "energy_sources": meter.sources,
        **split, **result, "work_dir": str(work_dir),
    }
    summary["budget"] = _coverage(database, extracted, selected, task_info, plan, minimum)
    if scheduler_rep is not None:
        summary["trimmer"] = {k: v for k, v in scheduler_rep.items() if k != "rounds"}
    from webapp.plug import Cancelled

    try:  # the last message a finished tuning shows (not "measuring PyTorch eager")
        report(99, f"finished: tuned {result['tuned']['median_s'] * 1e3:.2f} ms, "
                   f"untuned {result['untuned']['median_s'] * 1e3:.2f} ms" if result else
                   f"finished: {summary['trials_this_attempt']} trials (the model was not measured)")
    except Cancelled:  # a cancel after everything was measured: keep the result
        pass
    return summary


def _coverage(database: Any, extracted: list[Any], selected: list[int], task_info: dict[int, dict[str, Any]],
              plan: dict[str, Any], minimum: int) -> dict[str, Any]:
    """Tasks tuned (a valid record in the database) and untuned, and the untuned tasks' share of
    the model's weighted FLOPs (an estimate of their share of its untuned time: FLOPs, not
    measured per-task time)."""
    from .backends.trimmer import database_best_seconds

    tuned, untuned = [], []
    for i in selected:
        mod = extracted[i].dispatched[0]
        has = database.has_workload(mod) and database_best_seconds(database, mod) is not None
        (tuned if has else untuned).append(task_info[i]["name"])
    cost = {task_info[i]["name"]: task_info[i]["weight"] * task_info[i]["flop_count"] for i in selected}
    total = sum(cost.values()) or 1.0
    return {"minimum_trials_per_task": minimum, "trials_needed_for_every_task": plan["needed"],
            "short": plan["short"], "warning": plan["warning"], "planned_trials_per_task": plan["per_task"],
            "tasks_tuned": tuned, "tasks_untuned": untuned,
            "untuned_flop_share": sum(cost[n] for n in untuned) / total,
            "untuned_flop_share_note": "weighted-FLOP share of the untuned tasks (estimate, not measured time)"}


def tune_contexts(tasks: list[Any], work_dir: Path, num_threads: int, seed: int,
                  search: Mapping[str, Any] | None = None) -> tuple[list[Any], list[float]]:
    """MetaSchedule tune contexts and task weights for ``tasks`` (``ExtractedTask``s), as
    ``ms.relax_integration.extracted_tasks_to_tune_contexts``; with ``search`` (option
    ``"search"``, :func:`tuning.backends.options.search_settings`) the tasks' evolutionary
    search uses those settings (TVM clones the strategy into each task's context, so no state
    is shared). TVM's logger set-up runs next to handlers it did not make
    (:func:`tuning.backends.tvmlog.foreign_handlers_detached`), its console at
    :func:`tuning.backends.tvmlog.console_level`. Raises ``ValueError`` on bad settings."""
    from tvm.s_tir import meta_schedule as ms

    from .backends.options import search_settings
    from .backends.tvmlog import console_level, foreign_handlers_detached

    strategy: Any = "evolutionary"
    if search:
        strategy = ms.search_strategy.EvolutionarySearch(**search_settings(dict(search)))
    with foreign_handlers_detached(console=console_level()):
        return ms.relax_integration.extracted_tasks_to_tune_contexts(tasks, str(work_dir), strategy=strategy,
                                                                      num_threads=num_threads, seed=seed)


def scheduler_report(scheduler: Any) -> dict | None:
    """The scheduler's Trimmer report (dict) or None for schedulers without one (built-ins)."""
    rep_fn = getattr(scheduler, "report", None)
    rep = rep_fn() if callable(rep_fn) else None
    return rep if isinstance(rep, dict) and rep.get("scheduler") == "trimmer" else None


def _unrecorded_rounds(by_hash: Mapping[str, list[tuple[Any, list[float] | None]]], task_info: Mapping[int, dict[str, Any]],
                       selected: Sequence[int], resume: Mapping[str, list[dict[str, Any]]], earlier: list[dict[str, Any]],
                       first_round: int, wall_offset: float, joule_offset: float) -> list[dict[str, Any]]:
    """Rows (table ``rounds``, one per task) of the trials in the database that no recorded round
    holds: per task, its records in commit order (``by_hash``,
    :func:`tuning.backends.database.records_in_commit_order`) after those of the seed database
    (the task's ``trials_done`` in the first recorded ``tasks`` row) and those of the recorded
    rounds. Phase times and energy are unknown (0); ``details["recovered"]`` says so. A first
    attempt (no ``tasks`` row recorded yet): ``[]``."""
    import hashlib
    from collections import Counter

    seeded: dict[int, int] = {}
    for r in resume.get("tasks") or []:
        seeded.setdefault(int(r["task_index"]), int(r["trials_done"]))
    recorded = Counter(int(r["task_index"]) for r in earlier for _ in r["candidates"])
    rows: list[dict[str, Any]] = []
    for i in selected:
        if i not in seeded:
            continue
        missing = list(by_hash.get(task_info[i]["workload_hash"], []))[seeded[i] + recorded[i]:]
        if not missing:
            continue
        cands = []
        for k, (trace, secs) in enumerate(missing):
            ok = bool(secs) and all(x < 1e9 for x in secs)  # MetaSchedule stores a failed run as 1e10 s
            cands.append({"index": k, "trace_hash": hashlib.sha1(json.dumps(trace, sort_keys=True).encode()).hexdigest(),
                          "trace": trace, "run_seconds": list(secs) if ok else [],
                          "mean_seconds": sum(secs) / len(secs) if ok else None,
                          "error": "" if ok else "failed (the database holds no run time)"})
        means = [c["mean_seconds"] for c in cands if c["mean_seconds"] is not None]
        rows.append({
            "round_index": first_round + len(rows), "task_index": i, "num_candidates": len(cands),
            "num_errors": sum(1 for c in cands if c["error"]), "search_seconds": 0.0, "build_seconds": 0.0,
            "measure_seconds": 0.0, "search_joules": 0.0, "build_joules": 0.0, "measure_joules": 0.0,
            "energy_source": earlier[-1]["energy_source"] if earlier else "", "energy_measured": False,
            "wall_seconds": wall_offset, "joules_total": joule_offset, "best_seconds": min(means) if means else None,
            "details": {"recovered": "measured by an interrupted attempt, read back from the database: phase times and energy unknown"},
            "candidates": cands})
    return rows


def _round_row(summary: Any, task_index: int, wall_offset: float, joule_offset: float) -> dict[str, Any]:
    """A :class:`tuning.backends.callbacks.RoundSummary` as a JSON row (table ``rounds``)."""
    return {
        "round_index": int(summary.round_index), "task_index": int(task_index),
        "num_candidates": len(summary.candidates), "num_errors": sum(1 for c in summary.candidates if c.error),
        "search_seconds": summary.search_seconds, "build_seconds": summary.build_seconds,
        "measure_seconds": summary.measure_seconds, "search_joules": summary.search_joules,
        "build_joules": summary.build_joules, "measure_joules": summary.measure_joules,
        "energy_source": summary.energy_source, "energy_measured": bool(summary.energy_measured),
        "wall_seconds": wall_offset + summary.wall_seconds, "joules_total": joule_offset + summary.joules_total,
        "best_seconds": summary.best_seconds, "details": dict(summary.details or {}),
        "candidates": [{"index": c.index, "trace_hash": c.trace_hash, "trace": c.trace, "run_seconds": list(c.run_seconds),
                        "mean_seconds": c.mean_seconds, "error": c.error[:4000]} for c in summary.candidates],
    }


def onnx_for_peer(model: Any, params: Mapping[str, Any], work_dir: Path) -> Path:
    """The ONNX file the onnxruntime peer runs: the user's file for an ONNX import
    (``params["onnx_path"]``), else the PyTorch model exported into ``<work_dir>/model.onnx`` by
    :func:`tuning.backends.frontends.export_torch_onnx` (once per measurement, overwriting an
    earlier attempt's). Raises :class:`tuning.backends.frontends.OnnxExportError` when the export
    fails or there is neither a file nor a PyTorch model."""
    from .backends.frontends import OnnxExportError, export_torch_onnx

    if params.get("onnx_path"):
        return Path(params["onnx_path"])
    if model.torch_module is None:
        raise OnnxExportError(f"{model.name}: no ONNX file and no PyTorch model to export")
    return export_torch_onnx(model.torch_module, model.input_shapes, model.input_dtypes, work_dir / "model.onnx",
                             name=model.name)


#: Rounds of the interleaved peer measurement (each round times every peer once).
PEER_ROUNDS = 3


def measure_result(model: Any, prepared: Any, target: dict[str, Any], num_threads: int, database: Any, work_dir: Path,
                   params: Mapping[str, Any], report: Callable[[float, str], None],
                   weight_prepack: bool = False) -> dict[str, Any]:
    """Compile tuned (database applied) and untuned (empty database, same pipeline) builds of
    ``prepared`` (the tuning form, :func:`tuning.backends.frontends.prepare_for_tuning` with
    ``weight_prepack``; built by :func:`tuning.backends.frontends.build_with_database`), export
    them into ``work_dir``, and measure them with their peers, PyTorch eager and onnxruntime
    (CPU execution provider), interleaved: :func:`tuning.backends.latency.measure_interleaved`,
    one subprocess per peer with the same threads, :data:`PEER_ROUNDS` rounds of
    ``ceil(repeats / rounds)`` timings, median over all. On an LLVM target naming its CPU
    (``mcpu``) the untuned build is also measured without ``mcpu`` (``untuned_no_mcpu``):
    TVM's default kernels can be slower with the CPU named, so both baselines are reported.

    Peers are measured on CPU targets when ``params["measure_eager"]``: eager when there is a
    PyTorch model, onnxruntime also when ``params["measure_onnxruntime"]`` (on the user's ONNX
    file or the exported model, :func:`onnx_for_peer`). Returns ``{"tuned", "untuned",
    "untuned_no_mcpu", "eager", "onnxruntime", "speedup_vs_untuned", "speedup_vs_onnxruntime"}``:
    latency dicts in seconds (:func:`tuning.backends.latency.summarise` plus ``threads``);
    ``untuned_no_mcpu``/``eager``/``onnxruntime`` ``None`` when not measured, ``onnxruntime``
    ``{"error": "..."}`` when its export or measurement failed (the tuning still succeeds); the
    speedups are untuned median / tuned median and onnxruntime median / tuned median (``None``
    without an onnxruntime median). Raises ``RuntimeError`` when a TVM build or PyTorch eager
    cannot be measured."""
    from tvm.s_tir import meta_schedule as ms

    from .backends.frontends import build_with_database
    from .backends.latency import measure_interleaved

    libs = {}
    builds = [("tuned", database, target), ("untuned", ms.database.MemoryDatabase(), target)]
    if target.get("kind") == "llvm" and target.get("mcpu"):
        builds.append(("untuned_no_mcpu", ms.database.MemoryDatabase(),
                       {k: v for k, v in target.items() if k != "mcpu"}))
    for label, db, tgt in builds:
        ex = build_with_database(prepared, dict(tgt), db, weight_prepack)
        path = work_dir / f"{label}.so"
        ex.export_library(str(path))
        libs[label] = path
    device = "cuda" if target.get("kind") == "cuda" else "cpu"
    peers: dict[str, tuple[str, str]] = {label: ("tvm", str(path)) for label, path in libs.items()}
    report(90, "preparing the measurements (onnxruntime: the model in ONNX)")
    more, fixed = peer_plan(model, params, work_dir, device)
    peers.update(more)
    names = {"untuned": "the untuned build", "untuned_no_mcpu": "the untuned build without mcpu",
             "tuned": "the tuned build", "eager": "PyTorch eager",
             "onnxruntime": "onnxruntime"}

    def progress(msg: str) -> None:  # "starting tuned" -> "starting the tuned build"
        verb, _, label = msg.partition(" ")
        report(91 if verb == "starting" else 94, f"measuring: {verb} {names.get(label, label)}")

    measured = measure_interleaved(peers, model.input_shapes, model.input_dtypes, threads=num_threads,
                                   repeats=int(params["repeats"]), rounds=PEER_ROUNDS, device=device, report=progress)
    out = result_of_peers({**fixed, **measured})
    if out["onnxruntime"] is not None and "error" in out["onnxruntime"]:
        log.warning("onnxruntime peer of %s not measured: %s", model.name, out["onnxruntime"]["error"][:300])
    return out


def peer_plan(model: Any, params: Mapping[str, Any], work_dir: Path, device: str) -> tuple[dict[str, tuple[str, str]], dict[str, Any]]:
    """The peers :func:`measure_result` measures beside the TVM builds, and the entries settled
    without measuring. Returns ``(peers, fixed)``: ``peers`` label -> ``(kind, what)`` for
    :func:`tuning.backends.latency.measure_interleaved` (``"eager"``: ``("torch", model name)``
    when there is a PyTorch model; ``"onnxruntime"``: ``("onnxruntime", ONNX path)``, exporting
    the model now, :func:`onnx_for_peer`), only on ``device == "cpu"`` with
    ``params["measure_eager"]`` (onnxruntime also needs ``params["measure_onnxruntime"]``, default
    true); ``fixed``: ``{"eager": None, "onnxruntime": None}`` for peers not measured, and
    ``{"onnxruntime": {"error": "..."}}`` when the export failed."""
    from .backends.frontends import OnnxExportError

    peers: dict[str, tuple[str, str]] = {}
    fixed: dict[str, Any] = {"eager": None, "onnxruntime": None}
    if not params.get("measure_eager", True) or device != "cpu":
        return peers, fixed
    if model.torch_module is not None:
        peers["eager"] = ("torch", model.name)
    if params.get("measure_onnxruntime", True):
        try:
            peers["onnxruntime"] = ("onnxruntime", str(onnx_for_peer(model, params, work_dir)))
        except OnnxExportError as err:
            fixed["onnxruntime"] = {"error": str(err)}
    return peers, {k: v for k, v in fixed.items() if k not in peers}


def result_of_peers(entries: Mapping[str, Any]) -> dict[str, Any]:
    """The latency part of a tuning result from the peers' entries (label -> latency dict,
    ``{"error": ...}`` or ``None``; ``tuned`` and ``untuned`` required): ``{"tuned", "untuned",
    "untuned_no_mcpu", "eager", "onnxruntime", "speedup_vs_untuned", "speedup_vs_onnxruntime"}`` with
    ``speedup_vs_untuned`` = untuned median / tuned median and ``speedup_vs_onnxruntime`` =
    onnxruntime median / tuned median (``None`` when onnxruntime has no median). Raises
    ``RuntimeError`` (the peer's error) when a TVM build or PyTorch eager failed: those fail the
    tuning as before the peers were interleaved; a failed onnxruntime stays an error entry."""
    for label in ("untuned", "untuned_no_mcpu", "tuned", "eager"):
        entry = entries.get(label)
        if entry is not None and "error" in entry:
            raise RuntimeError(entry["error"])
    out = {k: entries.get(k) for k in ("tuned", "untuned", "untuned_no_mcpu", "eager", "onnxruntime")}
    out["speedup_vs_untuned"] = out["untuned"]["median_s"] / out["tuned"]["median_s"]
    ort = (out["onnxruntime"] or {}).get("median_s")
    out["speedup_vs_onnxruntime"] = ort / out["tuned"]["median_s"] if ort else None
    return out
