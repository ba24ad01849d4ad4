"""Queue orders of the co-locating policies, and the belief about jobs that outrun their estimate."""
import numpy as np
import pytest

from placement.core import interference, policies, simulator
from placement.core.types import JobSpec, expected_remaining_s, homogeneous_cluster

FLAT = interference.InterferenceModel((np.log(1.5), 0, 0, 0, 0))  # every pair: slowdown 1.5


def _queue():
    # (id, arrival, duration, util, estimate)
    spec = [(0, 0.0, 500.0, 20.0, None), (1, 1.0, 50.0, 90.0, None), (2, 2.0, 50.0, 40.0, None),
            (3, 3.0, 900.0, 60.0, 10.0), (4, 4.0, 300.0, 99.0, None)]
    return [JobSpec(i, a, 1, d, u, 100.0, estimate=e) for i, a, d, u, e in spec]


def test_orders_sort_the_window_as_documented():
    q = _queue()
    # utilisation: 99, 90, 60, 40, 20
    assert [j.job_id for j in policies.order_window(q, "utilisation")] == [4, 1, 3, 2, 0]
    # shortest planned: 3 (estimate 10), then 1 and 2 (50 each; 1 has the higher utilisation), 4, 0
    assert [j.job_id for j in policies.order_window(q, "shortest")] == [3, 1, 2, 4, 0]
    assert [j.job_id for j in policies.order_window(list(reversed(q)), "fifo")] == [0, 1, 2, 3, 4]
    assert [j.job_id for j in policies.Horus(lookahead=3, queue_order="shortest").order(q, 0, None)] == [1, 2, 0]


@pytest.mark.parametrize("make", [lambda: policies.Horus(queue_order="nearest"),
                                  lambda: policies.RandomColocation(queue_order="lifo")])
def test_unknown_queue_order_is_refused_by_name(make):
    with pytest.raises(ValueError, match="unknown queue order .*known: utilisation, shortest, fifo"):
        make()


def test_random_colocation_places_in_its_queue_order():
    # one GPU slot only (k_max 1): the job placed is the first of the order
    state = simulator.ClusterState(homogeneous_cluster(1, 1))
    q = _queue()
    rng = np.random.default_rng(0)
    [fifo] = policies.RandomColocation(k_max=1).place(q, state, 5.0, rng)
    [short] = policies.RandomColocation(k_max=1, queue_order="shortest").place(q, state, 5.0, rng)
    assert (fifo.job_id, short.job_id) == (0, 3)


def test_expected_remaining_within_and_past_the_estimate():
    assert expected_remaining_s(100.0, 30.0) == pytest.approx(70.0)
    assert expected_remaining_s(100.0, 100.0) == 0.0
    # run past its estimate: as much again as done so far (OVERRUN_RESIDUAL_FACTOR = 1)
    assert expected_remaining_s(10.0, 50.0) == pytest.approx(50.0)
    # float noise at the estimate's end is not an overrun
    assert expected_remaining_s(100.0, 100.0 + 1e-9) == 0.0


class _Spy(policies.FIFOExclusive):
    """FIFO exclusive that records the projected end of GPU 0 at every placement round."""

    def __init__(self):
        self.seen = []

    def place(self, queue, state, now, rng):
        self.seen.append((now, float(state.end_at[0])))
        return super().place(queue, state, now, rng)


def test_projected_end_of_an_overrunning_job_stays_ahead_of_now():
    # job 0 runs 100 s alone but was estimated at 10 s; job 1 arrives at 50 s (a second GPU is
    # free). At 50 s job 0 has done 50 s, past its estimate: it is expected to need 50 s more,
    # so GPU 0's projected end is 100 s, not the stale 10 s.
    jobs = [JobSpec(0, 0.0, 1, 100.0, 50.0, 100.0, estimate=10.0), JobSpec(1, 50.0, 1, 20.0, 50.0, 100.0)]
    spy = _Spy()
    r = simulator.simulate(jobs, homogeneous_cluster(1, 2), spy, FLAT)
    at_50 = [end for now, end in spy.seen if now == pytest.approx(50.0)]
    assert at_50 == [pytest.approx(100.0)]
    assert r.summary()["makespan_s"] == pytest.approx(100.0)


def _finish(r):
    return {o.job_id: o.finish for o in r.jobs}


