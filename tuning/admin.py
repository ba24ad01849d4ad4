"""Admin of the tuning engine."""
from django.contrib import admin

from .models import TuningRecord, TuningResult, TuningRound, TuningTask


@admin.register(TuningTask)
class TuningTaskAdmin(admin.ModelAdmin):
    list_display = ("experiment", "task_index", "name", "trials_done", "best_seconds", "state")
    list_filter = ("state",)


@admin.register(TuningRound)
class TuningRoundAdmin(admin.ModelAdmin):
    list_display = ("experiment", "round_index", "task", "num_candidates", "best_seconds_after", "energy_source")


@admin.register(TuningRecord)
class TuningRecordAdmin(admin.ModelAdmin):
    list_display = ("experiment", "task", "candidate_index", "mean_seconds", "energy_joules", "num_threads")


@admin.register(TuningResult)
class TuningResultAdmin(admin.ModelAdmin):
    list_display = ("experiment", "model_name", "total_trials", "wall_seconds", "joules")
