"""The life-cycle state machine shared by jobs and experiments.

States: ``queued -> running -> succeeded | failed | cancelled``; ``queued`` may also go
straight to ``cancelled`` or ``failed`` (rejected before it ran). A running item may go back
to ``queued`` only when its worker was lost and the work is redelivered. Terminal states
never change again, so a finished result is never overwritten.
"""
from __future__ import annotations

from django.db import models


class State(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


TERMINAL_STATES = frozenset({State.SUCCEEDED, State.FAILED, State.CANCELLED})

#: Legal transitions: ``TRANSITIONS[current]`` is the set of states that may follow it.
TRANSITIONS: dict[str, frozenset[str]] = {
    State.QUEUED: frozenset({State.RUNNING, State.CANCELLED, State.FAILED}),
    State.RUNNING: frozenset({State.SUCCEEDED, State.FAILED, State.CANCELLED, State.QUEUED}),
    State.SUCCEEDED: frozenset(),
    State.FAILED: frozenset(),
    State.CANCELLED: frozenset(),
}


class IllegalTransition(ValueError):
    """Raised when a job or experiment is asked to move to a state its current state forbids."""

    def __init__(self, obj: object, current: str, target: str) -> None:
        # plain strings: a State member's repr is "State.CANCELLED", not "'cancelled'"
        current, target = str(current), str(target)
        allowed = ", ".join(sorted(str(s) for s in TRANSITIONS.get(current, ()))) or "none (terminal state)"
        super().__init__(
            f"{type(obj).__name__} {getattr(obj, 'pk', '?')}: cannot go from {current!r} to "
            f"{target!r}; allowed from {current!r}: {allowed}"
        )
        self.current = current
        self.target = target


def check_transition(obj: object, current: str, target: str) -> None:
    """Raise :class:`IllegalTransition` unless ``current -> target`` is in :data:`TRANSITIONS`."""
    if target not in TRANSITIONS.get(current, frozenset()):
        raise IllegalTransition(obj, current, target)
