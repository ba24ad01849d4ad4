"""Trimmer's rules on latency histories whose stop rounds were worked out by hand (comments)."""
import math

import numpy as np
import pytest

from tuning.core.trimmer import TrimmerConfig, TrimmerState, oracle_stop, replay_rounds, select_candidates


def _state(n=1, weights=None, **cfg):
    # the hand-worked histories below judge every round (the paper's rule) unless a test sets
    # the cost-model warm-up itself
    cfg.setdefault("preempt_warmup", 0)
    return TrimmerState(n, weights or [1.0] * n, TrimmerConfig(**cfg), np.random.default_rng(0))


def _preempted_round(st, history, task_id=0):
    """Record ``history`` (one list of latencies per round) until the task is preempted; return
    that round's 1-based index, or None if it never was."""
    for lat in history:
        rec = st.record_round(task_id, lat)
        if rec.preempted:
            return rec.index
    return None


# One task; each entry is one round's candidate latencies (seconds); the best after each round
# and the count of consecutive non-improving rounds ("stale") are written beside it.
HISTORY_A = [
    [5.0],   # r1 best inf -> 5.0 improved, stale 0
    [4.0],   # r2 4.0 < 5.0 improved, stale 0
    [4.0],   # r3 4.0 is not < 4.0, stale 1
    [4.5],   # r4 stale 2
    [3.9],   # r5 improved, stale 0
    [3.9],   # r6 stale 1
    [4.0],   # r7 stale 2
    [3.95],  # r8 stale 3
]
HISTORY_FAIL = [
    [None, math.inf],  # r1 all failed: best stays inf, stale 1
    [2.0],             # r2 improved, stale 0
    [float("nan")],    # r3 failed, stale 1
    [3.0, 0.0],        # r4 3.0 > 2.0 and 0.0 is a failure, stale 2
    [1.0],             # r5 (after preemption it would improve, but the task already stopped)
]


@pytest.mark.parametrize(
    "history, patience, expected_round",
    [
        (HISTORY_A, 3, 8),     # stale reaches 3 only at r8 (the r3-r4 streak is broken at r5)
        (HISTORY_A, 2, 4),     # stale 2 first at r4
        (HISTORY_A, 1, 3),     # stale 1 first at r3
        (HISTORY_A, 4, None),  # stale never reaches 4 in 8 rounds
        (HISTORY_FAIL, 2, 4),  # r1 stale 1, r2 reset, r3 stale 1, r4 stale 2
        (HISTORY_FAIL, 1, 1),  # a round with only failures is a non-improving round
    ],
)
def test_task_preempted_after_patience_stale_rounds(history, patience, expected_round):
    st = _state(patience=patience, min_rel_improvement=0.0)
    got = None
    for lat in history:
        rec = st.record_round(0, lat)
        if rec.preempted:
            assert got is None, "a task is preempted once"
            got = rec.index
    assert got == expected_round
    assert st.preempted_at[0] == expected_round
    if expected_round is not None:
        assert st.choose_task([0]) == -1


# Two tasks, weights 1 and 2, window 2 rounds, stop when the weighted sum improved < 10 %.
# T_r = 1 * best0 + 2 * best1 after round r.
MODEL_HISTORY = [
    (0, 10.0),  # r1 T undefined (task 1 has no latency yet)
    (1, 5.0),   # r2 T = 10 + 10 = 20
    (0, 8.0),   # r3 T = 18; T1 undefined -> no decision
    (1, 4.0),   # r4 T = 16; vs T2 = 20: 20 % better -> go on
    (0, 7.9),   # r5 T = 15.9; vs T3 = 18: 11.7 % -> go on
    (1, 3.9),   # r6 T = 15.7; vs T4 = 16: 1.9 % < 10 % -> stop
    (0, 1.0),   # r7 never reached
]


