"""Dashboard pages of the platform: cluster overview and experiment list."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, render

from . import selectors
from .figures import cluster_capacity_figure
from .models import Cluster


def figure_html(fig, div_id: str) -> str:
    """A Plotly figure as an HTML fragment; plotly.js itself comes from base.html (static)."""
    return fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id, config={"displaylogo": False})


@login_required
def overview(request):
    """The landing page: what ran (each engine's latest headline against its baseline, linking
    to the engine's page), then the clusters (nodes, GPUs, capacity, current utilisation, one
    capacity figure each) and recent jobs."""
    rows = []
    for s in selectors.cluster_summaries():
        fig = cluster_capacity_figure(
            cluster_name=s.cluster.name, gpus_by_model=s.gpus_by_model, gpu_memory_by_model=s.gpu_memory_by_model
        )
        rows.append({"s": s, "figure": figure_html(fig, f"capacity-{s.cluster.pk}")})
    jobs = selectors.job_list(user=request.user)[:10]
    return render(request, "webapp/overview.html",
                  {"rows": rows, "jobs": jobs, "headlines": selectors.engine_headlines(user=request.user)})


@login_required
def experiments(request):
    """The user's experiments (staff: all) with live progress (polled from the API)."""
    rows = [(e, selectors.experiment_page(e)) for e in selectors.experiment_list(user=request.user)[:100]]
    return render(request, "webapp/experiments.html", {"rows": rows})


@login_required
def cluster_detail(request, pk: int):
    """One cluster's nodes (CPU, memory, GPUs, GPUs busy, taints), 50 per page."""
    cluster = get_object_or_404(Cluster, pk=pk)
    page = Paginator(selectors.cluster_nodes(cluster=cluster), 50).get_page(request.GET.get("page"))
    return render(request, "webapp/cluster_detail.html", {"cluster": cluster, "page": page})


def not_found(request, exception=None):
    """``handler404``: a URL under ``/api/`` that matches no route gets DRF's JSON body
    (``{"detail": "Not found."}``), as an API client expects; other URLs get Django's page."""
    if request.path.startswith("/api/"):
        from django.http import JsonResponse

        return JsonResponse({"detail": "Not found."}, status=404)
    from django.views.defaults import page_not_found

    return page_not_found(request, exception)
