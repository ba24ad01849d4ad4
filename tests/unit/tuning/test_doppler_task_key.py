"""DOPpler recognises a task by its arguments' dtypes and element counts: with weight
prepacking the candidates of one task lay their weights out differently (shapes as the
candidate's tiling chose them, same elements), and keyed by shape one task's state split per
layout (its degree of parallelism never rose). The shapes below are the ones a real prepacked
matmul task gave (Linear(512, 512) at batch 64)."""
from tuning.backends.doppler import DopplerEngine, Candidate


def _cand(*shapes, dtype="float32", device="cpu"):
    return Candidate("x.so", device, [["TENSOR", dtype, list(s)] for s in shapes])


def test_layouts_of_one_task_share_a_key():
    plain = _cand((64, 512), (512, 512), (64, 512))
    packed_a = _cand((64, 512), (32, 64, 8, 16), (64, 512))
    packed_b = _cand((64, 512), (32, 16, 8, 32, 2), (64, 512))
    assert DopplerEngine.task_key(plain) == DopplerEngine.task_key(packed_a) == DopplerEngine.task_key(packed_b)


def test_other_tasks_keep_their_own_keys():
    base = DopplerEngine.task_key(_cand((64, 512), (512, 512), (64, 512)))
    assert DopplerEngine.task_key(_cand((64, 512), (512, 256), (64, 256))) != base  # other sizes
    assert DopplerEngine.task_key(_cand((64, 512), (512, 512), (64, 512), dtype="float16")) != base
    assert DopplerEngine.task_key(_cand((64, 512), (512, 512), (64, 512), device="cuda")) != base
    assert DopplerEngine.task_key(_cand((64, 512), (64, 512), (512, 512))) != base  # argument order matters
