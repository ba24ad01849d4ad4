"""Trimmer's candidate filter on real MetaSchedule objects (TVM, LLVM target; nothing measured).

With the same seed, the wrapped search must propose the same first batch as the unwrapped
``EvolutionarySearch`` (the benchmark's baseline) for a batch under 20 (no epsilon-greedy random
pick): before the cost model's warm-up the filter passes the strategy's best-ranked candidates
through, so a difference can only come from the wrapper disturbing the strategy's random state. The expected batch is computed independently, by
running the plain strategy on its own context. Both sides go through what a task scheduler's
``tune`` does to a context before searching: initialize it once more (checked on the real
``tune_tasks`` below), generate the design spaces, ``pre_tuning``.
"""
import tempfile

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import te
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule import _ffi_api
from tvm.s_tir.meta_schedule.task_scheduler import GradientBased

from tuning.backends.trimmer import make_trimmer_search, wrap_task_context
from tuning.core.trimmer import TrimmerConfig

BATCH = 4


def _matmul_mod(n=32):
    a = te.placeholder((n, n), name="A")
    b = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return tvm.IRModule({"main": te.create_prim_func([a, b, c])})


def _context(seed):
    search = ms.search_strategy.EvolutionarySearch(population_size=16, init_min_unmeasured=8, genetic_num_iters=1)
    return ms.TuneContext(mod=_matmul_mod(), target=tvm.target.Target({"kind": "llvm", "num-cores": 1}),
                          space_generator="post-order-apply", search_strategy=search, task_name="matmul",
                          rand_state=seed, num_threads=1)


def _first_batch(ctx, seed):
    """Structural hashes of the first batch ``ctx``'s search strategy proposes after a task
    scheduler's set-up (random cost model seeded with ``seed``, empty in-memory database)."""
    _ffi_api.TuneContextInitialize(ctx)  # what TaskScheduler.tune does to every task's context
    spaces = ctx.generate_design_space()
    ctx.search_strategy.pre_tuning(8 * BATCH, BATCH, spaces, ms.database.MemoryDatabase(),
                                   ms.cost_model.RandomModel(seed=seed))
    try:
        cands = ctx.search_strategy.generate_measure_candidates()
    finally:
        ctx.search_strategy.post_tuning()
    return [int(tvm_ffi.structural_hash(c.sch.mod)) for c in cands]


@pytest.fixture(scope="module")
def plain():
    """The unwrapped strategy's first batch for task seed 7, cost-model seed 3."""
    return _first_batch(_context(7), seed=3)


def test_task_scheduler_initializes_each_context_again():
    # the premise of the mirroring in make_trimmer_search: the real tune_tasks (apache-tvm 0.27)
    # initializes each task's context once more, which advances its rand_state
    ctx = _context(7)
    before = int(ctx.rand_state)
    ms.tune_tasks(tasks=[ctx], task_weights=[1.0], work_dir=tempfile.mkdtemp(), max_trials_global=0,
                  num_trials_per_iter=BATCH, builder=ms.builder.LocalBuilder(), runner=ms.runner.LocalRunner(),
                  cost_model=ms.cost_model.RandomModel(seed=3), task_scheduler=GradientBased(seed=0))
    assert int(ctx.rand_state) != before


def test_wrapped_search_proposes_the_unwrapped_first_batch(plain):
    stats = []
    wrapped_ctx = wrap_task_context(_context(7), TrimmerConfig(oversample=2), seed=0, stats=stats)
    wrapped = _first_batch(wrapped_ctx, seed=3)
    assert len(plain) == BATCH
    assert wrapped == plain
    # the batch passed through unfiltered (cost model not warm) from a pool of twice the batch
    assert stats == [{"pool": 2 * BATCH, "kept": BATCH, "replaced": 0, "filtered": False}]


