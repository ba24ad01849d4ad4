"""Admin of the placement engine."""
from django.contrib import admin

from .models import PlacementDecision, ProfileRow, SimulationJobOutcome


@admin.register(ProfileRow)
class ProfileRowAdmin(admin.ModelAdmin):
    list_display = ("model", "batch_size", "gpu_type", "util_mean_pct", "util_peak_pct", "memory_mib", "source")
    list_filter = ("gpu_type", "source")


@admin.register(PlacementDecision)
class PlacementDecisionAdmin(admin.ModelAdmin):
    list_display = ("job", "policy", "gpu_ids", "predicted_util_pct", "predicted_memory_mib", "created_at")
    list_select_related = ("job",)
    raw_id_fields = ("job",)  # a select of every job grows without bound


@admin.register(SimulationJobOutcome)
class SimulationJobOutcomeAdmin(admin.ModelAdmin):
    list_display = ("experiment", "policy", "job_index", "model", "num_gpus", "queueing_delay_s", "jct_s", "slowdown")
    list_filter = ("policy",)
    list_select_related = ("experiment",)
    raw_id_fields = ("experiment",)
