"""Services of the tuning engine (functions that write).

:func:`tuning_experiment_run` is the runner of experiment kind ``"tuning"``: import the model,
extract its tuning tasks, tune them with MetaSchedule ``tune_tasks`` using the builder/runner
and task scheduler registered under the requested names (:mod:`tuning.backends.registry`),
mirror every round and tuning record into the Django models, then compile the model with the
database applied and measure tuned, untuned and PyTorch-eager latency with the same threads.

Resumable: the MetaSchedule JSON database in the experiment's work directory
(``settings.VAR_DIR / "tuning" / "exp-<id>"``) is the state. A run that starts again (worker
lost, task redelivered) counts the records already there per task and only spends the rest of
the trial budget; the search strategy warm-starts from those records.
"""
from __future__ import annotations

import fcntl
import json
import logging
import math
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from django.conf import settings
from django.db import transaction
from django.db.models import Max

from webapp.experiments import ExperimentCancelled, ProgressReporter
from webapp.models import Experiment

from .models import TuningRecord, TuningResult, TuningRound, TuningTask

log = logging.getLogger(__name__)

#: Defaults of a tuning experiment's parameters (see :class:`tuning.api.TuningParameters`).
DEFAULTS: dict[str, Any] = {
    "target": "llvm", "trials": 64, "trials_per_round": 16, "max_trials_per_task": None,
    "runner": "local", "scheduler": "gradient", "cost_model": "xgb", "seed": 0,
    "num_threads": None, "repeats": 20, "max_tasks": None, "force_target": False,
    "seed_database": None, "measure_eager": True, "input_shape": None, "options": {},
}


def tuning_root() -> Path:
    """Root of the tuning engine's runtime files (work dirs, imported databases, uploads, locks)."""
    p = Path(settings.VAR_DIR) / "tuning"
    p.mkdir(parents=True, exist_ok=True)
    return p


def experiment_work_dir(experiment_id: int) -> Path:
    """Work directory of a tuning experiment (JSON database, logs, compiled libraries)."""
    return tuning_root() / f"exp-{experiment_id}"


def queue_for_parameters(parameters: dict[str, Any]) -> str:
    """Celery queue of a tuning: ``gpu`` for a CUDA target, ``cpu`` otherwise."""
    return "gpu" if parameters.get("target") == "cuda" else "cpu"


def default_num_threads() -> int:
    """The deployment's measurement thread count: ``TANDEM_TUNING_THREADS`` or all usable cores."""
    from .backends.targets import available_cores

    return int(os.environ.get("TANDEM_TUNING_THREADS") or available_cores())


@contextmanager
def device_lock(device: str, reporter: ProgressReporter | None = None) -> Iterator[None]:
    """One tuning per device at a time on this machine: an exclusive ``flock`` on
    ``VAR_DIR/tuning/locks/<device>.lock``, waited for while reporting (so a cancel stops the wait)."""
    lock_dir = tuning_root() / "locks"
    lock_dir.mkdir(exist_ok=True)
    with open(lock_dir / f"{device}.lock", "w") as fh:
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if reporter is not None:
                    reporter.report(reporter.experiment.progress, f"waiting for the {device} device (another tuning holds it)")
                time.sleep(2)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _load_model(params: dict[str, Any]):
    from .backends.frontends import ModelImportError, import_onnx, import_torch_model

    if params.get("onnx"):
        path = resolve_onnx(params["onnx"])
        shapes = params.get("onnx_shapes") or None
        return import_onnx(path, shape_dict=shapes)
    if not params.get("model"):
        raise ModelImportError("give a model name or an ONNX file")
    return import_torch_model(params["model"], params.get("input_shape"))


def resolve_onnx(ref: str) -> Path:
    """An ONNX reference: an upload id (``uploads/<sha256>.onnx`` under the tuning root) or a
    path relative to ``settings.DATA_DIR``. Raises ``FileNotFoundError``."""
    root = tuning_root() / "uploads"
    candidates = [root / f"{ref}.onnx", Path(settings.DATA_DIR) / ref]
    for c in candidates:
        c = c.resolve()
        if c.is_file() and (c.is_relative_to(Path(settings.DATA_DIR).resolve()) or c.is_relative_to(root.resolve())):
            return c
    raise FileNotFoundError(f"no ONNX model {ref!r} (an upload id or a path under data/)")


