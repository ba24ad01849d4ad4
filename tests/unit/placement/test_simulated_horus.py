"""Horus as simulations run it (:func:`placement.pipeline.simulation_policy`): Tiresias's LAS
levels with preemption, the out-of-family pair belief and the break-even bound; every part can
be overridden, live placement keeps the class defaults, and a simulation's result names the
settings it ran with."""
from __future__ import annotations

from placement import pipeline
from placement.core import setup
from placement.core.pair_predictor import OutOfFamilyBelief
from placement.core.policies import FIFOExclusive, Horus, make_policy
from placement.core.world import InterferenceWorld


def test_simulated_horus_has_the_levels_the_belief_and_the_bound():
    h = pipeline.simulation_policy("horus")
    assert isinstance(h.pair_belief, OutOfFamilyBelief) and not isinstance(h.pair_belief, InterferenceWorld)
    assert h.pair_belief is setup.pair_belief(pipeline.DEFAULT_DATA_DIR)  # built once per folder
    assert h.max_pair_cost == 1.0 and h.preemptive and list(h.las.thresholds) == [3600.0, 36000.0]
    live = make_policy("horus")  # what live placement builds
    assert live.pair_belief is None and live.max_pair_cost is None and live.las is None and not live.preemptive


def test_overrides_win_and_dropping_the_belief_drops_the_bound():
    paper = pipeline.simulation_policy("horus", pair_belief=None, las_thresholds=None)
    assert paper.pair_belief is None and paper.max_pair_cost is None and paper.las is None
    looser = pipeline.simulation_policy("horus", max_pair_cost=2.0, k_max=3)
    assert looser.max_pair_cost == 2.0 and looser.k_max == 3 and looser.pair_belief is not None
    assert type(pipeline.simulation_policy("fifo")) is FIFOExclusive
    plus = pipeline.simulation_policy("horus+")  # the belief in its cost; no levels, no bound
    assert plus.pair_belief is setup.pair_belief(pipeline.DEFAULT_DATA_DIR)
    assert plus.las is None and plus.max_pair_cost is None


def test_a_result_names_the_settings_each_policy_ran_with():
    res = pipeline.run({"trace": "gavel:51b7ef", "policies": ["fifo", "horus"], "cluster": "1x8", "seed": 0})
    assert res["policies"]["fifo"]["settings"] == {}
    assert res["policies"]["horus"]["settings"] == {
        "las_thresholds_gpu_s": [3600.0, 36000.0], "pair_belief": "pair-cf-out-of-family", "max_pair_cost": 1.0}
    assert pipeline.describe_policy(Horus()) == {"las_thresholds_gpu_s": None, "pair_belief": None,
                                                 "max_pair_cost": None}


def test_the_belief_is_built_when_horus_comes_and_earlier_policies_report_first(monkeypatch):
    events = []
    real = setup.pair_belief

    def recording(data_dir):
        events.append(("belief", None))
        return real(data_dir)

    monkeypatch.setattr(pipeline.setup, "pair_belief", recording)
    pipeline.run({"trace": "gavel:51b7ef", "policies": ["fifo", "horus"], "cluster": "1x8", "seed": 0},
                 report=lambda pct, msg: events.append((pct, msg)), report_every_s=0.0)
    at = events.index(("belief", None))
    assert any(isinstance(p, float) and 0 < p <= 50 and "fifo" in m for p, m in events[:at])  # fifo ran first
    assert events[at - 1] == (50.0, "horus: loading the pair belief (2/2)")
    assert events[-1] == (100.0, "done")
    pcts = [p for p, _ in events if isinstance(p, float)]
    assert pcts == sorted(pcts)  # progress never goes back
