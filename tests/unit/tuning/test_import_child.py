"""Model import in a child process (:mod:`tuning.backends.import_child`), on real imports.

- Faithful: the Relax module the child writes with ``tvm.ir.save_json`` and the parent reads
  back is structurally equal to a direct import, yields the same tuning tasks (same structural
  hashes, which is what a resumed tuning matches its database records by), builds, and its
  output is bit-identical to the direct import's and matches the parent's own PyTorch twin
  (rebuilt with the same seeded weights) to float32 rounding.
- Failures are a :class:`ModelImportError` naming the cause: the child's own import error
  verbatim, a real ``MemoryError`` raised inside TVM's ONNX frontend (a ``Range`` of 2**40
  int64 elements, 8 TiB, which the frontend folds with numpy), the child killed by a signal (the
  test-only hook, :data:`TEST_CRASH_ENV`), and the timeout. The caller (this test process)
  lives on, and no temporary file is left.

Each case starts a fresh interpreter that imports TVM (about 10-25 s here).
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tuning.backends import import_child
from tuning.backends.frontends import ModelImportError, import_torch_model, prepare_for_tuning
from tuning.backends.import_child import TEST_CRASH_ENV, import_onnx_isolated, import_timeout_s, import_torch_model_isolated

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def own_tmp(tmp_path, monkeypatch):
    """A private temporary directory for the importer's files, to check none is left behind."""
    d = tmp_path / "tmp"
    d.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(d))
    return d


def _importer_files(d):
    """What the importer left in the temporary directory (torch keeps its own cache there too)."""
    return [p.name for p in d.iterdir() if p.name.startswith("tandem-import-")]


def _range_onnx() -> bytes:
    """ONNX graph ``y = Range(0, 2**40, 1)`` (int64): TVM's frontend evaluates the constant
    ``Range`` with numpy, which refuses to allocate 8 TiB."""
    inits = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in (("a", 0), ("b", 1 << 40), ("d", 1))]
    graph = helper.make_graph([helper.make_node("Range", ["a", "b", "d"], ["y"])], "range_huge", [],
                              [helper.make_tensor_value_info("y", TensorProto.INT64, None)], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def test_child_import_round_trips_convnet_exactly(own_tmp):
    import torch
    import tvm
    import tvm_ffi
    from tvm.s_tir import meta_schedule as ms

    from tuning.backends.frontends import build_with_database, extract_tuning_tasks

    direct = import_torch_model("convnet")
    child = import_torch_model_isolated("convnet")
    assert (child.name, child.source, child.input_shapes, child.input_dtypes) == ("convnet", "builtin", [(1, 16, 32, 32)], ["float32"])
    tvm.ir.assert_structural_equal(child.mod, direct.mod)

    target = tvm.target.Target({"kind": "llvm", "num-cores": 1})
    prepared = {k: prepare_for_tuning(m.mod, weight_prepack=True) for k, m in (("direct", direct), ("child", child))}
    hashes = {k: [int(tvm_ffi.structural_hash(t.dispatched[0])) for t in extract_tuning_tasks(p, target)]
              for k, p in prepared.items()}
    assert len(hashes["child"]) == 2 and hashes["child"] == hashes["direct"]  # two convolutions (each + ReLU)

    x = np.random.default_rng(0).standard_normal((1, 16, 32, 32)).astype("float32")
    outs = {}
    for k, p in prepared.items():
        ex = build_with_database(p, {"kind": "llvm", "num-cores": 1}, ms.database.MemoryDatabase(), weight_prepack=True)
        vm = tvm.relax.VirtualMachine(ex, tvm.cpu())
        got = vm["main"](tvm.runtime.tensor(x))
        outs[k] = (got if hasattr(got, "numpy") else got[0]).numpy()  # torch.export's outputs come as a tuple
    assert outs["child"].shape == (1, 32, 28, 28)
    assert np.array_equal(outs["child"], outs["direct"])
    with torch.no_grad():  # the parent's twin, rebuilt with the seeded weights the child imported
        want = child.torch_module(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(outs["child"], want, rtol=1e-5, atol=1e-5)
    assert _importer_files(own_tmp) == []


def test_child_import_error_message_comes_back_unchanged(own_tmp):
    with pytest.raises(ModelImportError, match=r"^unknown model 'no-such-net'; use one of convnet, matmul, mlp"):
        import_torch_model_isolated("no-such-net")
    assert _importer_files(own_tmp) == []


def test_memory_error_inside_tvm_onnx_frontend_fails_the_import(own_tmp):
    with pytest.raises(ModelImportError) as info:
        import_onnx_isolated(_range_onnx())
    msg = str(info.value)
    assert msg.startswith("TVM Relax cannot import ONNX model uploaded.onnx: MemoryError: ")
    assert "Unable to allocate 8.00 TiB" in msg  # 2**40 x 8 bytes
    assert _importer_files(own_tmp) == []


@pytest.mark.parametrize("sig, number", [("SIGSEGV", 11), ("SIGABRT", 6)])
def test_importer_killed_by_a_signal_names_it(own_tmp, monkeypatch, sig, number):
    monkeypatch.setenv(TEST_CRASH_ENV, sig)
    onnx_file = own_tmp.parent / "squeezenet.onnx"
    onnx_file.write_bytes((REPO / "data" / "onnx-light-models" / "light_squeezenet.onnx").read_bytes())
    with pytest.raises(ModelImportError) as info:
        import_onnx_isolated(onnx_file)
    msg = str(info.value)
    assert msg.startswith(f"the importer process for squeezenet.onnx was killed by {sig} (signal {number}): ")
    assert "nothing was imported" in msg
    # faulthandler's report of the crash, with the Python frame where TVM's frontend was called
    want = {"SIGSEGV": "Segmentation fault", "SIGABRT": "Aborted"}[sig]
    assert f"Fatal Python error: {want}" in msg and "in import_onnx" in msg
    assert _importer_files(own_tmp) == []


def test_import_that_outlasts_the_timeout_is_killed(own_tmp):
    with pytest.raises(ModelImportError, match=r"^model import of convnet did not finish within 0.5 s "
                                               r"\(TANDEM_IMPORT_TIMEOUT_S\); the importer process was killed$"):
        import_torch_model_isolated("convnet", timeout_s=0.5)  # the child cannot even load TVM in 0.5 s
    assert _importer_files(own_tmp) == []


@pytest.mark.parametrize("raw, want", [(None, import_child.DEFAULT_TIMEOUT_S), ("", import_child.DEFAULT_TIMEOUT_S),
                                       ("30", 30.0), ("2.5", 2.5)])
def test_import_timeout_from_the_environment(monkeypatch, raw, want):
    if raw is None:
        monkeypatch.delenv("TANDEM_IMPORT_TIMEOUT_S", raising=False)
    else:
        monkeypatch.setenv("TANDEM_IMPORT_TIMEOUT_S", raw)
    assert import_timeout_s() == want


@pytest.mark.parametrize("raw", ["0", "-3", "soon", "nan"])
def test_bad_import_timeout_is_refused(monkeypatch, raw):
    monkeypatch.setenv("TANDEM_IMPORT_TIMEOUT_S", raw)
    with pytest.raises(ValueError, match="TANDEM_IMPORT_TIMEOUT_S must be a positive number of seconds"):
        import_timeout_s()
