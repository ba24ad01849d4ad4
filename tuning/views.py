"""Dashboard pages of the tuning engine."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import render

from webapp.views import figure_html

from . import selectors
from .figures import latency_comparison_figure, time_split_figure, tuning_curve_figure


PEERS = (("tuned", "TVM tuned"), ("untuned", "TVM untuned"), ("untuned_no_mcpu", "TVM untuned, without mcpu"),
         ("eager", "PyTorch eager"), ("onnxruntime", "onnxruntime (CPU execution provider)"))


def latency_rows(result: dict | None) -> list[dict]:
    """Rows of the result page's latency table, one per peer of :data:`PEERS` that was measured
    or failed: ``label``, ``median_ms``/``p25_ms``/``p75_ms`` (milliseconds) or ``error``, and
    ``vs_tuned`` (its median / the tuned median; ``None`` for the tuned build itself)."""
    if not result:
        return []
    tuned = (result.get("tuned") or {}).get("median_s")
    rows = []
    for key, label in PEERS:
        d = result.get(key) or {}
        if "median_s" in d:
            rows.append({"label": label, "median_ms": d["median_s"] * 1e3, "p25_ms": d["p25_s"] * 1e3,
                         "p75_ms": d["p75_s"] * 1e3, "error": None,
                         "vs_tuned": d["median_s"] / tuned if tuned and key != "tuned" else None})
        elif d.get("error"):
            rows.append({"label": label, "error": str(d["error"])[:300], "vs_tuned": None})
    return rows


@login_required
def index(request):
    """Tuning experiments with their curves (best latency vs wall time and vs energy) and the
    tuned / untuned / PyTorch eager / onnxruntime comparison of the selected (default: newest) one."""
    exps = selectors.tuning_experiments(user=request.user)
    selected = None
    if request.GET.get("experiment"):
        selected = next((e for e in exps if str(e.pk) == request.GET["experiment"]), None)
        if selected is None:
            raise Http404("no such tuning experiment")
    elif exps:
        selected = exps[0]
    ctx = {"experiments": exps, "selected": selected}
    if selected is not None:
        ov = selectors.tuning_overview(experiment=selected)
        ctx.update(overview=ov, latency_rows=latency_rows(ov["result"]), figures=[
            figure_html(tuning_curve_figure(ov["curve"], x="wall_seconds"), "tuning-curve-time"),
            figure_html(tuning_curve_figure(ov["curve"], x="joules"), "tuning-curve-energy"),
            figure_html(latency_comparison_figure(ov["result"]), "tuning-latency"),
            figure_html(time_split_figure(ov["curve"]), "tuning-split"),
        ])
        from .doppler_figures import dop_trajectory_figure
        from .doppler_selectors import doppler_decisions

        decisions = doppler_decisions(experiment=selected)
        if decisions:
            ctx.update(doppler_figure=figure_html(dop_trajectory_figure(decisions), "tuning-doppler-dop"),
                       doppler_decisions=[{**d, "rel_error_pct": 100 * d["rel_error"]} for d in decisions])
        from .views_trimmer import trimmer_panel_context

        ctx.update(trimmer_panel_context(selected, exps))
    return render(request, "tuning/index.html", ctx)
