"""The "tuning" experiment kind: its parameters serializer (:class:`tuning.api.TuningParameters`),
its runner and the Django mirror of what the pipeline records.

:func:`tuning_experiment_run` binds the Django-free :func:`tuning.pipeline.run` to the database
through :func:`webapp.experiments.run_pipeline`: every row the pipeline records is committed as a
:class:`webapp.models.ExperimentRecord` and mirrored at once into the engine's tables
(``tasks`` -> :class:`TuningTask`, ``rounds`` -> :class:`TuningRound` + :class:`TuningRecord`,
``task_states`` and ``trimmer`` -> the tasks' and rounds' state/details). On a redelivery the
pipeline gets those rows back as ``resume`` and the JSON database in the work directory
(``settings.VAR_DIR / "tuning" / "exp-<id>"``) holds every measured record.
"""
from __future__ import annotations

from typing import Any

from django.db import transaction

from webapp.experiments import ProgressReporter, run_pipeline
from webapp.models import Experiment

from . import pipeline
from .api import TuningParameters
from .models import TuningRecord, TuningResult, TuningRound, TuningTask

__all__ = ["TuningParameters", "tuning_experiment_run", "mirror_record"]


def tuning_experiment_run(experiment: Experiment, reporter: ProgressReporter) -> dict[str, Any]:
    """Run (or resume) the tuning experiment; returns the result summary stored in
    ``experiment.result``. Raises what :func:`tuning.pipeline.run` raises
    (``ExperimentCancelled`` once cancelled, after the measured rounds are mirrored)."""
    from .services import experiment_work_dir, resolve_onnx, tuning_root

    params = {**pipeline.DEFAULTS, **(experiment.parameters or {})}
    params["work_dir"] = str(experiment_work_dir(experiment.pk))
    params["lock_dir"] = str(tuning_root() / "locks")
    params["databases_dir"] = str(tuning_root() / "databases")
    if params.get("onnx"):
        params["onnx_path"] = str(resolve_onnx(params["onnx"]))
    mirror = _Mirror(experiment)
    summary = run_pipeline(experiment, reporter, pipeline.run, params=params, on_record=mirror)
    summary["attempt"] = experiment.attempts
    split_keys = ("search_seconds", "build_seconds", "measure_seconds", "search_joules", "build_joules", "measure_joules")
    trimmer = mirror.trimmer
    TuningResult.objects.update_or_create(experiment=experiment, defaults={
        "model_name": summary["model"], "target": summary["target"], "num_threads": summary["num_threads"],
        "tuned_latency": summary["tuned"], "untuned_latency": summary["untuned"], "eager_latency": summary.get("eager") or {},
        "total_trials": TuningRecord.objects.filter(experiment=experiment).count(),
        "wall_seconds": summary["tuning_wall_seconds"], "joules": summary["tuning_joules"],
        "energy_source": summary["energy_source"],
        "details": {k: summary[k] for k in ("tasks", "rounds", "runner", "scheduler", "host_cpu", *split_keys)}
        | {"onnxruntime": summary.get("onnxruntime"), "speedup_vs_onnxruntime": summary.get("speedup_vs_onnxruntime"),
           "untuned_no_mcpu": summary.get("untuned_no_mcpu"), "weight_prepack": summary.get("weight_prepack")}
        | ({"trimmer": {k: v for k, v in trimmer.items() if k not in ("first_round_index", "task_indices")}}
           if trimmer is not None else {}),
    })
    return summary


class _Mirror:
    """``on_record`` of :func:`tuning_experiment_run`: mirrors each recorded table into the models."""

    def __init__(self, experiment: Experiment) -> None:
        self.experiment = experiment
        self.tasks: dict[int, TuningTask] = {}
        self.trimmer: dict[str, Any] | None = None
        self.target: tuple[dict[str, Any], int] | None = None

    def __call__(self, table: str, rows: list[dict[str, Any]]) -> None:
        mirror_record(self, table, rows)


def mirror_record(m: _Mirror, table: str, rows: list[dict[str, Any]]) -> None:
    """Write rows of ``table`` (see :mod:`tuning.pipeline`) into the tuning models of ``m.experiment``.
    Idempotent for rounds (a round index already mirrored is skipped)."""
    exp = m.experiment
    if table == "tasks":
        for r in rows:
            m.tasks[r["task_index"]], _ = TuningTask.objects.update_or_create(
                experiment=exp, task_index=r["task_index"],
                defaults={"name": r["name"], "workload_hash": r["workload_hash"], "weight": r["weight"],
                          "flop_count": r["flop_count"], "trials_done": r["trials_done"],
                          "state": TuningTask.State.TUNING})
    elif table == "rounds":
        for r in rows:
            if m.target is None:
                m.target = _target_of(exp)
            _mirror_round(exp, r, _task(m, r["task_index"]), *m.target)
    elif table == "task_states":
        for r in rows:
            TuningTask.objects.filter(experiment=exp, task_index=r["task_index"]).update(
                state=TuningTask.State(r["state"]), preempted=bool(r["preempted"]))
    elif table == "trimmer":
        from .services_trimmer import store_trimmer_report

        rep = rows[-1]
        m.trimmer = rep
        store_trimmer_report(exp, rep, [_task(m, i) for i in rep["task_indices"]], rep["first_round_index"])


