"""Horus's ``max_pair_cost``: share an occupied GPU only when the believed pair cost (the
predicted extra slowdowns the co-location adds, summed) is below the bound; with Tiresias's
levels a job refused every shared GPU preempts lower levels instead. The beliefs here are
fixed tables of pair slowdowns (inputs of the policy, not the simulator's world)."""
from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from placement.core import policies
from placement.core.types import ClusterState, JobSpec, homogeneous_cluster, mixed_cluster, profile_key


class TableBelief:
    """Pair slowdowns by model name: ``table[(a, b)]`` is a's slowdown next to b; 1 alone."""

    def __init__(self, table: dict[tuple[str, str], float]) -> None:
        self.table, self.calls = table, 0

    def slowdown(self, job, others, gpu_type):
        self.calls += 1
        return math.prod(self.table[(job.model, o.model)] for o in others)


def _busy(models=("a", "b")) -> ClusterState:
    """Two GPUs, each running one 1-GPU job (model ``models[i]``), both believed to end at 3,600 s."""
    state = ClusterState(homogeneous_cluster(1, 2))
    for g, m in enumerate(models):
        state.assign(JobSpec(g + 1, 0.0, 1, 3600.0, 40.0, 4000.0, model=m), (g,))
    state.note_end((0, 1), 3600.0)
    return state


def _sym(s_a: float, s_b: float) -> TableBelief:
    """The newcomer (model n) slows and is slowed by a-jobs by ``s_a``, by b-jobs by ``s_b``."""
    return TableBelief({("n", "a"): s_a, ("a", "n"): s_a, ("n", "b"): s_b, ("b", "n"): s_b})


def test_pair_cost_sums_the_extra_slowdowns_of_newcomer_and_resident():
    state, new = _busy(), JobSpec(9, 0.0, 1, 600.0, 30.0, 2000.0, model="n")
    h = policies.Horus(pair_belief=_sym(1.7, 1.2))
    # (1.7 - 1) + (1.7 - 1) on GPU 0, (1.2 - 1) + (1.2 - 1) on GPU 1
    assert h.pair_cost(new, state, np.array([0, 1])) == pytest.approx([1.4, 0.4])


@pytest.mark.parametrize("s_a, s_b, expect", [
    (1.7, 1.7, None),   # both pairs cost 1.4 >= 1: the job waits
    (1.7, 1.4, (1,)),   # 0.8 on GPU 1: below the break-even
    (1.45, 1.7, (0,)),  # 0.9 on GPU 0
])
def test_a_shared_gpu_is_taken_only_below_the_bound(s_a, s_b, expect):
    state, new = _busy(), JobSpec(9, 0.0, 1, 600.0, 30.0, 2000.0, model="n")
    h = policies.Horus(pair_belief=_sym(s_a, s_b), max_pair_cost=1.0, protect_critical=False)
    out = h.place([new], state, 0.0, np.random.default_rng(0))
    assert (out[0].gpu_ids if out else None) == expect
    # without the bound Horus shares in every case (the cheaper pair)
    (free,) = policies.Horus(pair_belief=_sym(s_a, s_b), protect_critical=False).place(
        [new], state, 0.0, np.random.default_rng(0))
    assert free.gpu_ids == ((0,) if s_a <= s_b else (1,))  # ties: the lower id


def test_an_idle_gpu_is_always_a_candidate():
    state = ClusterState(homogeneous_cluster(1, 2))
    state.assign(JobSpec(1, 0.0, 1, 3600.0, 40.0, 4000.0, model="a"), (0,))
    h = policies.Horus(pair_belief=_sym(3.0, 3.0), max_pair_cost=1.0)
    (p,) = h.place([JobSpec(9, 0.0, 1, 600.0, 30.0, 2000.0, model="n")], state, 0.0, np.random.default_rng(0))
    assert p.gpu_ids == (1,)


def test_with_las_levels_a_refused_job_preempts_the_lower_level_instead_of_sharing():
    state, new = _busy(), JobSpec(9, 100.0, 1, 600.0, 30.0, 2000.0, model="n")
    state.attained.update({1: 50_000.0, 2: 4_000.0})  # levels 2 and 1; the newcomer is at 0
    las = dict(las_thresholds=(3600.0, 36000.0), protect_critical=False)
    costly = policies.Horus(pair_belief=_sym(1.7, 1.7), max_pair_cost=1.0, **las)
    assert costly.preempt([new], state, 100.0) == [1]  # most attained service first (Tiresias)
    cheap = policies.Horus(pair_belief=_sym(1.2, 1.2), max_pair_cost=1.0, **las)
    assert cheap.preempt([new], state, 100.0) == []  # it may share: nobody is suspended
    assert policies.Horus(pair_belief=_sym(1.7, 1.7), **las).preempt([new], state, 100.0) == []


