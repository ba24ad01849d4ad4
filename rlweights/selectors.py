"""Selectors of the rlweights engine (functions that read)."""
from __future__ import annotations

from django.db.models import QuerySet

from webapp.models import Experiment
from webapp.states import State

from .models import LearningCurvePoint, WeightStep


def weight_learning_experiments(*, user) -> QuerySet[Experiment]:
    """The user's weight-learning experiments (staff see all), newest first."""
    qs = Experiment.objects.filter(kind="weight-learning")
    if not user.is_staff:
        qs = qs.filter(owner=user)
    return qs.order_by("-created_at", "-id")


def latest_succeeded_weight_learning(*, user) -> Experiment | None:
    """The newest succeeded weight-learning experiment the user may see, or ``None``."""
    return weight_learning_experiments(user=user).filter(state=State.SUCCEEDED).first()


def learning_curve(*, experiment: Experiment) -> list[dict]:
    """``[{"timesteps", "episode_reward", "best_improvement_percent"}]`` in training order."""
    return list(LearningCurvePoint.objects.filter(experiment=experiment)
                .values("timesteps", "episode_reward", "best_improvement_percent"))


def weight_steps(*, experiment: Experiment) -> list[dict]:
    """The PPO experiment's steps on the first unseen scenario: ``step``, ``weights``, ``metric_s``."""
    return list(WeightStep.objects.filter(experiment=experiment, method="ppo").values("scenario", "step", "weights", "metric_s"))


def cluster_nodes(*, cluster_id: int) -> dict:
    """A registered cluster as plain data for :class:`rlweights.pipeline.LearnParams` (``cluster``:
    ``{"name", "id", "nodes": [{"name", "cpu_cores", "memory_mib", "labels", "taints"}]}``, nodes
    in name order); raises ``Cluster.DoesNotExist``."""
    from webapp.models import Cluster

    c = Cluster.objects.get(pk=cluster_id)
    return {"name": c.name, "id": c.pk, "nodes": [{"name": n.name, "cpu_cores": n.cpu_cores, "memory_mib": n.memory_mib,
                                       "labels": n.labels, "taints": n.taints} for n in c.nodes.order_by("name")]}
