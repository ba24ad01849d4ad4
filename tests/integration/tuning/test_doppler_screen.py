"""DOPpler's early-termination screen with strikes and its latency estimator, on the LLVM CPU
target with real kernels in a real measurement worker (no mocks).

Kernels from ``doppler_kernels``: ``single`` computes C = A @ B (128x128 float32) once,
``quad`` four times (four reductions, then their sum), so ``quad`` does about four times the
work: after ``single`` set the task's best, ``quad`` is screened out at ``screen_ratio`` 1.5 even
when every repeat of ``single`` was slowed down by a burst (about 1.6x on these VMs).
"""
from __future__ import annotations

import math

import pytest

from tests.integration.tuning.doppler_kernels import kernel_pair

pytestmark = [pytest.mark.integration]


@pytest.fixture
def kernels(tmp_path):
    return kernel_pair(tmp_path, 4)


def _engine(tmp_path, **config):
    from tuning.backends.doppler import DopplerEngine, SlotSpec
    from tuning.core.doppler import DopplerConfig

    slot = SlotSpec(kind="cpu", name="cpu0", num_threads=1, cores=(0,))
    return DopplerEngine([slot], config=DopplerConfig(max_dop=1, **config), work_dir=tmp_path / "work",
                         build_workers=1)


def test_two_strike_screen_times_a_second_repeat_before_dropping(tmp_path, kernels):
    from tuning.backends.doppler import Candidate

    single, quad, info = kernels
    with _engine(tmp_path, screen_ratio=1.5, screen_repeats=2) as eng:
        results = eng.measure_batch([Candidate(single, "cpu", info), Candidate(quad, "cpu", info)])
        decision = eng.decisions[-1]
    (first, err0), (second, err1) = results
    assert err0 is None and err1 is None
    # single: no best yet, timed fully (3-6 repeats, every one recorded: estimator "mean")
    assert 3 <= len(first) <= 6
    # quad: two repeats, both clearly worse than single's mean, then dropped
    assert len(second) == 2 and decision["early_stops"] == 1
    assert decision["repeats"] == len(first) + 2


def test_one_strike_screen_drops_after_the_first_repeat(tmp_path, kernels):
    from tuning.backends.doppler import Candidate

    single, quad, info = kernels
    with _engine(tmp_path, screen_ratio=1.5) as eng:  # screen_repeats 1, the default
        results = eng.measure_batch([Candidate(single, "cpu", info), Candidate(quad, "cpu", info)])
        decision = eng.decisions[-1]
    assert len(results[1][0]) == 1 and decision["early_stops"] == 1
    assert decision["repeats"] == len(results[0][0]) + 1


def test_min_estimator_records_the_fastest_repeat_alone(tmp_path, kernels):
    from tuning.backends.doppler import Candidate

    single, quad, info = kernels
    with _engine(tmp_path, screen_ratio=0.0, estimator="min") as eng:  # no screen: both timed fully
        results = eng.measure_batch([Candidate(single, "cpu", info), Candidate(quad, "cpu", info)])
        decision = eng.decisions[-1]
        history = list(eng._tasks[eng.task_key(Candidate(single, "cpu", info))].history)
    assert [len(c) for c, _ in results] == [1, 1], results
    # 3-6 repeats were timed per candidate, one value recorded for each
    assert 6 <= decision["repeats"] <= 12 and decision["early_stops"] == 0
    one, four = results[0][0][0], results[1][0][0]
    assert math.isfinite(one) and one > 0
    # four times the work (plus the sum): the fastest repeats of the two kernels are about 4x
    # apart; wide bounds, as a burst of other load can slow every repeat of one kernel (~1.6x)
    assert 2.0 < four / one < 8.0, (one, four)
    assert history == [one, four]  # the engine's task history (the screen's best) uses the recorded values


def test_plain_timing_records_seconds_per_run_in_the_worker(kernels):
    # DOPpler's measurement function itself, in this process as in a measurement worker: plain
    # seconds per run (a 128x128 matmul on one core: well under 0.5 s, above 1 us), as many as
    # it says it timed, and no trace of the removed paired timing in what it reports
    from tuning.backends.doppler import worker
    from tuning.backends.doppler.slots import SlotSpec
    from tuning.core.doppler import DopplerConfig

    single, _, info = kernels
    cfg = DopplerConfig()
    worker._WORKER["slot"] = SlotSpec(kind="cpu", name="cpu", num_threads=1)
    try:
        costs, got = worker.measure_in_worker(single, "cpu", info, {
            "min_repeat_ms": 10, "min_repeats": cfg.min_repeats, "max_repeats": cfg.max_repeats,
            "ci_rel_halfwidth": cfg.ci_rel_halfwidth, "screen_ratio": 0.0, "best_s": None})
    finally:
        worker._WORKER.clear()
    assert cfg.min_repeats <= got["repeats"] == len(costs) <= cfg.max_repeats
    assert all(math.isfinite(c) and 1e-6 < c < 0.5 for c in costs), costs
    assert got["early_stop"] is False and "paired" not in got
