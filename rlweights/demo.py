"""The rlweights part of ``make demo``: the shipped PPO policy against the baselines on an
unseen PAI cluster setup with the real Azure Functions 2021 sample as the workload, recorded as a
``weight-learning`` experiment of the demo operator so /rlweights/ shows it."""
from __future__ import annotations

import json

DEMO_PARAMETERS = {"mode": "evaluate", "test_setups": 1, "azure_sample": True, "eval_seeds": [0], "seed": 7}


def run_demo(*, owner, stdout) -> dict:
    """Create a ``weight-learning`` experiment owned by ``owner`` that evaluates the shipped
    policy (``data/rlweights/policy.zip``) on one unseen setup with the Azure sample replayed 10x
    faster (budget 10 measurements per method, seed 0), run it in this process
    (:func:`webapp.services.experiment_run`), and print the comparison and the exported
    KubeSchedulerConfiguration. Takes a few seconds. Returns the experiment's result; raises
    ``RuntimeError`` if the experiment did not succeed."""
    from webapp.services import experiment_create, experiment_run

    exp = experiment_create(owner=owner, kind="weight-learning", parameters=DEMO_PARAMETERS,
                            name="demo: shipped PPO policy on the Azure 2021 sample")
    exp = experiment_run(experiment_id=exp.pk)
    if exp.state != "succeeded":
        raise RuntimeError(f"rlweights demo experiment {exp.pk} {exp.state}: {exp.error.splitlines()[0] if exp.error else ''}")
    r = exp.result
    s = r["summary"]
    stdout.write(f"rlweights: shipped PPO policy on unseen setup {r['test_scenarios'][0]} with the Azure 2021 sample replayed "
                 f"{r['params']['azure_speedup']:g}x faster\n")
    for m, v in sorted(s["methods"].items(), key=lambda kv: -kv[1]["mean_improvement_vs_equal_percent"]):
        stdout.write(f"  {m:14s} {v['mean_improvement_vs_equal_percent']:+6.2f}% mean-latency improvement over equal weights\n")
    stdout.write(f"  PPO vs best baseline ({s['best_baseline']}): {s['ppo_vs_best_baseline_percent']:+.2f}%\n")
    stdout.write("  learned weights: " + json.dumps(r["learned_weights"]) + "\n")
    stdout.write(r["kube_scheduler_configuration"])
    stdout.write(f"  (dashboard: /rlweights/experiments/{exp.pk}/, recorded as weight-learning experiment {exp.pk})\n")
    return r
