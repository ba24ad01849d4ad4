"""Unit tests of placement/core: policies, simulator invariants, trace readers."""
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement.core import interference, policies, simulator, traces
from placement.core.types import ClusterState, JobSpec, homogeneous_cluster, profile_key

DATA = Path(__file__).resolve().parents[3] / "data"
FLAT = interference.InterferenceModel((np.log(1.5), 0, 0, 0, 0))  # every pair: slowdown 1.5


def test_horus_cost_terms_worked_by_hand():
    # GPU0 holds a 60% / 4096 MiB job, GPU1 is empty; new job 30% / 4096 MiB on 16 GiB GPUs.
    state = ClusterState(homogeneous_cluster(1, 2))
    state.assign(JobSpec(1, 0, 1, 10, 60, 4096), (0,))
    job = JobSpec(2, 0, 1, 10, 30, 4096)
    cost, terms = policies.Horus().cost(job, state, np.array([0, 1]))
    # GPU0: mem 8192/16384 = 0.5, util (100-90)/100 = 0.1, tasks 1 -> 1.6
    # GPU1: mem 0.25, util (100-30)/100 = 0.7, tasks 0 -> 0.95
    assert cost == pytest.approx([1.6, 0.95])
    # overflow: a 70% job on GPU0 -> 130% -> 4 * 0.3 = 1.2
    _, t2 = policies.Horus().cost(JobSpec(3, 0, 1, 10, 70, 1024), state, np.array([0]))
    assert t2["utilisation"][0] == pytest.approx(1.2)


def test_multi_gpu_job_prefers_one_node():
    state = ClusterState(homogeneous_cluster(2, 4))
    state.assign(JobSpec(1, 0, 1, 10, 50, 1000), (0,))  # node 0 has 3 empty GPUs, node 1 has 4
    [p] = policies.Horus().place([JobSpec(2, 0, 4, 10, 50, 1000)], state, 0, np.random.default_rng(0))
    assert set(p.gpu_ids) == {4, 5, 6, 7}


def test_fifo_head_of_line_blocks_and_sjf_skips():
    state = ClusterState(homogeneous_cluster(1, 2))
    q = [JobSpec(1, 0, 4, 100, 10, 10) if False else JobSpec(1, 0, 2, 100, 10, 10), JobSpec(2, 1, 1, 5, 10, 10)]
    state.assign(JobSpec(9, 0, 1, 10, 10, 10), (0,))
    assert policies.FIFOExclusive().place(q, state, 0, np.random.default_rng(0)) == []
    assert [p.job_id for p in policies.SJF().place(q, state, 0, np.random.default_rng(0))] == [2]


def test_tiresias_levels_and_preemption():
    t = policies.Tiresias(thresholds=(100.0,))
    state = ClusterState(homogeneous_cluster(1, 1))
    state.assign(JobSpec(1, 0, 1, 1000, 10, 10), (0,))
    state.attained[1] = 500.0  # level 1
    assert t.preempt([JobSpec(2, 5, 1, 10, 10, 10)], state, 5) == [1]
    state.attained[1] = 50.0  # same level 0 as the newcomer: no preemption
    assert t.preempt([JobSpec(2, 5, 1, 10, 10, 10)], state, 5) == []


def test_simulator_fifo_exclusive_by_hand():
    # one GPU; jobs of 10 s at t=0 and t=1: second waits 9 s; JCTs 10 and 19; makespan 20
    jobs = [JobSpec(0, 0, 1, 10, 50, 100), JobSpec(1, 1, 1, 10, 50, 100)]
    r = simulator.simulate(jobs, homogeneous_cluster(1, 1), policies.FIFOExclusive(), FLAT)
    s = r.summary()
    assert [o.jct for o in r.jobs] == pytest.approx([10, 19])
    assert s["makespan_s"] == pytest.approx(20)
    assert s["mean_queueing_delay_s"] == pytest.approx(4.5)