@pytest.mark.parametrize(
    "window, min_rel, expected_stop",
    [
        (2, 0.10, 6),
        (2, 0.12, 5),     # r5: 11.7 % < 12 % -> stop one round earlier
        (2, 0.0, None),   # rule disabled
        (4, 0.10, None),  # r5 vs T1 undefined; r6: T6 = 15.7 vs T2 = 20: 21.5 % -> go on; r7: T7 = 1 + 7.8 = 8.8 vs T3 = 18 -> go on
        (1, 0.05, 5),     # r3 vs T2: 10 %; r4 vs T3: 11.1 %; r5: 15.9 vs 16: 0.6 % -> stop
    ],
)
def test_model_level_stop_on_windowed_weighted_sum(window, min_rel, expected_stop):
    st = _state(2, [1.0, 2.0], window=window, min_rel_improvement=min_rel, patience=99)
    stopped = None
    for task, lat in MODEL_HISTORY:
        st.record_round(task, [lat])
        if st.check_stop():
            stopped = len(st.rounds)
            break
    assert stopped == expected_stop
    if expected_stop is not None:
        assert st.stop_reason == "model-plateau" and st.stop_round == expected_stop


def test_weighted_total_by_hand():
    st = _state(2, [1.0, 2.0], patience=99)
    for task, lat in MODEL_HISTORY[:6]:
        st.record_round(task, [lat])
    assert st.totals == [None, 20.0, 18.0, 16.0, pytest.approx(15.9), pytest.approx(15.7)]


@pytest.mark.parametrize(
    "budget, per_round, expected_round, reason",
    [
        ({"energy_budget_j": 25.0}, (10.0, 1.0), 3, "energy-budget"),   # 10, 20, 30 >= 25 at r3
        ({"energy_budget_j": 20.0}, (10.0, 1.0), 2, "energy-budget"),   # 20 >= 20 at r2
        ({"time_budget_s": 2.5}, (10.0, 1.0), 3, "time-budget"),        # 1, 2, 3 >= 2.5 at r3
    ],
)
def test_budgets(budget, per_round, expected_round, reason):
    st = _state(1, patience=99, min_rel_improvement=0.0, **budget)
    for i in range(10):
        st.record_round(0, [10.0 - i], joules=per_round[0], seconds=per_round[1])
        if st.check_stop():
            break
    assert (st.stop_round, st.stop_reason) == (expected_round, reason)


def test_energy_attribution_and_non_contributing_share():
    st = _state(1, patience=99, min_rel_improvement=0.0)
    # r1: 8 J over 4 candidates = 2 J each; 3.0 (< inf) and 2.0 (< 3.0) contribute, 2.5 and the
    # failure do not -> 4 J non-contributing
    st.record_round(0, [3.0, 2.0, 2.5, None], joules=8.0, seconds=4.0)
    # r2: 6 J over 2 = 3 J each; 2.1 >= 2.0 does not contribute, 1.5 does -> 3 J
    st.record_round(0, [2.1, 1.5], joules=6.0, seconds=2.0)
    rep = st.report()
    assert rep["joules"] == 14.0 and rep["seconds"] == 6.0
    assert rep["non_contributing_joules"] == 7.0
    assert rep["non_contributing_share"] == 0.5
    assert rep["n_candidates"] == 6 and rep["n_contributing"] == 3
    assert [r["joules_per_candidate"] for r in rep["rounds"]] == [2.0, 3.0]
    assert rep["tasks"][0]["best_s"] == 1.5


@pytest.mark.parametrize(
    "histories, weights, alive, expected",
    [
        # t0 [10, 9, 8, 8]: g1 = (10 - 8) / 3 = 0.667, g2 = 8 / 4 = 2, score 0.2*0.667 + 0.8*2 = 1.733
        # t1 [4, 4]: g1 = 0 (n <= 3), g2 = 4 / 2 = 2, score 1.6 -> t0
        ([[10, 9, 8, 8], [4, 4]], [1, 1], [0, 1], 0),
        # same, t1 weighted 2 -> 3.2 > 1.733 -> t1
        ([[10, 9, 8, 8], [4, 4]], [1, 2], [0, 1], 1),
        # t1 never ran -> round-robin warm-up picks it first
        ([[10, 9, 8, 8], []], [1, 1], [0, 1], 1),
        # only t1 alive
        ([[10, 9, 8, 8], [4, 4]], [1, 1], [1], 1),
        # t0 only failed (inf): -1e9 -> t1
        ([[None], [4, 4]], [5, 1], [0, 1], 1),
        ([[1.0]], [1], [], -1),
    ],
)
def test_choose_task_gradient_rule(histories, weights, alive, expected):
    st = _state(len(histories), weights, patience=99)
    for t, h in enumerate(histories):
        for lat in h:
            st.record_round(t, [lat])
    assert st.choose_task(alive) == expected


