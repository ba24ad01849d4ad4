"""XGBoost predictor: graph features -> GPU utilisation (%) per GPU type (SPEC section 2).

Training rows are profile rows (model, batch size, GPU type, utilisation, source) joined with
the graph features of the same (model, batch size). One regressor per (GPU type, target).

Model: gradient-boosted trees fitted to log1p(target) (squared error there = the RMSLE the
Horus paper reports), shrunk toward the constant baseline in that space::

    log1p(pred) = (1 - shrink) x trees(x) + shrink x log1p(median of the training rows)

``shrink = 1`` is the constant baseline itself. The trees' ``max_depth`` and
``min_child_weight`` (rows per leaf: the hessian of squared error is 1 per row) and ``shrink``
come from a grid fixed beforehand (:data:`GRID_MAX_DEPTH`, :data:`GRID_MIN_CHILD_WEIGHT`,
:data:`GRID_SHRINK`) and are chosen by leave-one-model-out RMSLE over the training models
(:func:`select_config`): inside every outer fold of :meth:`UtilisationPredictor.leave_one_model_out`
(nested: the held-out model never takes part in the choice), and over all rows for the live
predictor (:meth:`UtilisationPredictor.predict`), the same procedure.

Held-out error: leave-one-model-out (every batch size of one model held out at a time),
RMSLE = sqrt(mean((log1p(pred) - log1p(true))^2)) and MAE in percentage points.
"""
from __future__ import annotations

import hashlib
import itertools
from collections import OrderedDict
from dataclasses import asdict, dataclass

import numpy as np

from .features import FEATURE_NAMES

#: The hyper-parameter grid searched by :func:`select_config`, fixed before any evaluation.
#: Depth 1-3: 12 features, 20-26 rows; ``min_child_weight`` 1 / 3 / 6 rows per leaf (6 is more
#: than any model's batch sizes in the shipped rows, so such a leaf spans two models);
#: ``shrink`` from the trees alone (0) to the constant baseline (1).
GRID_MAX_DEPTH = (1, 2, 3)
GRID_MIN_CHILD_WEIGHT = (1, 3, 6)
GRID_SHRINK = (0.0, 0.25, 0.5, 0.75, 1.0)
#: Fixed boosting settings (unchanged from the first predictor): 200 trees at learning rate
#: 0.05, row subsample 0.9, exact greedy splits (the exact algorithm; data this small needs
#: no histogram).
BOOSTING = {"n_estimators": 200, "learning_rate": 0.05, "subsample": 0.9, "tree_method": "exact"}


class NoProfileData(LookupError):
    """No profile rows for the requested GPU type / target; the message names the command."""


def _x(feat: dict) -> list[float]:
    v = []
    for k in FEATURE_NAMES:
        x = float(feat[k])
        v.append(np.log1p(x) if k in ("train_flops", "forward_flops", "params", "input_size") else x)
    return v


@dataclass(frozen=True)
class Config:
    """One point of the grid: tree ``max_depth``, ``min_child_weight`` (rows per leaf) and
    ``shrink`` in [0, 1] toward log1p(training median)."""

    max_depth: int
    min_child_weight: int
    shrink: float


#: Used only where no inner leave-one-model-out is possible (rows of a single model): the
#: constant baseline, since one model gives no evidence that features transfer to another.
SINGLE_MODEL_CONFIG = Config(max_depth=1, min_child_weight=1, shrink=1.0)


@dataclass
class Prediction:
    """A predicted value with provenance: ``sources`` = profile source labels trained on,
    ``n_rows`` training rows, ``gpu_type``, ``config`` the selected :class:`Config` (as a dict)."""

    value: float
    gpu_type: str
    target: str
    sources: list[str]
    n_rows: int
    config: dict | None = None


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


