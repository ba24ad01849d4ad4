"""Weight prepacking (TVM's ``cpu_weight_prepack``, on by default on llvm): the tasks are tuned
with layout-free weights, the final build applies the records with the layout rewrite folded
into the constants, and the tuned library still computes what PyTorch computes. A real
``tuning.pipeline.run`` of the built-in ``convnet`` (2 tasks, 8 trials), no Django."""
from __future__ import annotations

import numpy as np
import pytest

from tests.integration.tuning import SMALL_SEARCH

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_prepacked_tuning_builds_a_correct_faster_model(tmp_path):
    import torch
    import tvm
    from tvm import relax

    from tuning import pipeline
    from tuning.backends.targets import make_target
    from webapp.plug import Collect, no_report

    params = {"model": "convnet", "target": "llvm", "trials": 8, "trials_per_round": 4, "repeats": 5,
              "num_threads": 1, "measure_eager": False, "work_dir": str(tmp_path / "work"),
              "options": {"builder_workers": 1, "search": SMALL_SEARCH}}
    summary = pipeline.run(params, report=no_report, record=Collect())
    assert summary["weight_prepack"] is True  # the llvm default
    assert summary["trials_in_database"] == 8 and summary["budget"]["tasks_untuned"] == []

    # the tuned tasks are the layout-free ones (and differ from the tasks without prepacking)
    model = pipeline.load_model({"model": "convnet"})
    target = make_target("llvm", 1)
    packed = pipeline.extract_tasks(model, target, True)
    plain = pipeline.extract_tasks(model, target, False)
    assert all(t.dispatched[0]["main"].attrs.get("layout_free_buffers") is not None for t in packed)
    assert all(t.dispatched[0]["main"].attrs.get("layout_free_buffers") is None for t in plain)

    # the tuned library computes the model's function
    x = np.random.default_rng(0).standard_normal(model.input_shapes[0]).astype("float32")
    vm = relax.VirtualMachine(tvm.runtime.load_module(str(tmp_path / "work" / "tuned.so")), tvm.cpu())
    got = vm["main"](tvm.runtime.tensor(x))
    got = (got if hasattr(got, "numpy") else got[0]).numpy()
    with torch.no_grad():
        want = model.torch_module.eval()(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)

    # both untuned baselines are reported, and tuning paid
    assert summary["tuned"]["median_s"] < summary["untuned"]["median_s"]
    if target.get("mcpu"):
        assert summary["untuned_no_mcpu"]["median_s"] > 0
        assert summary["tuned"]["median_s"] < summary["untuned_no_mcpu"]["median_s"]
