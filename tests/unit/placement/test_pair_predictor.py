"""Pair interference predictor (the policies' belief): fit, new types, leave-one-model-out."""
import csv
from pathlib import Path

import numpy as np
import pytest

from placement.core import pair_predictor as pp
from placement.core.traces import load_throughputs

DATA = Path(__file__).resolve().parents[3] / "data"


def synthetic(seed=0):
    """16 types whose sens/press are linear in their features; pairs from the additive model."""
    rng = np.random.default_rng(seed)
    types = [(f"M{i}", 16) for i in range(16)]
    feats = {t: rng.normal(size=len(pp.FEATURE_NAMES)) for t in types}
    sens = {t: 0.3 * feats[t][0] for t in types}
    press = {t: -0.2 * feats[t][1] for t in types}
    pairs = [pp.PairRow("v100", a, b, float(np.exp(0.5 + sens[a] + press[b]))) for a in types for b in types]
    return types, feats, sens, press, pairs


def test_fit_reproduces_an_additive_pair_table():
    types, feats, sens, press, pairs = synthetic()
    m = pp.PairSlowdownPredictor.fit(pairs, feats, lam_cf=1e-6, lam_feat=1.0)
    for p in pairs:
        assert m.pair_slowdown(p.a, p.b, "V100") == pytest.approx(max(p.slowdown, 1.0), rel=1e-3)
    # two co-runners: log slowdowns add
    a, b = types[0], types[1]
    assert m.slowdown(a, [b, b], "V100") == pytest.approx(m.pair_slowdown(a, b) ** 2, rel=1e-9)
    assert m.slowdown(a, []) == 1.0


def test_unmeasured_type_is_predicted_from_its_features_only():
    types, feats, sens, press, pairs = synthetic(1)
    new = types[-1]
    train = [p for p in pairs if new not in (p.a, p.b)]
    m = pp.PairSlowdownPredictor.fit(train, feats, lam_cf=1e-6, lam_feat=1e-3)
    # sens/press are exactly linear in features, so the feature regression recovers them
    for b in types[:-1]:
        expect = np.exp(0.5 + sens[new] + press[b])
        assert m.pair_slowdown(new, b) == pytest.approx(max(expect, 1.0), rel=0.05)


def test_bad_input_is_refused():
    types, feats, _, _, pairs = synthetic()
    with pytest.raises(ValueError, match="need >= 10 pairs"):
        pp.PairSlowdownPredictor.fit(pairs[:5], feats)
    with pytest.raises(ValueError, match="must be > 0"):
        pp.PairSlowdownPredictor.fit(pairs, feats, lam_cf=0)
    with pytest.raises(ValueError, match="feature row"):
        pp.feature_vector({"model": "x", "train_flops": "nan?"})


def test_spearman_by_hand():
    assert pp.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert pp.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # ties take average ranks: ranks (0.5, 0.5, 2) vs (0, 1, 2) -> Pearson of those
    assert pp.spearman([1, 1, 2], [1, 2, 3]) == pytest.approx(np.corrcoef([0.5, 0.5, 2], [0, 1, 2])[0, 1])


def test_leave_one_model_out_on_gavel_beats_the_constant_on_mae():
    with open(DATA / "placement" / "zoo_features.csv", newline="") as fh:
        feat = pp.features_by_type(csv.DictReader(fh))
    pairs = pp.measured_pairs(load_throughputs(DATA / "gavel-traces" / "simulation_throughputs.json"))
    res = pp.leave_one_model_out(pairs, feat)
    assert len(res["folds"]) == 7
    # the constant baseline recomputed here, independently of the function
    errs = []
    for fam in res["folds"]:
        train = [p.slowdown for p in pairs if fam not in (p.a[0], p.b[0])]
        test = [p.slowdown for p in pairs if fam in (p.a[0], p.b[0])]
        errs.extend(abs(np.median(train) - s) for s in test)
    assert res["const_mae"] == pytest.approx(np.mean(errs))
    assert res["mae"] < res["const_mae"]
    assert res["spearman"] > 0.3  # measured 0.47 (target 0.5 not reached; see docs)


class TableBelief:
    """A belief given as a table of pair slowdowns by model name (unit-test stand-in)."""

    def __init__(self, table):
        self.table = table

    def slowdown(self, job, others, gpu_type):
        return float(np.prod([self.table[(job.model, o.model)] for o in others])) if others else 1.0


def test_horus_with_a_pair_belief_picks_the_gentler_partner():
    from placement.core.policies import Horus
    from placement.core.types import ClusterState, JobSpec, homogeneous_cluster

    state = ClusterState(homogeneous_cluster(1, 2))
    state.assign(JobSpec(0, 0, 1, 100, 40, 1000, "harsh"), (0,))
    state.assign(JobSpec(1, 0, 1, 100, 40, 1000, "gentle"), (1,))
    new = JobSpec(2, 0, 1, 100, 40, 1000, "new")
    belief = TableBelief({("new", "harsh"): 2.5, ("harsh", "new"): 1.5, ("new", "gentle"): 1.1,
                          ("gentle", "new"): 1.2})
    rng = np.random.default_rng(0)
    # without a belief the two GPUs cost the same (same memory, util, tasks): lowest id wins
    assert Horus(protect_critical=False).place([new], state, 0, rng)[0].gpu_ids == (0,)
    p = Horus(protect_critical=False, pair_belief=belief).place([new], state, 0, rng)[0]
    assert p.gpu_ids == (1,)
    # cost terms by hand: harsh GPU (2.5 - 1) + (1.5 - 1) = 2.0, gentle (1.1 - 1) + (1.2 - 1) = 0.3
    terms = {c["gpu"]: c["pair_slowdown"] for c in p.explanation["candidates"]}
    assert terms == {0: pytest.approx(2.0), 1: pytest.approx(0.3)}
    with pytest.raises(ValueError, match="pair_belief must have"):
        Horus(pair_belief=object())
    with pytest.raises(ValueError, match="w_pair"):
        Horus(w_pair=float("nan"))


def test_out_of_family_belief_never_uses_the_family_own_pairs():
    with open(DATA / "placement" / "zoo_features.csv", newline="") as fh:
        feat = pp.features_by_type(csv.DictReader(fh))
    pairs = pp.measured_pairs(load_throughputs(DATA / "gavel-traces" / "simulation_throughputs.json"))
    b = pp.OutOfFamilyBelief(pairs, feat)
    from placement.core.types import JobSpec

    a, o = JobSpec(0, 0, 1, 1, 1, 1, "ResNet-50", 64), JobSpec(1, 0, 1, 1, 1, 1, "A3C", 0)
    held_out = pp.PairSlowdownPredictor.fit([p for p in pairs if "ResNet-50" not in (p.a[0], p.b[0])], feat)
    assert b.pair(a, o, "V100") == pytest.approx(held_out.pair_slowdown(("ResNet-50", 64), ("A3C", 1), "v100"))
    assert ("ResNet-50", 64) not in held_out.fits["v100"].terms
