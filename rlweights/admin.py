"""Admin of the rlweights engine (read-only result rows)."""
from django.contrib import admin

from .models import LearningCurvePoint, WeightStep


@admin.register(LearningCurvePoint)
class LearningCurvePointAdmin(admin.ModelAdmin):
    list_display = ("experiment", "timesteps", "episode_reward", "best_improvement_percent")
    list_filter = ("experiment",)


@admin.register(WeightStep)
class WeightStepAdmin(admin.ModelAdmin):
    list_display = ("experiment", "scenario", "method", "step", "metric_s")
    list_filter = ("method",)