def _select_tasks(extracted: list[Any], max_tasks: int | None) -> list[int]:
    """Indices of the tasks to tune: all, or the ``max_tasks`` with the largest weight x FLOP
    (ties by order), kept in extraction order."""
    from tvm.s_tir.analysis import estimate_tir_flops

    idx = list(range(len(extracted)))
    if max_tasks is None or max_tasks >= len(idx):
        return idx
    cost = {i: extracted[i].weight * float(estimate_tir_flops(extracted[i].dispatched[0])) for i in idx}
    keep = sorted(idx, key=lambda i: (-cost[i], i))[:max_tasks]
    return sorted(keep)


def tuning_experiment_run(experiment: Experiment, reporter: ProgressReporter) -> dict[str, Any]:
    """Run (or resume) the tuning experiment; returns the result summary stored in
    ``experiment.result``. See the module docstring. Raises
    :class:`tuning.backends.frontends.ModelImportError`,
    :class:`tuning.backends.targets.TargetMismatch`,
    :class:`tuning.backends.registry.UnknownComponent`, ``ExperimentCancelled``.
    """
    params = {**DEFAULTS, **(experiment.parameters or {})}
    from .backends.targets import device_of, make_target

    num_threads = int(params["num_threads"] or default_num_threads())
    target = make_target(params["target"], num_threads)
    with device_lock(device_of(target), reporter):
        return _run(experiment, reporter, params, target, num_threads)


