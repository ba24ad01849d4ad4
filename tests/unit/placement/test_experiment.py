"""Simulation parameters and the Tiresias trace profiled from graph features alone."""
import pytest

from placement.experiment import SimulationParams, run_simulations


@pytest.mark.parametrize("params, bad", [
    ({"trace": "gavel:zzz"}, "trace"), ({"policies": []}, "policies"), ({"policies": ["horus", "horus"]}, "policies"),
    ({"cluster": "8"}, "cluster"), ({"seed": -1}, "seed"), ({"policies": ["fifo", "astrology"]}, "policies"),
])
def test_bad_parameters_are_named(params, bad):
    s = SimulationParams(data=params)
    assert not s.is_valid() and set(s.errors) == {bad}


def test_defaults():
    s = SimulationParams(data={})
    assert s.is_valid() and s.validated_data["policies"] == ["fifo", "gandiva", "horus"]


def test_tiresias60_with_predicted_profiles_on_a_small_cluster():
    res = run_simulations({"trace": "tiresias60", "policies": ["fifo", "horus"], "cluster": "2x4", "seed": 0})
    assert res["jobs"] == 60 and res["gpus"] == 8
    fifo, horus = (res["policies"][p]["summary"] for p in ("fifo", "horus"))
    assert fifo["jobs"] == horus["jobs"] == 60
    # on 8 GPUs the 60 jobs queue; co-location lets Horus start them sooner
    assert horus["mean_queueing_delay_s"] < fifo["mean_queueing_delay_s"]
