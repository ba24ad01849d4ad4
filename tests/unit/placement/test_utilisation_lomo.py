"""Leave-one-model-out figures of the utilisation predictor beside the constant baseline."""
import csv
import itertools
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from placement.backends import predictor as P
from placement.backends.features import FEATURE_NAMES
from placement.backends.predictor import NoProfileData, UtilisationPredictor
from placement.core.profiles import read_csv_rows

DATA = Path(__file__).resolve().parents[3] / "data" / "placement"


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


def test_rows_of_one_model_predict_their_median():
    """No inner fold exists with one model, so the live predictor is the constant baseline."""
    profile, feats = _rows(models=1)
    p = UtilisationPredictor(profile, feats).predict(feats[0], gpu_type="V100")
    assert p.config == {"max_depth": 1, "min_child_weight": 1, "shrink": 1.0}
    assert p.value == pytest.approx(float(np.median([r["util_mean_pct"] for r in profile])))


def test_a_folds_configuration_and_predictions_never_see_the_held_out_model():
    """Nested selection: rewriting the held-out model's utilisation changes nothing in its fold
    (configuration, inner score, predictions); it does change the other folds, which train on it."""
    profile, feats = _rows(models=4, batches=(8, 32, 64))
    base = UtilisationPredictor(profile, feats).leave_one_model_out(gpu_type="V100")
    poisoned = [{**p, "util_mean_pct": 0.01} if p["model"] == "m2" else p for p in profile]
    other = UtilisationPredictor(poisoned, feats).leave_one_model_out(gpu_type="V100")
    assert other["folds"]["m2"] == base["folds"]["m2"]
    assert other["folds"]["m0"]["constant"] != base["folds"]["m0"]["constant"]


def test_live_predictor_is_the_grid_point_with_the_lowest_inner_lomo_rmsle():
    """The live predictor's configuration and value, recomputed here by brute force over the
    grid with XGBoost directly: pooled leave-one-model-out RMSLE of log1p predictions shrunk
    toward log1p(training median)."""
    import xgboost as xgb

    profile, feats = _rows(models=4, batches=(8, 32, 64))
    X = np.array([P._x(f) for f in feats])
    y = np.array([p["util_mean_pct"] for p in profile])
    g = np.array([p["model"] for p in profile])

    def fit(mask, depth, mcw):
        return xgb.XGBRegressor(max_depth=depth, min_child_weight=mcw, random_state=0, n_jobs=1,
                                **P.BOOSTING).fit(X[mask], np.log1p(y[mask]))

    scores = {}
    for depth, mcw in itertools.product(P.GRID_MAX_DEPTH, P.GRID_MIN_CHILD_WEIGHT):
        raw, base = np.zeros_like(y), np.zeros_like(y)
        for m in sorted(set(g)):
            raw[g == m] = fit(g != m, depth, mcw).predict(X[g == m])
            base[g == m] = np.log1p(np.median(y[g != m]))
        for s in P.GRID_SHRINK:
            pred = np.maximum((1 - s) * raw + s * base, 0)
            scores[(depth, mcw, s)] = np.sqrt(np.mean((pred - np.log1p(y)) ** 2))
    depth, mcw, s = min(scores, key=scores.get)
    pred = UtilisationPredictor(profile, feats)
    p = pred.predict(feats[5], gpu_type="V100")
    assert p.config == {"max_depth": depth, "min_child_weight": mcw, "shrink": s}
    want = (1 - s) * fit(np.ones(len(y), bool), depth, mcw).predict(X[5:6])[0] + s * np.log1p(np.median(y))
    assert p.value == pytest.approx(float(np.expm1(max(want, 0.0))), rel=1e-5)


def _shipped_constant(gpu: str):
    """The constant baseline on the shipped Gavel-derived rows, read straight from the CSV:
    each row is predicted by the median utilisation of the other models' rows on ``gpu``."""
    by_model = defaultdict(list)
    with open(DATA / "gavel_profile.csv", newline="") as fh:
        for row in csv.DictReader(fh):
            if row["gpu_type"] == gpu:
                by_model[row["model"]].append(float(row["util_mean_pct"]))
    y, c = [], []
    for m, vals in by_model.items():
        rest = [v for other, vs in by_model.items() if other != m for v in vs]
        y += vals
        c += [float(np.median(rest))] * len(vals)
    y, c = np.array(y), np.array(c)
    return len(y), float(np.sqrt(np.mean((np.log1p(c) - np.log1p(y)) ** 2))), float(np.abs(c - y).mean())


@pytest.fixture(scope="module")
def shipped():
    return UtilisationPredictor(read_csv_rows(DATA / "gavel_profile.csv"), read_csv_rows(DATA / "zoo_features.csv"))


@pytest.mark.parametrize("gpu", ["K80", "P100", "V100"])
def test_shipped_rows_beat_the_constant_on_rmsle_and_mae(shipped, gpu):
    """Issue 21's bar on the data we ship: nested leave-one-model-out over Gavel's 7 families
    beats the constant baseline (computed here from the CSV) on RMSLE and MAE per GPU type."""
    n, const_rmsle, const_mae = _shipped_constant(gpu)
    r = shipped.leave_one_model_out(gpu_type=gpu)
    assert (r["rows"], r["models"]) == (n, 7) == (26, 7)
    assert r["const_rmsle"] == pytest.approx(const_rmsle) and r["const_mae"] == pytest.approx(const_mae)
    assert r["rmsle"] < const_rmsle and r["mae"] < const_mae
    assert r["spearman"] > 0.3  # and it still ranks models, not a constant in disguise
