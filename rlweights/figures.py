"""Pure figure functions of the rlweights dashboard: selector output in, Plotly figure out."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go


def learning_curve_figure(points: list[dict], window: int = 20) -> go.Figure:
    """Episode reward (sum of per-step % improvements) against environment steps, with a
    moving average over ``window`` episodes."""
    x = [p["timesteps"] for p in points]
    y = [p["episode_reward"] for p in points]
    fig = go.Figure()
    fig.add_scatter(x=x, y=y, mode="markers", name="episode reward", marker={"size": 4, "opacity": 0.4})
    if len(y) >= 2:
        w = min(window, len(y))
        avg = np.convolve(y, np.ones(w) / w, mode="valid")
        fig.add_scatter(x=x[w - 1:], y=avg.tolist(), mode="lines", name=f"mean of {w} episodes")
    fig.update_layout(title="PPO learning curve" if points else "no learning curve: evaluate mode runs the shipped policy (no training)", xaxis_title="environment steps", yaxis_title="episode reward (%-points)")
    return fig


def weights_per_step_figure(steps: list[dict]) -> go.Figure:
    """Weight of each score plugin at each step of the PPO optimisation experiment, with the
    latency measured (second axis)."""
    fig = go.Figure()
    if steps:
        for name in steps[0]["weights"]:
            fig.add_scatter(x=[s["step"] for s in steps], y=[s["weights"][name] for s in steps], mode="lines+markers", name=name)
        fig.add_scatter(x=[s["step"] for s in steps], y=[s["metric_s"] for s in steps], mode="lines", name="latency [s]",
                        yaxis="y2", line={"dash": "dot", "color": "black"})
    fig.update_layout(title="Weights chosen per step (unseen setup)", xaxis_title="step", yaxis_title="weight",
                      yaxis2={"title": "latency [s]", "overlaying": "y", "side": "right"})
    return fig


def baseline_comparison_figure(summary: dict) -> go.Figure:
    """Mean improvement over equal weights [%] per method (error bars: standard deviation over
    unseen scenarios and seeds)."""
    methods = summary.get("methods", {})
    names = sorted(methods, key=lambda m: methods[m]["mean_improvement_vs_equal_percent"])
    fig = go.Figure(go.Bar(x=names, y=[methods[m]["mean_improvement_vs_equal_percent"] for m in names],
                           error_y={"type": "data", "array": [methods[m]["std"] for m in names]}))
    fig.update_layout(title="Improvement over equal weights on unseen setups and workloads",
                      yaxis_title="latency improvement [%]", xaxis_title="method")
    return fig