@pytest.mark.parametrize(
    "kwargs",
    [
        {"patience": 0},
        {"window": 0},
        {"min_rel_improvement": -0.1},
        {"min_rel_improvement": 1.0},
        {"energy_budget_j": 0},
        {"time_budget_s": -1},
        {"exploration_floor": 1.5},
        {"oversample": 0},
        # JSON true is not the count 1
        {"patience": True},
        {"window": True},
        {"grad_window": True},
        {"oversample": True},
        {"filter_warmup": False},
        # numbers that are not numbers: no raw TypeError, and JSON true/false is not 1/0
        {"min_task_improvement": "abc"},
        {"exploration_floor": None},
        {"exploration_floor": True},
        {"alpha": False},
        {"energy_budget_j": True},
        {"energy_budget_j": "5"},
        {"time_budget_s": float("nan")},
        {"min_rel_improvement": float("inf")},
        # counts that MetaSchedule's 32-bit ints cannot hold (passed, then failed on the worker)
        {"patience": 2**31},
        {"window": 10**30},
        {"filter_warmup": 10**30},
        {"preempt_warmup": 2**31},
        {"oversample": 65},
        {"oversample": 10**19},
    ],
)
def test_config_rejects_bad_values(kwargs):
    (name,) = kwargs  # the message names the option
    with pytest.raises(ValueError, match=name):
        TrimmerConfig(**kwargs)


def test_config_accepts_the_limits():
    cfg = TrimmerConfig(patience=2**31 - 1, window=2**31 - 1, oversample=64, alpha=0, exploration_floor=1,
                        energy_budget_j=None, time_budget_s=np.float64(2.5), min_task_improvement=np.float32(0.01))
    assert (cfg.patience, cfg.oversample, cfg.alpha) == (2**31 - 1, 64, 0)


def test_from_options_rejects_unknown_names():
    with pytest.raises(ValueError, match="unknown Trimmer option"):
        TrimmerConfig.from_options({"patients": 3})
    assert TrimmerConfig.from_options({"patience": 5}).patience == 5


def test_bad_round_changes_nothing():
    st = _state(1)
    with pytest.raises(ValueError):
        st.record_round(1, [1.0])
    with pytest.raises(ValueError):
        st.record_round(0, [1.0], joules=-1.0)
    assert st.rounds == [] and st.best == [math.inf]


@pytest.mark.parametrize(
    "scores, want, floor, expected_best, n_random",
    [
        # pool of 8, keep 4, floor 0.25 -> ceil(1) random slot; best 3 by score: idx 5 (0.9), 2 (0.8), 7 (0.7)
        ([0.1, 0.2, 0.8, 0.3, 0.05, 0.9, 0.4, 0.7], 4, 0.25, [2, 5, 7], 1),
        # floor 0 -> pure ranking: top 4 = 5, 2, 7, 6
        ([0.1, 0.2, 0.8, 0.3, 0.05, 0.9, 0.4, 0.7], 4, 0.0, [2, 5, 6, 7], 0),
        # floor 0.1 of 4 -> ceil(0.4) = 1 random slot
        ([0.1, 0.2, 0.8, 0.3, 0.05, 0.9, 0.4, 0.7], 4, 0.1, [2, 5, 7], 1),
        # ties keep the lower index: scores all equal, floor 0 -> 0, 1
        ([1.0, 1.0, 1.0], 2, 0.0, [0, 1], 0),
        # floor 1 -> everything random
        ([0.1, 0.9, 0.5, 0.3], 2, 1.0, [], 2),
    ],
)
def test_select_candidates(scores, want, floor, expected_best, n_random):
    keep = select_candidates(scores, want, floor, np.random.default_rng(1))
    assert len(keep) == want == len(set(keep))
    assert set(expected_best) <= set(keep)
    others = set(keep) - set(expected_best)
    assert len(others) == n_random
    assert keep == sorted(keep)


