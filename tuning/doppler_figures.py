"""DOPpler's dashboard figure (pure): the degree of parallelism (DOP) of every measured batch,
from :func:`tuning.doppler_selectors.doppler_decisions`."""
from __future__ import annotations

from typing import Any

import plotly.graph_objects as go


def dop_trajectory_figure(decisions: list[dict[str, Any]]) -> go.Figure:
    """DOP per round (one line per tuning task), back-offs marked, and the sample's relative
    error (percent, right axis). ``decisions``: output of :func:`doppler_decisions`."""
    fig = go.Figure()
    by_task: dict[str, list[dict[str, Any]]] = {}
    for d in decisions:
        by_task.setdefault(d.get("task_name") or d["task"], []).append(d)
    for name, ds in by_task.items():
        fig.add_trace(go.Scatter(x=[d["round"] for d in ds], y=[d["dop"] for d in ds], mode="lines+markers",
                                 name=f"DOP {name}", line={"shape": "hv"}))
    back = [d for d in decisions if d["action"] == "backoff"]
    if back:
        fig.add_trace(go.Scatter(x=[d["round"] for d in back], y=[d["dop"] for d in back], mode="markers",
                                 name="back-off", marker={"symbol": "x", "size": 11, "color": "crimson"}))
    checked = [d for d in decisions if d.get("sample")]
    if checked:
        fig.add_trace(go.Bar(x=[d["round"] for d in checked], y=[100 * d["rel_error"] for d in checked],
                             name="relative error vs serial (%)", yaxis="y2", opacity=0.35))
    fig.update_layout(title="DOPpler: degree of parallelism per round", xaxis_title="round",
                      yaxis={"title": "DOP (candidates measured at once)", "rangemode": "tozero", "dtick": 1},
                      yaxis2={"title": "relative error (%)", "overlaying": "y", "side": "right", "rangemode": "tozero"},
                      legend={"orientation": "h"}, margin={"t": 50})
    return fig
