"""Horus's gang term: co-locating onto one GPU of a g-GPU job slows all g of them (data-parallel
steps wait for the slowest worker), so among shared GPUs Horus prefers partners that span fewer
GPUs. ``ClusterState.gang_gpus`` is the bookkeeping it reads."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from placement.core import policies, simulator
from placement.core.setup import load_tables
from placement.core.types import ClusterState, JobSpec, homogeneous_cluster

DATA = Path(__file__).resolve().parents[3] / "data"


def _full_cluster() -> ClusterState:
    """Node 0 (GPUs 0-3): one 4-GPU job; node 1 (GPUs 4-7): four 1-GPU jobs. Every task has the
    same utilisation and memory, so the paper's cost is the same on all eight GPUs."""
    state = ClusterState(homogeneous_cluster(2, 4))
    state.assign(JobSpec(1, 0.0, 4, 3600.0, 40.0, 4000.0), (0, 1, 2, 3))
    for i, g in enumerate((4, 5, 6, 7)):
        state.assign(JobSpec(10 + i, 0.0, 1, 3600.0, 40.0, 4000.0), (g,))
    return state


def test_gang_gpus_counts_the_resident_jobs_gpus_through_assign_move_release_and_copy():
    state = _full_cluster()
    assert state.gang_gpus.tolist() == [4, 4, 4, 4, 1, 1, 1, 1]
    state.assign(JobSpec(2, 0.0, 1, 60.0, 10.0, 1000.0), (2,))
    assert state.gang_gpus.tolist() == [4, 4, 5, 4, 1, 1, 1, 1]
    scratch = state.copy()
    scratch.release(1)
    assert scratch.gang_gpus.tolist() == [0, 0, 1, 0, 1, 1, 1, 1]
    assert state.gang_gpus.tolist() == [4, 4, 5, 4, 1, 1, 1, 1]  # the copy is independent
    state.move(2, (5,))
    assert state.gang_gpus.tolist() == [4, 4, 4, 4, 1, 2, 1, 1]
    state.release(1)
    assert state.gang_gpus.tolist() == [0, 0, 0, 0, 1, 2, 1, 1]
    # the invariant, recomputed from the running jobs
    want = np.zeros(8, dtype=int)
    for job, gpus in state.running.values():
        want[list(gpus)] += job.num_gpus
    assert state.gang_gpus.tolist() == want.tolist()


def test_horus_shares_with_a_one_gpu_job_rather_than_a_gang():
    state, new = _full_cluster(), JobSpec(99, 0.0, 1, 600.0, 30.0, 2000.0)
    rng = np.random.default_rng(0)
    # the paper's cost (w_gang 0) ties on all eight GPUs: argmin takes the first, a GPU of the gang
    (paper,) = policies.Horus(w_gang=0).place([new], state, 0.0, rng)
    assert paper.gpu_ids == (0,)
    (ours,) = policies.Horus().place([new], state, 0.0, rng)
    assert ours.gpu_ids == (4,)
    terms = {c["gpu"]: c for c in ours.explanation["candidates"]}
    assert terms[4]["gang"] == 0.0
    _, all_terms = policies.Horus().cost(new, state, np.arange(8))
    assert all_terms["gang"].tolist() == [3.0, 3.0, 3.0, 3.0, 0.0, 0.0, 0.0, 0.0]
    # the term only ranks shared GPUs: an idle GPU still wins over any shared one
    state.release(13)
    (idle,) = policies.Horus().place([new], state, 0.0, rng)
    assert idle.gpu_ids == (7,)


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf"), "1", None, True])
def test_w_gang_must_be_finite_and_not_negative(bad):
    with pytest.raises(ValueError, match="w_gang"):
        policies.Horus(w_gang=bad)


def test_one_gpu_traces_schedule_exactly_as_without_the_term():
    """Every job takes one GPU, so every gang term is 0: the two schedules are the same job
    for job (an independent check that the term changes nothing else)."""
    tables = load_tables(DATA)
    rng = np.random.default_rng(3)
    jobs = [JobSpec(i, float(rng.uniform(0, 4000)), 1, float(rng.uniform(300, 9000)),
                    float(rng.uniform(20, 90)), float(rng.uniform(1000, 6000)), "ResNet-50", 64)
            for i in range(60)]
    gpus = homogeneous_cluster(2, 4)
    a = simulator.simulate(jobs, gpus, policies.Horus(), tables.world, seed=0)
    b = simulator.simulate(jobs, gpus, policies.Horus(w_gang=0), tables.world, seed=0)
    assert [(o.job_id, o.start, o.finish, o.gpu_ids) for o in a.jobs] == \
        [(o.job_id, o.start, o.finish, o.gpu_ids) for o in b.jobs]
    assert a.world["colocated_s"] > 0  # jobs did share GPUs, so the cost function was used


def test_a_gang_job_is_spared_in_simulation():
    """A 2-GPU job (node 0) and two 1-GPU jobs (node 1) fill a 4-GPU cluster; a short 1-GPU
    job arrives. With the gang term it shares with a 1-GPU job, so the 2-GPU job runs alone
    and ends at exactly its duration; without it, it shares with the gang, which ends later."""
    tables = load_tables(DATA)
    jobs = [JobSpec(0, 0.0, 2, 10_000.0, 40.0, 4000.0, "ResNet-50", 64),
            JobSpec(1, 0.0, 1, 10_000.0, 40.0, 4000.0, "ResNet-50", 64),
            JobSpec(2, 0.0, 1, 10_000.0, 40.0, 4000.0, "ResNet-50", 64),
            JobSpec(3, 100.0, 1, 2_000.0, 30.0, 2000.0, "ResNet-18", 64)]
    gpus = homogeneous_cluster(2, 2)
    # migration and the critical-path guard off: the newcomer starts at once and stays put
    kw = {"migrate": False, "protect_critical": False}
    ours = {o.job_id: o for o in simulator.simulate(jobs, gpus, policies.Horus(**kw), tables.world).jobs}
    paper = {o.job_id: o for o in simulator.simulate(jobs, gpus, policies.Horus(w_gang=0, **kw),
                                                      tables.world).jobs}
    assert ours[3].start == paper[3].start == 100.0
    assert ours[0].finish == pytest.approx(10_000.0) and set(ours[3].gpu_ids) <= {2, 3}
    assert set(paper[3].gpu_ids) <= {0, 1} and paper[0].finish > 10_000.0 + 100.0
