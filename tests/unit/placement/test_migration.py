"""Migration of co-located jobs and Horus's critical-path protection, with expected values
worked out by hand (interference: every pair slows down by exactly 1.5)."""
import numpy as np
import pytest

from placement.core import interference, policies, simulator
from placement.core.types import ClusterState, JobSpec, homogeneous_cluster

FLAT = interference.InterferenceModel((np.log(1.5), 0, 0, 0, 0))  # every pair: slowdown 1.5

# 2 GPUs on one node. t=0: A (100 s, 90 %) and B (10 s, 10 %) take one empty GPU each.
# t=1: C (100 s, 10 %) arrives; no GPU is empty. Horus's cost prefers GPU0 (90 + 10 = 100 %:
# utilisation term 0) over GPU1 (10 + 10 = 20 %: 0.8).
A = JobSpec(0, 0.0, 1, 100.0, 90.0, 1000.0)
B = JobSpec(1, 0.0, 1, 10.0, 10.0, 1000.0)
C = JobSpec(2, 1.0, 1, 100.0, 10.0, 1000.0)


def _by_id(r):
    return {o.job_id: o for o in r.jobs}


def test_migration_to_the_gpu_b_frees_by_hand():
    # Without the critical-path guard C joins A on GPU0; both run at 1/1.5 from t=1.
    # t=10: B ends, GPU1 is idle. Work left: A 99 - 9/1.5 = 93, C 100 - 9/1.5 = 94.
    # Savings W*(1.5-1) - 10: A 36.5, C 37 -> C moves to GPU1 (cost 10 s), A is alone again.
    # A: 93 s at full speed from t=10 -> ends at 103. C: paused 10..20, then 94 s -> ends at 114.
    h = policies.Horus(queue_order="utilisation", protect_critical=False)
    r = simulator.simulate([A, B, C], homogeneous_cluster(1, 2), h, FLAT, migration_cost_s=10.0)
    o = _by_id(r)
    assert o[1].finish == pytest.approx(10.0)
    assert o[0].finish == pytest.approx(103.0)
    assert o[2].finish == pytest.approx(114.0)
    assert (o[0].migrations, o[1].migrations, o[2].migrations) == (0, 0, 1)
    assert o[2].gpu_ids == (1,) and o[0].gpu_ids == (0,)
    assert r.summary()["makespan_s"] == pytest.approx(114.0)
    assert r.summary()["migrations"] == 1
    # effective utilisation: from t=10 to 20 only A runs (90 % of 2 GPUs = 45 %); C's 10 % counts
    # again once it resumes at t=20 -> (90 + 10) / 2 = 50 %
    at = dict(zip(r.util_t.tolist(), r.util_pct.tolist()))
    assert at[10.0] == pytest.approx(45.0)
    assert at[20.0] == pytest.approx(50.0)


def test_without_migration_the_pair_stays_slow_by_hand():
    # Same, migrate=False: from t=1 both run at 1/1.5 until A ends. A needs 99 s of work:
    # ends at 1 + 148.5 = 149.5; C has 1 s left then and ends at 150.5.
    h = policies.Horus(queue_order="utilisation", protect_critical=False, migrate=False)
    r = simulator.simulate([A, B, C], homogeneous_cluster(1, 2), h, FLAT, migration_cost_s=10.0)
    o = _by_id(r)
    assert o[0].finish == pytest.approx(149.5)
    assert o[2].finish == pytest.approx(150.5)
    assert r.summary()["migrations"] == 0


def test_migration_that_does_not_pay_is_not_made():
    # A cost of 60 s: savings 93*0.5 - 60 < 0 and 94*0.5 - 60 < 0 -> no move; same as no migration.
    h = policies.Horus(queue_order="utilisation", protect_critical=False)
    r = simulator.simulate([A, B, C], homogeneous_cluster(1, 2), h, FLAT, migration_cost_s=60.0)
    assert r.summary()["migrations"] == 0
    assert _by_id(r)[2].finish == pytest.approx(150.5)


