"""The life-cycle state machine, written out by hand: every (from, to) pair, legal or not."""
from __future__ import annotations

import pytest

from webapp.states import IllegalTransition, check_transition

Q, R, S, F, C = "queued", "running", "succeeded", "failed", "cancelled"

# (from, to, legal): all 25 pairs.
TABLE = [
    (Q, Q, False), (Q, R, True), (Q, S, False), (Q, F, True), (Q, C, True),
    (R, Q, True), (R, R, False), (R, S, True), (R, F, True), (R, C, True),
    (S, Q, False), (S, R, False), (S, S, False), (S, F, False), (S, C, False),
    (F, Q, False), (F, R, False), (F, S, False), (F, F, False), (F, C, False),
    (C, Q, False), (C, R, False), (C, S, False), (C, F, False), (C, C, False),
]


@pytest.mark.parametrize("current, target, legal", TABLE)
def test_transition_table(current, target, legal):
    if legal:
        check_transition(object(), current, target)
    else:
        with pytest.raises(IllegalTransition) as exc:
            check_transition(object(), current, target)
        assert exc.value.current == current and exc.value.target == target


def test_terminal_message_says_so():
    with pytest.raises(IllegalTransition, match=r"none \(terminal state\)"):
        check_transition(object(), S, R)


def test_model_transition_sets_timestamps_and_refuses_illegal():
    from webapp.models import Job

    job = Job(model_name="resnet18", batch_size=1)
    job.transition_to(R)
    assert job.started_at is not None and job.finished_at is None
    job.transition_to(S)
    assert job.finished_at is not None and job.is_terminal
    with pytest.raises(IllegalTransition):
        job.transition_to(C)
    assert job.state == S


def test_message_uses_state_values_not_enum_names():
    from webapp.states import State

    with pytest.raises(IllegalTransition) as exc:
        check_transition(object(), State.SUCCEEDED, State.CANCELLED)
    assert str(exc.value) == "object ?: cannot go from 'succeeded' to 'cancelled'; allowed from 'succeeded': none (terminal state)"
    with pytest.raises(IllegalTransition) as exc:
        check_transition(object(), State.QUEUED, State.SUCCEEDED)
    assert str(exc.value) == "object ?: cannot go from 'queued' to 'succeeded'; allowed from 'queued': cancelled, failed, running"
