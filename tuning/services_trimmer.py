"""Storing a Trimmer report with its tuning experiment (called by ``tuning.services`` after
``tune_tasks``): preempted tasks get state ``preempted`` with their preemption round in
``TuningTask.details``, each mirrored ``TuningRound`` gets Trimmer's per-round attribution in
``details["trimmer"]``, and the whole report goes to ``TuningResult.details["trimmer"]`` (set by the
caller from the return value). No migration: all of it lives in the models' ``details`` JSON.
"""
from __future__ import annotations

from typing import Any, Optional

from django.db import transaction

from .models import TuningRound, TuningTask


def scheduler_report(scheduler: Any) -> Optional[dict]:
    """The scheduler's Trimmer report (dict) or None for schedulers without one (built-ins)."""
    try:
        report = getattr(scheduler, "report")
    except AttributeError:
        return None
    rep = report() if callable(report) else None
    return rep if isinstance(rep, dict) and rep.get("scheduler") == "trimmer" else None


def store_trimmer_report(experiment: Any, report: dict, task_rows: list[TuningTask], first_round_index: int) -> None:
    """Write the report's preemptions and per-round attribution into the experiment's rows.

    task_rows: the TuningTask rows in the order of the task list given to ``tune_tasks``;
    first_round_index: ``TuningRound.round_index`` of this attempt's first round (rounds are
    mirrored in join order, the order the report records them in).
    """
    with transaction.atomic():
        for entry, row in zip(report["tasks"], task_rows):
            if entry.get("preempted_at_round") is None:
                continue
            details = dict(row.details or {})
            details.update(preempted=True, preempted_at_round=first_round_index + entry["preempted_at_round"] - 1)
            TuningTask.objects.filter(pk=row.pk).update(details=details, preempted=True, state=TuningTask.State.PREEMPTED)
            row.details = details
        for r in report["rounds"]:
            idx = first_round_index + r["round"] - 1
            rnd = TuningRound.objects.filter(experiment=experiment, round_index=idx).first()
            if rnd is None:
                continue
            details = dict(rnd.details or {})
            details["trimmer"] = {k: r[k] for k in ("joules", "seconds", "joules_per_candidate", "n_contributing",
                                                    "improved", "preempted_task", "weighted_total_s")}
            # whether the round counted toward patience (after the cost-model warm-up) and whether
            # it beat the noise threshold; absent from reports written before these fields existed
            details["trimmer"].update({k: r[k] for k in ("judged", "progressed") if k in r})
            TuningRound.objects.filter(pk=rnd.pk).update(details=details)
