"""The onnxruntime peer of a tuning result (issue 20, "Peers"): the model exported to ONNX and
timed by onnxruntime's CPU execution provider in a subprocess with the same threads and the
same procedure as the TVM builds and PyTorch eager, interleaved with them; a model the exporter
refuses gives an ``{"error": ...}`` entry, not a failed tuning. Real torch exporter and
onnxruntime; the whole path with TVM builds runs in tests/integration/tuning
(test_doppler_rpc, test_tuning_worker)."""
from __future__ import annotations

import numpy as np
import pytest

from tuning.backends.frontends import OnnxExportError, export_torch_onnx, torch_model
from tuning.backends.latency import measure_in_subprocess, measure_interleaved

MLP_SHAPE = (16, 512)


class _BesselI0(__import__("torch").nn.Module):
    """``aten::i0`` has no ONNX symbolic in opset 17: the TorchScript exporter refuses it."""

    def forward(self, x):
        import torch

        return torch.special.i0(x)


@pytest.fixture(scope="module")
def mlp_onnx(tmp_path_factory):
    return export_torch_onnx(torch_model("mlp"), [MLP_SHAPE], ["float32"],
                             tmp_path_factory.mktemp("ort") / "mlp.onnx", name="mlp")


def test_exported_mlp_computes_what_pytorch_computes(mlp_onnx):
    import onnxruntime as ort
    import torch

    x = np.random.default_rng(1).standard_normal(MLP_SHAPE).astype("float32")
    sess = ort.InferenceSession(str(mlp_onnx), providers=["CPUExecutionProvider"])
    (got,) = sess.run(None, {sess.get_inputs()[0].name: x})
    with torch.no_grad():
        want = torch_model("mlp")(torch.from_numpy(x)).numpy()
    assert got.shape == (16, 512)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_onnxruntime_timing_of_mlp_honours_the_thread_count(mlp_onnx):
    res = measure_in_subprocess("onnxruntime", str(mlp_onnx), [MLP_SHAPE], ["float32"], threads=2, repeats=5)
    assert res["repeats"] == 5 and res["threads"] == 2
    # 2 x 16 x 512 x 512 multiply-adds x 2 layers = 16.8 MFLOP: well above 1 us, well below 1 s
    assert 1e-6 < res["min_s"] <= res["p25_s"] <= res["median_s"] <= res["p75_s"] <= res["max_s"] < 1.0
    # read back from the session, not echoed from the request (default intra-op is 0: all cores)
    assert res["session"]["intra_op_num_threads"] == 2
    assert res["session"]["inter_op_num_threads"] == 1
    assert res["session"]["providers"] == ["CPUExecutionProvider"]


def test_interleaved_peers_share_rounds_and_a_failing_one_is_an_error_entry(mlp_onnx, tmp_path):
    missing = tmp_path / "absent.onnx"
    seen = []
    res = measure_interleaved({"a": ("onnxruntime", str(mlp_onnx)), "gone": ("onnxruntime", str(missing)),
                               "b": ("onnxruntime", str(mlp_onnx))},
                              [MLP_SHAPE], ["float32"], threads=1, repeats=5, rounds=3, report=seen.append)
    assert list(res) == ["a", "gone", "b"]
    assert res["a"]["repeats"] == res["b"]["repeats"] == 6  # ceil(5 / 3) = 2 timings per round, 3 rounds
    assert res["a"]["median_s"] > 0 and res["b"]["median_s"] > 0
    assert set(res["gone"]) == {"error"} and str(missing) in res["gone"]["error"]
    assert seen == ["starting a", "starting gone", "starting b", "timing round 1/3", "timing round 2/3",
                    "timing round 3/3"]


def test_interleaved_refuses_zero_rounds():
    with pytest.raises(ValueError, match="rounds and repeats must be >= 1"):
        measure_interleaved({}, [MLP_SHAPE], ["float32"], threads=1, repeats=3, rounds=0)


def test_export_failure_names_the_operator_and_leaves_no_file(tmp_path):
    path = tmp_path / "i0.onnx"
    with pytest.raises(OnnxExportError, match="aten::i0"):
        export_torch_onnx(_BesselI0(), [(4, 4)], ["float32"], path, name="i0")
    assert list(tmp_path.iterdir()) == []


def _model(torch_module, name="i0"):
    from tuning.backends.frontends import ImportedModel

    return ImportedModel(name=name, source="builtin", mod=None, input_shapes=[(4, 4)], input_dtypes=["float32"],
                         torch_module=torch_module)


