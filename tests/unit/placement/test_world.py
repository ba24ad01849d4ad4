"""The simulator's world (measured pair slowdowns) versus what policies see."""
import subprocess
import sys
from pathlib import Path

import pytest

from placement.core import policies, simulator, world
from placement.core.setup import load_tables
from placement.core.types import ClusterState, JobSpec, homogeneous_cluster

DATA = Path(__file__).resolve().parents[3] / "data"

# a tiny Gavel-shaped table: A alone 10 steps/s, B alone 16; together A 5, B 12
TABLE = {"v100": {
    "('A (batch size 16)', 1)": {"null": 10.0, "('B (batch size 32)', 1)": [5.0, 12.0],
                                 "('A (batch size 16)', 1)": [0.0, 0.0]},
    "('B (batch size 32)', 1)": {"null": 16.0, "('A (batch size 16)', 1)": [12.0, 5.0]},
    "('A (batch size 16)', 2)": {"null": 18.0},
}}


def job(i, model, bs, *, gpus=1, dur=100.0, util=50.0, arrival=0.0):
    return JobSpec(i, arrival, gpus, dur, util, 1000.0, model, bs)


def test_pair_lookup_measured_then_scale_one_then_modelled():
    w = world.InterferenceWorld(TABLE)
    a, b = job(0, "A", 16), job(1, "B", 32)
    assert w.pair(a, b, "V100") == (pytest.approx(10 / 5), "measured")
    assert w.pair(b, a, "V100") == (pytest.approx(16 / 12), "measured")
    a2, b2 = job(2, "A", 16, gpus=2), job(3, "B", 32, gpus=2)
    assert w.pair(a2, b2, "V100") == (pytest.approx(2.0), "measured_1gpu")
    # unmeasured: a [0, 0] entry and an unknown type -> median of the measured scale-1 pairs
    median = (2.0 + 16 / 12) / 2
    assert w.pair(a, job(4, "A", 16), "V100") == (pytest.approx(median), "modelled")
    assert w.pair(a, job(5, "vgg19", 32), "V100M32") == (pytest.approx(median), "modelled")
    # three on a GPU: log slowdowns add, modelled
    s, src = w.slowdown(a, [b, b], "V100")
    assert (s, src) == (pytest.approx(4.0), "modelled")
    with pytest.raises(ValueError, match="no measured pair"):
        world.InterferenceWorld({"v100": {"('A', 1)": {"null": 1.0}}})


def test_simulator_progresses_by_the_measured_pair_and_reports_the_source():
    # A and B share one GPU from t=0 (Horus, k_max 2, one GPU): A runs at 1/2, B at 12/16.
    # B ends at 100 / 0.75 = 133.3 s, when A has done 66.7 s of work; A ends 33.3 s later.
    jobs = [job(0, "A", 16), job(1, "B", 32)]
    r = simulator.simulate(jobs, homogeneous_cluster(1, 1), policies.Horus(migrate=False, protect_critical=False),
                           world.InterferenceWorld(TABLE))
    fin = {o.job_id: o.finish for o in r.jobs}
    assert fin[1] == pytest.approx(400 / 3)
    assert fin[0] == pytest.approx(400 / 3 + (100 - 200 / 3))
    assert r.world["measured_s"] == pytest.approx(2 * 400 / 3, abs=0.1)
    assert r.world["measured_share"] == 1.0 and r.world["modelled_share"] == 0.0
    assert r.summary()["world"]["name"] == "gavel-measured-pairs"


def test_unmeasured_pairs_are_labelled_modelled():
    jobs = [job(0, "A", 16), job(1, "vgg19", 32)]
    r = simulator.simulate(jobs, homogeneous_cluster(1, 1), policies.Horus(migrate=False, protect_critical=False),
                           world.InterferenceWorld(TABLE))
    assert r.world["modelled_share"] == 1.0 and r.world["measured_s"] == 0.0


def test_shipped_world_measures_most_gavel_pairs():
    t = load_tables(DATA)
    d = t.world.describe()
    assert set(d["pairs"]) == {"k80", "p100", "v100"}
    # Gavel's own table: ResNet-50 bs 64 next to A3C on V100
    row = t.throughputs["v100"]["('ResNet-50 (batch size 64)', 1)"]
    expect = row["null"] / row["('A3C', 1)"][0]
    s, src = t.world.pair(job(0, "ResNet-50", 64), job(1, "A3C", 1), "V100")
    assert (s, src) == (pytest.approx(max(expect, 1.0)), "measured")


