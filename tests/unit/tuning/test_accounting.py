"""Round accounting (search/build/measure split) and the tuning-curve figures, with a fake
meter and hand-computed values."""
from __future__ import annotations

import pytest

from tuning.backends.callbacks import RoundClock, TimedRunner
from tuning.backends.energy import EnergyMeter, EnergyReading
from tuning.figures import best_so_far, latency_comparison_figure, tuning_curve_figure


class ScriptedMeter(EnergyMeter):
    """Returns the scripted (seconds, joules) readings in order."""

    source, measured = "estimate", False

    def __init__(self, points):
        self.points = list(points)

    def _counter_joules(self):  # never called: read() is scripted below
        raise AssertionError("ScriptedMeter reads from its script")

    def read(self):
        s, j = self.points.pop(0)
        return EnergyReading(j, s, self.source, self.measured)


def _meter(times):
    # joules = 10 x seconds, so every energy split is ten times the time split
    return ScriptedMeter([(t, 10 * t) for t in times])


def test_round_split_sequential():
    # boundaries: start 0, build 3..10, wait 11..14, callback 15
    clock = RoundClock(_meter([0, 3, 10, 11, 14, 15]))
    seq = clock.build_started()
    clock.build_finished(seq)
    clock.wait_started(clock.last_built())
    clock.wait_finished(seq)
    rid, sl, now = clock.round_finished()
    assert rid == 0 and now.seconds == 15
    # search = 3 (generation) + 1 (before the wait) + 1 (after it) = 5 s; build 7 s; measure 3 s
    assert sl.seconds == {"search": 5, "build": 7, "measure": 3}
    assert sl.joules == {"search": 50, "build": 70, "measure": 30}


class _SyncRunner:
    """Like TVM 0.27's LocalRunner: measures every candidate inside ``run`` and hands back
    futures that are already done."""

    def run(self, runner_inputs):
        return []


def test_measurement_inside_run_counts_as_measurement():
    # boundaries: start 0, build 3..10, Runner.run 11..14 (measuring), callback 15: the same split
    # as when the tuner waits on the futures instead (LocalRunner's measurement is not "search")
    clock = RoundClock(_meter([0, 3, 10, 11, 14, 15]))
    seq = clock.build_started()
    clock.build_finished(seq)
    assert TimedRunner(_SyncRunner(), clock).run([]) == []
    rid, sl, now = clock.round_finished()
    assert rid == 0 and sl.seconds == {"search": 5, "build": 7, "measure": 3}


def test_round_split_when_builds_run_ahead_of_joins():
    # gradient warm-up: build r0 1..3, build r1 4..6, wait r0 6.5..8, callback r0 8.5,
    # wait r1 9..9.5, callback r1 10
    clock = RoundClock(_meter([0, 1, 3, 4, 6, 6.5, 8, 8.5, 9, 9.5, 10]))
    for _ in range(2):
        clock.build_finished(clock.build_started())
    clock.wait_started(0)
    clock.wait_finished(0)
    r0 = clock.round_finished()
    clock.wait_started(1)
    clock.wait_finished(1)
    r1 = clock.round_finished()
    assert (r0[0], r1[0]) == (0, 1)
    assert r0[1].seconds == {"search": 2.0, "build": 2.0, "measure": 1.5}
    assert r1[1].seconds == {"search": 2.0, "build": 2.0, "measure": 0.5}
    # the slices partition the wall clock: 5.5 + 4.5 = 10 s
    assert sum(r0[1].seconds.values()) + sum(r1[1].seconds.values()) == r1[2].seconds == 10


def _pt(rnd, wall, joules, lat, measured):
    return {"round": rnd, "wall_seconds": wall, "joules": joules, "weighted_latency_s": lat, "tasks_measured": measured,
            "energy_source": "estimate", "search_seconds": 1, "build_seconds": 2, "measure_seconds": 3}


def test_best_so_far_is_running_minimum_once_all_tasks_counted():
    curve = [_pt(0, 10, 100, 0.004, 1), _pt(1, 20, 200, 0.009, 2), _pt(2, 30, 300, 0.011, 2), _pt(3, 40, 400, 0.007, 2)]
    xs, ys = best_so_far(curve, "wall_seconds")
    assert xs == [10, 20, 30, 40]
    assert ys == pytest.approx([4.0, 9.0, 9.0, 7.0])  # ms; round 2 did not improve
    xs, _ = best_so_far(curve, "joules")
    assert xs == [100, 200, 300, 400]


def test_figures_build():
    fig = tuning_curve_figure([_pt(0, 10, 100, 0.004, 1)], x="joules")
    assert "energy" in fig.layout.xaxis.title.text
    with pytest.raises(ValueError):
        tuning_curve_figure([], x="trials")
    fig = latency_comparison_figure({"tuned": {"median_s": 0.001, "p25_s": 0.0009, "p75_s": 0.0012},
                                     "untuned": {"median_s": 0.01, "p25_s": 0.009, "p75_s": 0.011}, "eager": None})
    assert list(fig.data[0].x) == ["TVM tuned", "TVM untuned"]
    assert list(fig.data[0].y) == pytest.approx([1.0, 10.0])
