"""Trimmer's part of the tuning dashboard: the context of ``templates/tuning/trimmer_panel.html``.

Reads the Trimmer report stored with a tuning result (``TuningResult.details["trimmer"]``, or
the experiment's ``result["trimmer"]``) and the energy and tuned latency of the user's tuning
experiments, and renders :mod:`tuning.figures_trimmer` figures to HTML fragments (plotly.js is
loaded by the page).
"""
from __future__ import annotations

from typing import Any, Optional

from webapp.views import figure_html

from .figures_trimmer import energy_latency_pareto_figure, preemption_figure


def trimmer_report(experiment: Any) -> Optional[dict]:
    """The Trimmer report of a tuning experiment, or None when it was not tuned by Trimmer."""
    from .models import TuningResult

    res = TuningResult.objects.filter(experiment=experiment).only("details").first()
    details = res.details if res is not None else {}
    rep = (details or {}).get("trimmer") or (experiment.result or {}).get("trimmer")
    return rep or None


def pareto_runs(experiments) -> list[dict]:
    """One point per finished tuning experiment: label, scheduler, joules, latency_s (tuned
    median end-to-end latency, seconds)."""
    from .models import TuningResult

    runs = []
    for res in TuningResult.objects.filter(experiment__in=experiments).select_related("experiment"):
        lat = (res.tuned_latency or {}).get("median_s")
        exp = res.experiment
        runs.append({
            "label": f"#{exp.pk} {exp.name or res.model_name}",
            "scheduler": (exp.parameters or {}).get("scheduler", "gradient"),
            "joules": res.joules,
            "latency_s": lat,
        })
    return runs


def trimmer_panel_context(experiment: Any, experiments) -> dict:
    """Template context: ``trimmer`` (report summary or None), ``trimmer_preemption_html`` and
    ``trimmer_pareto_html`` (HTML fragments or empty strings)."""
    rep = trimmer_report(experiment)
    ctx: dict[str, Any] = {"trimmer": None, "trimmer_preemption_html": "", "trimmer_pareto_html": ""}
    if rep:
        ctx["trimmer"] = {k: rep.get(k) for k in ("joules", "non_contributing_share", "n_rounds", "n_candidates",
                                                  "stop_reason", "stop_round", "energy_source")}
        ctx["trimmer"]["preempted"] = [t for t in rep.get("tasks", []) if t.get("preempted_at_round")]
        ctx["trimmer_preemption_html"] = figure_html(preemption_figure(rep), "trimmer-preemption")
    runs = [r for r in pareto_runs(experiments) if r["latency_s"] is not None]
    if runs:
        ctx["trimmer_pareto_html"] = figure_html(energy_latency_pareto_figure(runs), "trimmer-pareto")
    return ctx
