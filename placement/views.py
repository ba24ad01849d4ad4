"""Dashboard pages of the placement engine: simulations (per-policy comparison) and live
placement decisions."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import render

from webapp.views import figure_html

from . import figures, selectors


def gpu_summary(gpu_ids: list[int], first_nodes: int = 3) -> str:
    """A short text for a decision's GPUs (GPUDevice pks): the ids themselves for up to 8
    GPUs, else "N GPUs on M nodes: a, b, c, ..." with the first ``first_nodes`` node names in
    id order (the full list is in the API's ``gpu_ids``)."""
    from webapp.models import GPUDevice

    if len(gpu_ids) <= 8:
        return ", ".join(str(g) for g in gpu_ids)
    nodes: list[str] = []
    for name in GPUDevice.objects.filter(pk__in=gpu_ids).order_by("pk").values_list("node__name", flat=True):
        if name not in nodes:
            nodes.append(name)
    shown = ", ".join(nodes[:first_nodes]) + (", ..." if len(nodes) > first_nodes else "")
    return f"{len(gpu_ids)} GPUs on {len(nodes)} node{'s' if len(nodes) != 1 else ''}: {shown}"


@login_required
def index(request):
    """Simulation experiments, and the latest live placement decisions with their cost terms."""
    sims = selectors.simulation_list(user=request.user)[:50]
    decisions = list(selectors.decision_list(user=request.user)[:25])
    for d in decisions:
        d.gpu_summary = gpu_summary(d.gpu_ids)
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
