"""Heterogeneous clusters (V100 / P100 / K80 nodes): the world's per-type isolated speed from
Gavel's measured throughputs, the policies' belief from datasheet peak FLOPS, Horus preferring
and waiting for faster types, and migration that never moves a job to a type where it loses."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from placement.core import policies, traces
from placement.core.setup import load_tables
from placement.core.types import ClusterState, GPUSpec, JobSpec, homogeneous_cluster, mixed_cluster

DATA = Path(__file__).resolve().parents[3] / "data"


@pytest.fixture(scope="module")
def tables():
    return load_tables(DATA)


def test_world_speed_is_gavels_isolated_throughput_ratio(tables):
    w, thr = tables.world, tables.throughputs
    resnet = JobSpec(0, 0, 1, 100, 50, 1000, "ResNet-50", 64)
    for gpu in ("k80", "p100"):
        want = (thr[gpu]["('ResNet-50 (batch size 64)', 1)"]["null"] / thr["v100"]["('ResNet-50 (batch size 64)', 1)"]["null"])
        assert w.speed(resnet, gpu.upper()) == (pytest.approx(want), "measured")
    assert w.speed(resnet, "V100") == (1.0, "reference") and w.speed(resnet, "v100m32") == (1.0, "reference")
    unmeasured = JobSpec(1, 0, 1, 100, 50, 1000, "densenet121", 32)  # not one of Gavel's job types
    ratios = [thr["k80"][k]["null"] / thr["v100"][k]["null"] for k in thr["k80"]
              if thr["k80"][k].get("null") and thr["v100"].get(k, {}).get("null")]
    assert w.speed(unmeasured, "K80") == (pytest.approx(float(np.median(ratios))), "modelled")
    assert w.speed(resnet, "A100") == (1.0, "modelled")  # a type Gavel never measured


def test_belief_comes_from_datasheets_not_the_world(tables):
    state = ClusterState(mixed_cluster([("V100", 16384), ("P100", 16384), ("K80", 12288), ("A100", 40960)], 2))
    s = policies.type_slowness(state)
    assert s.tolist() == pytest.approx([0, 0, 15.7 / 9.3 - 1, 15.7 / 9.3 - 1, 15.7 / 4.37 - 1, 15.7 / 4.37 - 1, 0, 0])
    assert not policies.type_slowness(ClusterState(homogeneous_cluster(2, 4))).any()
    assert policies.believed_speed("v100m32") == 15.7 and policies.believed_speed("T4") is None


def test_hetero_cluster_for_trace_keeps_the_gpu_count_in_equal_shares():
    jobs = [JobSpec(i, float(i), 1, 3600.0, 50, 1000) for i in range(40)]
    homo, het = traces.cluster_for_trace(jobs), traces.heterogeneous_cluster_for_trace(jobs)
    n_homo = len({g.node for g in homo})
    nodes = {g.node: (g.gpu_type, g.memory_mib) for g in het}
    assert len(nodes) == -(-n_homo // 3) * 3 and len(het) == 8 * len(nodes)
    counts = {t: sum(1 for v in nodes.values() if v[0] == t) for t in ("V100", "P100", "K80")}
    assert len(set(counts.values())) == 1 and nodes[0] == ("V100", 16384.0) and nodes[2] == ("K80", 12288.0)


def _state_with_busy_fast_gpus(end_at: float) -> tuple[ClusterState, JobSpec]:
    """Node 0: two V100s, each holding one task that ends (as projected) at ``end_at``; node 1:
    two idle K80s. A new job of 10,000 s."""
    state = ClusterState(mixed_cluster([("V100", 16384), ("K80", 12288)], 2))
    state.track_end = True
    for j, g in ((1, 0), (2, 1)):
        state.assign(JobSpec(j, 0, 1, end_at, 50, 15000), (g,))  # too big to share with
        state.note_end((g,), end_at)
    return state, JobSpec(3, 0, 1, 10_000.0, 50, 4000)


def test_horus_waits_for_a_fast_gpu_only_when_that_finishes_sooner():
    horus = policies.Horus()
    rng = np.random.default_rng(0)
    state, job = _state_with_busy_fast_gpus(end_at=600.0)  # V100 free at 600 s: 600 + 10,000 < 10,000 x 3.6
    assert horus.place([job], state, 0.0, rng) == []  # waits
    late, job = _state_with_busy_fast_gpus(end_at=40_000.0)  # V100 free only at 40,000 s: take a K80 now
    (p,) = horus.place([job], late, 0.0, rng)
    assert p.gpu_ids[0] in (2, 3) and "type_slowness" in p.explanation["candidates"][0]


def test_horus_prefers_the_faster_type_when_both_are_free():
    state = ClusterState(mixed_cluster([("K80", 12288), ("V100", 16384)], 2))  # K80s have the lower ids
    (p,) = policies.Horus().place([JobSpec(1, 0, 1, 100.0, 50, 1000)], state, 0.0, np.random.default_rng(0))
    assert p.gpu_ids[0] in (2, 3)


def test_migration_never_moves_a_job_to_a_type_where_it_loses():
    # two jobs share a V100; the only idle GPU is a K80 (believed 3.6x slower)
    state = ClusterState(mixed_cluster([("V100", 16384), ("K80", 12288)], 1))
    for j in (1, 2):
        state.assign(JobSpec(j, 0, 1, 10_000.0, 50, 4000), (0,))
    horus = policies.Horus()
    assert horus.migrate(state, 0.0, {1: 5000.0, 2: 5000.0}, {1: 1.7, 2: 1.7}, 30.0) == []
    # the same pair on a homogeneous cluster moves (the saving 5,000 x 0.7 - 30 > 0)
    homo = ClusterState(homogeneous_cluster(1, 2))
    for j in (1, 2):
        homo.assign(JobSpec(j, 0, 1, 10_000.0, 50, 4000), (0,))
    (m,) = horus.migrate(homo, 0.0, {1: 5000.0, 2: 5000.0}, {1: 1.7, 2: 1.7}, 30.0)
    assert m.to_gpus == (1,)
    # a job slowed 5x on a K80 (observed) moves to an idle V100
    het = ClusterState([GPUSpec(0, 0, "K80", 12288.0), GPUSpec(1, 1, "V100", 16384.0)])
    for j in (1, 2):
        het.assign(JobSpec(j, 0, 1, 10_000.0, 50, 4000), (0,))
    moves = horus.migrate(het, 0.0, {1: 5000.0, 2: 4000.0}, {1: 5.0, 2: 5.0}, 30.0)
    assert [(m.job_id, m.to_gpus) for m in moves] == [(1, (1,))]


def test_hetero_cluster_adds_rounds_of_nodes_until_every_job_fits():
    # 24 tasks of 14 GiB: a round of V100, P100, K80 nodes has only 16 GPUs with that memory
    jobs = [JobSpec(0, 0.0, 24, 3600.0, 50, 14336.0), JobSpec(1, 360_000.0, 1, 3600.0, 50, 1000.0)]
    het = traces.heterogeneous_cluster_for_trace(jobs)
    big = [g for g in het if g.memory_mib >= 14336.0]
    assert len(big) >= 24 and len({g.node for g in het}) % 3 == 0
    assert len({g.node for g in het}) == 6  # two rounds suffice: 32 GPUs of 16 GiB


def test_a_multi_gpu_job_waits_for_as_many_fast_gpus_as_it_needs():
    # 4 V100s whose residents (15 GiB: no room to share) end at 100, 200, 300, 400 s; 4 idle
    # K80s; a 4-GPU job of 100 s at t = 1: on the K80s now it is believed to end at
    # 1 + 100 x 3.59 = 360 s, waiting for all four V100s at 400 + 100 = 500 s: start now
    state = ClusterState(mixed_cluster([("V100", 16384), ("K80", 12288)], 4))
    state.track_end = True
    for g, end in enumerate((100.0, 200.0, 300.0, 400.0)):
        state.assign(JobSpec(10 + g, 0, 1, end, 50, 15000), (g,))
        state.note_end((g,), end)
    job = JobSpec(1, 1.0, 4, 100.0, 50, 4000)
    (p,) = policies.Horus().place([job], state, 1.0, np.random.default_rng(0))
    assert sorted(p.gpu_ids) == [4, 5, 6, 7]
    # the same job of 10,000 s: waiting (ends 10,400 s) beats 35,900 s on the K80s
    assert policies.Horus().place([JobSpec(2, 1.0, 4, 10_000.0, 50, 4000)], state, 1.0, np.random.default_rng(0)) == []


def test_migration_is_told_the_interference_not_the_worlds_type_speed(tables):
    # two jobs share a K80, a V100 idles: the policy is told their pair slowdown (>= 1), never
    # the world's K80 / V100 speed ratio
    from placement.core import simulator

    seen = []

    class Spy(policies.Horus):
        name = "spy"

        def migrate(self, state, now, remaining, slowdown, cost_s):
            seen.append(dict(slowdown))
            return []

        def place(self, queue, state, now, rng):
            return [policies.Placement(j.job_id, (0,)) for j in queue if j.job_id in (0, 1) and j.job_id not in state.running]

    gpus = [GPUSpec(0, 0, "K80", 12288.0), GPUSpec(1, 1, "V100", 16384.0)]
    jobs = [JobSpec(0, 0, 1, 1000.0, 50, 1000, "ResNet-18", 16), JobSpec(1, 0, 1, 1000.0, 50, 1000, "A3C", 0)]
    simulator.simulate(jobs, gpus, Spy(), tables.world)
    pair = tables.world.pair(jobs[0], jobs[1], "K80")[0]
    assert seen and seen[0][0] == pytest.approx(pair) and all(v >= 1 for d in seen for v in d.values())


def test_a_job_no_type_can_hold_is_refused_at_once():
    with pytest.raises(ValueError, match=r"job 7 \(big\) needs 20000 MiB per GPU; the largest of V100, P100, K80 has 16384"):
        traces.heterogeneous_cluster_for_trace([JobSpec(i, float(i), 1, 60.0, 50, 1000) for i in range(7)]
                                               + [JobSpec(7, 8.0, 1, 60.0, 50, 20000, "big")])


def test_baselines_and_type_blind_horus_migrate_as_before():
    # the pair on a V100 with only a K80 idle: Gandiva (its paper's rule) and Horus with
    # w_speed 0 move it, Horus (w_speed 1) does not
    def shared():
        state = ClusterState(mixed_cluster([("V100", 16384), ("K80", 12288)], 1))
        for j in (1, 2):
            state.assign(JobSpec(j, 0, 1, 10_000.0, 50, 4000), (0,))
        return state

    args = ({1: 5000.0, 2: 5000.0}, {1: 1.7, 2: 1.7}, 30.0)
    assert [m.to_gpus for m in policies.Gandiva().migrate(shared(), 0.0, *args)] == [(1,)]
    assert [m.to_gpus for m in policies.Horus(w_speed=0).migrate(shared(), 0.0, *args)] == [(1,)]
    assert policies.Horus().migrate(shared(), 0.0, *args) == []
