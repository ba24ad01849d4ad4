"""Checks on parsed JSON values shared by the API's serializers and the tuning options."""
from __future__ import annotations

import math
from typing import Any


def non_finite_path(value: Any, path: str = "") -> str | None:
    """Where the first infinite or NaN float in a parsed JSON value is (a request body's
    ``1e400`` parses to infinity): its path from ``path`` down, as ``path.key`` for an object
    member and ``path[i]`` for a list item (``options.energy_budget_j``, ``sizes[2]``; with the
    default empty ``path`` the first key has no dot), ``path`` itself if ``value`` is one, None
    if there is none. Objects and lists are searched in document order. Raises nothing."""
    if isinstance(value, float) and not math.isfinite(value):
        return path
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        sub = f"{path}[{key}]" if isinstance(key, int) else (f"{path}.{key}" if path else str(key))
        found = non_finite_path(item, sub)
        if found is not None:
            return found
    return None
