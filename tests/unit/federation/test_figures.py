"""Pure figure functions of the federation dashboard."""
from __future__ import annotations

from federation import figures


def test_latency_heatmap_carries_the_matrix():
    fig = figures.latency_heatmap(["a", "b"], [[0.5, 84.9], [84.9, 0.5]])
    hm = fig.data[0]
    assert list(hm.x) == ["a", "b"] and [list(r) for r in hm.z] == [[0.5, 84.9], [84.9, 0.5]]
    assert hm.text[0][1] == "84.9"


def test_degradation_figure_one_sorted_line_per_app():
    rows = [{"app": "x", "kind": "inference", "sweep": "latency", "x": 50.0, "factor": 3.0},
            {"app": "x", "kind": "inference", "sweep": "latency", "x": 0.0, "factor": 1.1},
            {"app": "x", "kind": "inference", "sweep": "contention", "x": 0.5, "factor": 2.0},
            {"app": "y", "kind": "microservices", "sweep": "latency", "x": 0.0, "factor": 1.0}]
    fig = figures.degradation_figure(rows, "latency")
    assert [t.name for t in fig.data] == ["x (inference)", "y (microservices)"]
    assert list(fig.data[0].x) == [0.0, 50.0] and list(fig.data[0].y) == [1.1, 3.0]


def test_plan_table_and_comparison():
    result = {"plan": {"replicas": {"b": {"A": 1, "B": 2}, "a": {"A": 1}}, "explanation": {"a": "why a"}}}
    assert figures.plan_table(result) == [{"service": "a", "clusters": "A x1", "explanation": "why a"},
                                          {"service": "b", "clusters": "A x1, B x2", "explanation": ""}]
    cmp = {"app": "t", "plans": {"orchestrator": {"cost": {"total_ms": 10.0}}, "all-in-one": {"cost": {"total_ms": 20.0}}},
           "measured": {"orchestrator": {"p95_ms": 12.0}, "all-in-one": {"p95_ms": 25.0}}}
    fig = figures.plan_comparison_figure(cmp)
    assert list(fig.data[1].y) == [12.0, 25.0]