def test_simulator_colocation_slowdown_by_hand():
    # Horus co-locates both on the single GPU (k_max 2): each runs at 1/1.5 -> both finish at 15 s
    jobs = [JobSpec(0, 0, 1, 10, 40, 100), JobSpec(1, 0, 1, 10, 40, 100)]
    r = simulator.simulate(jobs, homogeneous_cluster(1, 1), policies.Horus(), FLAT)
    assert [o.finish for o in r.jobs] == pytest.approx([15, 15])
    assert [o.queueing_delay for o in r.jobs] == [0, 0]


job_st = st.builds(
    lambda a, g, d, u, m: (a, g, d, u, m),
    st.floats(0, 1000), st.sampled_from([1, 1, 1, 2, 4]), st.floats(1, 500), st.floats(0, 100),
    st.floats(100, 16000))


#: every policy with its defaults, plus Horus without its critical-path guard (migrates more)
POLICY_CONFIGS = [(name, {}) for name in policies.POLICIES] + [("horus", {"protect_critical": False})]


@settings(max_examples=40, deadline=None)
@given(st.lists(job_st, min_size=1, max_size=25), st.sampled_from(POLICY_CONFIGS), st.integers(0, 3),
       st.sampled_from([0.0, 5.0, 30.0]))
def test_invariants_memory_once_and_all_finish(raw, config, seed, migration_cost):
    check_invariants(raw, config, seed, migration_cost)


def check_invariants(raw, config, seed, migration_cost):
    """Simulate ``raw`` jobs on 2x4 GPUs under ``config`` = (policy name, kwargs), asserting at
    every placement and migration decision and at the end; returns the result."""
    jobs = [JobSpec(i, a, g, d, u, m) for i, (a, g, d, u, m) in enumerate(raw)]
    gpus = homogeneous_cluster(2, 4)
    policy = policies.make_policy(config[0], **config[1])
    # wrap place() and migrate() to check the invariants at every decision
    seen_running: set[int] = set()
    inner, inner_migrate = policy.place, policy.migrate

    def checked(queue, state, now, rng):
        out = inner(queue, state, now, rng)
        ids = [p.job_id for p in out]
        assert len(ids) == len(set(ids)), "a job placed twice in one decision"
        assert not (set(ids) & set(state.running)), "a running job placed again"
        scratch = state.copy()
        byid = {j.job_id: j for j in queue}
        for p in out:
            scratch.assign(byid[p.job_id], p.gpu_ids)  # raises if over memory
        assert np.all(scratch.mem_used <= scratch.capacity + 1e-6)
        seen_running.update(ids)
        return out

    def checked_migrate(state, now, remaining, slowdown, cost_s):
        out = inner_migrate(state, now, remaining, slowdown, cost_s)
        ids = [m.job_id for m in out]
        assert len(ids) == len(set(ids)), "a job migrated twice in one decision"
        assert policy.migrates or not out, "a policy without migration migrated"
        scratch = state.copy()
        for m in out:
            job, held = scratch.running[m.job_id]  # KeyError: not running
            assert held == m.from_gpus
            assert len(set(m.to_gpus)) == job.num_gpus, "a task on two GPUs / a GPU twice"
            for g in m.to_gpus:  # destinations: idle, or held by this job alone
                assert scratch.ntasks[g] == 0 or (g in held and scratch.ntasks[g] == 1)
            scratch.move(m.job_id, m.to_gpus)  # raises if over memory
            assert m.saving_s > 0
        assert np.all(scratch.mem_used <= scratch.capacity + 1e-6)
        assert sum(len(g) for _, g in scratch.running.values()) == int(scratch.ntasks.sum())
        return out

    policy.place = checked
    policy.migrate = checked_migrate
    r = simulator.simulate(jobs, gpus, policy, FLAT, seed=seed, migration_cost_s=migration_cost)
    assert sorted(o.job_id for o in r.jobs) == list(range(len(jobs)))  # every job finished once
    assert all(o.finish >= o.start >= o.arrival for o in r.jobs)
    # a job runs at most at full speed and makes no progress while a migration pauses it
    for o in r.jobs:
        assert o.finish - o.start >= o.duration + o.migrations * migration_cost - 1e-6
        assert o.migrations == 0 or policy.migrates
    return r


