"""Round accounting (search/build/measure split) and the tuning-curve figures, with a fake
meter and hand-computed values."""
from __future__ import annotations

import pytest

from tuning.backends.callbacks import RoundClock
from tuning.backends.energy import EnergyMeter, EnergyReading
from tuning.figures import best_so_far, latency_comparison_figure, tuning_curve_figure


class ScriptedMeter(EnergyMeter):
    """Returns the scripted (seconds, joules) readings in order."""

    source, measured = "estimate", False

    def __init__(self, points):
        self.points = list(points)

    def read(self):
        s, j = self.points.pop(0)
        return EnergyReading(j, s, self.source, self.measured)


def test_round_split_from_timestamps():
    # start 0 s/0 J; build 3..10 s (12..40 J); callback at 14 s (52 J)
    # -> search 3 s/12 J, build 7 s/28 J, measure 4 s/12 J
    clock = RoundClock(ScriptedMeter([(0, 0), (3, 12), (10, 40), (14, 52), (20, 70), (21, 71), (25, 80)]))
    started = clock.build_started()
    clock.build_finished(started)
    prev, b0, b1, now = clock.round_finished()
    assert (b0.seconds - prev.seconds, b1.seconds - b0.seconds, now.seconds - b1.seconds) == (3, 7, 4)
    assert (b0.joules - prev.joules, b1.joules - b0.joules, now.joules - b1.joules) == (12, 28, 12)
    # the next round's search starts at the previous callback (14 s)
    clock.build_finished(clock.build_started())
    prev, b0, b1, now = clock.round_finished()
    assert (b0.seconds - prev.seconds, b1.seconds - b0.seconds, now.seconds - b1.seconds) == (6, 1, 4)


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
