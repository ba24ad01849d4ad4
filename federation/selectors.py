"""Selectors of the federation engine (functions that read)."""
from __future__ import annotations

from webapp.models import Experiment
from webapp.states import State


def _visible(user):
    qs = Experiment.objects.filter(state=State.SUCCEEDED)
    return qs if user.is_staff else qs.filter(owner=user)


def latest_plan(*, user) -> Experiment | None:
    """The user's (staff: anyone's) latest succeeded ``federation-plan`` experiment."""
    return _visible(user).filter(kind="federation-plan").order_by("-finished_at", "-id").first()


def latest_benchmark(*, user) -> Experiment | None:
    """The user's (staff: anyone's) latest succeeded ``federation-benchmark`` experiment."""
    return _visible(user).filter(kind="federation-benchmark").order_by("-finished_at", "-id").first()