def test_invariants_hold_in_a_case_with_migrations():
    # the property above, on a case known to migrate (so that its migrate checks do run):
    # 8 one-GPU jobs fill 8 GPUs, 2 more co-locate, then the short ones end and free GPUs
    raw = [(0.0, 1, 10.0 if i < 4 else 400.0, 50.0, 1000.0) for i in range(8)] + \
          [(1.0, 1, 400.0, 50.0, 1000.0), (1.0, 1, 400.0, 50.0, 1000.0)]
    for config in (("horus", {"protect_critical": False}), ("horus+", {"protect_critical": False}),
                   ("gandiva", {})):
        r = check_invariants(raw, config, 0, 5.0)
        assert r.summary()["migrations"] >= 1, config


def test_never_fitting_job_is_an_error():
    with pytest.raises(simulator.NeverPlaceableError, match=r"job 0 \(unnamed\) needs 9 GPUs"):
        simulator.simulate([JobSpec(0, 0, 9, 10, 10, 10)], homogeneous_cluster(1, 8), policies.Horus(), FLAT)


def test_interference_fit_recovers_known_coefficients():
    rng = np.random.default_rng(0)
    ua, ub = rng.uniform(0, 100, 200), rng.uniform(0, 100, 200)
    true = (0.2, 0.1, 0.5, 0.0, 0.3)
    s = np.exp(interference._design(ua, ub) @ np.array(true))
    m = interference.fit_interference(ua, ub, s)
    assert m.coef == pytest.approx(true, abs=1e-6)
    assert m.slowdown(50, [50, 50]) == pytest.approx(np.exp(2 * (0.2 + 0.05 + 0.25)))


def test_gavel_trace_malformed_row_names_line_and_column(tmp_path):
    good = (DATA / "gavel-traces/msr_seed0/795a4c.trace").read_text().splitlines()
    bad = tmp_path / "bad.trace"
    fields = good[1].split("\t")
    fields[5] = "soon"
    bad.write_text("\n".join([good[0], "\t".join(fields)]) + "\n")
    thr = traces.load_throughputs(DATA / "gavel-traces/simulation_throughputs.json")
    with pytest.raises(traces.TraceError, match=r"line 2, column 'arrival_time'"):
        traces.read_gavel_trace(bad, thr, lambda f, b: (10.0, 100.0))


def test_philly_malformed_and_seeded_models(tmp_path):
    p = tmp_path / "p.csv"
    p.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,66.0,1,66,a\n"
                 "2017-10-09 07:02:55,x,1,66,a\n")
    with pytest.raises(traces.TraceError, match=r"line 3, column 'duration'"):
        traces.read_philly(p, [("LM", 5)], lambda f, b: (1.0, 1.0))
    p.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n" +
                 "".join(f"2017-10-09 07:0{i}:00,60,1,60,a\n" for i in range(6)))
    models = [("A", 1), ("B", 2), ("C", 3)]
    a = traces.read_philly(p, models, lambda f, b: (1.0, 1.0), seed=3)
    b = traces.read_philly(p, models, lambda f, b: (1.0, 1.0), seed=3)
    assert [j.model for j in a] == [j.model for j in b]
    expected = np.random.default_rng(3).integers(0, 3, size=6)
    assert [j.model for j in a] == [models[k][0] for k in expected]
    assert [j.arrival for j in a] == [0, 60, 120, 180, 240, 300]


def test_tiresias_trace_reads_60_jobs():
    jobs = traces.read_tiresias_trace(DATA / "tiresias-sim/60_job.csv", lambda m, b: (20.0, 2000.0))
    assert len(jobs) == 60 and jobs[1].num_gpus == 8 and jobs[1].model == "vgg11" and jobs[1].duration == 147


def test_horus_plus_serves_the_group_with_most_credit_first():
    # two obvious groups: 3 light 1-GPU jobs waiting 10 s each (credit 10 x 3 = 30) and
    # 2 heavy 4-GPU jobs waiting 100 s (credit 100 x 2 = 200): the heavy group goes first.
    now = 100.0
    light = [JobSpec(i, 90.0, 1, 10, 10, 500) for i in range(3)]
    heavy = [JobSpec(10 + i, 0.0, 4, 10, 90, 15000) for i in range(2)]
    order = policies.HorusPlus(k=2).order(light + heavy, now, np.random.default_rng(0))
    assert [j.job_id for j in order] == [10, 11, 0, 1, 2]


