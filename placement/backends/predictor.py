"""XGBoost predictor: graph features -> GPU utilisation (%) per GPU type (SPEC section 2).

Training rows are profile rows (model, batch size, GPU type, utilisation, source) joined with
the graph features of the same (model, batch size). One regressor per (GPU type, target).
Held-out error: leave-one-model-out (every batch size of one model held out at a time),
RMSLE = sqrt(mean((log1p(pred) - log1p(true))^2)) and MAE in percentage points.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .features import FEATURE_NAMES


class NoProfileData(LookupError):
    """No profile rows for the requested GPU type / target; the message names the command."""


def _x(feat: dict) -> list[float]:
    v = []
    for k in FEATURE_NAMES:
        x = float(feat[k])
        v.append(np.log1p(x) if k in ("train_flops", "forward_flops", "params", "input_size") else x)
    return v


@dataclass
class Prediction:
    """A predicted value with provenance: ``sources`` = profile source labels trained on,
    ``n_rows`` training rows, ``gpu_type``."""

    value: float
    gpu_type: str
    target: str
    sources: list[str]
    n_rows: int


def _join(profile_rows: list[dict], feature_rows: list[dict], gpu_type: str, target: str):
    feats = {(r["model"].removeprefix("gavel:"), int(r["batch_size"])): r for r in feature_rows}
    X, y, groups, sources = [], [], [], set()
    for r in profile_rows:
        if r["gpu_type"].upper() != gpu_type.upper() or r.get(target) in (None, ""):
            continue
        f = feats.get((r["model"], int(r["batch_size"])))
        if f is None:
            continue
        X.append(_x(f))
        y.append(float(r[target]))
        groups.append(r["model"])
        sources.add(r["source"])
    return np.array(X), np.array(y), groups, sorted(sources)


class UtilisationPredictor:
    """Per-GPU-type XGBoost regressors of ``target`` (``util_mean_pct``, ``util_peak_pct`` or
    ``memory_mib``) from :data:`FEATURE_NAMES`. Raises :class:`NoProfileData` when a GPU type
    has no rows with that target."""

    def __init__(self, profile_rows: list[dict], feature_rows: list[dict], *, seed: int = 0) -> None:
        self.profile_rows, self.feature_rows, self.seed = profile_rows, feature_rows, seed
        self._models: dict = {}

    def _fit(self, X, y):
        import xgboost as xgb

        m = xgb.XGBRegressor(n_estimators=200, max_depth=3, learning_rate=0.05, subsample=0.9,
                             random_state=self.seed, n_jobs=1)
        m.fit(X, np.log1p(y))
        return m

    def _data(self, gpu_type: str, target: str):
        X, y, groups, sources = _join(self.profile_rows, self.feature_rows, gpu_type, target)
        if len(y) == 0:
            raise NoProfileData(
                f"no profile rows with {target} for GPU type {gpu_type!r}; fill them with "
                f"`manage.py profile_gpu` on a {gpu_type} (or `manage.py zoo_features` for the "
                f"Gavel-derived utilisation of K80/P100/V100)")
        return X, y, groups, sources

    def predict(self, features: dict, *, gpu_type: str, target: str = "util_mean_pct") -> Prediction:
        """Predict ``target`` for one feature dict (a :class:`GraphFeatures` ``as_dict``)."""
        key = (gpu_type.upper(), target)
        if key not in self._models:
            X, y, _, sources = self._data(gpu_type, target)
            self._models[key] = (self._fit(X, y), sources, len(y))
        model, sources, n = self._models[key]
        val = float(np.expm1(model.predict(np.array([_x(features)]))[0]))
        return Prediction(max(val, 0.0), gpu_type.upper(), target, sources, n)

    def leave_one_model_out(self, *, gpu_type: str, target: str = "util_mean_pct") -> dict:
        """Leave-one-model-out RMSLE, MAE (target units: percentage points, or MiB for
        ``memory_mib``) and Spearman rank correlation over every model with rows for
        ``gpu_type``, beside the constant baseline (each fold predicts the median of its
        training rows: ``const_rmsle``, ``const_mae``) and the Horus paper's RMSLE
        (``paper_rmsle`` 0.154, Yeung et al., TPDS 2022, section 6). ``NoProfileData`` with
        fewer than 2 models."""
        from scipy.stats import spearmanr

        X, y, groups, sources = self._data(gpu_type, target)
        pred = np.zeros_like(y)
        const = np.zeros_like(y)
        names = sorted(set(groups))
        if len(names) < 2:
            raise NoProfileData(f"leave-one-model-out needs >= 2 models for {gpu_type}, have {len(names)}")
        g = np.array(groups)
        for name in names:
            test = g == name
            m = self._fit(X[~test], y[~test])
            pred[test] = np.expm1(m.predict(X[test]))
            const[test] = float(np.median(y[~test]))
        pred = np.maximum(pred, 0.0)

        def rmsle(p):
            return float(np.sqrt(np.mean((np.log1p(p) - np.log1p(y)) ** 2)))

        rho = spearmanr(pred, y).statistic if len(set(pred.tolist())) > 1 else float("nan")
        return {"gpu_type": gpu_type.upper(), "target": target, "rows": int(len(y)), "models": len(names),
                "rmsle": rmsle(pred), "mae": float(np.abs(pred - y).mean()), "spearman": float(rho),
                "const_rmsle": rmsle(const), "const_mae": float(np.abs(const - y).mean()),
                "paper_rmsle": 0.154, "sources": sources}
