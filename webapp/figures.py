"""Dashboard figures of the platform: pure functions from selector output to Plotly figures."""
from __future__ import annotations

import plotly.graph_objects as go


def cluster_capacity_figure(*, cluster_name: str, gpus_by_model: dict[str, int], gpu_memory_by_model: dict[str, int]) -> go.Figure:
    """Bar chart of a cluster's GPU capacity by GPU type: number of GPUs (left axis) and total
    GPU memory in GiB (right axis, MiB / 1024), one bar pair per type, types sorted by name.
    An empty mapping gives an empty figure titled "no GPUs"."""
    models = sorted(gpus_by_model)
    counts = [gpus_by_model[m] for m in models]
    mem_gib = [round(gpu_memory_by_model.get(m, 0) / 1024, 1) for m in models]
    fig = go.Figure()
    fig.add_bar(name="GPUs", x=models, y=counts, offsetgroup=0, yaxis="y")
    fig.add_bar(name="GPU memory (GiB)", x=models, y=mem_gib, offsetgroup=1, yaxis="y2")
    title = f"{cluster_name}: GPU capacity by type" if models else f"{cluster_name}: no GPUs"
    fig.update_layout(
        title=title, barmode="group", height=340, margin=dict(l=50, r=60, t=50, b=40),
        xaxis=dict(title="GPU type"), yaxis=dict(title="GPUs"),
        yaxis2=dict(title="memory (GiB)", overlaying="y", side="right", showgrid=False),
        legend=dict(orientation="h", y=-0.25),
    )
    return fig