def test_select_candidates_rejects_oversized_batch():
    with pytest.raises(ValueError):
        select_candidates([0.1, 0.2], 3, 0.1, np.random.default_rng(0))


def test_default_window_is_patience_times_tasks():
    # one task, patience 2, default window = 2 rounds, min_rel 1 %:
    # r1 T=10; r2 T=9 (vs nothing 2 rounds back); r3 T=9 vs T1=10: 10 % -> go on;
    # r4 T=9 vs T2=9: 0 % -> stop at r4 (with a 1-round window it would have stopped at r3)
    st = _state(1, patience=2, min_rel_improvement=0.01)
    stopped = None
    for lat in [10.0, 9.0, 9.0, 9.0, 1.0]:
        st.record_round(0, [lat])
        if st.check_stop():
            stopped = len(st.rounds)
            break
    assert stopped == 4 and st.stop_reason == "model-plateau"


# Resume: the database of the interrupted run already holds a best of 1.0 s for the task.
# Rounds after the resume (one candidate each), patience 3:
RESUMED = [1.2, 1.1, 1.05, 0.9]


@pytest.mark.parametrize(
    "prior, expected_preempt, expected_contrib",
    [
        # seeded with 1.0: 1.2, 1.1, 1.05 are all >= 1.0 -> stale 1, 2, 3 -> preempted at r3;
        # no candidate contributed (0.9 at r4 is recorded after preemption and would contribute)
        (1.0, 3, [False, False, False, True]),
        # unseeded (fresh run, or a resume that forgot the database): inf -> 1.2 -> 1.1 -> 1.05
        # -> 0.9 all improve, never preempted, every candidate "contributes"
        (None, None, [True, True, True, True]),
        # seeded with a worse prior 1.15: 1.2 stale 1, 1.1 improves (reset), 1.05 improves, 0.9 improves
        (1.15, None, [False, True, True, True]),
        # an invalid prior (a failed record) is ignored, as unseeded
        (math.inf, None, [True, True, True, True]),
    ],
)
def test_resumed_task_is_judged_against_database_best(prior, expected_preempt, expected_contrib):
    st = _state(1, patience=3, min_rel_improvement=0.0)
    st.seed_best(0, prior)
    got, contrib = None, []
    for lat in RESUMED:
        rec = st.record_round(0, [lat])
        contrib += rec.contributing
        if rec.preempted:
            got = rec.index
    assert got == expected_preempt
    assert contrib == expected_contrib
    assert st.choose_task([0]) == (-1 if expected_preempt else 0)


def test_resumed_tasks_get_their_warmup_round_and_define_the_weighted_total():
    # two tasks seeded with 2.0 and 3.0 s, weights 1 and 2: the weighted total is defined before
    # any round (2 + 6 = 8), and round-robin still gives each task a first round (t0 then t1)
    st = _state(2, [1.0, 2.0], patience=3)
    st.seed_best(0, 2.0)
    st.seed_best(1, 3.0)
    assert st.weighted_total() == 8.0
    assert st.choose_task([0, 1]) == 0
    st.record_round(0, [2.5])
    assert st.choose_task([0, 1]) == 1
    assert st.report()["tasks"][0]["prior_best_s"] == 2.0


def test_seed_best_rejects_bad_task_and_late_calls():
    st = _state(1)
    with pytest.raises(ValueError):
        st.seed_best(1, 1.0)
    st.record_round(0, [1.0])
    with pytest.raises(ValueError):
        st.seed_best(0, 0.5)


# A task creeping down by small steps (one candidate per round); the relative drop of each round
# against the best before it is written beside it.
CREEPING = [
    [10.0],   # r1 inf -> 10.0: a first valid latency always counts
    [9.0],    # r2 -10 %
    [8.95],   # r3 -0.56 %
    [8.93],   # r4 -0.22 %
    [8.80],   # r5 -1.46 %
    [8.79],   # r6 -0.11 %
    [8.785],  # r7 -0.06 %
    [8.78],   # r8 -0.06 %
    [8.0],    # r9 -8.9 % (only reached when nothing preempted the task before)
]


