"""Selectors of the tuning engine (functions that read)."""
from __future__ import annotations

from typing import Any

from webapp.models import Experiment

from .models import TuningResult, TuningRound, TuningTask


def tuning_curve(*, experiment: Experiment) -> list[dict[str, Any]]:
    """Rounds in order with the model-level estimate after each: ``wall_seconds``,
    ``joules`` (cumulative), ``task``, ``best_seconds`` of that task and ``weighted_latency_s``
    = sum over tasks of weight x best mean run time so far (seconds; tasks not yet measured
    are left out, so compare curves only once every task has a record)."""
    tasks = {t.pk: t for t in TuningTask.objects.filter(experiment=experiment)}
    best: dict[int, float] = {}
    out = []
    for r in TuningRound.objects.filter(experiment=experiment).order_by("round_index"):
        if r.best_seconds_after is not None:
            best[r.task_id] = r.best_seconds_after
        out.append({
            "round": r.round_index, "task": tasks[r.task_id].name if r.task_id in tasks else "",
            "wall_seconds": r.wall_seconds, "joules": r.joules_total, "best_seconds": r.best_seconds_after,
            "weighted_latency_s": sum(tasks[k].weight * v for k, v in best.items() if k in tasks),
            "tasks_measured": len(best), "energy_source": r.energy_source,
            "search_seconds": r.search_seconds, "build_seconds": r.build_seconds, "measure_seconds": r.measure_seconds,
        })
    return out


def tuning_overview(*, experiment: Experiment) -> dict[str, Any]:
    """JSON-ready tasks, curve and latency result of one tuning experiment."""
    res = TuningResult.objects.filter(experiment=experiment).first()
    return {
        "id": experiment.pk, "state": experiment.state, "progress": experiment.progress,
        "parameters": experiment.parameters,
        "tasks": [{"index": t.task_index, "name": t.name, "weight": t.weight, "flop": t.flop_count,
                   "best_seconds": t.best_seconds, "trials": t.trials_done, "state": t.state}
                  for t in TuningTask.objects.filter(experiment=experiment)],
        "curve": tuning_curve(experiment=experiment),
        "result": None if res is None else {
            "tuned": res.tuned_latency, "untuned": res.untuned_latency, "eager": res.eager_latency,
            "untuned_no_mcpu": (res.details or {}).get("untuned_no_mcpu"),
            "onnxruntime": (res.details or {}).get("onnxruntime"),
            "speedup_vs_onnxruntime": (res.details or {}).get("speedup_vs_onnxruntime"),
            "trials": res.total_trials, "wall_seconds": res.wall_seconds, "joules": res.joules,
            "energy_source": res.energy_source, "target": res.target, "num_threads": res.num_threads,
        },
    }


def tuning_experiments(*, user=None) -> list[Experiment]:
    """Tuning experiments visible to ``user`` (all for staff or ``None``), newest first."""
    qs = Experiment.objects.filter(kind="tuning")
    if user is not None and not user.is_staff:
        qs = qs.filter(owner=user)
    return list(qs.order_by("-created_at")[:100])