def _run(experiment: Experiment, reporter: ProgressReporter, params: dict[str, Any], target: dict[str, Any], num_threads: int) -> dict[str, Any]:
    import tvm
    import tvm_ffi
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.analysis import estimate_tir_flops

    from .backends import database as dbmod
    from .backends.callbacks import RoundAccountingCallback, RoundClock, TimedBuilder, TimedRunner
    from .backends.energy import make_energy_meter
    from .backends.frontends import extract_tuning_tasks, prepare_for_compile, prepare_for_tuning
    from .backends.registry import TuningSetup, make_runner, make_scheduler
    from .backends.targets import check_same_target, device_of
    from .backends.components import set_num_threads

    set_num_threads(num_threads)  # this process's own TVM runtime (compile-time checks) too
    work_dir = experiment_work_dir(experiment.pk)
    work_dir.mkdir(parents=True, exist_ok=True)
    reporter.report(1, "importing the model")
    model = _load_model(params)
    prepared = prepare_for_tuning(model.mod)
    tvm_target = tvm.target.Target(target)
    extracted = extract_tuning_tasks(prepared, tvm_target)
    if not extracted:
        raise ValueError(f"model {model.name} has no tunable tasks")
    selected = _select_tasks(extracted, params["max_tasks"])

    # --- the database: seed, target check, meta ------------------------------------------
    force = bool(params["force_target"])
    if params.get("seed_database") and not (work_dir / dbmod.RECORD_FILE).exists():
        src = tuning_root() / "databases" / str(params["seed_database"])
        for tgt in dbmod.record_targets(src):
            check_same_target(tgt, target, force=force, what=f"seed database {params['seed_database']!r}")
        dbmod.export_database(src, work_dir)
    meta = dbmod.read_meta(work_dir)
    if meta is not None:
        check_same_target(meta["target"], target, force=force, what=f"the database in {work_dir}")
        if int(meta.get("num_threads", num_threads)) != num_threads and not force:
            from .backends.targets import TargetMismatch

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
    task_rows: dict[int, TuningTask] = {}
    done_total = 0
    for i in selected:
        mod = extracted[i].dispatched[0]
        h = int(tvm_ffi.structural_hash(mod)) & 0xFFFFFFFFFFFFFFFF
        done = done_by_hash.get(int(tvm_ffi.structural_hash(mod)), 0)
        done_total += done
        row, _ = TuningTask.objects.update_or_create(
            experiment=experiment, task_index=i,
            defaults={"name": extracted[i].task_name, "workload_hash": str(h), "weight": float(extracted[i].weight),
                      "flop_count": float(estimate_tir_flops(mod)), "trials_done": done},
        )
        task_rows[i] = row
    remaining = max(0, trials - done_total)
    to_tune = [i for i in selected if per_task_cap is None or task_rows[i].trials_done < per_task_cap]
    resumed_from = done_total
    log.info("tuning %s: %d tasks, %d trials already in the database, %d to go", model.name, len(to_tune), done_total, remaining)

    # --- components --------------------------------------------------------------------------
    meter = make_energy_meter(device_of(target))
    setup = TuningSetup(target=target, num_threads=num_threads, work_dir=work_dir, seed=int(params["seed"]),
                        max_trials_global=trials, num_trials_per_iter=int(params["trials_per_round"]),
                        energy_meter=meter, options=dict(params.get("options") or {}))
    prior = TuningRound.objects.filter(experiment=experiment).aggregate(r=Max("round_index"))["r"]
    last = TuningRound.objects.filter(experiment=experiment).order_by("-round_index").first()
    wall_offset = last.wall_seconds if last else 0.0
    joule_offset = last.joules_total if last else 0.0
    cancelled: list[BaseException] = []
    trials_seen = [done_total]
    index_of = {pos: i for pos, i in enumerate(to_tune)}

    def on_round(summary) -> None:
        _mirror_round(experiment, summary, task_rows[index_of[summary.task_id]], target=target, num_threads=num_threads,
                      wall_offset=wall_offset, joule_offset=joule_offset)
        trials_seen[0] += len(summary.candidates)
        pct = 5 + 80 * min(1.0, trials_seen[0] / max(1, trials))
        try:
            reporter.report(pct, f"{trials_seen[0]}/{trials} trials, round {summary.round_index}")
        except ExperimentCancelled as err:
            cancelled.append(err)
            raise

    tuning_seconds = 0.0
    tuning_joules = 0.0
    scheduler_rep = None
    if remaining > 0 and to_tune:
        builder, runner = make_runner(params["runner"], setup)
        scheduler = make_scheduler(params["scheduler"], setup)
        clock = RoundClock(meter)
        callback = RoundAccountingCallback(clock, on_round, first_round_index=(prior + 1) if prior is not None else 0,
                                           round_details=getattr(runner, "round_details", None))
        contexts, weights = ms.relax_integration.extracted_tasks_to_tune_contexts(
            [extracted[i] for i in to_tune], str(work_dir), num_threads=num_threads, seed=int(params["seed"]))
        reporter.report(5 + 80 * min(1.0, done_total / max(1, trials)),
                        f"tuning {len(to_tune)} tasks, {remaining} trials" + (f" (resumed: {done_total} done)" if done_total else ""))
        TuningTask.objects.filter(experiment=experiment, task_index__in=to_tune).update(state=TuningTask.State.TUNING)
        cost_model = params["cost_model"]
        try:
            ms.tune_tasks(
                tasks=contexts, task_weights=weights, work_dir=str(work_dir), max_trials_global=remaining,
                max_trials_per_task=per_task_cap, num_trials_per_iter=int(params["trials_per_round"]),
                builder=TimedBuilder(builder, clock), runner=TimedRunner(runner, clock), database=database, cost_model=cost_model,
                measure_callbacks=[*ms.measure_callback.MeasureCallback.create("default"), callback],
                task_scheduler=scheduler,
            )
        except Exception:
            if cancelled:
                raise cancelled[0] from None
            raise
        finally:
            if callable(getattr(runner, "close", None)):  # runners with worker processes (DOPpler)
                runner.close()
        end = meter.read()
        tuning_seconds, tuning_joules = end.seconds, end.joules
        from .services_trimmer import scheduler_report, store_trimmer_report

        scheduler_rep = scheduler_report(scheduler)  # Trimmer: preemptions and energy attribution
        if scheduler_rep is not None:
            store_trimmer_report(experiment, scheduler_rep, [task_rows[i] for i in to_tune],
                                 (prior + 1) if prior is not None else 0)
        for pos, i in enumerate(to_tune):
            rec = scheduler.tasks_[pos] if len(scheduler.tasks_) > pos else None
            if scheduler_rep is not None:
                rec = scheduler_rep["tasks"][pos]
            state = TuningTask.State.PREEMPTED if (rec is not None and _preempted(rec, task_rows[i])) else TuningTask.State.FINISHED
            TuningTask.objects.filter(pk=task_rows[i].pk).update(state=state, preempted=state == TuningTask.State.PREEMPTED)
    else:
        TuningTask.objects.filter(experiment=experiment).update(state=TuningTask.State.FINISHED)

    # --- result ------------------------------------------------------------------------------------
    reporter.report(88, "compiling tuned and untuned builds")
    result = _measure_result(experiment, model, prepare_for_compile(model.mod), target, num_threads, database, work_dir, params, reporter)
    rounds = TuningRound.objects.filter(experiment=experiment)
    split = {k: sum(getattr(r, k) for r in rounds) for k in
             ("search_seconds", "build_seconds", "measure_seconds", "search_joules", "build_joules", "measure_joules")}
    last = rounds.order_by("-round_index").first()
    total_trials = TuningRecord.objects.filter(experiment=experiment).count()
    summary = {
        "model": model.name, "source": model.source, "target": target, "num_threads": num_threads,
        "host_cpu": target.get("mcpu") or (target.get("host") or {}).get("mcpu"),
        "tasks": len(selected), "tasks_in_model": len(extracted),
        "trials_budget": trials, "trials_in_database": sum(dbmod.count_records_by_workload(database).values()),
        "trials_mirrored": total_trials, "resumed_from_trials": resumed_from,
        "trials_this_attempt": trials_seen[0] - done_total, "attempt": experiment.attempts,
        "rounds": rounds.count(), "runner": params["runner"], "scheduler": params["scheduler"],
        "tuning_wall_seconds": last.wall_seconds if last else 0.0, "tuning_joules": last.joules_total if last else 0.0,
        "this_attempt_seconds": tuning_seconds, "this_attempt_joules": tuning_joules,
        "energy_source": meter.source, "energy_measured": meter.measured, "energy_sources": meter.sources,
        **split, **result, "work_dir": str(work_dir),
    }
    if scheduler_rep is not None:
        summary["trimmer"] = {k: v for k, v in scheduler_rep.items() if k != "rounds"}
    TuningResult.objects.update_or_create(experiment=experiment, defaults={
        "model_name": model.name, "target": target, "num_threads": num_threads,
        "tuned_latency": result["tuned"], "untuned_latency": result["untuned"], "eager_latency": result.get("eager") or {},
        "total_trials": total_trials, "wall_seconds": summary["tuning_wall_seconds"], "joules": summary["tuning_joules"],
        "energy_source": meter.source, "details": {k: summary[k] for k in ("tasks", "rounds", "runner", "scheduler", "host_cpu", *split)}
        | ({"trimmer": scheduler_rep} if scheduler_rep is not None else {}),
    })
    return summary