@pytest.mark.parametrize(
    "min_imp, patience, expected_round",
    [
        (0.0, 3, None),   # every round strictly improves: never stale (the paper's rule)
        (0.01, 3, 8),     # stale: r3 1, r4 2, r5 reset (1.46 % > 1 %), r6 1, r7 2, r8 3 -> r8
        (0.02, 3, 5),     # r3 1, r4 2, r5 3 (1.46 % < 2 %) -> r5
        (0.005, 3, 8),    # r3 0.56 % > 0.5 % resets; r4 1, r5 reset, r6 1, r7 2, r8 3 -> r8
        (0.01, 2, 4),     # r3 1, r4 2 -> r4
        (0.2, 1, 2),      # r2's 10 % < 20 % -> stale 1 at r2
    ],
)
def test_noise_threshold_for_task_progress(min_imp, patience, expected_round):
    st = _state(patience=patience, min_task_improvement=min_imp, min_rel_improvement=0.0)
    got = _preempted_round(st, CREEPING)
    assert got == expected_round
    if got is not None:
        # the preempting round still lowered the best (it improved, but not by enough) unless
        # the threshold was 0; candidates' contribution stays strict
        d = st.rounds[-1].as_dict()
        assert d["progressed"] is False
        assert d["n_contributing"] == (1 if d["improved"] else 0)


def test_noise_threshold_rejects_bad_values():
    for bad in (-0.01, 1.0):
        with pytest.raises(ValueError):
            TrimmerConfig(min_task_improvement=bad)


# Cost-model warm-up: two candidates per round, so round i starts after 2(i-1) measured
# candidates (r1 0, r2 2, r3 4, r4 6, r5 8, r6 10, r7 12, r8 14, r9 16). A round counts toward
# patience only if it started with >= preempt_warmup candidates measured; an improving round
# resets the count either way.
HISTORY_WARM = [
    [5.0, 6.0],  # r1 inf -> 5.0 improved
    [6.0, 7.0],  # r2 not improved
    [5.5, 5.2],  # r3 not improved
    [5.1, 6.0],  # r4 not improved
    [5.0, 5.3],  # r5 not improved (5.0 is not < 5.0)
    [4.0, 4.1],  # r6 improved
    [4.2, 4.3],  # r7 not improved
    [4.0, 4.5],  # r8 not improved
    [4.1, 4.1],  # r9 not improved
]


@pytest.mark.parametrize(
    "warmup, expected_round, first_judged",
    [
        (0, 4, 1),       # every round judged: r2 1, r3 2, r4 3 -> r4 (the paper's rule)
        (4, 5, 3),       # judged from r3: r3 1, r4 2, r5 3 -> r5
        (5, 9, 4),       # judged from r4: r4 1, r5 2, r6 reset, r7 1, r8 2, r9 3 -> r9
        (8, 9, 5),       # judged from r5: r5 1, r6 reset, r7-r9 1, 2, 3 -> r9
        (12, 9, 7),      # judged from r7: r7 1, r8 2, r9 3 -> r9
        (14, None, 8),   # judged from r8: r8 1, r9 2 -> never 3
        (100, None, None),  # 18 candidates never reach the warm-up
    ],
)
def test_preemption_waits_for_the_cost_model_warmup(warmup, expected_round, first_judged):
    st = _state(patience=3, min_rel_improvement=0.0, preempt_warmup=warmup)
    assert _preempted_round(st, HISTORY_WARM) == expected_round
    judged = [r.index for r in st.rounds if r.judged]
    assert (judged[0] if judged else None) == first_judged
    assert all(r["judged"] == (r["round"] in judged) for r in st.report()["rounds"])


# Model-level stop with the warm-up: one task, weight 1, window 2 rounds, 1 %, patience out of
# the way; two candidates per round. T after each round: r1 10, r2 10, r3 10, r4 9, r5 9, r6 9,
# r7 9. The rule may fire at round r only when r - 2 >= max(1, k), k = the round after which the
# run first held >= preempt_warmup candidates.
MODEL_WARM = [[10.0, 11.0], [10.0, 12.0], [10.5, 10.0], [9.0, 9.5], [9.0, 9.1], [9.2, 9.3], [9.0, 9.9]]