@pytest.mark.parametrize("cost,a_end", [(0.0, 105.0), (30.0, 135.0)])
def test_a_preempted_job_pays_the_restore_cost_when_it_restarts(cost, a_end):
    # Tiresias, one GPU, level boundary at 10 GPU-s. A (100 s) runs from 0; B (5 s) arrives at
    # 20, when A has attained 20 GPU-s (level 1) and B none (level 0): A is suspended with 80 s
    # left, B runs 20..25, A restarts at 25, paused for the restore cost, then runs its 80 s.
    jobs = [JobSpec(0, 0.0, 1, 100.0, 50.0, 100.0), JobSpec(1, 20.0, 1, 5.0, 50.0, 100.0)]
    r = simulator.simulate(jobs, homogeneous_cluster(1, 1), policies.Tiresias(thresholds=(10.0,)), FLAT,
                           migration_cost_s=cost)
    assert _finish(r) == {0: pytest.approx(a_end), 1: pytest.approx(25.0)}
    assert {o.job_id: o.preemptions for o in r.jobs} == {0: 1, 1: 0}


def test_horus_las_preempts_only_when_the_head_cannot_share():
    # Level boundary 10 GPU-s. A (100 s, 2 GiB of 16) has attained 20 GPU-s when B (5 s) arrives.
    a = JobSpec(0, 0.0, 1, 100.0, 50.0, 2000.0)
    # B fits beside A (k_max 2, memory): no preemption; they share from 20 s (slowdown 1.5 each).
    small = JobSpec(1, 20.0, 1, 5.0, 50.0, 2000.0)
    r = simulator.simulate([a, small], homogeneous_cluster(1, 1), policies.Horus(las_thresholds=(10.0,)), FLAT,
                           migration_cost_s=0.0)
    assert {o.job_id: o.preemptions for o in r.jobs} == {0: 0, 1: 0}
    assert _finish(r)[1] == pytest.approx(27.5)  # 5 s of work at 1/1.5 speed
    # B needs more memory than is left beside A: A (lower level) is suspended for it.
    big = JobSpec(1, 20.0, 1, 5.0, 50.0, 15000.0)
    r = simulator.simulate([a, big], homogeneous_cluster(1, 1), policies.Horus(las_thresholds=(10.0,)), FLAT,
                           migration_cost_s=0.0)
    assert {o.job_id: o.preemptions for o in r.jobs} == {0: 1, 1: 0}
    assert _finish(r) == {0: pytest.approx(105.0), 1: pytest.approx(25.0)}


@pytest.mark.parametrize("bad", [(), (0.0,), (-5.0,), (float("nan"),)])
def test_horus_las_thresholds_are_checked(bad):
    with pytest.raises(ValueError, match="las_thresholds must be positive GPU-seconds"):
        policies.Horus(las_thresholds=bad)


def test_random_colocation_looks_only_at_its_window():
    # window of 2: the shortest of the two oldest (job 1, 50 s), not job 3 (estimate 10 s) beyond it
    state = simulator.ClusterState(homogeneous_cluster(1, 1))
    pol = policies.RandomColocation(k_max=1, queue_order="shortest", lookahead=2)
    [p] = pol.place(_queue(), state, 5.0, np.random.default_rng(0))
    assert p.job_id == 1 and pol.queue_window == 2
    with pytest.raises(ValueError, match="lookahead must be >= 1"):
        policies.RandomColocation(lookahead=0)


def test_horus_random_partners_draws_among_horus_candidates_only():
    # GPU0 holds a job, GPU1 is empty, GPU2 is full (k_max 2): Horus takes the empty GPU1;
    # the ablation draws uniformly between GPU0 and GPU1, never GPU2.
    state = simulator.ClusterState(homogeneous_cluster(1, 3))
    state.assign(JobSpec(10, 0.0, 1, 1000.0, 90.0, 100.0), (0,))
    state.assign(JobSpec(11, 0.0, 1, 1000.0, 50.0, 100.0), (2,))
    state.assign(JobSpec(12, 0.0, 1, 1000.0, 50.0, 100.0), (2,))
    job = JobSpec(1, 1.0, 1, 10.0, 10.0, 100.0)
    kw = dict(protect_critical=False, lookahead=8)
    [h] = policies.Horus(**kw).place([job], state, 1.0, np.random.default_rng(0))
    assert h.gpu_ids == (1,)
    ablation = policies.HorusRandomPartners(**kw)
    picks = [ablation.place([job], state, 1.0, np.random.default_rng(s))[0].gpu_ids[0] for s in range(200)]
    assert set(picks) == {0, 1} and 70 < picks.count(0) < 130  # binomial(200, 1/2): 5 sigma ~ 35
    assert ablation.queue_order == "shortest" and ablation.lookahead == 8
    assert "horus-random-partners" not in policies.POLICIES
