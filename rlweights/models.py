"""Django models of the rlweights engine: result rows of a ``weight-learning`` experiment
(the summary itself is ``Experiment.result``)."""
from django.db import models

from webapp.models import Experiment


class LearningCurvePoint(models.Model):
    """One finished PPO training episode: environment steps so far, the episode's reward
    (sum of per-step percentage improvements, percent-points) and its best improvement [%]."""

    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="learning_curve")
    timesteps = models.PositiveIntegerField()
    episode_reward = models.FloatField()
    best_improvement_percent = models.FloatField()

    class Meta:
        ordering = ["experiment", "timesteps", "id"]


class WeightStep(models.Model):
    """A weight vector measured in an optimisation experiment on an unseen scenario:
    ``method`` (ppo or a baseline), ``step`` within the experiment, ``weights`` (by plugin
    name), the latency metric measured [s]."""

    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="weight_steps")
    scenario = models.CharField(max_length=128)
    method = models.CharField(max_length=32)
    step = models.PositiveIntegerField()
    weights = models.JSONField()
    metric_s = models.FloatField()

    class Meta:
        ordering = ["experiment", "scenario", "method", "step"]
