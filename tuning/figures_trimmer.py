"""Trimmer's dashboard figures: pure functions from plain data (a Trimmer report, see
:meth:`tuning.core.trimmer.TrimmerState.report`, or per-experiment summaries) to Plotly figures.

Units: joules on energy axes, milliseconds on latency axes (reports hold seconds).
"""
from __future__ import annotations

import math
from typing import Iterable, Optional, Sequence

import plotly.graph_objects as go


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the non-dominated points, sorted by energy.

    points: ``(joules, latency_s)`` pairs; lower is better in both. A point is dominated when
    another is no worse in both and strictly better in one. Points with a missing or non-finite
    coordinate are ignored.
    """
    ok = [i for i, (e, l) in enumerate(points)
          if e is not None and l is not None and math.isfinite(e) and math.isfinite(l)]
    front = []
    for i in ok:
        ei, li = points[i]
        dominated = any(
            (points[j][0] <= ei and points[j][1] <= li) and (points[j][0] < ei or points[j][1] < li)
            for j in ok if j != i
        )
        if not dominated:
            front.append(i)
    return sorted(front, key=lambda i: (points[i][0], points[i][1]))


def energy_latency_pareto_figure(runs: Iterable[dict]) -> go.Figure:
    """Energy against best latency, one point per tuning experiment, with the Pareto front.

    runs: dicts with ``label`` (str), ``scheduler`` (str), ``joules`` (float) and ``latency_s``
    (float, the model's tuned latency or the weighted sum of task best latencies; None when
    unknown - such runs are skipped).
    """
    runs = [r for r in runs if r.get("joules") is not None and r.get("latency_s") is not None]
    fig = go.Figure()
    for sched in sorted({r.get("scheduler") or "?" for r in runs}):
        sub = [r for r in runs if (r.get("scheduler") or "?") == sched]
        fig.add_trace(go.Scatter(
            x=[r["joules"] for r in sub], y=[r["latency_s"] * 1e3 for r in sub], mode="markers",
            name=sched, text=[r.get("label", "") for r in sub],
            hovertemplate="%{text}<br>%{x:.0f} J<br>%{y:.3f} ms<extra></extra>", marker={"size": 10},
        ))
    front = pareto_front([(r["joules"], r["latency_s"]) for r in runs])
    if front:
        fig.add_trace(go.Scatter(
            x=[runs[i]["joules"] for i in front], y=[runs[i]["latency_s"] * 1e3 for i in front],
            mode="lines", name="Pareto front", line={"dash": "dot", "color": "grey"}, hoverinfo="skip",
        ))
    fig.update_layout(title="Tuning energy against best latency (lower left is better)",
                      xaxis_title="tuning energy (J)", yaxis_title="latency (ms)", template="plotly_white")
    return fig


def task_curves(report: dict) -> dict[int, dict]:
    """Per-task tuning curves from a Trimmer report: for each task id, the cumulative energy
    (joules, over all rounds of the run) at the end of each of its rounds, its best latency
    (seconds) after it, and the preemption point ``(joules, latency_s)`` or None."""
    out: dict[int, dict] = {}
    cum = 0.0
    for r in report.get("rounds", []):
        cum += r.get("joules") or 0.0
        c = out.setdefault(r["task_id"], {"joules": [], "best_s": [], "preempted": None})
        c["joules"].append(cum)
        c["best_s"].append(r.get("best_after_s"))
        if r.get("preempted_task"):
            c["preempted"] = (cum, r.get("best_after_s"))
    return out


def preemption_figure(report: dict, names: Optional[dict[int, str]] = None) -> go.Figure:
    """Best latency of each task against cumulative tuning energy, with an X where Trimmer
    preempted the task (and a vertical line where the whole tuning stopped, if it did)."""
    names = names or {t["task_id"]: t.get("name") or f"task {t['task_id']}" for t in report.get("tasks", [])}
    fig = go.Figure()
    for tid, c in sorted(task_curves(report).items()):
        ys = [None if v is None else v * 1e3 for v in c["best_s"]]
        fig.add_trace(go.Scatter(x=c["joules"], y=ys, mode="lines+markers", name=names.get(tid, f"task {tid}"),
                                 line={"shape": "hv"}))
        if c["preempted"] and c["preempted"][1] is not None:
            fig.add_trace(go.Scatter(x=[c["preempted"][0]], y=[c["preempted"][1] * 1e3], mode="markers",
                                     marker={"symbol": "x", "size": 14, "color": "black"},
                                     name=f"preempted: {names.get(tid, tid)}", showlegend=False,
                                     hovertemplate="preempted at %{x:.0f} J<extra></extra>"))
    if report.get("stop_round"):
        rounds = report.get("rounds", [])
        stop_j = sum((r.get("joules") or 0.0) for r in rounds[: report["stop_round"]])
        fig.add_vline(x=stop_j, line_dash="dash", annotation_text=f"stop: {report.get('stop_reason')}")
    fig.update_layout(title="Per-task best latency and Trimmer preemption points",
                      xaxis_title="cumulative tuning energy (J)", yaxis_title="best latency (ms)",
                      yaxis_type="log", template="plotly_white")
    return fig