class _Trees:
    """Tree fits on subsets of one data set (X (n, k), y (n,) >= 0, one group label per row),
    each subset named by the groups it leaves out and fitted at most once: the nested
    evaluation fits the same "all but models a and b" set from two outer folds."""

    def __init__(self, X: np.ndarray, y: np.ndarray, groups, seed: int) -> None:
        self.X, self.ly, self.g, self.seed = X, np.log1p(y), np.asarray(groups), seed
        self._fits: dict = {}

    def mask(self, out: frozenset) -> np.ndarray:
        return ~np.isin(self.g, list(out)) if out else np.ones(len(self.g), bool)

    def fit(self, out: frozenset, depth: int, mcw: int):
        key = (out, depth, mcw)
        if key not in self._fits:
            import xgboost as xgb

            m = self.mask(out)
            model = xgb.XGBRegressor(max_depth=depth, min_child_weight=mcw, random_state=self.seed, n_jobs=1,
                                     **BOOSTING)
            model.fit(self.X[m], self.ly[m])
            self._fits[key] = model
        return self._fits[key]

    def log_median(self, out: frozenset) -> float:
        return float(np.log1p(np.median(np.expm1(self.ly[self.mask(out)]))))

    def predict_log(self, out: frozenset, cfg: Config, X: np.ndarray) -> np.ndarray:
        """log1p(prediction) of the model fitted without the groups ``out``, under ``cfg``."""
        base = self.log_median(out)
        if cfg.shrink >= 1.0:
            return np.full(len(X), base)
        raw = self.fit(out, cfg.max_depth, cfg.min_child_weight).predict(X)
        return np.maximum((1.0 - cfg.shrink) * raw + cfg.shrink * base, 0.0)


def select_config(trees: _Trees, out: frozenset = frozenset()) -> tuple[Config, float]:
    """Choose a :class:`Config` from the grid by leave-one-model-out over the models of the
    rows that ``out`` leaves in: each of those models is held out in turn, the rest fitted,
    and the config with the lowest pooled RMSLE on the held-out rows wins (ties: the first in
    grid order, depth and leaf size ascending, shrink ascending). Returns (config, its inner
    RMSLE); with a single model, :data:`SINGLE_MODEL_CONFIG` and NaN."""
    keep = trees.mask(out)
    names = sorted(set(trees.g[keep].tolist()))
    if len(names) < 2:
        return SINGLE_MODEL_CONFIG, float("nan")
    best: tuple[float, Config] | None = None
    for depth, mcw in itertools.product(GRID_MAX_DEPTH, GRID_MIN_CHILD_WEIGHT):
        raw, base, ly = [], [], []
        for name in names:
            inner_out = out | {name}
            test = keep & (trees.g == name)
            raw.append(trees.fit(inner_out, depth, mcw).predict(trees.X[test]))
            base.append(np.full(int(test.sum()), trees.log_median(inner_out)))
            ly.append(trees.ly[test])
        raw_a, base_a, ly_a = np.concatenate(raw), np.concatenate(base), np.concatenate(ly)
        for shrink in GRID_SHRINK:
            pred = np.maximum((1.0 - shrink) * raw_a + shrink * base_a, 0.0)
            score = float(np.sqrt(np.mean((pred - ly_a) ** 2)))
            if best is None or score < best[0] - 1e-12:
                best = (score, Config(depth, mcw, shrink))
    assert best is not None
    return best[1], best[0]


#: Live fits by data fingerprint, so the API (a predictor per request) selects and fits once.
_LIVE_CACHE: OrderedDict = OrderedDict()
_LIVE_CACHE_SIZE = 16


def _fingerprint(X: np.ndarray, y: np.ndarray, groups, seed: int) -> str:
    h = hashlib.sha256()
    for a in (np.ascontiguousarray(X, dtype=float), np.ascontiguousarray(y, dtype=float)):
        h.update(a.tobytes())
    h.update("\x00".join(groups).encode())
    h.update(str(seed).encode())
    return h.hexdigest()