@pytest.mark.parametrize(
    "warmup, expected_stop",
    [
        (0, 3),      # k = 0: r3 T=10 vs T1=10, 0 % -> stop
        (4, 6),      # k = 2 (4 candidates after r2): r4 9 vs T2 10 (10 %), r5 9 vs T3 10, r6 9 vs T4 9 -> stop
        (8, 6),      # k = 4: first check at r6: 9 vs T4 9 -> stop
        (10, 7),     # k = 5: first check at r7: 9 vs T5 9 -> stop
        (100, None),  # never warm in 14 candidates
    ],
)
def test_model_level_stop_waits_for_the_cost_model_warmup(warmup, expected_stop):
    st = _state(1, window=2, min_rel_improvement=0.01, patience=99, preempt_warmup=warmup)
    stopped = None
    for lat in MODEL_WARM:
        st.record_round(0, lat)
        if st.check_stop():
            stopped = len(st.rounds)
            break
    assert stopped == expected_stop


@pytest.mark.parametrize("bad", [-1, 1.5, True, "100", None])
def test_preempt_warmup_must_be_a_non_negative_integer(bad):
    with pytest.raises(ValueError, match="preempt_warmup"):
        TrimmerConfig(preempt_warmup=bad)


def test_default_preempt_warmup_is_the_xgboost_warmup():
    assert TrimmerConfig().preempt_warmup == 100 == TrimmerConfig().filter_warmup


# ---------------------------------------------------------------- replay of a recorded trajectory
def _rounds(history, task_id=0):
    """(task, latencies, joules) per round; round i (1-based) carries i joules, so the replay's
    energy is 1 + 2 + ... + rounds."""
    return [(task_id, lat, float(i)) for i, lat in enumerate(history, start=1)]


@pytest.mark.parametrize(
    "history, cfg, expected_rounds, expected_reason",
    [
        # HISTORY_A, patience 3: preempted at r8 (see above); the only task gone ends the run
        (HISTORY_A, dict(patience=3, min_rel_improvement=0.0), 8, "all-preempted"),
        (HISTORY_A, dict(patience=2, min_rel_improvement=0.0), 4, "all-preempted"),
        # patience 4 never fires: the whole trajectory is replayed, no stop
        (HISTORY_A, dict(patience=4, min_rel_improvement=0.0), 8, None),
        # window 2, 10 %: T = 10, 9, 8.5, 8.4; r3 8.5 vs T1 10 is 15 % -> go on; r4 8.4 vs T2 9 is
        # 6.7 % -> stop at r4
        ([[10.0], [9.0], [8.5], [8.4], [1.0]], dict(patience=10, window=2, min_rel_improvement=0.1), 4,
         "model-plateau"),
        # warm-up 4 candidates (one per round): r1-r4 start with 0-3 measured and are not judged;
        # r5 stale 1, r6 stale 2 -> preempted at r6 with patience 2
        ([[5.0]] * 8, dict(patience=2, min_rel_improvement=0.0, preempt_warmup=4), 6, "all-preempted"),
    ],
)
def test_replay_stops_where_the_rules_say(history, cfg, expected_rounds, expected_reason):
    cfg.setdefault("preempt_warmup", 0)
    res = replay_rounds(_rounds(history), 1, [1.0], TrimmerConfig(**cfg))
    assert res.rounds == expected_rounds
    assert res.trials == expected_rounds  # one candidate per round
    assert res.joules == expected_rounds * (expected_rounds + 1) / 2
    assert res.stop_reason == expected_reason
    assert res.skipped_rounds == 0


def test_replay_agrees_with_live_state():
    # the replay is TrimmerState fed round by round: the same preemption round as the live test
    live = _state(patience=3, min_rel_improvement=0.0)
    assert _preempted_round(live, HISTORY_A) == 8
    res = replay_rounds(_rounds(HISTORY_A), 1, [1.0], TrimmerConfig(patience=3, min_rel_improvement=0.0,
                                                                     preempt_warmup=0))
    assert res.preempted_at == [8]


