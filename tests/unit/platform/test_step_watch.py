"""StepWatch: when job_run's step callback writes progress and checks for cancellation."""
from __future__ import annotations

from webapp.services import StepWatch


class Clock:
    """A fake clock advancing 0.25 s per reading (exact in binary floating point)."""

    def __init__(self):
        self.t = 0.0

    def __call__(self):
        self.t += 0.25
        return self.t


def test_long_job_checks_cancellation_every_second_between_percent_changes():
    w = StepWatch(100000, interval_s=1.0, clock=Clock())
    got = [w.step(i) for i in range(1, 13)]
    # step 1 at t=0.25: first percent (0) written and checked; then checks at t=1.25 (step 5)
    # and t=2.25 (step 9): 1 s apart, with the percent still 0 (it changes every 1000 steps)
    assert [i for i, (_, check) in enumerate(got, 1) if check] == [1, 5, 9]
    assert [(i, pct) for i, (pct, _) in enumerate(got, 1) if pct is not None] == [(1, 0)]


def test_percent_change_writes_and_checks_at_once():
    w = StepWatch(100000, interval_s=1.0, clock=Clock())
    for i in range(1, 1000):
        w.step(i)
    # timed checks fell on steps 1, 5, ..., 997 (t = 249.25 s); step 1000 comes at t = 250.0 s
    assert w.step(1000) == (1, True)  # percent 0 -> 1: written and checked though only 0.75 s passed
    assert w.step(1001) == (None, False)


def test_short_job_checks_every_percent():
    w = StepWatch(4, interval_s=1.0, clock=lambda: 0.0)  # a frozen clock: only percent changes count
    assert [w.step(i) for i in range(1, 5)] == [(25, True), (50, True), (75, True), (100, True)]