class UtilisationPredictor:
    """Per-GPU-type XGBoost regressors of ``target`` (``util_mean_pct``, ``util_peak_pct`` or
    ``memory_mib``) from :data:`FEATURE_NAMES`, with the configuration chosen by
    :func:`select_config` (module docstring). Raises :class:`NoProfileData` when a GPU type
    has no rows with that target."""

    def __init__(self, profile_rows: list[dict], feature_rows: list[dict], *, seed: int = 0) -> None:
        self.profile_rows, self.feature_rows, self.seed = profile_rows, feature_rows, seed
        self._models: dict = {}

    def _data(self, gpu_type: str, target: str):
        X, y, groups, sources = _join(self.profile_rows, self.feature_rows, gpu_type, target)
        if len(y) == 0:
            raise NoProfileData(
                f"no profile rows with {target} for GPU type {gpu_type!r}; fill them with "
                f"`manage.py profile_gpu` on a {gpu_type} (or `manage.py zoo_features` for the "
                f"Gavel-derived utilisation of K80/P100/V100)")
        return X, y, groups, sources

    def _live(self, gpu_type: str, target: str):
        key = (gpu_type.upper(), target)
        if key not in self._models:
            X, y, groups, sources = self._data(gpu_type, target)
            fp = _fingerprint(X, y, groups, self.seed)
            if fp not in _LIVE_CACHE:
                trees = _Trees(X, y, groups, self.seed)
                cfg, _ = select_config(trees)
                _LIVE_CACHE[fp] = (trees, cfg)
                while len(_LIVE_CACHE) > _LIVE_CACHE_SIZE:
                    _LIVE_CACHE.popitem(last=False)
            trees, cfg = _LIVE_CACHE[fp]
            self._models[key] = (trees, cfg, sources, len(y))
        return self._models[key]

    def config(self, *, gpu_type: str, target: str = "util_mean_pct") -> Config:
        """The configuration the live predictor uses for ``gpu_type`` (chosen on all its rows)."""
        return self._live(gpu_type, target)[1]

    def predict(self, features: dict, *, gpu_type: str, target: str = "util_mean_pct") -> Prediction:
        """Predict ``target`` for one feature dict (a :class:`GraphFeatures` ``as_dict``)."""
        trees, cfg, sources, n = self._live(gpu_type, target)
        val = float(np.expm1(trees.predict_log(frozenset(), cfg, np.array([_x(features)]))[0]))
        return Prediction(max(val, 0.0), gpu_type.upper(), target, sources, n, asdict(cfg))

    def leave_one_model_out(self, *, gpu_type: str, target: str = "util_mean_pct") -> dict:
        """Leave-one-model-out RMSLE, MAE (target units: percentage points, or MiB for
        ``memory_mib``) and Spearman rank correlation over every model with rows for
        ``gpu_type``, beside the constant baseline (each fold predicts the median of its
        training rows: ``const_rmsle``, ``const_mae``) and the Horus paper's RMSLE
        (``paper_rmsle`` 0.154, Yeung et al., TPDS 2022, section 6). Each fold's
        configuration is chosen by :func:`select_config` on that fold's training models
        only (nested); ``folds`` gives, per held-out model, that configuration, its inner
        RMSLE, and the held-out rows' predictions (``predicted``, in row order) and constant.
        ``NoProfileData`` with fewer than 2 models."""
        from scipy.stats import spearmanr

        X, y, groups, sources = self._data(gpu_type, target)
        pred = np.zeros_like(y)
        const = np.zeros_like(y)
        names = sorted(set(groups))
        if len(names) < 2:
            raise NoProfileData(f"leave-one-model-out needs >= 2 models for {gpu_type}, have {len(names)}")
        g = np.array(groups)
        trees = _Trees(X, y, groups, self.seed)
        folds = {}
        for name in names:
            test = g == name
            out = frozenset({name})
            cfg, inner = select_config(trees, out)
            pred[test] = np.expm1(trees.predict_log(out, cfg, X[test]))
            const[test] = float(np.median(y[~test]))
            folds[name] = {**asdict(cfg), "inner_rmsle": inner, "rows": int(test.sum()),
                           "predicted": pred[test].tolist(), "constant": float(const[test][0])}
        pred = np.maximum(pred, 0.0)

        def rmsle(p):
            return float(np.sqrt(np.mean((np.log1p(p) - np.log1p(y)) ** 2)))

        rho = spearmanr(pred, y).statistic if len(set(pred.tolist())) > 1 else float("nan")
        return {"gpu_type": gpu_type.upper(), "target": target, "rows": int(len(y)), "models": len(names),
                "rmsle": rmsle(pred), "mae": float(np.abs(pred - y).mean()), "spearman": float(rho),
                "const_rmsle": rmsle(const), "const_mae": float(np.abs(const - y).mean()),
                "paper_rmsle": 0.154, "sources": sources, "folds": folds,
                "selection": "nested: per fold, leave-one-model-out RMSLE over the training models"}
