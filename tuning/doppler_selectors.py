"""DOPpler's selector: the per-batch decisions the DOPpler runner stored in
``TuningRound.details["doppler"]``."""
from __future__ import annotations

from typing import Any


def doppler_decisions(*, experiment) -> list[dict[str, Any]]:
    """Selector: DOPpler's per-batch decisions of a tuning experiment, in round order, each with
    ``round`` and ``task`` (name) added. Empty for a tuning measured with another runner."""
    from .models import TuningRound

    out = []
    for r in TuningRound.objects.filter(experiment=experiment).select_related("task").order_by("round_index"):
        d = (r.details or {}).get("doppler")
        if d:
            out.append({**d, "round": r.round_index, "task_name": r.task.name})
    return out