def test_pair_cost_is_memoised_on_job_types_and_equals_the_direct_sum():
    rng = np.random.default_rng(3)
    models = ["a", "b", "c"]
    table = {(x, y): float(rng.uniform(1.0, 2.2)) for x in models + ["n"] for y in models + ["n"]}
    belief = TableBelief(table)
    h = policies.Horus(pair_belief=belief, k_max=3)
    state = ClusterState(homogeneous_cluster(2, 4))
    jid = 1
    for g in range(8):
        for _ in range(int(rng.integers(0, 3))):
            state.assign(JobSpec(jid, 0.0, 1, 100.0, 10.0, 100.0, model=str(rng.choice(models))), (g,))
            jid += 1
    new = JobSpec(999, 0.0, 1, 60.0, 10.0, 100.0, model="n")
    got = h.pair_cost(new, state, np.arange(8))
    for g in range(8):
        rs = [j.model for j, gids in state.running.values() if g in gids]
        want = math.prod(table[("n", r)] for r in rs) - 1.0
        for i, r in enumerate(rs):
            rest = rs[:i] + rs[i + 1:]
            want += math.prod(table[(r, o)] for o in rest + ["n"]) - math.prod(table[(r, o)] for o in rest)
        assert got[g] == pytest.approx(max(want, 0.0)), g
    calls = belief.calls
    assert (h.pair_cost(new, state, np.arange(8)) == got).all() and belief.calls == calls  # from the memo


class TypedBelief(TableBelief):
    """As TableBelief, with every slowdown scaled per GPU type (K80 gives 1.3x the excess)."""

    def slowdown(self, job, others, gpu_type):
        s = super().slowdown(job, others, gpu_type)
        return 1.0 + (s - 1.0) * (1.3 if gpu_type == "K80" else 1.0)


def test_pair_cost_on_mixed_types_shuffled_candidates_and_multi_gpu_residents():
    # the grouping by (resident kinds, GPU type) must give each candidate its own GPU's cost,
    # whatever the order of the candidates, and multi-GPU residents count on each of their GPUs
    rng = np.random.default_rng(11)
    models = ["a", "b"]
    table = {(x, y): float(rng.uniform(1.0, 2.0)) for x in models + ["n"] for y in models + ["n"]}
    belief = TypedBelief(table)
    h = policies.Horus(pair_belief=belief, k_max=3)
    state = ClusterState(mixed_cluster([("V100", 16e3), ("K80", 12e3), ("V100", 16e3)], 4))
    jid = 1
    for _ in range(10):
        n = int(rng.integers(1, 3))
        gpus = tuple(int(g) for g in rng.choice(12, size=n, replace=False))
        if all(state.ntasks[g] < 2 for g in gpus):
            state.assign(JobSpec(jid, 0.0, n, 100.0, 10.0, 100.0, model=str(rng.choice(models))), gpus)
            jid += 1
    new = JobSpec(999, 0.0, 1, 60.0, 10.0, 100.0, model="n")
    cand = rng.permutation(12)[:9]
    got = h.pair_cost(new, state, cand)
    for i, g in enumerate(cand):
        rs = [j for j, gids in state.running.values() if g in gids]
        gt = state.gpus[int(g)].gpu_type
        want = belief.slowdown(new, rs, gt) - 1.0 if rs else 0.0
        for r in rs:
            rest = [o for o in rs if o is not r]
            want += belief.slowdown(r, rest + [new], gt) - belief.slowdown(r, rest, gt)
        assert got[i] == pytest.approx(max(want, 0.0)), (i, int(g))
    assert len({round(v, 9) for v in got}) > 2  # the case is not trivially uniform


@pytest.mark.parametrize("value", [0, -1.0, float("nan"), float("inf"), "1", True])
def test_bad_bounds_are_refused_naming_the_value(value):
    with pytest.raises(ValueError, match="max_pair_cost must be a finite number > 0"):
        policies.Horus(pair_belief=_sym(1.5, 1.5), max_pair_cost=value)


def test_a_bound_without_a_belief_is_refused():
    with pytest.raises(ValueError, match="needs a pair_belief"):
        policies.Horus(max_pair_cost=1.0)


