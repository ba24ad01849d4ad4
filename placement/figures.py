"""Plotly figures of the placement engine: pure functions of a simulation result dict
(:func:`placement.experiment.run_simulations`) to ``plotly.graph_objects.Figure``."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go


def _hours(v):
    return [x / 3600.0 for x in v]


def makespan_figure(result: dict) -> go.Figure:
    """Bar per policy: makespan (h)."""
    names = list(result["policies"])
    vals = [result["policies"][n]["summary"]["makespan_s"] / 3600 for n in names]
    fig = go.Figure(go.Bar(x=names, y=vals, text=[f"{v:.1f}" for v in vals]))
    fig.update_layout(title="Makespan", xaxis_title="policy", yaxis_title="hours", height=320, margin=dict(t=40, b=30))
    return fig


def jct_cdf_figure(result: dict) -> go.Figure:
    """JCT CDF per policy (hours, log x) from the stored percentiles."""
    fig = go.Figure()
    pct = np.linspace(0, 1, 101)
    for name, p in result["policies"].items():
        fig.add_trace(go.Scatter(x=_hours(p["jct_quantiles_s"]), y=pct, mode="lines", name=name))
    fig.update_layout(title="Job completion time CDF", xaxis_title="JCT (hours)", xaxis_type="log",
                      yaxis_title="fraction of jobs", height=360, margin=dict(t=40, b=30))
    return fig


def queueing_figure(result: dict) -> go.Figure:
    """Mean and median queueing delay per policy (hours)."""
    names = list(result["policies"])
    mean = [result["policies"][n]["summary"]["mean_queueing_delay_s"] / 3600 for n in names]
    med = [result["policies"][n]["queueing_quantiles_s"][50] / 3600 for n in names]
    fig = go.Figure([go.Bar(x=names, y=mean, name="mean"), go.Bar(x=names, y=med, name="median")])
    fig.update_layout(title="Queueing delay", xaxis_title="policy", yaxis_title="hours", barmode="group", height=320,
                      margin=dict(t=40, b=30))
    return fig


def utilisation_figure(result: dict) -> go.Figure:
    """Effective cluster GPU utilisation (%) over time (days) per policy."""
    fig = go.Figure()
    for name, p in result["policies"].items():
        u = p["utilisation"]
        fig.add_trace(go.Scatter(x=[t / 86400 for t in u["t"]], y=u["util"], mode="lines", name=name,
                                 line_shape="hv"))
    fig.update_layout(title="GPU utilisation over time", xaxis_title="days", yaxis_title="% of cluster",
                      height=360, margin=dict(t=40, b=30))
    return fig


ALL_FIGURES = (makespan_figure, jct_cdf_figure, queueing_figure, utilisation_figure)