def test_horus_orders_window_by_utilisation_and_ignores_beyond_it():
    q = [JobSpec(i, float(i), 1, 10, u, 100) for i, u in enumerate([10, 80, 50, 99])]
    assert [j.job_id for j in policies.Horus(lookahead=3, queue_order="utilisation").order(q, 0, None)] == [1, 2, 0]


def test_gandiva_prefers_empty_then_least_utilised_without_overflow_penalty():
    state = ClusterState(homogeneous_cluster(1, 2))
    state.assign(JobSpec(1, 0, 1, 10, 90, 100), (0,))
    state.assign(JobSpec(2, 0, 1, 10, 60, 100), (1,))
    # both GPUs busy: goes to GPU1 (60 + 70 = 130 %, over 100 but Gandiva does not care)
    [p] = policies.Gandiva().place([JobSpec(3, 0, 1, 10, 70, 100)], state, 0, np.random.default_rng(0))
    assert p.gpu_ids == (1,)
    empty = ClusterState(homogeneous_cluster(1, 2))
    empty.assign(JobSpec(1, 0, 1, 10, 5, 100), (0,))
    [p] = policies.Gandiva().place([JobSpec(3, 0, 1, 10, 70, 100)], empty, 0, np.random.default_rng(0))
    assert p.gpu_ids == (1,)


def test_random_colocation_is_seeded():
    state = ClusterState(homogeneous_cluster(2, 4))
    q = [JobSpec(i, 0, 1, 10, 10, 100) for i in range(6)]
    a = policies.RandomColocation().place(q, state, 0, np.random.default_rng(7))
    b = policies.RandomColocation().place(q, state, 0, np.random.default_rng(7))
    assert [p.gpu_ids for p in a] == [p.gpu_ids for p in b]


@pytest.mark.parametrize("gpus", [(1,), (1, 2)])
def test_assign_one_or_many_gpus_updates_the_same_way_and_refuses_overflow(gpus):
    """ClusterState.assign (one GPU takes a scalar path): memory, utilisation and task counts
    add up on exactly those GPUs; a job that would overflow a GPU's memory, a job already
    placed and a GPU id outside the cluster change nothing."""
    state = ClusterState(homogeneous_cluster(1, 4))  # 16,384 MiB GPUs
    state.assign(JobSpec(1, 0, len(gpus), 10, 40, 6000), gpus)
    state.assign(JobSpec(2, 0, len(gpus), 10, 25, 6000), gpus)
    want = np.zeros(4)
    want[list(gpus)] = 1
    assert state.mem_used.tolist() == (want * 12000).tolist()
    assert state.util_sum.tolist() == (want * 65).tolist() and state.ntasks.tolist() == (want * 2).tolist()
    before = (state.mem_used.copy(), state.util_sum.copy(), state.ntasks.copy(), dict(state.running))
    for job, where, err in [(JobSpec(3, 0, len(gpus), 10, 5, 5000), gpus, ValueError),  # 17,000 > 16,384 MiB
                            (JobSpec(1, 0, len(gpus), 10, 5, 10), gpus, ValueError),  # already placed
                            (JobSpec(4, 0, 1, 10, 5, 10), (4,), IndexError),
                            (JobSpec(5, 0, 1, 10, 5, 10), (-1,), IndexError),
                            (JobSpec(6, 0, 2, 10, 5, 10), (0, -1), IndexError),  # numpy would wrap -1
                            (JobSpec(7, 0, 2, 10, 5, 10), (1, 4), IndexError)]:
        with pytest.raises(err):
            state.assign(job, where)
        assert [a.tolist() for a in before[:3]] == [state.mem_used.tolist(), state.util_sum.tolist(), state.ntasks.tolist()]
        assert state.running == before[3]
        cls = state.resident_class.tolist()
        assert [c == 0 for c in cls] == [g not in gpus for g in range(4)]
        assert sorted(state.resident_profiles[cls[gpus[0]]]) == sorted(
            profile_key(state.running[j][0]) for j in (1, 2)) and len({cls[g] for g in gpus}) == 1
    assert state.running[1][1] == tuple(gpus) and all(type(g) is int for g in state.running[1][1])