def _preempted(task_record: Any, row: TuningTask) -> bool:
    """A task the scheduler terminated before it reached its share is reported as preempted
    only by schedulers that say so (``details["preempted"]`` set by them); the built-ins finish."""
    row.refresh_from_db(fields=["details"])
    return bool(row.details.get("preempted"))


def _mirror_round(experiment: Experiment, summary: Any, task: TuningTask, *, target: dict[str, Any], num_threads: int,
                  wall_offset: float, joule_offset: float) -> None:
    """Write one round and its tuning records, update the task's best and trial count."""
    n = max(1, len(summary.candidates))
    best_before = task.best_seconds
    best_round = summary.best_seconds
    best_after = min(x for x in (best_before, best_round) if x is not None) if (best_before or best_round) else None
    improved = best_round is not None and (best_before is None or best_round < best_before)
    with transaction.atomic():
        rnd, created = TuningRound.objects.get_or_create(
            experiment=experiment, round_index=summary.round_index,
            defaults=dict(
                task=task, attempt=experiment.attempts, num_candidates=len(summary.candidates),
                num_errors=sum(1 for c in summary.candidates if c.error),
                search_seconds=summary.search_seconds, build_seconds=summary.build_seconds, measure_seconds=summary.measure_seconds,
                search_joules=summary.search_joules, build_joules=summary.build_joules, measure_joules=summary.measure_joules,
                energy_source=summary.energy_source, energy_measured=summary.energy_measured,
                best_seconds_after=best_after, improved=improved,
                wall_seconds=wall_offset + summary.wall_seconds, joules_total=joule_offset + summary.joules_total,
                details=summary.details,
            ))
        if not created:  # redelivered callback of a round already mirrored
            return
        TuningRecord.objects.bulk_create([
            TuningRecord(experiment=experiment, task=task, round=rnd, candidate_index=c.index, trace_hash=c.trace_hash,
                         trace=c.trace, run_seconds=c.run_seconds, mean_seconds=c.mean_seconds, error=c.error[:4000],
                         build_seconds=summary.build_seconds / n, wall_seconds=wall_offset + summary.wall_seconds,
                         energy_joules=summary.measure_joules / n, energy_source=summary.energy_source,
                         target=target, num_threads=num_threads)
            for c in summary.candidates])
        task.trials_done += len(summary.candidates)
        task.best_seconds = best_after
        TuningTask.objects.filter(pk=task.pk).update(trials_done=task.trials_done, best_seconds=best_after)