def test_critical_path_guard_by_hand():
    # With the guard (default): at t=1 end_at = [100, 10]; the makespan bound
    # H = max(100, 1 + 100, 1 + ((99 + 9) + 100) / 2 = 105) = 105.
    # GPU0: delay min(99, 100) = 99 -> 100 + 99 > 105: excluded. GPU1: 10 + min(9, 100) = 19 <= 105.
    # So C shares GPU1 with B: B's last 9 s take 13.5 -> B ends at 14.5; C has done 9 s then,
    # its other 91 s alone -> ends at 105.5. A is never slowed: ends at 100. No GPU is idle
    # while a GPU is shared, so no migration.
    r = simulator.simulate([A, B, C], homogeneous_cluster(1, 2), policies.Horus(queue_order="utilisation"), FLAT, migration_cost_s=10.0)
    o = _by_id(r)
    assert o[0].finish == pytest.approx(100.0)
    assert o[1].finish == pytest.approx(14.5)
    assert o[2].finish == pytest.approx(105.5)
    assert o[2].gpu_ids == (1,)
    assert r.summary()["migrations"] == 0


def test_guard_mask_and_work_bound_by_hand():
    state = ClusterState(homogeneous_cluster(1, 3))
    state.track_end = True
    state.assign(JobSpec(0, 0, 1, 100, 50, 1000), (0,))
    state.assign(JobSpec(1, 0, 1, 10, 50, 1000), (1,))
    state.end_at[:2] = [100.0, 10.0]
    q = [JobSpec(5, 0, 2, 50, 10, 1000)]
    # (100 + 10 + 50 * 2) / 3 GPUs = 70
    assert policies.Horus.work_bound(q, state, 0.0) == pytest.approx(70.0)
    h = policies.Horus(queue_order="utilisation")
    h._work_bound = 70.0
    job = JobSpec(9, 0, 1, 60, 10, 1000)
    # H = max(100, 60, 70) = 100; GPU0: 100 + 60 > 100 excluded; GPU1: 10 + 10 <= 100; GPU2 empty
    assert h.candidates(job, state, 0.0).tolist() == [False, True, True]
    # unknown end times (live placement): nothing excluded
    state.end_at[:] = np.nan
    assert h.candidates(job, state, 0.0).tolist() == [True, True, True]
    assert policies.Horus(queue_order="utilisation", protect_critical=False).candidates(job, state, 0.0).tolist() == [True, True, True]


def test_policy_migrate_picks_largest_saving_and_keeps_locality():
    state = ClusterState(homogeneous_cluster(2, 2))  # node 0: GPUs 0, 1; node 1: GPUs 2, 3
    state.assign(JobSpec(0, 0, 1, 100, 50, 1000), (0,))
    state.assign(JobSpec(1, 0, 1, 100, 50, 1000), (0,))
    state.assign(JobSpec(2, 0, 1, 100, 50, 1000), (1,))
    state.assign(JobSpec(3, 0, 1, 100, 50, 1000), (2,))
    # GPU 3 is the only idle one. Job 1 saves 200*0.5 - 30 = 70, job 0 saves 100*0.5 - 30 = 20.
    h = policies.Horus(queue_order="utilisation")
    [m] = h.migrate(state, 0.0, {0: 100.0, 1: 200.0}, {0: 1.5, 1: 1.5}, 30.0)
    assert (m.job_id, m.from_gpus, m.to_gpus) == (1, (0,), (3,))
    assert m.saving_s == pytest.approx(70.0)
    assert state.ntasks.tolist() == [2, 1, 1, 0]  # the policy does not modify the state
    # not worth it at a cost of 100 s (100*0.5 and 200*0.5 are both <= 100)
    assert h.migrate(state, 0.0, {0: 100.0, 1: 200.0}, {0: 1.5, 1: 1.5}, 100.0) == []
    # FIFO never migrates; random co-location does not either
    assert policies.FIFOExclusive().migrate(state, 0.0, {1: 200.0}, {1: 1.5}, 0.0) == []
    assert policies.RandomColocation().migrate(state, 0.0, {1: 200.0}, {1: 1.5}, 0.0) == []
    with pytest.raises(ValueError, match="cost"):
        h.migrate(state, 0.0, {}, {}, -1.0)


