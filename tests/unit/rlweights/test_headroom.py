"""Headroom (issue 22): the best of a seeded set of weight vectors against equal weights, the
set's composition, a brute-force check on a tiny setup, its defined outcomes; PPO against each
method (``versus``) on hand-worked rows; the bench's refusal of ``--headroom-vectors 0``."""
import itertools
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rlweights.compare import compare, versus
from rlweights.core.cluster import ClusterSetup, cluster_setups
from rlweights.core.env import SimScenario
from rlweights.core.headroom import Headroom, distribution, headroom, headroom_vectors, vector_kind
from rlweights.core.scheduler import Node, Pod
from rlweights.core.serverless import simulate
from rlweights.core.workload import FunctionProfile, Workload, workloads

ROOT = Path(__file__).resolve().parents[3]


class Table:
    """A scenario whose metric is looked up per vector (default ``base``), counting calls."""

    name = "table"

    def __init__(self, values: dict, base: float = 10.0):
        self.values, self.base, self.calls = values, base, 0

    def evaluate(self, w):
        self.calls += 1
        return self.values.get(tuple(int(x) for x in w), self.base)


class Quadratic:
    name = "quad"

    def __init__(self, target):
        self.target = np.asarray(target, float)

    def evaluate(self, w):
        return 10.0 + float(np.sum((np.asarray(w, float) - self.target) ** 2))


def test_the_set_is_equal_weights_then_all_corners_then_sobol():
    v = headroom_vectors(300, seed=0)
    assert v.shape == (300, 7) and v.dtype == np.int64
    assert v.min() >= 1 and v.max() <= 100
    assert len({tuple(r) for r in v}) == 300
    assert v[0].tolist() == [100] * 7
    # rows 1..7: plugin i at 100, the others at 1
    assert [r.tolist() for r in v[1:8]] == [[100 if j == i else 1 for j in range(7)] for i in range(7)]
    # rows 0..127 are exactly the 2^7 corners of {1, 100}^7
    assert {tuple(r) for r in v[:128]} == set(itertools.product((1, 100), repeat=7))
    assert [vector_kind(i) for i in (0, 1, 7, 8, 127, 128, 299)] == [
        "equal", "one-plugin", "one-plugin", "corner", "corner", "sobol", "sobol"]
    # the Sobol part depends on the seed, the corners do not; a shorter set is a prefix
    w = headroom_vectors(300, seed=1)
    assert np.array_equal(v[:128], w[:128]) and not np.array_equal(v[128:], w[128:])
    assert np.array_equal(headroom_vectors(300, seed=0), v)
    assert np.array_equal(headroom_vectors(200, seed=0), v[:200])
    assert headroom_vectors(1).tolist() == [[100] * 7]


