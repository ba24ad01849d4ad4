"""Platform figures: pure functions, values checked by hand."""
from __future__ import annotations

from webapp.figures import cluster_capacity_figure


def test_capacity_by_gpu_type():
    # hkust example: 6 V100 of 16 GiB -> 96 GiB; plus 2 T4 of 15360 MiB -> 30 GiB
    fig = cluster_capacity_figure(cluster_name="c", gpus_by_model={"V100": 6, "T4": 2},
                                  gpu_memory_by_model={"V100": 6 * 16384, "T4": 2 * 15360})
    gpus, mem = fig.data
    assert list(gpus.x) == ["T4", "V100"] and list(gpus.y) == [2, 6]
    assert list(mem.y) == [30.0, 96.0]
    assert fig.layout.title.text == "c: GPU capacity by type"


def test_no_gpus():
    fig = cluster_capacity_figure(cluster_name="cpu-only", gpus_by_model={}, gpu_memory_by_model={})
    assert fig.layout.title.text == "cpu-only: no GPUs" and list(fig.data[0].x) == []
