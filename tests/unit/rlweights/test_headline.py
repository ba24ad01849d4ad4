"""The weight-learning headline: PPO against the best same-budget baseline, from the summary."""
from types import SimpleNamespace

from rlweights.experiment import weight_learning_headline


def test_headline_from_summary():
    exp = SimpleNamespace(result={"params": {"budget": 10, "metric": "mean"}, "summary": {
        "methods": {"ppo": {"mean_improvement_vs_equal_percent": 5.62}, "random": {"mean_improvement_vs_equal_percent": 5.06},
                    "equal": {"mean_improvement_vs_equal_percent": 0.0}},
        "best_baseline": "random", "ppo_vs_best_baseline_percent": 0.61}})
    h = weight_learning_headline(exp)
    assert (h.ours, h.baseline, h.baseline_name) == ("-5.6 %", "-5.1 %", "random (budget 10)")
    assert abs(h.ratio - 0.9939) < 1e-9 and h.better == "lower" and h.verdict == "tie"
    # latency change, read in the ratio's direction (lower is better): "-5.6 %" is 5.6 % faster
    assert h.metric == "mean-latency change vs equal weights (PPO)"


def test_no_headline_without_ppo():
    assert weight_learning_headline(SimpleNamespace(result={"summary": {"methods": {"random": {}}}})) is None
    assert weight_learning_headline(SimpleNamespace(result={})) is None
