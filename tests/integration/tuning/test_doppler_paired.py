"""DOPpler's paired timing on the LLVM CPU target, with real kernels in a real measurement worker.

Two kernels with the same signature (A: 128x128 float32, B: 128x128, C: 128x128 out):
``single`` computes C = A @ B once, ``double`` computes it twice (two separate reductions, then
their sum), so by construction ``double`` does about twice the work. The engine makes the
batch's first candidate the task's reference kernel and records every candidate on its scale,
so (independently of how fast this machine is) ``single`` must come out near the reference's
own time and ``double`` near twice it.
"""
from __future__ import annotations

import math

import pytest

pytestmark = [pytest.mark.integration]

N = 128


def _export(tmp_path, name: str, times: int):
    """Build the kernel computing A @ B ``times`` times (summed) with the plain LLVM target and
    export it as a shared library, like DOPpler's build workers. Returns (path, args_info JSON)."""
    import tvm
    from tvm import te
    from tvm.driver import build as tvm_build
    from tvm.s_tir import meta_schedule as ms

    a = te.placeholder((N, N), name="A")
    b = te.placeholder((N, N), name="B")
    def product(t: int):
        k = te.reduce_axis((0, N), name=f"k{t}")
        return te.compute((N, N), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name=f"P{t}")

    parts = [product(t) for t in range(times)]
    c = parts[0] if times == 1 else te.compute((N, N), lambda i, j: sum(p[i, j] for p in parts), name="C")
    func = te.create_prim_func([a, b, c])
    mod = tvm.IRModule({"main": func})
    path = str(tmp_path / f"{name}.so")
    tvm_build(mod, target=tvm.target.Target({"kind": "llvm", "num-cores": 1})).export_library(path)
    args_info = [x.as_json() for x in ms.arg_info.ArgInfo.from_prim_func(func)]
    return path, args_info


def kernel_pair(tmp_path, times: int):
    """``single`` (A @ B once) and a kernel doing it ``times`` times, with the same task signature.
    Returns (single path, other path, args_info)."""
    single, info = _export(tmp_path, "single", 1)
    other, info2 = _export(tmp_path, f"times{times}", times)
    assert info == info2  # the same task signature
    return single, other, info


@pytest.fixture
def kernels(tmp_path):
    return kernel_pair(tmp_path, 2)


def _engine(tmp_path, paired):
    from tuning.backends.doppler import DopplerEngine, SlotSpec
    from tuning.core.doppler import DopplerConfig

    slot = SlotSpec(kind="cpu", name="cpu0", num_threads=1, cores=(0,))
    # no early termination: every candidate gets 3-6 repeats, so one noisy repeat (a burst on
    # this shared VM) cannot decide a value (the checks below take the median of the repeats)
    return DopplerEngine([slot], config=DopplerConfig(max_dop=1, screen_ratio=0.0), work_dir=tmp_path / "work",
                         build_workers=1, paired=paired)


def _median(values):
    import statistics

    return statistics.median(values)


def test_paired_timing_puts_every_candidate_on_the_reference_scale(tmp_path, kernels):
    from tuning.backends.doppler import _Candidate

    single, double, info = kernels
    cands = [_Candidate(single, "cpu", info), _Candidate(double, "cpu", info), _Candidate(single, "cpu", info)]
    with _engine(tmp_path, paired=True) as eng:
        results = eng.measure_batch(cands)
        decision = eng.decisions[-1]
        ref = dict(eng._tasks[eng.task_key(cands[0])].reference)
        # the next batch of the task reuses its reference and scale: with the scale set to 1 s,
        # the values are plain ratios to the reference kernel (plain seconds would be ~1e-3)
        eng._tasks[eng.task_key(cands[0])].reference["level_s"] = 1.0
        again = eng.measure_batch([_Candidate(double, "cpu", info)])
        decision2 = eng.decisions[-1]
    assert all(err is None and costs for costs, err in results), results
    # the first candidate became the reference: its library was copied out of the artifact
    assert ref is not None and ref["path"] != single and ref["path"].endswith(".so")
    assert len(ref["level_repeats_s"]) == 31 and ref["level_s"] > 0
    assert decision["paired"] == 3 and decision["reference_level_s"] == ref["level_s"]
    level = ref["level_s"]
    assert all(len(c) >= 3 for c, _ in results), results
    median = [_median(c) for c, _ in results]
    # the reference's own kernel (timed again, twice) comes out at its scale; twice the work at
    # about twice it (bounds allow a 2-vCPU VM's noise, and the sum of the two products is extra work)
    assert 0.8 < median[0] / level < 1.25, (median, level)
    assert 0.8 < median[2] / level < 1.25, (median, level)
    assert 1.6 < median[1] / level < 2.6, (median, level)
    # the second batch: the same reference (not chosen again), its values on the 1 s scale
    assert decision2["paired"] == 1 and decision2["reference_level_s"] == 1.0
    assert 1.6 < _median(again[0][0]) < 2.6, again


