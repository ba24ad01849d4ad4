"""DOPpler on CUDA: one measurement slot per GPU (CUDA_VISIBLE_DEVICES), timed by TVM's
time_evaluator on the device, whose CUDA timer records CUDA events. Needs an NVIDIA GPU."""
from __future__ import annotations

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.gpu]


def _has_gpu() -> bool:
    import tvm

    return bool(tvm.cuda(0).exist)


@pytest.mark.skipif(not _has_gpu(), reason="needs an NVIDIA GPU (none on this machine)")
def test_doppler_tunes_a_matmul_on_every_gpu(tmp_path):
    import tvm
    from tvm import te
    from tvm.s_tir import meta_schedule as ms

    from tuning.backends.registry import TuningSetup, make_runner
    from tuning.backends.targets import cuda_target

    a = te.placeholder((256, 256), name="A")
    b = te.placeholder((256, 256), name="B")
    k = te.reduce_axis((0, 256), name="k")
    c = te.compute((256, 256), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    mod = tvm.IRModule({"main": te.create_prim_func([a, b, c])})
    target = cuda_target()
    setup = TuningSetup(target=target, num_threads=1, work_dir=tmp_path, seed=0, max_trials_global=16,
                        num_trials_per_iter=8, options={"doppler": {"devices": "cuda"}})
    builder, runner = make_runner("doppler", setup)
    try:
        n_gpus = len(runner.engine.slot_specs)
        db = ms.tune_tir(mod, target, str(tmp_path), max_trials_global=16, num_trials_per_iter=8,
                         builder=builder, runner=runner, seed=0)
        decisions = list(runner.engine.decisions)
    finally:
        runner.close()
    assert [d["dop"] for d in decisions] == [1, min(2, n_gpus)]
    assert {k for d in decisions for k in d["measured_by"]} <= {f"cuda{i}" for i in range(n_gpus)}
    best = db.get_top_k(db.commit_workload(mod), 1)
    assert best and float(best[0].run_secs[0]) > 0