def test_initializing_the_inner_strategy_with_the_new_context_changes_the_batch(plain):
    # the mistake inner_context avoids: the inner strategy initialized with the wrapping context
    # forks its random state from that context's (advanced) seed and searches elsewhere
    ctx = _context(7)
    search = make_trimmer_search(ctx.search_strategy, TrimmerConfig(oversample=2), 0, [])
    again = ms.TuneContext(mod=ctx.mod, target=ctx.target, space_generator=ctx.space_generator,
                           search_strategy=search, task_name=ctx.task_name, rand_state=int(ctx.rand_state),
                           num_threads=1)
    assert _first_batch(again, seed=3) != plain


def test_same_seed_same_batch_and_other_seed_another(plain):
    # the comparisons above mean something only if the batch is reproducible and depends on the
    # task's seed
    assert _first_batch(_context(7), seed=3) == plain
    assert _first_batch(_context(8), seed=3) != plain
    np.testing.assert_equal(len(set(plain)), BATCH)


def test_a_cloned_wrapped_context_searches_and_leaves_the_original_intact(plain):
    # TuneContext.clone clones the wrapper; the clone's inner strategy must be initialized for its
    # own context (postprocessed candidates), and the original must still search as before
    ctx = wrap_task_context(_context(7), TrimmerConfig(oversample=2), seed=0, stats=[])
    twin = ctx.clone()
    assert _first_batch(ctx, seed=3) == plain
    spaces = twin.generate_design_space()
    twin.search_strategy.pre_tuning(8 * BATCH, BATCH, spaces, ms.database.MemoryDatabase(),
                                    ms.cost_model.RandomModel(seed=3))
    cands = twin.search_strategy.generate_measure_candidates()
    twin.search_strategy.post_tuning()
    assert len(cands) == BATCH
    # postprocessors ran: no unprocessed meta-schedule annotations are left in the candidates
    assert not any("meta_schedule.parallel" in c.sch.mod.script() for c in cands)


def _fake_seconds(h: int) -> float:
    """A made-up but fixed run time per candidate (from its structural hash), the same in both
    runs, so the database's best records, which seed every round's population, agree."""
    return 1e-3 * (1.0 + (h % 997) / 997.0)


def _rounds(ctx, seed, n_rounds, on_round=lambda n: None):
    """Drive ``ctx``'s strategy for ``n_rounds`` rounds like a task scheduler: generate, record each
    candidate in the in-memory database with :func:`_fake_seconds`, notify, then call
    ``on_round(number measured)``. Returns the rounds' structural hashes."""
    from tvm.s_tir.meta_schedule.runner import RunnerResult

    _ffi_api.TuneContextInitialize(ctx)
    spaces = ctx.generate_design_space()
    db = ms.database.MemoryDatabase()
    workload = db.commit_workload(ctx.mod)
    strategy = ctx.search_strategy
    strategy.pre_tuning(n_rounds * BATCH, BATCH, spaces, db, ms.cost_model.RandomModel(seed=seed))
    out = []
    try:
        for _ in range(n_rounds):
            cands = strategy.generate_measure_candidates()
            hashes = [int(tvm_ffi.structural_hash(c.sch.mod)) for c in cands]
            results = [RunnerResult([_fake_seconds(h)], None) for h in hashes]
            for c, h in zip(cands, hashes):
                db.commit_tuning_record(ms.database.TuningRecord(
                    c.sch.trace, workload, [_fake_seconds(h)], ctx.target, c.args_info))
            strategy.notify_runner_results(cands, results)
            on_round(len(cands))
            out.append(hashes)
    finally:
        strategy.post_tuning()
    return out


def test_every_warm_up_round_is_the_unwrapped_strategys():
    # before the filter acts the wrapper must not change what the search proposes, in any round,
    # given the same measurements (here made up, identical on both sides). The pool's unmeasured
    # half is counted as seen by the strategy; on this task that did not change the next rounds
    # (a stronger search, or rounds ordered differently by noisy measurements, could)
    plain = _rounds(_context(7), seed=3, n_rounds=4)
    stats = []
    wrapped = _rounds(wrap_task_context(_context(7), TrimmerConfig(oversample=2), seed=0, stats=stats),
                      seed=3, n_rounds=4)
    assert len({h for r in plain for h in r}) == 4 * BATCH  # four rounds of new candidates
    assert wrapped == plain
    assert [s["filtered"] for s in stats] == [False] * 4
