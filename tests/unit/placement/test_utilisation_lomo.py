"""Leave-one-model-out figures of the utilisation predictor beside the constant baseline."""
import numpy as np
import pytest

from placement.backends.features import FEATURE_NAMES
from placement.backends.predictor import NoProfileData, UtilisationPredictor


def _rows(models=6, batches=(8, 16, 32, 64)):
    """Utilisation rises with train_flops (log-linear, exact): a learnable trend across models."""
    profile, feats = [], []
    for m in range(models):
        for b in batches:
            flops = 1e9 * (m + 1) * b
            feats.append({**{k: 1.0 for k in FEATURE_NAMES}, "model": f"m{m}", "batch_size": b, "train_flops": flops})
            util = min(95.0, 4.0 * np.log2(flops / 1e9) + 5.0)
            profile.append({"model": f"m{m}", "batch_size": b, "gpu_type": "V100", "util_mean_pct": util,
                            "source": "synthetic"})
    return profile, feats


def test_lomo_reports_the_constant_baseline_computed_fold_by_fold():
    profile, feats = _rows()
    r = UtilisationPredictor(profile, feats).leave_one_model_out(gpu_type="v100")
    y = np.array([p["util_mean_pct"] for p in profile])
    models = np.array([p["model"] for p in profile])
    const = np.array([np.median(y[models != m]) for m in models])  # each row: median of the other models
    assert r["const_mae"] == pytest.approx(float(np.abs(const - y).mean()))
    assert r["const_rmsle"] == pytest.approx(float(np.sqrt(np.mean((np.log1p(const) - np.log1p(y)) ** 2))))
    assert (r["rows"], r["models"], r["paper_rmsle"]) == (24, 6, 0.154)
    # a trend the trees can follow: ranked well and better than the constant on both errors
    assert r["spearman"] > 0.8
    assert r["mae"] < r["const_mae"] and r["rmsle"] < r["const_rmsle"]


def test_lomo_needs_two_models():
    profile, feats = _rows(models=1)
    with pytest.raises(NoProfileData, match=">= 2 models"):
        UtilisationPredictor(profile, feats).leave_one_model_out(gpu_type="V100")
