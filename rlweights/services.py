"""Services of the rlweights engine (functions that write)."""
from __future__ import annotations

from typing import Any

from django.db import transaction

from webapp.models import Experiment

from .models import LearningCurvePoint, WeightStep


def weight_learning_store(*, experiment: Experiment, result: dict[str, Any]) -> None:
    """Replace the experiment's learning-curve points and PPO weight steps with ``result``'s."""
    # WeightStep.scenario holds 128 characters; a registered cluster's name alone may have 128
    scenario = (result["test_scenarios"][0] if result.get("test_scenarios") else "")[:128]
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
