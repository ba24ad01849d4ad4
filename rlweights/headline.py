"""The weight-learning experiment's headline (landing page, demo summary): PPO's learned
weights against the best baseline searched with the same budget, on unseen setups."""
from __future__ import annotations


def weight_learning_headline(experiment):
    """``Headline`` of a succeeded weight learning: PPO's mean improvement of the latency metric
    over equal weights (percent) against the best same-budget baseline's; ``ratio`` = PPO's
    latency / the best baseline's (mean over pairs), lower is better. ``None`` without PPO."""
    from webapp.experiments import Headline

    s = (experiment.result or {}).get("summary") or {}
    methods = s.get("methods") or {}
    best = s.get("best_baseline")
    if "ppo" not in methods or not best:
        return None
    ppo = methods["ppo"]["mean_improvement_vs_equal_percent"]
    base = methods[best]["mean_improvement_vs_equal_percent"]
    budget = ((experiment.result or {}).get("params") or {}).get("budget", "?")
    metric = ((experiment.result or {}).get("params") or {}).get("metric", "mean")
    return Headline(engine="rlweights", metric=f"{metric} latency vs equal weights (PPO)", ours=f"{ppo:+.1f} %",
                    baseline_name=f"{best} (budget {budget})", baseline=f"{base:+.1f} %",
                    ratio=1.0 - s["ppo_vs_best_baseline_percent"] / 100.0, better="lower",
                    note=f"ratio: PPO's latency / {best}'s, on unseen setups and workloads; paper: +33 % vs fixed, +12 % vs best")
