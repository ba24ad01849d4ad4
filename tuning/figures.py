"""Dashboard figures of the tuning engine: pure functions from selector output
(:func:`tuning.selectors.tuning_curve`, :func:`tuning.selectors.tuning_overview`) to Plotly figures."""
from __future__ import annotations

from typing import Any

import plotly.graph_objects as go


def best_so_far(curve: list[dict[str, Any]], x_key: str) -> tuple[list[float], list[float]]:
    """Points (x, weighted model latency in ms) of the tuning curve: after each round, the sum
    over measured tasks of weight x best mean run time, kept as the running minimum once every
    task measured so far is fixed (a later round can only lower it). ``x_key``: ``"wall_seconds"``
    or ``"joules"``."""
    xs, ys = [], []
    tasks_seen = 0
    best = None
    for p in curve:
        y = p["weighted_latency_s"] * 1e3
        if p["tasks_measured"] > tasks_seen:  # a new task joins the sum: the curve may rise
            tasks_seen, best = p["tasks_measured"], y
        else:
            best = y if best is None else min(best, y)
        xs.append(p[x_key])
        ys.append(best)
    return xs, ys


def tuning_curve_figure(curve: list[dict[str, Any]], *, x: str = "wall_seconds", title: str = "") -> go.Figure:
    """Best model latency estimate (ms) against tuning wall time (s) or energy (J), one marker
    per round; empty figure titled "no rounds yet" without rounds."""
    if x not in ("wall_seconds", "joules"):
        raise ValueError("x must be 'wall_seconds' or 'joules'")
    xs, ys = best_so_far(curve, x)
    fig = go.Figure()
    fig.add_scatter(x=xs, y=ys, mode="lines+markers", line_shape="hv", name="sum of weighted best task latencies")
    source = curve[-1]["energy_source"] if curve else ""
    xlabel = "tuning wall time (s)" if x == "wall_seconds" else f"tuning energy (J, {source or 'n/a'})"
    fig.update_layout(title=title or ("no rounds yet" if not curve else f"best latency vs {xlabel}"), height=320,
                      margin=dict(l=60, r=20, t=50, b=50), xaxis=dict(title=xlabel), yaxis=dict(title="latency estimate (ms)"))
    return fig


def time_split_figure(curve: list[dict[str, Any]]) -> go.Figure:
    """Stacked bars per round: seconds spent on search, build and measurement."""
    fig = go.Figure()
    rounds = [p["round"] for p in curve]
    for key, name in (("search_seconds", "search"), ("build_seconds", "build"), ("measure_seconds", "measurement")):
        fig.add_bar(x=rounds, y=[p[key] for p in curve], name=name)
    fig.update_layout(barmode="stack", title="time per round" if curve else "no rounds measured yet", height=300, margin=dict(l=60, r=20, t=50, b=50),
                      xaxis=dict(title="round"), yaxis=dict(title="seconds"))
    return fig


def latency_comparison_figure(result: dict[str, Any] | None) -> go.Figure:
    """Bar chart of end-to-end latency (ms, median with p25-p75 error bars) of the tuned build,
    the untuned build (with and, where measured, without ``mcpu``), PyTorch eager and
    onnxruntime; missing or failed ones (no ``median_s``) left out."""
    fig = go.Figure()
    if result:
        labels, med, lo, hi = [], [], [], []
        for key, label in (("tuned", "TVM tuned"), ("untuned", "TVM untuned"),
                           ("untuned_no_mcpu", "TVM untuned, no mcpu"), ("eager", "PyTorch eager"),
                           ("onnxruntime", "onnxruntime (CPU EP)")):
            d = result.get(key) or {}
            if "median_s" in d:
                labels.append(label)
                med.append(d["median_s"] * 1e3)
                lo.append((d["median_s"] - d["p25_s"]) * 1e3)
                hi.append((d["p75_s"] - d["median_s"]) * 1e3)
        fig.add_bar(x=labels, y=med, error_y=dict(type="data", array=hi, arrayminus=lo, symmetric=False))
    fig.update_layout(title="end-to-end latency (median, p25-p75)" if result else "no result yet", height=300,
                      margin=dict(l=60, r=20, t=50, b=40), xaxis=dict(title="build (same threads)"), yaxis=dict(title="ms", type="log"))
    return fig