def test_multi_gpu_migration_keeps_own_gpu_and_never_spans_more_nodes():
    state = ClusterState(homogeneous_cluster(2, 3))  # node 0: GPUs 0-2; node 1: GPUs 3-5
    state.assign(JobSpec(0, 0, 2, 100, 50, 1000), (0, 1))  # 2-GPU job on node 0
    state.assign(JobSpec(1, 0, 1, 100, 50, 1000), (1,))  # shares GPU 1
    for g, jid in ((2, 2), (4, 3), (5, 4)):
        state.assign(JobSpec(jid, 0, 1, 100, 50, 1000), (g,))
    g = policies.Gandiva()
    # only GPU 3 (node 1) is idle: the 2-GPU job would span 2 nodes -> not moved;
    # job 1 (single GPU) saves 100*0.5 - 10 = 40 and moves to GPU 3
    ms = g.migrate(state, 0.0, {0: 500.0, 1: 100.0}, {0: 1.5, 1: 1.5}, 10.0)
    assert [(m.job_id, m.to_gpus) for m in ms] == [(1, (3,))]
    # free GPU 2 on node 0 instead: the 2-GPU job (larger saving) keeps GPU 0, takes GPU 2
    state.release(2)
    state.release(3)
    state.assign(JobSpec(3, 0, 1, 100, 50, 1000), (3,))
    ms = g.migrate(state, 0.0, {0: 500.0, 1: 100.0}, {0: 1.5, 1: 1.5}, 10.0)
    assert [(m.job_id, m.from_gpus, m.to_gpus) for m in ms] == [(0, (0, 1), (0, 2))]


def test_cluster_state_move_checks_memory_and_leaves_state_on_error():
    state = ClusterState(homogeneous_cluster(1, 2, memory_mib=1000.0))
    state.assign(JobSpec(0, 0, 1, 10, 50, 600), (0,))
    state.assign(JobSpec(1, 0, 1, 10, 50, 600), (1,))
    state.assign(JobSpec(2, 0, 1, 10, 50, 300), (1,))
    with pytest.raises(ValueError, match="memory"):
        state.move(0, (1,))  # 900 + 600 > 1000
    assert state.running[0][1] == (0,) and state.mem_used.tolist() == [600.0, 900.0]
    assert state.move(2, (0,)) == (1,)
    assert state.mem_used.tolist() == [900.0, 600.0] and state.ntasks.tolist() == [2, 1]
    with pytest.raises(KeyError):
        state.move(7, (0,))


def test_negative_migration_cost_is_an_error():
    with pytest.raises(ValueError, match="migration_cost_s"):
        simulator.simulate([A], homogeneous_cluster(1, 1), policies.Horus(queue_order="utilisation"), FLAT, migration_cost_s=-1)


def test_live_state_without_end_tracking_excludes_nothing():
    # A 1000 s job on the only GPU, projected to end at 1000; a 10 s newcomer, bound H = 1000:
    # 1000 + min(1000, 10) > 1000 -> excluded when end times are tracked (simulator) ...
    h = policies.Horus(queue_order="utilisation")
    h._work_bound = 0.0
    newcomer = JobSpec(1, 0, 1, 10, 40, 100)
    tracked = ClusterState(homogeneous_cluster(1, 1))
    tracked.track_end = True
    tracked.assign(JobSpec(0, 0, 1, 1000, 40, 100), (0,))
    tracked.note_end((0,), 1000.0)
    assert h.candidates(newcomer, tracked, 0.0).tolist() == [False]
    # ... but live placement's state does not track them: end_at stays NaN, nothing is excluded
    live = ClusterState(homogeneous_cluster(1, 1))
    live.assign(JobSpec(0, 0, 1, 1000, 40, 100), (0,))
    live.note_end((0,), 1000.0)
    assert np.isnan(live.end_at).all()
    assert h.candidates(newcomer, live, 0.0).tolist() == [True]
    # and a live round places both jobs on the one GPU, as before the guard existed
    out = policies.Horus(queue_order="utilisation").place([JobSpec(0, 0, 1, 1000, 40, 100), newcomer], ClusterState(homogeneous_cluster(1, 1)),
                                 0.0, np.random.default_rng(0))
    assert [p.gpu_ids for p in out] == [(0,), (0,)]
