"""Trimmer figures and option parsing; expected values worked out by hand."""
from types import SimpleNamespace

import pytest

from tuning.backends.trimmer import config_from_options, runner_latencies
from tuning.figures_trimmer import energy_latency_pareto_figure, pareto_front, preemption_figure, task_curves


@pytest.mark.parametrize(
    "points, expected",
    [
        # (J, s): b=(200,1.0) is dominated by a=(100,1.0) (less energy, same latency);
        # c=(300,0.5) is the fastest; d=(150,0.8) beats neither a on energy nor c on latency -> front a, d, c
        ([(100, 1.0), (200, 1.0), (300, 0.5), (150, 0.8)], [0, 3, 2]),
        ([(100, 1.0)], [0]),
        ([(100, 1.0), (100, 1.0)], [0, 1]),       # equal points do not dominate each other
        ([(None, 1.0), (50, float("nan")), (70, 2.0)], [2]),
        ([], []),
    ],
)
def test_pareto_front(points, expected):
    assert pareto_front(points) == expected


REPORT = {
    "tasks": [{"task_id": 0, "name": "conv"}, {"task_id": 1, "name": "dense"}],
    "stop_round": 4,
    "stop_reason": "model-plateau",
    "rounds": [
        {"task_id": 0, "joules": 10.0, "best_after_s": 0.004, "preempted_task": False},
        {"task_id": 1, "joules": 5.0, "best_after_s": 0.002, "preempted_task": False},
        {"task_id": 0, "joules": 10.0, "best_after_s": 0.004, "preempted_task": True},
        {"task_id": 1, "joules": 5.0, "best_after_s": 0.001, "preempted_task": False},
    ],
}


def test_task_curves_cumulative_energy_and_preemption_point():
    c = task_curves(REPORT)
    # cumulative energy after rounds: 10, 15, 25, 30
    assert c[0] == {"joules": [10.0, 25.0], "best_s": [0.004, 0.004], "preempted": (25.0, 0.004)}
    assert c[1] == {"joules": [15.0, 30.0], "best_s": [0.002, 0.001], "preempted": None}


def test_figures_build():
    fig = preemption_figure(REPORT)
    names = [t.name for t in fig.data]
    assert "conv" in names and "dense" in names and "preempted: conv" in names
    fig = energy_latency_pareto_figure([
        {"label": "a", "scheduler": "gradient", "joules": 300.0, "latency_s": 0.010},
        {"label": "b", "scheduler": "trimmer", "joules": 200.0, "latency_s": 0.0101},
        {"label": "c", "scheduler": "trimmer", "joules": None, "latency_s": 0.01},
    ])
    front = [t for t in fig.data if t.name == "Pareto front"][0]
    assert list(front.x) == [200.0, 300.0]


def test_config_from_options_takes_own_keys_and_validates_subdict():
    cfg = config_from_options({"patience": 5, "number": 3, "trimmer": {"exploration_floor": 0.2}})
    assert (cfg.patience, cfg.exploration_floor) == (5, 0.2)
    with pytest.raises(ValueError, match="unknown Trimmer option"):
        config_from_options({"trimmer": {"patiense": 2}})
    with pytest.raises(ValueError):
        config_from_options({"patience": 0})
    # a bad top-level value is refused even where the sub-dict overrides it (both are stored)
    with pytest.raises(ValueError, match="preempt_warmup"):
        config_from_options({"preempt_warmup": -3, "trimmer": {"preempt_warmup": 5}})
    assert config_from_options({"preempt_warmup": 7, "trimmer": {"preempt_warmup": 5}}).preempt_warmup == 5


def test_runner_latencies_mean_and_errors():
    rr = [SimpleNamespace(run_secs=[0.001, 0.003], error_msg=None),
          SimpleNamespace(run_secs=None, error_msg="timeout"),
          SimpleNamespace(run_secs=[0.002], error_msg=None)]
    br = [SimpleNamespace(error_msg=None), SimpleNamespace(error_msg=None), SimpleNamespace(error_msg="build failed")]
    assert runner_latencies(rr, br) == [pytest.approx(0.002), None, None]