def test_on_gpu_and_resident_class_match_a_recount_through_assign_release_move_and_copy():
    rng = np.random.default_rng(7)
    state = ClusterState(homogeneous_cluster(2, 4))
    copies = []
    for step in range(3000):
        op = rng.integers(0, 4)
        if op == 0 or not state.running:
            n = int(rng.integers(1, 4))
            gpus = tuple(int(g) for g in rng.choice(8, size=n, replace=False))
            model, batch = [("a", 32), ("b", 32), ("a", None), ("b", 64)][int(rng.integers(0, 4))]
            state.assign(JobSpec(step + 1, 0.0, n, 60.0, 5.0, 10.0, model=model, batch_size=batch), gpus)
        elif op == 1:
            state.release(int(rng.choice(list(state.running))))
        elif op == 2:
            jid = int(rng.choice(list(state.running)))
            n = state.running[jid][0].num_gpus
            state.move(jid, tuple(int(g) for g in rng.choice(8, size=n, replace=False)))
        else:
            copies.append((state.copy(), {j: g for j, (_, g) in state.running.items()}))
        want: dict[int, set] = {}
        for jid, (_, gids) in state.running.items():
            for g in gids:
                want.setdefault(g, set()).add(jid)
        assert {g: set(v) for g, v in state.on_gpu.items()} == want, step
        assert all(len(v) == len(set(v)) for v in state.on_gpu.values())
        # resident_class: one id per multiset of resident profiles, and back
        kinds = {}
        for g in range(state.n_gpus):
            have = Counter(profile_key(state.running[j][0]) for j in want.get(g, ()))
            assert Counter(state.resident_profiles[state.resident_class[g]]) == have, step
            kinds.setdefault(frozenset(have.items()), set()).add(int(state.resident_class[g]))
        assert all(len(ids) == 1 for ids in kinds.values()), step
    for c, running in copies:  # later steps on the original never reached a copy
        assert {j: g for j, (_, g) in c.running.items()} == running
        assert sorted((g, j) for g, v in c.on_gpu.items() for j in v) == sorted(
            (g, j) for j, gids in running.items() for g in gids)
        for g in range(c.n_gpus):
            assert Counter(c.resident_profiles[c.resident_class[g]]) == Counter(
                profile_key(job) for job, gids in c.running.values() if g in gids)


def test_las_order_is_reused_within_a_round_and_never_across_simulations():
    # place() reuses the order preempt() computed at the same time for the same jobs; another
    # simulation (another attained-service record) at the same time is sorted afresh
    h = policies.Horus(las_thresholds=(3600, 36000))
    queue = [JobSpec(i, float(i), 1, 100.0 * (5 - i), 10.0, 100.0) for i in range(5)]
    state = ClusterState(homogeneous_cluster(1, 2))
    state.attained.update({0: 4000.0, 1: 50000.0})  # preempted earlier: levels 1 and 2
    want = sorted(queue, key=lambda j: (policies.Tiresias().level(j.job_id, state), j.planned))
    first = h._las_order(list(queue), state, 10.0)
    assert [j.job_id for j in first] == [j.job_id for j in want] == [4, 3, 2, 0, 1]
    assert h._las_order(list(queue), state, 10.0) is first
    other = ClusterState(homogeneous_cluster(1, 2))  # nothing attained there
    assert [j.job_id for j in h._las_order(list(queue), other, 10.0)] == [4, 3, 2, 1, 0]
    assert [j.job_id for j in h._las_order(list(queue[1:]), state, 10.0)] == [4, 3, 2, 1]
    placed = h.place(queue, state, 10.0, np.random.default_rng(0))
    assert [p.job_id for p in placed] == [4, 3, 2, 0]  # two GPUs x two slots, in LAS order


def test_equal_profiles_of_numpy_and_python_numbers_share_a_resident_class():
    state = ClusterState(homogeneous_cluster(1, 2))
    state.assign(JobSpec(1, 0.0, 1, 60.0, 60.0, 100.0, model="a"), (0,))
    state.assign(JobSpec(2, 0.0, 1, 60.0, np.float64(50.0), np.float64(100.0), model="a",
                         batch_size=np.int64(0)), (0,))
    state.assign(JobSpec(3, 0.0, 1, 60.0, 60.0, 100.0, model="a"), (1,))
    state.assign(JobSpec(4, 0.0, 1, 60.0, 50.0, 100.0, model="a"), (1,))
    assert state.resident_class[0] == state.resident_class[1] != 0


def test_a_move_to_a_gpu_outside_the_cluster_changes_nothing():
    state = ClusterState(homogeneous_cluster(1, 4))
    state.assign(JobSpec(1, 0.0, 2, 60.0, 40.0, 100.0, model="a"), (0, 1))
    before = (dict(state.running), dict(state.on_gpu), state.resident_class.tolist(), state.ntasks.tolist())
    for where in [(2, 9), (2, -1)]:
        with pytest.raises(IndexError, match="out of range"):
            state.move(1, where)
        assert (dict(state.running), dict(state.on_gpu), state.resident_class.tolist(),
                state.ntasks.tolist()) == before
