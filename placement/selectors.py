"""Selectors of the placement engine (functions that read)."""
from __future__ import annotations

from django.db.models import QuerySet

from webapp.models import Experiment

from .models import PlacementDecision, ProfileRow


def decision_list(*, user) -> QuerySet[PlacementDecision]:
    """Placement decisions of the user's jobs (staff: all), newest first."""
    qs = PlacementDecision.objects.select_related("job")
    return qs if user.is_staff else qs.filter(job__owner=user)


def profile_rows(*, gpu_type: str | None = None) -> QuerySet[ProfileRow]:
    qs = ProfileRow.objects.all()
    return qs.filter(gpu_type__iexact=gpu_type) if gpu_type else qs


def simulation_list(*, user) -> QuerySet[Experiment]:
    """Simulation experiments the user may see (staff: all), newest first."""
    qs = Experiment.objects.filter(kind="simulation")
    return qs if user.is_staff else qs.filter(owner=user)