def test_plain_timing_has_no_reference(tmp_path, kernels):
    from tuning.backends.doppler import _Candidate

    single, double, info = kernels
    with _engine(tmp_path, paired=False) as eng:
        results = eng.measure_batch([_Candidate(single, "cpu", info), _Candidate(double, "cpu", info)])
        decision = eng.decisions[-1]
        assert eng._tasks[eng.task_key(_Candidate(single, "cpu", info))].reference is None
    assert decision["paired"] == 0 and decision["reference_level_s"] is None
    # plain seconds per run (no scale applied); their ratio is not checked: two measurements
    # timed apart can differ by up to ~2x on a noisy VM, which is what paired timing was for
    assert all(costs and all(math.isfinite(c) and 0 < c < 0.5 for c in costs) for costs, _ in results), results


def test_a_missing_reference_falls_back_to_plain_timing(tmp_path, kernels):
    from tuning.backends import doppler as dp
    from tuning.core.doppler import DopplerConfig

    single, _, info = kernels
    cfg = DopplerConfig()
    dp._WORKER["slot"] = dp.SlotSpec(kind="cpu", name="cpu", num_threads=1)
    try:
        costs, got = dp._measure_in_worker(single, "cpu", info, {
            "min_repeat_ms": 10, "min_repeats": cfg.min_repeats, "max_repeats": cfg.max_repeats,
            "ci_rel_halfwidth": cfg.ci_rel_halfwidth, "screen_ratio": 0.0, "best_s": None,
            "reference": {"path": str(tmp_path / "gone.so"), "level_s": 1.0}})
    finally:
        dp._WORKER.clear()
    assert got["paired"] is False and "paired_error" in got
    # plain seconds, not multiples of the (absent) reference's 1 s scale
    assert costs and all(math.isfinite(c) and 0 < c < 0.5 for c in costs)


def test_paired_values_are_the_ratio_times_the_given_scale(kernels):
    # with the reference's scale set to 1 s, a candidate's values are its ratio to the reference
    # itself: about 2 for twice the work, about 1 for the reference's own kernel; plain seconds
    # (about 1e-3 here) would be far below
    from tuning.backends import doppler as dp
    from tuning.core.doppler import DopplerConfig

    single, double, info = kernels
    cfg = DopplerConfig()
    evalcfg = {"min_repeat_ms": 10, "min_repeats": cfg.min_repeats, "max_repeats": cfg.max_repeats,
               "ci_rel_halfwidth": cfg.ci_rel_halfwidth, "screen_ratio": 0.0, "best_s": None,
               "reference": {"path": single, "level_s": 1.0}}
    dp._WORKER["slot"] = dp.SlotSpec(kind="cpu", name="cpu", num_threads=1)
    try:
        twice, got = dp._measure_in_worker(double, "cpu", info, evalcfg)
        same, _ = dp._measure_in_worker(single, "cpu", info, evalcfg)
    finally:
        dp._WORKER.clear()
    assert got["paired"] is True and got["repeats"] == len(twice) >= cfg.min_repeats
    assert 1.6 < _median(twice) < 2.6, twice
    assert 0.8 < _median(same) < 1.25, same