def _task(m: _Mirror, index: int) -> TuningTask:
    if index not in m.tasks:
        m.tasks[index] = TuningTask.objects.get(experiment=m.experiment, task_index=index)
    return m.tasks[index]


def _mirror_round(experiment: Experiment, r: dict[str, Any], task: TuningTask, target: dict[str, Any],
                  num_threads: int) -> None:
    """Write one round and its tuning records, update the task's best and trial count."""
    cands = r["candidates"]
    n = max(1, len(cands))
    best_before, best_round = task.best_seconds, r["best_seconds"]
    vals = [x for x in (best_before, best_round) if x is not None]
    best_after = min(vals) if vals else None
    improved = best_round is not None and (best_before is None or best_round < best_before)
    with transaction.atomic():
        rnd, created = TuningRound.objects.get_or_create(
            experiment=experiment, round_index=r["round_index"],
            defaults=dict(
                task=task, attempt=experiment.attempts, num_candidates=len(cands), num_errors=r["num_errors"],
                search_seconds=r["search_seconds"], build_seconds=r["build_seconds"], measure_seconds=r["measure_seconds"],
                search_joules=r["search_joules"], build_joules=r["build_joules"], measure_joules=r["measure_joules"],
                energy_source=r["energy_source"], energy_measured=r["energy_measured"],
                best_seconds_after=best_after, improved=improved,
                wall_seconds=r["wall_seconds"], joules_total=r["joules_total"], details=r["details"],
            ))
        if not created:  # redelivered row of a round already mirrored
            return
        TuningRecord.objects.bulk_create([
            TuningRecord(experiment=experiment, task=task, round=rnd, candidate_index=c["index"], trace_hash=c["trace_hash"],
                         trace=c["trace"], run_seconds=c["run_seconds"], mean_seconds=c["mean_seconds"], error=c["error"],
                         build_seconds=r["build_seconds"] / n, wall_seconds=r["wall_seconds"],
                         energy_joules=r["measure_joules"] / n, energy_source=r["energy_source"],
                         target=target, num_threads=num_threads)
            for c in cands])
        task.trials_done += len(cands)
        task.best_seconds = best_after
        TuningTask.objects.filter(pk=task.pk).update(trials_done=task.trials_done, best_seconds=best_after)


def _target_of(experiment: Experiment) -> tuple[dict[str, Any], int]:
    """The target dict and thread count a tuning experiment measures with (as the pipeline builds them)."""
    from .backends.targets import make_target

    params = {**pipeline.DEFAULTS, **(experiment.parameters or {})}
    threads = int(params["num_threads"] or pipeline.default_num_threads())
    return make_target(params["target"], threads), threads


def tuning_headline(experiment: Experiment):
    """The landing page's figure of a succeeded tuning: the tuned build's end-to-end median
    latency against the faster of its peers, PyTorch eager and onnxruntime (same threads, same
    interleaved timing; the strongest simple alternative a user would deploy instead); ``ratio``
    = tuned / that peer (lower is better). ``None`` without the tuned figure and at least one
    peer's (e.g. ``measure_eager`` off, CUDA)."""
    from webapp.experiments import Headline

    res = experiment.result or {}
    tuned = (res.get("tuned") or {}).get("median_s")
    peers = {name: (res.get(key) or {}).get("median_s") for name, key in
             (("PyTorch eager", "eager"), ("onnxruntime", "onnxruntime"))}
    peers = {k: v for k, v in peers.items() if v}
    if not tuned or not peers:
        return None
    baseline_name, eager = min(peers.items(), key=lambda kv: kv[1])
    b = res.get("budget") or {}
    note = f"{res.get('model')}, {res.get('num_threads')} threads"
    if b:
        note += f", {len(b.get('tasks_tuned', []))}/{len(b.get('tasks_tuned', [])) + len(b.get('tasks_untuned', []))} tasks tuned"
    return Headline(engine="tuning", metric="end-to-end latency", ours=f"{tuned * 1e3:.2f} ms",
                    baseline_name=baseline_name, baseline=f"{eager * 1e3:.2f} ms", ratio=tuned / eager,
                    better="lower", note=note)


def tuning_page(experiment: Experiment) -> str:
    """The dashboard page of a tuning experiment."""
    return f"/tuning/?experiment={experiment.pk}"