def test_replay_skips_rounds_of_preempted_tasks():
    # two tasks, patience 1:
    # r1 t0 [5] best 5; r2 t1 [4] best 4; r3 t0 [5] stale 1 -> t0 preempted at r3;
    # r4 t1 [3] improved; (t0 [1] skipped: already preempted); r5 t1 [3] stale 1 -> preempted at r5
    recorded = [(0, [5.0], 1.0), (1, [4.0], 1.0), (0, [5.0], 1.0), (1, [3.0], 1.0), (0, [1.0], 1.0),
                (1, [3.0], 1.0), (1, [2.0], 1.0)]
    res = replay_rounds(recorded, 2, [1.0, 1.0], TrimmerConfig(patience=1, min_rel_improvement=0.0,
                                                               preempt_warmup=0))
    assert (res.rounds, res.trials, res.joules) == (5, 5, 5.0)
    assert res.skipped_rounds == 1
    assert res.task_trials == [2, 3]
    assert res.preempted_at == [3, 5]
    assert res.stop_reason == "all-preempted"
    # ends with t0 best 5 (its skipped [1.0] does not count) and t1 best 3: 1*5 + 1*3
    assert res.weighted_total_s == 8.0


@pytest.mark.parametrize(
    "history, patience, expected_rounds, expected_total",
    [
        # HISTORY_A: patience 2 stops after r4 with best 4.0; patience 3 after r8 with best 3.9
        (HISTORY_A, 2, 4, 4.0),
        (HISTORY_A, 3, 8, 3.9),
        # a late gain that only a patient rule keeps: stale r2, r3; r4 halves the best
        ([[6.0], [6.0], [6.0], [3.0]], 2, 3, 6.0),
        ([[6.0], [6.0], [6.0], [3.0]], 3, 4, 3.0),
    ],
)
def test_replay_reports_the_latency_its_rules_end_with(history, patience, expected_rounds, expected_total):
    # weight 2: the reported total is weight * best, not the best alone
    res = replay_rounds(_rounds(history), 1, [2.0], TrimmerConfig(patience=patience, min_rel_improvement=0.0,
                                                                   preempt_warmup=0))
    assert res.rounds == expected_rounds
    assert res.weighted_total_s == pytest.approx(2.0 * expected_total)


def test_replay_total_is_none_while_a_task_has_no_valid_best():
    # t1 is never measured validly (a failure, then nothing): no total can be given
    res = replay_rounds([(0, [5.0], 1.0), (1, [None], 1.0)], 2, [1.0, 1.0],
                        TrimmerConfig(patience=5, min_rel_improvement=0.0, preempt_warmup=0))
    assert res.weighted_total_s is None
    assert replay_rounds([], 1, [1.0], TrimmerConfig()).weighted_total_s is None


@pytest.mark.parametrize("bad", [3, -1, 0.9, True, "0"])
def test_replay_rejects_a_bad_task_id(bad):
    with pytest.raises(ValueError, match="task_id"):
        replay_rounds([(bad, [1.0], 0.0)], 1, [1.0], TrimmerConfig())


def test_replay_rejects_a_malformed_round():
    with pytest.raises(ValueError, match="recorded round"):
        replay_rounds([(0, [1.0])], 1, [1.0], TrimmerConfig())


def test_replay_of_nothing_runs_nothing():
    res = replay_rounds([], 1, [1.0], TrimmerConfig())
    assert (res.rounds, res.trials, res.joules, res.stop_reason, res.task_trials) == (0, 0, 0.0, None, [0])


def test_replay_applies_budgets_from_the_recorded_energy_and_time():
    # improving rounds of 10 J and 4 s each, so only a budget can stop them:
    # energy budget 25 J is reached after r3 (30 J); time budget 10 s after r3 (12 s)
    rounds = [(0, [5.0 - i], 10.0, 4.0) for i in range(5)]
    cfg = dict(patience=10, min_rel_improvement=0.0, preempt_warmup=0)
    res = replay_rounds(rounds, 1, [1.0], TrimmerConfig(energy_budget_j=25.0, **cfg))
    assert (res.rounds, res.stop_reason, res.joules) == (3, "energy-budget", 30.0)
    res = replay_rounds(rounds, 1, [1.0], TrimmerConfig(time_budget_s=10.0, **cfg))
    assert (res.rounds, res.stop_reason) == (3, "time-budget")
    # without seconds in the trajectory the time budget never fires
    res = replay_rounds([r[:3] for r in rounds], 1, [1.0], TrimmerConfig(time_budget_s=10.0, **cfg))
    assert (res.rounds, res.stop_reason) == (5, None)


