"""webapp.auth.SlidingWindowCounter: the sliding-window counter behind the submission and
sign-in throttles, on a local-memory cache with a controlled clock."""
from __future__ import annotations

import uuid

import pytest
from django.core.cache.backends.locmem import LocMemCache

from webapp.auth import SubmitThrottle


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class User:
    is_authenticated = True

    def __init__(self, pk: int) -> None:
        self.pk = pk


class Request:
    def __init__(self, pk: int) -> None:
        self.user, self.META, self.headers = User(pk), {}, {}


@pytest.fixture
def throttle(monkeypatch):
    """A factory of SubmitThrottle at 10/min on one cache and one clock (a new instance per
    request, as DRF makes)."""
    cache, clock = LocMemCache(f"throttle-test-{uuid.uuid4()}", {}), Clock(6000.0)  # 6000 s: a window starts
    monkeypatch.setattr(SubmitThrottle, "THROTTLE_RATES", {"submit": "10/min"})
    monkeypatch.setattr(SubmitThrottle, "cache", cache)

    def make():
        t = SubmitThrottle()
        t.timer = clock
        return t

    make.clock = clock
    return make


def test_limit_within_a_window_and_refusals_are_not_counted(throttle):
    allowed = [throttle().allow_request(Request(1), None) for _ in range(15)]
    assert allowed == [True] * 10 + [False] * 5
    t = throttle()
    assert not t.allow_request(Request(1), None)
    # 10 in this window, none before: the estimate falls below 10 once this window has become
    # the previous one, at the next window's start (60 s from now)
    assert t.wait() == pytest.approx(60.0)
    throttle.clock.t = 6060.5  # 10 * (1 - 0.5/60) < 10
    assert throttle().allow_request(Request(1), None)
    assert throttle().allow_request(Request(2), None)  # per user


def test_previous_window_decays_linearly(throttle):
    for _ in range(10):
        assert throttle().allow_request(Request(1), None)
    throttle.clock.t = 6060.0 + 15.0  # next window, a quarter gone: estimate 10 * 0.75 = 7.5
    allowed = [throttle().allow_request(Request(1), None) for _ in range(5)]
    assert allowed == [True, True, True, False, False]  # 7.5, 8.5, 9.5 < 10; then 10.5
    t = throttle()
    assert not t.allow_request(Request(1), None)
    # 3 this window: the previous weight must fall to 7/10, i.e. 30% into the window, 3 s from now
    assert t.wait() == pytest.approx(3.0)
    throttle.clock.t = 6060.0 + 18.5  # 0.69 * 10 + 3 = 9.9 < 10
    assert throttle().allow_request(Request(1), None)
    throttle.clock.t = 6060.0 + 120.0  # two windows later: nothing counts
    assert [throttle().allow_request(Request(1), None) for _ in range(10)] == [True] * 10


def test_unreachable_cache_lets_requests_through(throttle, monkeypatch, caplog):
    def down(*a, **k):
        raise ConnectionError("cache server down")

    monkeypatch.setattr(SubmitThrottle.cache, "incr", down)
    assert all(throttle().allow_request(Request(1), None) for _ in range(20))
    assert "throttle submit not applied: cache unavailable (ConnectionError" in caplog.text


def test_a_zero_limit_refuses_everything_and_a_bug_is_not_taken_for_an_outage(throttle, monkeypatch):
    monkeypatch.setattr(SubmitThrottle, "THROTTLE_RATES", {"submit": "0/min"})
    t = throttle()
    assert not t.allow_request(Request(1), None) and t.wait() is None

    def bug(*a, **k):
        raise ZeroDivisionError("a bug, not an unreachable cache")

    monkeypatch.setattr(SubmitThrottle, "THROTTLE_RATES", {"submit": "10/min"})
    monkeypatch.setattr(SubmitThrottle.cache, "incr", bug)
    with pytest.raises(ZeroDivisionError):
        throttle().allow_request(Request(1), None)
