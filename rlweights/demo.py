"""The rlweights part of ``make demo``: the shipped PPO policy against the baselines on an
unseen PAI cluster setup with the real Azure Functions 2021 sample as the workload."""
from __future__ import annotations

import json


def run_demo(*, owner=None, stdout) -> dict:
    """Evaluate the shipped policy (``data/rlweights/policy.zip``) on one unseen setup with the
    Azure sample replayed 10x faster (budget 10 measurements per method, seed 0); print the comparison and the
    exported KubeSchedulerConfiguration. Takes a few seconds."""
    from .backends.pipeline import LearnParams, run_learning

    p = LearnParams(mode="evaluate", test_setups=1, azure_sample=True, eval_seeds=[0], seed=7)
    r = run_learning(p)
    s = r["summary"]
    stdout.write(f"rlweights: shipped PPO policy on unseen setup {r['test_scenarios'][0]} with the Azure 2021 sample replayed {p.azure_speedup:g}x faster\n")
    for m, v in sorted(s["methods"].items(), key=lambda kv: -kv[1]["mean_improvement_vs_equal_percent"]):
        stdout.write(f"  {m:14s} {v['mean_improvement_vs_equal_percent']:+6.2f}% mean latency vs equal weights\n")
    stdout.write(f"  PPO vs best baseline ({s['best_baseline']}): {s['ppo_vs_best_baseline_percent']:+.2f}%\n")
    stdout.write("  learned weights: " + json.dumps(r["learned_weights"]) + "\n")
    stdout.write(r["kube_scheduler_configuration"])
    stdout.write("  (dashboard: /rlweights/ after `manage.py learn_weights` or a weight-learning experiment)\n")
    return r