def test_a_model_the_exporter_refuses_gets_an_onnxruntime_error_entry_and_no_speedup(tmp_path):
    """What :func:`tuning.pipeline.measure_result` measures beside the TVM builds, and the result
    it assembles, for a PyTorch model the ONNX exporter refuses: eager still measured,
    onnxruntime an error entry, its speedup None, the tuning not failed."""
    from tuning.pipeline import DEFAULTS, peer_plan, result_of_peers

    peers, fixed = peer_plan(_model(_BesselI0()), DEFAULTS, tmp_path, "cpu")
    assert peers == {"eager": ("torch", "i0")}
    assert set(fixed) == {"onnxruntime"} and set(fixed["onnxruntime"]) == {"error"}
    assert "aten::i0" in fixed["onnxruntime"]["error"] and not (tmp_path / "model.onnx").exists()
    tuned, untuned, eager = ({"median_s": s} for s in (0.002, 0.005, 0.004))
    out = result_of_peers({**fixed, "tuned": tuned, "untuned": untuned, "eager": eager})
    assert out == {"tuned": tuned, "untuned": untuned, "untuned_no_mcpu": None, "eager": eager,
                   "onnxruntime": fixed["onnxruntime"], "speedup_vs_untuned": 2.5, "speedup_vs_onnxruntime": None}


def test_peer_plan_exports_once_into_the_work_dir_and_follows_the_switches(tmp_path):
    from tuning.pipeline import DEFAULTS, peer_plan, result_of_peers

    mlp = _model(torch_model("mlp"), name="mlp")
    mlp.input_shapes = [MLP_SHAPE]
    peers, fixed = peer_plan(mlp, DEFAULTS, tmp_path, "cpu")
    assert peers == {"eager": ("torch", "mlp"), "onnxruntime": ("onnxruntime", str(tmp_path / "model.onnx"))}
    assert fixed == {} and (tmp_path / "model.onnx").stat().st_size > 2 * 512 * 512 * 4  # two float32 weights
    assert peer_plan(mlp, {**DEFAULTS, "measure_onnxruntime": False}, tmp_path, "cpu")[0] == {"eager": ("torch", "mlp")}
    assert peer_plan(mlp, {**DEFAULTS, "measure_eager": False}, tmp_path, "cpu") == ({}, {"eager": None, "onnxruntime": None})
    assert peer_plan(mlp, DEFAULTS, tmp_path, "cuda") == ({}, {"eager": None, "onnxruntime": None})
    # an ONNX import: the user's file, nothing exported; no PyTorch model, no eager
    user = tmp_path / "user.onnx"
    user.write_bytes(b"")
    assert peer_plan(_model(None), {**DEFAULTS, "onnx_path": str(user)}, tmp_path / "w", "cpu") == (
        {"onnxruntime": ("onnxruntime", str(user))}, {"eager": None})
    assert result_of_peers({"tuned": {"median_s": 0.002}, "untuned": {"median_s": 0.002},
                            "onnxruntime": {"median_s": 0.003}})["speedup_vs_onnxruntime"] == pytest.approx(1.5)
    with pytest.raises(RuntimeError, match="eager broke"):
        result_of_peers({"tuned": {"median_s": 1.0}, "untuned": {"median_s": 1.0}, "eager": {"error": "eager broke"}})


def test_result_page_rows_and_figure_show_onnxruntime_beside_eager_or_why_not():
    from tuning.figures import latency_comparison_figure
    from tuning.views import latency_rows

    lat = lambda m: {"median_s": m, "p25_s": m * 0.9, "p75_s": m * 1.1}  # noqa: E731
    result = {"tuned": lat(0.002), "untuned": lat(0.008), "eager": lat(0.003), "onnxruntime": lat(0.001)}
    rows = latency_rows(result)
    assert [r["label"] for r in rows] == ["TVM tuned", "TVM untuned", "PyTorch eager", "onnxruntime (CPU execution provider)"]
    assert rows[3]["median_ms"] == pytest.approx(1.0) and rows[3]["vs_tuned"] == pytest.approx(0.5)
    assert rows[0]["vs_tuned"] is None and rows[1]["vs_tuned"] == pytest.approx(4.0)
    assert list(latency_comparison_figure(result).data[0].x) == ["TVM tuned", "TVM untuned", "PyTorch eager",
                                                                   "onnxruntime (CPU EP)"]
    failed = latency_rows({**result, "onnxruntime": {"error": "ONNX export of m failed: aten::i0"}})
    assert failed[3] == {"label": "onnxruntime (CPU execution provider)", "error": "ONNX export of m failed: aten::i0",
                         "vs_tuned": None}
    assert list(latency_comparison_figure({**result, "onnxruntime": {"error": "x"}}).data[0].x) == [
        "TVM tuned", "TVM untuned", "PyTorch eager"]


def test_the_untuned_build_without_mcpu_gets_its_row_and_bar_when_measured():
    from tuning.figures import latency_comparison_figure
    from tuning.views import latency_rows

    lat = lambda m: {"median_s": m, "p25_s": m * 0.9, "p75_s": m * 1.1}  # noqa: E731
    result = {"tuned": lat(0.002), "untuned": lat(0.008), "untuned_no_mcpu": lat(0.004), "eager": lat(0.003)}
    rows = latency_rows(result)
    assert [r["label"] for r in rows] == ["TVM tuned", "TVM untuned", "TVM untuned, without mcpu", "PyTorch eager"]
    assert rows[2]["vs_tuned"] == pytest.approx(2.0)
    assert list(latency_comparison_figure(result).data[0].x) == ["TVM tuned", "TVM untuned", "TVM untuned, no mcpu",
                                                                   "PyTorch eager"]
