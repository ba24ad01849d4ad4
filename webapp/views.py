"""Dashboard pages of the platform: cluster overview and experiment list."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from . import selectors
from .figures import cluster_capacity_figure


def figure_html(fig, div_id: str) -> str:
    """A Plotly figure as an HTML fragment; plotly.js itself comes from base.html (static)."""
    return fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id, config={"displaylogo": False})


@login_required
def overview(request):
    """Cluster overview: nodes, GPUs, capacity, current utilisation, one capacity figure each."""
    rows = []
    for s in selectors.cluster_summaries():
        fig = cluster_capacity_figure(
            cluster_name=s.cluster.name, gpus_by_model=s.gpus_by_model, gpu_memory_by_model=s.gpu_memory_by_model
        )
        rows.append({"s": s, "figure": figure_html(fig, f"capacity-{s.cluster.pk}")})
    jobs = selectors.job_list(user=request.user)[:10]
    return render(request, "webapp/overview.html", {"rows": rows, "jobs": jobs})


@login_required
def experiments(request):
    """The user's experiments (staff: all) with live progress (polled from the API)."""
    return render(request, "webapp/experiments.html", {"experiments": selectors.experiment_list(user=request.user)[:100]})