def _measure_result(experiment, model, prepared, target, num_threads, database, work_dir: Path, params, reporter) -> dict[str, Any]:
    """Compile tuned (database applied) and untuned (empty database, same pipeline) builds,
    export them, and measure both plus PyTorch eager in fresh subprocesses with the same threads."""
    import tvm
    import tvm_ffi
    from tvm.s_tir import meta_schedule as ms

    from .backends.latency import measure_in_subprocess

    tvm_target = tvm.target.Target(target)
    libs = {}
    # ``prepared`` is the module before legalisation/fusion (see frontends.prepare_for_compile)
    for label, db in (("tuned", database), ("untuned", ms.database.MemoryDatabase())):
        ex = ms.relax_integration.compile_relax(db, prepared, tvm_target, None)
        path = work_dir / f"{label}.so"
        ex.export_library(str(path))
        libs[label] = path
    device = "cuda" if target.get("kind") == "cuda" else "cpu"
    repeats = int(params["repeats"])
    out: dict[str, Any] = {}
    for pct, label in ((91, "untuned"), (94, "tuned")):
        reporter.report(pct, f"measuring the {label} build")
        out[label] = measure_in_subprocess("tvm", str(libs[label]), model.input_shapes, model.input_dtypes,
                                           threads=num_threads, repeats=repeats, device=device)
    out["eager"] = None
    if params["measure_eager"] and model.torch_module is not None and device == "cpu":
        reporter.report(97, "measuring PyTorch eager")
        out["eager"] = measure_in_subprocess("torch", model.name, model.input_shapes, model.input_dtypes,
                                             threads=num_threads, repeats=repeats)
    out["speedup_vs_untuned"] = out["untuned"]["median_s"] / out["tuned"]["median_s"]
    return out


def onnx_upload_store(*, data: bytes) -> dict[str, Any]:
    """Store an uploaded ONNX model after checking it imports; returns ``{"id", "name", ...}``.
    Raises :class:`tuning.backends.frontends.ModelImportError` (nothing stored) or
    ``ValueError`` for an oversized file."""
    import hashlib

    from .backends.frontends import import_onnx

    if len(data) > settings.MAX_UPLOAD_MIB * 1024 * 1024:
        raise ValueError(f"ONNX file larger than {settings.MAX_UPLOAD_MIB} MiB")
    model = import_onnx(data)
    digest = hashlib.sha256(data).hexdigest()
    root = tuning_root() / "uploads"
    root.mkdir(exist_ok=True)
    tmp = root / f".{digest}.tmp"
    tmp.write_bytes(data)
    os.replace(tmp, root / f"{digest}.onnx")
    return {"id": digest, "inputs": [list(s) for s in model.input_shapes], **model.details}


def tuning_database_import(*, src: str | os.PathLike[str], name: str, overwrite: bool = False) -> dict[str, Any]:
    """Import the MetaSchedule JSON database in directory ``src`` as ``name`` (usable as
    ``seed_database``). Raises :class:`tuning.backends.database.DatabaseImportError`."""
    from .backends.database import DatabaseImportError, import_database

    if not name or "/" in name or name.startswith("."):
        raise DatabaseImportError(f"invalid database name {name!r}")
    return import_database(src, tuning_root() / "databases" / name, overwrite=overwrite)


def tuning_database_export(*, experiment: Experiment, dest: str | os.PathLike[str]) -> dict[str, Any]:
    """Export a tuning experiment's MetaSchedule database to directory ``dest``."""
    from .backends.database import export_database

    return export_database(experiment_work_dir(experiment.pk), dest)
