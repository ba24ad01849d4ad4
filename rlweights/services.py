"""Services of the rlweights engine (functions that write)."""
from __future__ import annotations

from typing import Any

from django.db import transaction

from webapp.experiments import ProgressReporter
from webapp.models import Experiment

from .models import LearningCurvePoint, WeightStep


def weight_learning_run(experiment: Experiment, reporter: ProgressReporter) -> dict[str, Any]:
    """Runner of the ``weight-learning`` experiment kind: train PPO (or evaluate a saved
    policy) and compare it with the baselines on unseen setups and workloads
    (:func:`rlweights.backends.pipeline.run_learning`). Idempotent: a rerun (worker lost)
    recomputes the same seeded result and replaces this experiment's rows atomically.
    Returns the summary stored as ``experiment.result``."""
    from .backends.pipeline import LearnParams, run_learning

    raw = dict(experiment.parameters)
    cluster_id = raw.pop("cluster_id", None)
    params = LearnParams(**raw)
    if cluster_id is not None:
        params.cluster = cluster_nodes(cluster_id=cluster_id)
    result = run_learning(params, progress=reporter.report)
    weight_learning_store(experiment=experiment, result=result)
    return result


def cluster_nodes(*, cluster_id: int) -> dict:
    """A registered cluster as plain data for :class:`rlweights.backends.pipeline.LearnParams`."""
    from webapp.models import Cluster

    c = Cluster.objects.get(pk=cluster_id)
    return {"name": c.name, "nodes": [{"name": n.name, "cpu_cores": n.cpu_cores, "memory_mib": n.memory_mib,
                                       "labels": n.labels, "taints": n.taints} for n in c.nodes.all()]}


def weight_learning_store(*, experiment: Experiment, result: dict[str, Any]) -> None:
    """Replace the experiment's learning-curve points and PPO weight steps with ``result``'s."""
    scenario = result["test_scenarios"][0] if result.get("test_scenarios") else ""
    with transaction.atomic():
        LearningCurvePoint.objects.filter(experiment=experiment).delete()
        WeightStep.objects.filter(experiment=experiment).delete()
        LearningCurvePoint.objects.bulk_create([
            LearningCurvePoint(experiment=experiment, timesteps=c["timesteps"], episode_reward=c["episode_reward"],
                               best_improvement_percent=c["best_improvement_percent"])
            for c in result.get("curve", [])
        ])
        WeightStep.objects.bulk_create([
            WeightStep(experiment=experiment, scenario=scenario, method="ppo", step=s["step"],
                       weights=dict(zip(result["plugins"], s["weights"])), metric_s=s["metric_s"])
            for s in result.get("ppo_steps", [])
        ])