class Spy(policies.Horus):
    """Horus that keeps every object the simulator hands it."""

    def __init__(self):
        super().__init__(k_max=2)
        self.seen = []

    def place(self, queue, state, now, rng):
        self.seen.append((queue, state, now, rng))
        return super().place(queue, state, now, rng)

    def migrate(self, state, now, remaining, slowdown, cost_s):
        self.seen.append((state, now, remaining, slowdown, cost_s))
        return super().migrate(state, now, remaining, slowdown, cost_s)


def reachable(root, limit=200_000):
    """Every object reachable from ``root`` through attributes and containers."""
    seen, stack = {}, [root]
    while stack and len(seen) < limit:
        o = stack.pop()
        if id(o) in seen or isinstance(o, (str, bytes, int, float, type(None))):
            continue
        seen[id(o)] = o
        if isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, (list, tuple, set, frozenset)):
            stack.extend(o)
        if hasattr(o, "__dict__") and not isinstance(o, type):
            stack.extend(vars(o).values())
        for slot in getattr(type(o), "__slots__", ()):
            if hasattr(o, slot):
                stack.append(getattr(o, slot))
    return seen.values()


def test_a_policy_never_receives_the_world():
    w = world.InterferenceWorld(TABLE)
    jobs = [job(i, "A" if i % 2 else "B", 16 if i % 2 else 32, arrival=float(i), dur=50.0 + 30 * i)
            for i in range(6)]
    spy = Spy()
    simulator.simulate(jobs, homogeneous_cluster(1, 2), spy, w, migration_cost_s=1.0)
    assert spy.seen
    found = [o for o in reachable(spy.seen) if isinstance(o, (world.InterferenceWorld, world.ModelledWorld))]
    assert found == []
    assert any(isinstance(o, ClusterState) for o in reachable(spy.seen))  # the walk does reach things


def test_policies_module_cannot_import_the_world():
    code = ("import sys, placement.core.policies as p; "
            "print(sorted(m for m in sys.modules if m in ('placement.core.world', 'placement.core.simulator')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[3]).stdout.strip()
    assert out == "[]"


def test_heterogeneous_cluster_uses_each_gpu_types_measured_pair():
    # the same pair on a K80 node and on a V100 node progresses at each type's measured rate:
    # the pair's slowdown on that type, and the type's isolated speed relative to a V100
    # (durations are V100 seconds)
    from placement.core.types import GPUSpec

    t = load_tables(DATA)
    a, b = ("ResNet-50", 64), ("A3C", 1)
    gpus = [GPUSpec(0, 0, "K80", 12288.0), GPUSpec(1, 1, "V100", 16384.0)]
    jobs = [job(0, *a, dur=1000.0), job(1, *b, dur=1e6), job(2, *a, dur=1000.0), job(3, *b, dur=1e6)]
    state = ClusterState(gpus)

    class Pinned(policies.Policy):
        """Puts jobs 0, 1 on GPU 0 (K80) and 2, 3 on GPU 1 (V100)."""
        name, exclusive, k_max = "pinned", False, 2

        def place(self, queue, st, now, rng):
            return [policies.Placement(j.job_id, (0,) if j.job_id < 2 else (1,)) for j in queue]

    assert state.n_gpus == 2
    r = simulator.simulate(jobs, gpus, Pinned(), t.world)
    fin = {o.job_id: o.finish for o in r.jobs}
    v100 = t.throughputs["v100"]["('ResNet-50 (batch size 64)', 1)"]["null"]
    for gid, gpu in ((0, "k80"), (2, "v100")):
        row = t.throughputs[gpu]["('ResNet-50 (batch size 64)', 1)"]
        slow = max(row["null"] / row["('A3C', 1)"][0], 1.0)
        speed = row["null"] / v100
        assert fin[gid] == pytest.approx(1000.0 * slow / speed, rel=1e-9), gpu
    assert fin[0] > 3 * fin[2]  # a K80 is several times slower than a V100 for ResNet-50
    assert r.world["speed_measured_s"] > 0 and r.world["speed_modelled_s"] == 0
