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


def _lone_job_on_a_k80(w_speed: float = 1.0):
    """GPU 0: a K80 holding job 1 alone; GPU 1: an idle V100."""
    state = ClusterState([GPUSpec(0, 0, "K80", 12288.0), GPUSpec(1, 1, "V100", 16384.0)])
    state.assign(JobSpec(1, 0, 1, 10_000.0, 50, 4000), (0,))
    return state


def test_horus_moves_a_lone_job_from_a_slow_type_to_an_idle_fast_gpu_when_it_pays():
    # belief: K80 slowness 15.7 / 4.37 - 1 = 2.593. 10,000 s left: 10,000 x 3.593 > 30 + 10,000,
    # saving 35,927 - 10,030 = 25,897 s
    (m,) = policies.Horus().migrate(_lone_job_on_a_k80(), 0.0, {1: 10_000.0}, {1: 1.0}, 30.0)
    assert (m.job_id, m.from_gpus, m.to_gpus) == (1, (0,), (1,))
    assert m.saving_s == pytest.approx(10_000.0 * 15.7 / 4.37 - 10_030.0)
    # 10 s left: 35.9 <= 30 + 10, the move does not pay
    assert policies.Horus().migrate(_lone_job_on_a_k80(), 0.0, {1: 10.0}, {1: 1.0}, 30.0) == []
    # type-blind Horus, Horus without migration and Gandiva never move a job that shares nothing
    assert policies.Horus(w_speed=0).migrate(_lone_job_on_a_k80(), 0.0, {1: 10_000.0}, {1: 1.0}, 30.0) == []
    assert policies.Horus(migrate=False).migrate(_lone_job_on_a_k80(), 0.0, {1: 10_000.0}, {1: 1.0}, 30.0) == []
    assert policies.Gandiva().migrate(_lone_job_on_a_k80(), 0.0, {1: 10_000.0}, {1: 1.0}, 30.0) == []


def test_a_lone_job_never_moves_to_a_slower_or_equal_type():
    fast = ClusterState([GPUSpec(0, 0, "V100", 16384.0), GPUSpec(1, 1, "K80", 12288.0), GPUSpec(2, 2, "V100", 16384.0)])
    fast.assign(JobSpec(1, 0, 1, 10_000.0, 50, 4000), (0,))
    assert policies.Horus().migrate(fast, 0.0, {1: 10_000.0}, {1: 1.0}, 30.0) == []


def test_a_job_started_on_a_k80_moves_to_the_v100_that_frees_in_simulation(tables):
    # A (estimate 1e6 s, really 1,000 s, 15 GiB: nobody shares its GPU) takes the V100 at t=0.
    # B (ResNet-50, 20,000 s) arrives at t=1: the V100 is believed busy until 1e6, so B starts
    # on the K80 (it would wait if the V100 were believed to free soon). At t=1,000 A ends; B has
    # done 999 x r s of work (r: the world's K80 / V100 ratio for ResNet-50), moves (30 s pause)
    # and ends at 1,030 + 20,000 - 999 r. Without migration it ends at 1 + 20,000 / r.
    from placement.core import simulator

    gpus = [GPUSpec(0, 0, "V100", 16384.0), GPUSpec(1, 1, "K80", 12288.0)]
    jobs = [JobSpec(0, 0.0, 1, 1000.0, 50, 15000, "ResNet-18", 16, estimate=1e6),
            JobSpec(1, 1.0, 1, 20_000.0, 50, 4000, "ResNet-50", 64)]
    r_k80, label = tables.world.speed(jobs[1], "K80")
    assert label == "measured" and r_k80 < 0.5
    moved = {o.job_id: o for o in simulator.simulate(jobs, gpus, policies.Horus(), tables.world,
                                                     migration_cost_s=30.0).jobs}
    stayed = {o.job_id: o for o in simulator.simulate(jobs, gpus, policies.Horus(migrate=False), tables.world,
                                                      migration_cost_s=30.0).jobs}
    assert moved[1].migrations == 1 and moved[1].gpu_ids == (0,)
    assert moved[1].finish == pytest.approx(1030.0 + 20_000.0 - 999.0 * r_k80)
    assert stayed[1].migrations == 0 and stayed[1].finish == pytest.approx(1.0 + 20_000.0 / r_k80)


def test_homogeneous_migration_savings_are_the_plain_rule_to_the_last_digit():
    # on one GPU type every migrating policy ranks by W (s - 1) - cost exactly as before the
    # type terms existed: job 2's 250 x 0.54 - 30 = 105.0 beats job 1's 900 x 0.15 - 30
    # (104.99999999999991 in floating point; 105.0 if the type terms were added as 1.0 + 0.0)
    rem, sd = {1: 900.0, 2: 250.0, 3: 100.0, 4: 100.0}, {1: 1.15, 2: 1.54, 3: 1.0, 4: 1.0}
    want = max((w * (sd[j] - 1.0) - 30.0, -j) for j, w in rem.items())
    assert -want[1] == 2 and want[0] == 105.0
    for policy in (policies.Gandiva(), policies.Horus(), policies.Horus(w_speed=0)):
        state = ClusterState(homogeneous_cluster(1, 3))
        for jid, g in ((1, 0), (3, 0), (2, 1), (4, 1)):
            state.assign(JobSpec(jid, 0, 1, 10_000.0, 50, 1000), (g,))
        (m,) = policy.migrate(state, 0.0, rem, sd, 30.0)
        assert (m.job_id, m.to_gpus, m.saving_s) == (2, (2,), want[0])


def test_a_job_that_fits_no_idle_gpu_does_not_stop_the_next_move():
    # job 1 (20 GiB, shares a 32 GiB V100) ranks first but no idle GPU holds it; job 3, alone on
    # a K80, still moves to the idle P100: saving 10,000 (15.7 / 4.37 - 15.7 / 9.3) - 30
    state = ClusterState([GPUSpec(0, 0, "V100M32", 32768.0), GPUSpec(1, 1, "K80", 12288.0),
                          GPUSpec(2, 2, "P100", 16384.0)])
    state.assign(JobSpec(1, 0, 1, 1e6, 50, 20000), (0,))
    state.assign(JobSpec(2, 0, 1, 1e6, 50, 4000), (0,))
    state.assign(JobSpec(3, 0, 1, 1e6, 50, 4000), (1,))
    (m,) = policies.Horus().migrate(state, 0.0, {1: 1e5, 2: 10.0, 3: 1e4}, {1: 2.0, 2: 2.0, 3: 1.0}, 30.0)
    assert (m.job_id, m.to_gpus) == (3, (2,))
    assert m.saving_s == pytest.approx(1e4 * (15.7 / 4.37 - 15.7 / 9.3) - 30.0)