def test_sobol_part_covers_the_range_evenly():
    v = headroom_vectors(128 + 2000, seed=3)[128:]
    for j in range(7):
        counts = np.bincount((v[:, j] - 1) // 10, minlength=10)  # deciles 1-10, ..., 91-100
        assert counts.min() >= 170 and counts.max() <= 230, counts  # 200 each if uniform


def test_a_tiny_range_gives_the_whole_box():
    v = headroom_vectors(5000, w_min=1, w_max=3)
    assert v.shape == (3**7, 7)
    assert {tuple(r) for r in v} == set(itertools.product((1, 2, 3), repeat=7))


@pytest.mark.parametrize("n", [0, -3, True, 2.5])
def test_bad_vector_counts_are_refused(n):
    with pytest.raises(ValueError, match="at least 1"):
        headroom_vectors(n)


def test_bad_range_is_refused():
    with pytest.raises(ValueError, match="weight range"):
        headroom_vectors(10, w_min=5, w_max=5)


def test_finds_the_brute_force_optimum_of_a_synthetic_box():
    # all 3^7 vectors measured independently; the minimum is unique at the target
    target = (3, 1, 2, 3, 1, 1, 2)
    q = Quadratic(target)
    brute = min(itertools.product((1, 2, 3), repeat=7), key=lambda w: q.evaluate(w))
    h = headroom(q, 3**7, w_min=1, w_max=3)
    assert tuple(h.best_weights) == brute == target
    eq = 10.0 + float(np.sum((3 - np.array(target)) ** 2))  # equal weights are [3] * 7: 10 + 4 + 1 + 4 + 4 + 1 = 24
    assert h.equal_metric == eq == 24.0 and h.best_metric == 10.0
    assert h.headroom_percent == pytest.approx(100 * (24 - 10) / 24)
    assert h.n_vectors == 3**7 and h.best_kind == "sobol"


def test_a_one_plugin_corner_wins_and_is_recorded():
    t = Table({(1, 1, 100, 1, 1, 1, 1): 8.0, (1, 1, 1, 1, 1, 1, 1): 9.0})
    h = headroom(t, 300)
    assert (h.best_weights, h.best_metric, h.best_index, h.best_kind) == ([1, 1, 100, 1, 1, 1, 1], 8.0, 3, "one-plugin")
    assert h.headroom_percent == pytest.approx(20.0)
    assert t.calls == 300 and h.n_vectors == 300


def test_headroom_is_never_negative_and_equal_weights_win_ties():
    flat = headroom(Table({}), 300)  # every vector measures the same
    assert (flat.headroom_percent, flat.best_index, flat.best_kind) == (0.0, 0, "equal")
    # equal weights are the best: every other vector worse
    worse = Table({(100,) * 7: 5.0}, base=7.0)
    h = headroom(worse, 300)
    assert h.headroom_percent == 0.0 and h.best_weights == [100] * 7 and h.best_metric == 5.0
    # a tie between equal weights and another vector goes to equal weights
    tie = headroom(Table({(100,) * 7: 5.0, (1, 100, 1, 1, 1, 1, 1): 5.0}, base=6.0), 300)
    assert tie.best_index == 0 and tie.headroom_percent == 0.0


def test_brute_force_on_a_tiny_simulated_setup():
    """A real 3-node PAI setup and a 20-s generated window (31 invocations), weights 1..2: the 128
    vectors of the box simulated directly, without the scenario or its cache; headroom on the
    scenario must find the same best metric, and its vector must measure that metric."""
    setup = cluster_setups(11, 1, n_nodes=(3, 3), prefix="tiny")[0]
    wl = workloads(12, 1, length_s=20.0, prefix="tiny")[0]
    brute = {w: simulate(setup, wl, np.array(w), 0).mean_s for w in itertools.product((1, 2), repeat=7)}
    best = min(brute.values())
    eq = brute[(2,) * 7]
    assert best < eq, "this setup must leave some headroom, or the test checks nothing"
    sc = SimScenario(setup, wl, seed=0)
    h = headroom(sc, 300, w_min=1, w_max=2)
    assert h.n_vectors == 128 and len(sc._cache) == 128
    assert h.equal_metric == eq and h.best_metric == best and brute[tuple(h.best_weights)] == best
    assert h.headroom_percent == pytest.approx(100 * (eq - best) / eq) and h.headroom_percent > 0


def test_an_empty_window_is_skipped_not_divided_by_zero():
    node = Node("n0", 4000, 8 * 2**30)
    pod = Pod("f", cpu_milli=1000, memory_bytes=2**28, labels={"app": "f"}, cache_key="f")
    fn = FunctionProfile("f", "f:v1", 0, 1000, 2**28, pod)
    empty = Workload("empty", [fn], np.array([]), np.array([]), np.array([], int))
    h = headroom(SimScenario(ClusterSetup("one", [node]), empty), 300)
    assert isinstance(h, Headroom)
    assert h.headroom_percent is None and h.skipped and h.n_vectors == 1 and h.equal_metric == 0.0


def test_headroom_shares_the_comparison_cache():
    """The bench runs headroom on the same (pair, seed) copies compare() then uses: no vector is
    simulated twice, and compare's equal-weights metric equals headroom's."""
    setup = cluster_setups(11, 1, n_nodes=(3, 3), prefix="tiny")[0]
    wl = workloads(12, 1, length_s=20.0, prefix="tiny")[0]
    base = SimScenario(setup, wl)
    caches = {}
    sc = SimScenario(setup, wl, seed=1, _cache=caches.setdefault((base.name, 1), {}))
    h = headroom(sc, 20)
    assert len(caches[(base.name, 1)]) == 20
    rows = compare([base], budget=3, seeds=[1], caches=caches)
    eq = [r for r in rows if r["method"] == "equal"][0]
    assert eq["best_metric"] == h.equal_metric


def test_versus_on_hand_worked_rows():
    rows = [{"scenario": s, "seed": seed, "method": m, "best_metric": v}
            for s, seed, m, v in [("a", 0, "ppo", 90.0), ("a", 0, "tpe", 100.0), ("b", 0, "ppo", 50.0), ("b", 0, "tpe", 40.0),
                                  ("a", 1, "ppo", 80.0), ("a", 1, "tpe", 80.0), ("b", 1, "ppo", 45.0), ("b", 1, "tpe", 50.0)]]
    rows.append({"scenario": "c", "seed": 0, "method": "equal", "best_metric": 0.0, "skipped": "empty"})
    v = versus(rows, "ppo")
    # seed 0: a 100*(100-90)/100 = 10, b 100*(40-50)/40 = -25 -> -7.5; seed 1: a 0, b 10 -> 5
    assert v["tpe"]["per_seed"] == {0: pytest.approx(-7.5), 1: pytest.approx(5.0)}
    assert v["tpe"]["mean"] == pytest.approx(-1.25) and v["tpe"]["std_over_seeds"] == pytest.approx(6.25)
    assert v["tpe"]["pairs"] == 4 and set(v) == {"tpe"}
    with pytest.raises(ValueError):
        versus(rows, "cma-es")


def test_distribution_statistics():
    d = distribution([4.0, None, 1.0, 3.0, 2.0])
    assert d == {"n": 4, "min": 1.0, "median": 2.5, "p90": pytest.approx(3.7), "max": 4.0, "mean": 2.5}
    assert distribution([None])["n"] == 0 and distribution([])["median"] is None


def test_bench_refuses_zero_headroom_vectors():
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "rlweights.py"), "--headroom-vectors", "0"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 2
    assert "--headroom-vectors must be >= 1, got 0" in p.stderr


@pytest.mark.parametrize("args,message", [
    (["--test-setups", "0"], "--test-setups and --test-workloads must be >= 1, got 0 and 3"),
    (["--eval-seed", "-1"], "--eval-seed and --headroom-seed must be >= 0, got -1 and 0"),
    (["--budgets", "10,10"], "--budgets names a budget twice: '10,10'"),
    (["--policy", "/nonexistent/policy"], "--policy /nonexistent/policy: not a saved policy (missing "
                                           "/nonexistent/policy.zip, /nonexistent/policy.json)"),
    (["--policy", "/etc/hostname"], "--policy /etc/hostname: not a saved policy (missing /etc/hostname.zip"),
])
def test_bench_refuses_bad_arguments_before_writing_anything(tmp_path, args, message):
    out, hr = tmp_path / "rows.csv", tmp_path / "headroom.csv"
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "rlweights.py"), *args, "--out", str(out),
                        "--headroom-out", str(hr)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and message in p.stderr
    assert not out.exists() and not hr.exists()
