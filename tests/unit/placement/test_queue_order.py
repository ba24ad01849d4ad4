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
