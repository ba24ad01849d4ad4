"""Graph features: FLOPs against torchvision's published multiply-adds, ONNX, the predictor."""
from pathlib import Path

import pytest

from placement.backends.features import model_features, onnx_features
from placement.backends.predictor import NoProfileData, UtilisationPredictor
from placement.core.profiles import PEAK_FP32_TFLOPS, derive_gavel_rows, read_csv_rows

DATA = Path(__file__).resolve().parents[3] / "data"

# torchvision weights.meta["_ops"] (labelled GFLOPS, counting giga multiply-adds), copied from
# the torchvision 0.29 model docs: ResNet18_Weights 1.814, ResNet50_Weights 4.089,
# MobileNet_V2_Weights 0.301, VGG16_Weights 15.47.
PUBLISHED_GMACS = {"resnet18": 1.814, "resnet50": 4.089, "mobilenet_v2": 0.301, "vgg16": 15.47}


@pytest.mark.parametrize("name,gmacs", PUBLISHED_GMACS.items())
def test_forward_flops_match_torchvision_published_macs(name, gmacs):
    f = model_features(name, 1)
    # our FLOPs = 2 x MACs, so GMACs = forward_flops / 2 / 1e9
    assert f.forward_flops / 2e9 == pytest.approx(gmacs, rel=0.02)
    assert f.train_flops == pytest.approx(3 * f.forward_flops, rel=0.05) or name == "mobilenet_v2"


def test_published_metadata_is_what_we_compare_with():
    import torchvision

    for name, gmacs in PUBLISHED_GMACS.items():
        assert torchvision.models.get_model_weights(name).DEFAULT.meta["_ops"] == pytest.approx(gmacs, abs=1e-3)


def test_layer_counts_resnet18():
    f = model_features("resnet18", 2)
    # 20 convolutions (17 3x3/7x7 + 3 downsample 1x1), 1 fc, 20 batch norms
    assert (f.n_conv, f.n_linear, f.n_norm) == (20, 1, 20)
    assert f.params == 11_689_512  # torchvision's published num_params
    assert f.forward_flops == pytest.approx(2 * model_features("resnet18", 1).forward_flops)


def test_onnx_resnet50_matches_torchvision_macs_and_scales_with_batch():
    f1 = onnx_features(DATA / "onnx-light-models/light_resnet50.onnx", batch_size=1)
    f4 = onnx_features(DATA / "onnx-light-models/light_resnet50.onnx", batch_size=4)
    assert f1.forward_flops / 2e9 == pytest.approx(4.089, rel=0.02)
    assert f4.forward_flops == pytest.approx(4 * f1.forward_flops)
    assert f1.params == pytest.approx(25.6e6, rel=0.01)  # ResNet-50's 25.6 M parameters
    assert f1.n_conv == 53


def test_onnx_garbage_is_a_clear_error(tmp_path):
    bad = tmp_path / "x.onnx"
    bad.write_bytes(b"not a protobuf at all \x00\x01")
    with pytest.raises(ValueError, match="not a valid ONNX model"):
        onnx_features(bad)


def test_gavel_derivation_by_hand():
    thr = {"v100": {"('ResNet-50 (batch size 64)', 1)": {"null": 4.0}}}
    rows = derive_gavel_rows(thr, {("ResNet-50", 64): 1e12})
    # 4 steps/s x 1 TFLOP/step = 4 TFLOP/s on a 15.7 TFLOP/s V100 -> 25.48 %
    assert rows[0]["util_mean_pct"] == pytest.approx(100 * 4 / PEAK_FP32_TFLOPS["v100"], abs=1e-3)
    assert rows[0]["util_peak_pct"] is None and rows[0]["memory_mib"] is None


def test_predictor_errors_and_provenance():
    prof = read_csv_rows(DATA / "placement/gavel_profile.csv")
    feats = read_csv_rows(DATA / "placement/zoo_features.csv")
    pred = UtilisationPredictor(prof, feats)
    with pytest.raises(NoProfileData, match="manage.py profile_gpu"):
        pred.predict(feats[0], gpu_type="T4")
    with pytest.raises(NoProfileData, match="memory_mib"):
        pred.predict(feats[0], gpu_type="V100", target="memory_mib")
    p = pred.predict(feats[0], gpu_type="V100")
    assert p.sources == ["gavel-throughput-derived"] and p.n_rows == 26 and 0 <= p.value <= 100