def test_replay_rounds_without_candidates_count_as_not_improving():
    # r1 [2.0] best 2; r2 [] nothing measured, stale 1 -> preempted at r2 with patience 1
    res = replay_rounds([(0, [2.0], 1.0), (0, [], 1.0), (0, [1.0], 1.0)], 1, [1.0],
                        TrimmerConfig(patience=1, min_rel_improvement=0.0, preempt_warmup=0))
    assert (res.rounds, res.trials, res.stop_reason) == (2, 1, "all-preempted")


# ---------------------------------------------------------------- oracle stop (what any stop rule can save)
@pytest.mark.parametrize("totals, joules, tol, expected", [
    # final 2.0; 2.9 > 2.06 until the last round -> only the full trajectory keeps it
    ([4.0, 3.0, 3.0, 2.9, 2.9, 2.0], [1.0] * 6, 0.03, (6, 96, 1.0, 2.0)),
    # final 2.0; round 2's 2.05 <= 2.0 * 1.03 = 2.06 -> stop after 2 rounds, (1 + 2) / 10 J
    ([5.0, 2.05, 2.05, 2.0], [1.0, 2.0, 3.0, 4.0], 0.03, (2, 32, 0.3, 2.05)),
    # tolerance 0: the first round that reaches the final best itself (round 4)
    ([5.0, 2.05, 2.05, 2.0], [1.0, 2.0, 3.0, 4.0], 0.0, (4, 64, 1.0, 2.0)),
    # no valid total in round 1 (a task without a record); 3.0 <= 2.0 * 1.5 at round 2 -> 2 / 4 J
    ([None, 3.0, 2.0], [1.0, 1.0, 2.0], 0.5, (2, 32, 0.5, 3.0)),
    # no energy recorded: no share
    ([3.0, 2.0], [0.0, 0.0], 0.03, (2, 32, None, 2.0)),
])
def test_oracle_stop_is_the_first_round_within_the_tolerance(totals, joules, tol, expected):
    res = oracle_stop(totals, joules, [16] * len(totals), tol)
    assert (res.rounds, res.trials, res.energy_share, res.reached_s) == expected
    assert res.final_s == totals[-1]


@pytest.mark.parametrize("totals, joules, trials, tol, match", [
    ([2.0], [1.0, 1.0], [16], 0.03, "one entry per round"),
    ([], [], [], 0.03, "at least one round"),
    ([None, None], [1.0, 1.0], [16, 16], 0.03, "no final latency"),
    ([2.0, 3.0], [1.0, 1.0], [16, 16], 0.03, "rose"),
    ([2.0, None], [1.0, 1.0], [16, 16], 0.03, "None after a valid one"),
    ([2.0, 0.0], [1.0, 1.0], [16, 16], 0.03, "positive number"),
    ([2.0, math.inf], [1.0, 1.0], [16, 16], 0.03, "positive number"),
    ([2.0], [-1.0], [16], 0.03, "joules"),
    ([2.0], [math.nan], [16], 0.03, "joules"),
    ([2.0], [1.0], [-1], 0.03, "trials"),
    ([2.0], [1.0], [True], 0.03, "trials"),
    ([2.0], [1.0], [16], -0.1, "tolerance"),
    ([2.0], [1.0], [16], math.nan, "tolerance"),
    ([2.0], [1.0], [16], 3, r"fraction in \[0, 1\)"),  # 3 meant as 3 %
    ([2.0], [1.0], [16], "0.03", "tolerance must be a number"),
    ([2.0], [1.0], [16], True, "tolerance must be a number"),
    (["3", "2"], [1.0, 1.0], [16, 16], 0.03, "weighted total must be a number"),
    ([True], [1.0], [16], 0.03, "weighted total must be a number"),
    ([2.0], ["1"], [16], 0.03, "joules must be a number"),
    ([2.0], [None], [16], 0.03, "joules must be a number"),
    ([3.0, 2.0], [1.7e308, 1.7e308], [16, 16], 0.03, "sum to inf"),
])
def test_oracle_stop_rejects_bad_input(totals, joules, trials, tol, match):
    with pytest.raises(ValueError, match=match):
        oracle_stop(totals, joules, trials, tol)
