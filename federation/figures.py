"""Pure figure functions of the federation dashboard: selector output -> Plotly figure."""
from __future__ import annotations

import plotly.graph_objects as go


def latency_heatmap(names: list[str], rtt_ms: list[list[float]], *, title: str = "Inter-cluster RTT (ms)") -> go.Figure:
    """Heatmap of the ``(C, C)`` RTT matrix in ms, annotated with the values."""
    fig = go.Figure(go.Heatmap(z=rtt_ms, x=names, y=names, colorscale="Viridis", colorbar={"title": "ms"},
                               text=[[f"{v:.1f}" for v in row] for row in rtt_ms], texttemplate="%{text}",
                               hovertemplate="%{y} -> %{x}: %{z:.1f} ms<extra></extra>"))
    fig.update_layout(title=title, xaxis_title="to", yaxis_title="from", height=380, margin={"l": 80, "r": 20, "t": 50, "b": 60})
    return fig


def degradation_figure(rows: list[dict], sweep: str) -> go.Figure:
    """Degradation factor (p95 / p95 of the sweep's x=0 baseline, 1.0 at x=0) against RTT (ms) or contention (0-1), one line
    per application; ``sweep`` is ``"latency"`` or ``"contention"``."""
    fig = go.Figure()
    for app in sorted({r["app"] for r in rows}):
        pts = sorted((r["x"], r["factor"]) for r in rows if r["app"] == app and r["sweep"] == sweep)
        kind = next(r["kind"] for r in rows if r["app"] == app)
        fig.add_trace(go.Scatter(x=[p[0] for p in pts], y=[p[1] for p in pts], mode="lines+markers", name=f"{app} ({kind})"))
    fig.update_layout(title=f"p95 degradation vs {'inter-cluster RTT' if sweep == 'latency' else 'contention'}",
                      xaxis_title="RTT between the two member clusters (ms)" if sweep == "latency" else "injected contention (fraction of CPU)",
                      yaxis_title="p95 / centralised p95", height=360, margin={"l": 60, "r": 20, "t": 50, "b": 60})
    return fig


def plan_comparison_figure(comparison: dict) -> go.Figure:
    """Expected (model) and measured (harness) p95 latency, ms, of the orchestrator and every
    baseline for one application."""
    methods = list(comparison["plans"])
    fig = go.Figure([
        go.Bar(name="expected (model, mean)", x=methods, y=[comparison["plans"][m]["cost"]["total_ms"] for m in methods]),
        go.Bar(name="measured p95 (harness)", x=methods, y=[comparison["measured"][m]["p95_ms"] for m in methods]),
    ])
    fig.update_layout(barmode="group", title=f"{comparison['app']}: orchestrator vs baselines", xaxis_title="plan", yaxis_title="ms per request",
                      height=340, margin={"l": 60, "r": 20, "t": 50, "b": 60})
    return fig


def plan_table(result: dict) -> list[dict]:
    """Rows ``{service, clusters, explanation}`` of a federation-plan result (for a template table)."""
    plan = result["plan"]
    return [{"service": s, "clusters": ", ".join(f"{c} x{n}" for c, n in sorted(plan["replicas"][s].items())),
             "explanation": plan["explanation"].get(s, "")} for s in sorted(plan["replicas"])]
