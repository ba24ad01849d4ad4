"""DOPpler's DOP controller (tuning.core.doppler), table-driven with hand-derived expectations.

Each trajectory case lists per batch the relative error the serial sample will show and how many
parallelism-induced failures it had; the expected DOP per batch was worked out by hand from the
spec's rules (SPEC section 3, DOPpler):
  * a batch at DOP 1 is serial already: no check ("serial-equivalent"), DOP += step (capped at
    max_dop);
  * at DOP d > 1: back off to max(1, floor(d * 0.5)) if rel_error > 0.05 or
    induced_failures > 0.05 * d; else d + step, capped at max_dop ("hold" when already there).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from tuning.core.doppler import (
    DopController,
    DopplerConfig,
    best_fraction_indices,
    clearly_worse,
    estimate_run_secs,
    mad_outliers,
    mean_relative_error,
    modified_z_scores,
    repeats_sufficient,
    screen,
    select_serial_sample,
)

OK = (0.0, 0)  # (relative error, induced failures)
BAD = (0.0625, 0)  # 6.25% > 5%
EDGE = (0.046875, 0)  # 4.6875% <= 5%: passes
FAIL1 = (0.0, 1)


def _run(config: DopplerConfig, batches: list[tuple[float, int]], n: int = 10) -> DopController:
    """Feed synthetic batches: serial latency 1.0 s for every sampled candidate, parallel latency
    1.0 * (1 + err) (powers of two, so the error is exact in binary floating point); ``fails``
    sampled candidates failed in parallel (nan) but ran serially."""
    ctl = DopController(config)
    rng = np.random.default_rng(0)
    for err, fails in batches:
        parallel = np.full(n, 1.0 + err)
        parallel[:fails] = np.nan
        sample = ctl.plan_sample(parallel, rng)
        ctl.observe(parallel, {i: 1.0 for i in sample})
    return ctl


# Derivations (d = DOP of the batch):
# all_ok_max4:   1 ->(serial, +1) 2 ->ok 3 ->ok 4 ->ok, at max: hold 4 ->hold 4.       next 4
# backoff_at_4:  1 -> 2 ->ok 3 ->ok 4 ->BAD floor(4*.5)=2 ->ok 3.                     next 4
# edge_passes:   1 -> 2 ->4.6875%<=5% 3 ->ok 4.                                        next 5
# failure_at_2:  1 -> 2 ->1 failure > 0.05*2=0.1: floor(2*.5)=1 -> serial 2 ->ok 3.     next 4
# step2_max5:    step 2: 1 -> 3 -> 5 -> hold 5.                                        next 5
# backoff_from3: 1 -> 2 -> 3 ->BAD floor(1.5)=1 -> 2 ->BAD floor(1)=1.                  next 1
# factor_0.75:   1 -> 2 -> 3 -> 4 ->BAD floor(4*.75)=3 ->BAD floor(2.25)=2.             next 3
# max1:          max_dop 1: never grows: 1, 1, 1 (hold, a DOP-1 batch is never checked).  next 1
# bad_at_dop1:   the BAD error at DOP 1 is ignored (no sample taken): 1 -> 2 ->BAD 1.   next 2
TRAJECTORIES = [
    ("all_ok_max4", DopplerConfig(max_dop=4), [OK] * 6, [1, 2, 3, 4, 4, 4], 4,
     ["increase", "increase", "increase", "hold", "hold", "hold"]),
    ("backoff_at_4", DopplerConfig(max_dop=8), [OK, OK, OK, BAD, OK], [1, 2, 3, 4, 2], 3,
     ["increase", "increase", "increase", "backoff", "increase"]),
    ("edge_passes", DopplerConfig(max_dop=8), [OK, EDGE, OK, OK], [1, 2, 3, 4], 5,
     ["increase"] * 4),
    ("failure_at_2", DopplerConfig(max_dop=8), [OK, FAIL1, OK, OK], [1, 2, 1, 2], 3,
     ["increase", "backoff", "increase", "increase"]),
    ("step2_max5", DopplerConfig(max_dop=5, additive_step=2), [OK] * 4, [1, 3, 5, 5], 5,
     ["increase", "increase", "hold", "hold"]),
    ("backoff_from3", DopplerConfig(max_dop=8), [OK, OK, BAD, OK, BAD], [1, 2, 3, 1, 2], 1,
     ["increase", "increase", "backoff", "increase", "backoff"]),
    ("factor_0.75", DopplerConfig(max_dop=8, backoff_factor=0.75), [OK, OK, OK, BAD, BAD], [1, 2, 3, 4, 3], 2,
     ["increase", "increase", "increase", "backoff", "backoff"]),
    ("max1", DopplerConfig(max_dop=1), [OK, BAD, OK], [1, 1, 1], 1, ["hold", "hold", "hold"]),
    ("bad_at_dop1", DopplerConfig(max_dop=8), [BAD, BAD], [1, 2], 1, ["increase", "backoff"]),
]


@pytest.mark.parametrize("name,config,batches,expected,next_dop,actions", TRAJECTORIES, ids=[t[0] for t in TRAJECTORIES])
def test_dop_trajectory(name, config, batches, expected, next_dop, actions):
    ctl = _run(config, batches)
    assert ctl.trajectory() == expected
    assert ctl.dop == next_dop
    assert [d.action for d in ctl.history] == actions
    # a DOP-1 batch re-measures nothing and says so; every DOP > 1 batch had a serial sample
    assert [d.check for d in ctl.history] == ["serial-equivalent" if d == 1 else "serial-sample" for d in expected]
    assert all(d.sample == [] for d in ctl.history if d.dop == 1)


def test_failure_threshold_scales_with_dop():
    # At DOP 20, 5% of DOP is exactly 1 failure: 1 induced failure is not > 1 -> increase;
    # 2 induced failures > 1 -> back off to floor(20 * 0.5) = 10.
    cfg = DopplerConfig(max_dop=32, start_dop=20)
    ctl = DopController(cfg)
    p = np.full(20, 1.0)
    p[0] = np.nan
    assert ctl.observe(p, {0: 1.0}).action == "increase" and ctl.dop == 21
    ctl = DopController(cfg)
    p[1] = np.nan
    d = ctl.observe(p, {0: 1.0, 1: 1.0})
    assert (d.action, d.next_dop, d.induced_failures) == ("backoff", 10, 2)


def test_real_failures_do_not_count():
    # failed in parallel AND serially: a broken candidate, not parallelism's fault.
    ctl = DopController(DopplerConfig(max_dop=4, start_dop=2))
    p = np.array([np.nan, 1.0, 1.0, 1.0])
    d = ctl.observe(p, {0: float("nan"), 1: 1.0})
    assert (d.induced_failures, d.action, d.next_dop) == (0, "increase", 3)


@pytest.mark.parametrize("base,growth,dop,expected", [
    (10.0, 1.0, 1, 10.0),   # 10 * (1 + 1*0)
    (10.0, 1.0, 2, 20.0),   # 10 * (1 + 1*1)
    (10.0, 1.0, 4, 40.0),   # 10 * (1 + 1*3)
    (10.0, 0.5, 3, 20.0),   # 10 * (1 + 0.5*2)
    (5.0, 0.0, 7, 5.0),     # no growth
])
def test_timeout_grows_with_dop(base, growth, dop, expected):
    ctl = DopController(DopplerConfig(max_dop=8, base_timeout_s=base, timeout_growth=growth))
    assert ctl.timeout_s(dop) == pytest.approx(expected)


def test_modified_z_scores_by_hand():
    # values 0..4 and 100: median 2.5, |dev| = 2.5 1.5 .5 .5 1.5 97.5 -> MAD = median = 1.5
    # z(100) = 0.6745 * 97.5 / 1.5 = 43.8425; z(0) = 0.6745 * -2.5 / 1.5 = -1.12417
    z = modified_z_scores([0, 1, 2, 3, 4, 100])
    assert z[5] == pytest.approx(43.8425)
    assert z[0] == pytest.approx(-1.124167, rel=1e-5)
    assert mad_outliers([0, 1, 2, 3, 4, 100]) == [5]
    # MAD 0 (most values equal): nobody is an outlier
    assert mad_outliers([1, 1, 1, 1, 9]) == []
    # failed (nan) candidates are ignored
    assert mad_outliers([0, 1, float("nan"), 2, 3, 4, 100]) == [6]


def test_serial_sample_outliers_plus_random_fill():
    # n = 10; median 1.005; |dev| sorted .005 .005 .005 .015 .025 .045 .055 .095 .105 3.995,
    # MAD = (.025 + .045)/2 = .035; z(5.0) = .6745*3.995/.035 = 76.99 (outlier), z(0.9) = 2.02.
    # target ceil(0.2 * 10) = 2 -> the outlier (index 8) plus one random other finite index.
    values = [1.0, 1.1, 0.9, 1.0, 1.05, 0.95, 1.02, 0.98, 5.0, 1.01]
    for seed in range(5):
        s = select_serial_sample(values, np.random.default_rng(seed))
        assert len(s) == 2 and 8 in s
    # reproducible for a seed
    assert select_serial_sample(values, np.random.default_rng(3)) == select_serial_sample(values, np.random.default_rng(3))
    # 16 candidates, no outliers: ceil(3.2) = 4 random ones, never a failed (nan) one
    vals = np.linspace(1.0, 1.15, 16)
    vals[[2, 5]] = np.nan
    s = select_serial_sample(vals, np.random.default_rng(1))
    assert len(s) == 4 and not {2, 5} & set(s)


def test_plan_sample_adds_failures_and_is_empty_at_dop1():
    rng = np.random.default_rng(0)
    ctl = DopController(DopplerConfig(max_dop=4))
    assert ctl.plan_sample([1.0, 2.0, float("nan")], rng) == []
    ctl.dop = 2
    s = ctl.plan_sample([1.0] * 9 + [float("nan")], rng)
    assert 9 in s and len(s) == 3  # ceil(0.2*10) = 2 random finite + the failed one


def test_mean_relative_error_by_hand():
    # (|1.1-1.0|/1.0 + |2.0-2.5|/2.5) / 2 = (0.1 + 0.2) / 2 = 0.15; the nan pair is skipped
    assert mean_relative_error([1.1, 2.0, float("nan")], [1.0, 2.5, 1.0]) == pytest.approx(0.15)
    assert mean_relative_error([], []) == 0.0
    with pytest.raises(ValueError):
        mean_relative_error([1.0], [1.0, 2.0])


@pytest.mark.parametrize("history,batch,expected", [
    # 10 + 9 finite = 19 -> k = ceil(1.9) = 2 best: 0.5 (batch 0) and 1 (history)
    ([5, 4, 3, 2, 1, 6, 7, 8, 9, 10], [0.5, 11, 1.5, float("nan"), 20, 30, 40, 50, 60, 70], [0]),
    # same, but 0.7 also beats the history's 1 -> [0, 1]
    ([5, 4, 3, 2, 1, 6, 7, 8, 9, 10], [0.5, 0.7, 1.5, float("nan"), 20, 30, 40, 50, 60, 70], [0, 1]),
    # first batch of 4: k = ceil(0.4) = 1 -> the fastest, index 2
    ([], [3.0, 2.0, 1.0, 4.0], [2]),
    ([], [float("nan")], []),
])
def test_best_fraction(history, batch, expected):
    assert best_fraction_indices(history, batch, 0.10) == expected


@pytest.mark.parametrize("samples,kwargs,expected", [
    ([1.0, 1.0], {}, False),                       # n=2 < min_repeats=3
    ([1.0, 1.0, 1.0], {}, True),                   # s = 0: interval of width 0
    ([1.0, 2.0, 3.0], {}, False),                  # t(.975,2)=4.303 * 1/sqrt(3) = 2.48 > 0.03*2
    # mean 1.0, s = sqrt(0.0002/3) = 0.008165, half = 3.182 * 0.008165 / 2 = 0.01299
    ([1.00, 1.01, 0.99, 1.00], {}, True),          # 0.01299 <= 0.03
    ([1.00, 1.01, 0.99, 1.00], {"ci_rel_halfwidth": 0.01}, False),  # 0.01299 > 0.01
    # mean 1.0, s = 0.02 (ddof 1: 0.0008/2 = 0.0004), half = 4.303 * 0.02 / sqrt(3) = 0.04969
    ([0.98, 1.00, 1.02], {}, False),               # 0.04969 > 0.03 (default)
    ([0.98, 1.00, 1.02], {"ci_rel_halfwidth": 0.05}, True),  # 0.04969 <= 0.05
    # mean 1.0, s = 0.01, half = 4.303 * 0.01 / sqrt(3) = 0.02484 <= 0.03: three repeats suffice
    ([0.99, 1.00, 1.01], {}, True),
    ([1.0, 2.0, 3.0], {"max_repeats": 3}, True),   # bound reached
    ([1.0, 2.0, 3.0, 1.0, 2.0, 3.0], {}, True),    # default bound: 6 repeats
    ([1.0, 2.0, 3.0, 1.0, 2.0], {}, False),        # 5 < 6, t(.975,4)=2.776*0.837/2.236=1.04 > 0.054
])
def test_adaptive_repeats(samples, kwargs, expected):
    assert repeats_sufficient(samples, **kwargs) is expected


@pytest.mark.parametrize("first,best,ratio,expected", [
    (1.6e-3, 1.0e-3, 1.5, True),    # 1.6 ms > 1.5 * 1.0 ms
    (1.5e-3, 1.0e-3, 1.5, False),   # exactly 1.5x: not clearly worse
    (1.2e-3, 1.0e-3, 1.5, False),   # could still be the best within noise: repeat it
    (0.5e-3, 1.0e-3, 1.5, False),   # faster than the best
    (9.0, None, 1.5, False),        # no best yet (first candidate of a task)
    (9.0, float("inf"), 1.5, False),
    (3.1e-3, 1.0e-3, 3.0, True),    # 3.1 > 3 * 1.0
    (9.0, 1.0e-3, 0, False),        # screening disabled
])
def test_clearly_worse(first, best, ratio, expected):
    assert clearly_worse(first, best, ratio) is expected


# The screen with strikes; best 1.0 ms, ratio 1.5: a repeat above 1.5 ms is a strike
@pytest.mark.parametrize("repeats_ms,strikes,expected", [
    ([1.6], 1, "stop"),             # one strike is enough: the first repeat decides (as clearly_worse)
    ([1.2], 1, "pass"),
    ([1.6], 2, "more"),             # one strike of two: time another repeat
    ([1.6, 1.7], 2, "stop"),        # two strikes
    ([1.6, 1.1], 2, "pass"),        # the second repeat was undisturbed: a burst slowed the first
    ([1.6, 1.6], 3, "more"),
    ([1.6, 1.6, 1.55], 3, "stop"),
    ([1.6, 1.6, 1.5], 3, "pass"),   # exactly 1.5x is not clearly worse
    ([1.6, 1.7, 1.8], 2, "stop"),   # more repeats than strikes: all worse still stops
])
def test_screen_strikes(repeats_ms, strikes, expected):
    assert screen([r * 1e-3 for r in repeats_ms], 1.0e-3, 1.5, strikes) == expected


def test_screen_without_best_or_disabled_always_passes():
    assert screen([9.0, 9.0], None, 1.5, 2) == "pass"
    assert screen([9.0], 1e-3, 0, 1) == "pass"
    with pytest.raises(ValueError, match="screen_repeats"):
        screen([1.0], 1.0, 1.5, 0)
    with pytest.raises(ValueError, match="at least one"):
        screen([], 1.0, 1.5, 1)


def test_estimate_run_secs():
    reps = [2.0e-3, 1.0e-3, 1.6e-3]
    assert estimate_run_secs(reps, "mean") == reps       # recorded unchanged: the database takes the mean
    assert estimate_run_secs(reps, "min") == [1.0e-3]    # the fastest repeat alone
    assert estimate_run_secs([3e-3], "min") == [3e-3]
    with pytest.raises(ValueError, match="estimator"):
        estimate_run_secs(reps, "median")
    with pytest.raises(ValueError, match="at least one"):
        estimate_run_secs([], "min")


@pytest.mark.parametrize("kwargs", [
    {"max_dop": 0}, {"start_dop": 3, "max_dop": 2}, {"backoff_factor": 1.0}, {"max_rel_error": 0},
    {"sample_fraction": 1.5}, {"min_repeats": 5, "max_repeats": 3}, {"timeout_growth": -1},
    {"screen_ratio": 1.0}, {"screen_ratio": -2}, {"screen_repeats": 0}, {"screen_repeats": 7},
    {"screen_repeats": 2, "max_repeats": 1, "min_repeats": 1}, {"screen_repeats": 1.5}, {"screen_repeats": True}, {"estimator": "median"},
    {"estimator": None},
])
def test_config_rejects_bad_values(kwargs):
    # the error names the first (offending) setting, so a user sees which one to fix
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        DopplerConfig(**kwargs)


def test_config_from_options():
    assert DopplerConfig.from_options({"max_rel_error": 0.1}, max_dop=3) == DopplerConfig(max_rel_error=0.1, max_dop=3)
    with pytest.raises(ValueError, match="bogus"):
        DopplerConfig.from_options({"bogus": 1})
    assert math.isclose(DopplerConfig().max_rel_error, 0.05)
