"""Dashboard pages of the placement engine: simulations (per-policy comparison) and live
placement decisions."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import render

from webapp.views import figure_html

from . import figures, selectors


@login_required
def index(request):
    """Simulation experiments, and the latest live placement decisions with their cost terms."""
    sims = selectors.simulation_list(user=request.user)[:50]
    decisions = selectors.decision_list(user=request.user)[:25]
    latest = next((s for s in sims if s.result.get("policies")), None)
    figs = [figure_html(f(latest.result), f"fig-{i}") for i, f in enumerate(figures.ALL_FIGURES)] if latest else []
    return render(request, "placement/index.html",
                  {"sims": sims, "decisions": decisions, "latest": latest, "figures": figs})


@login_required
def simulation_detail(request, pk: int):
    """One simulation: the four comparison figures and the summary table."""
    exp = selectors.simulation_list(user=request.user).filter(pk=pk).first()
    if exp is None:
        raise Http404("no such simulation")
    figs = [figure_html(f(exp.result), f"fig-{i}") for i, f in enumerate(figures.ALL_FIGURES)] \
        if exp.result.get("policies") else []
    return render(request, "placement/simulation.html", {"exp": exp, "figures": figs})
