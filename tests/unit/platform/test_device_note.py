"""``device_note``: a job placed on GPUs it could not use says so, in words (issue: jobs given
GPUs on imported nodes that have no worker ran on CPU silently)."""
import pytest

from webapp.services import device_note


@pytest.mark.parametrize("assigned, device, worker, expected", [
    ([], "cpu", "w1", ""),  # no GPUs asked for: CPU is what was asked
    ([("n1", True)], "cuda:0", "n1", ""),  # placed and ran where placed
    ([("pai-7", False), ("pai-7", False)], "cpu", "w1",
     "placed on GPUs of node pai-7, which no Tandem worker reports (an imported node); it ran on the CPU of worker w1"),
    ([("a", False), ("b", True)], "cpu", "b",
     "placed on GPUs of node a, which no Tandem worker reports (an imported node); it ran on the CPU of worker b"),
    ([("a", False), ("c", False)], "cuda:0", "w",
     "placed on GPUs of nodes a, c, which no Tandem worker reports (an imported node); it ran on cuda:0 of worker w"),
    ([("gpu-1", True)], "cuda:0", "gpu-2", "placed on GPUs of gpu-1 but taken by the worker on gpu-2; it ran on cuda:0 of worker gpu-2"),
    ([("gpu-1", True)], "cpu", "gpu-1", "it ran on the CPU of worker gpu-1"),  # the node's worker has no usable CUDA
])
def test_device_note(assigned, device, worker, expected):
    assert device_note(assigned=assigned, device=device, worker_node=worker) == expected
