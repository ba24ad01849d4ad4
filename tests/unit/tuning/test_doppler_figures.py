"""DOPpler's dashboard figure from stored decisions (pure function)."""
from __future__ import annotations

from tuning.doppler_figures import dop_trajectory_figure

DECISIONS = [
    {"round": 0, "task": "t1", "task_name": "conv", "dop": 1, "action": "increase", "sample": [], "rel_error": 0.0},
    {"round": 1, "task": "t2", "task_name": "dense", "dop": 1, "action": "increase", "sample": [], "rel_error": 0.0},
    {"round": 2, "task": "t1", "task_name": "conv", "dop": 2, "action": "backoff", "sample": [0, 3], "rel_error": 0.125},
]


def test_one_line_per_task_backoffs_and_errors():
    fig = dop_trajectory_figure(DECISIONS)
    names = [t.name for t in fig.data]
    assert names == ["DOP conv", "DOP dense", "back-off", "relative error vs serial (%)"]
    assert list(fig.data[0].x) == [0, 2] and list(fig.data[0].y) == [1, 2]
    assert list(fig.data[2].x) == [2]
    assert list(fig.data[3].y) == [12.5]  # 0.125 as percent


def test_empty():
    assert len(dop_trajectory_figure([]).data) == 0
