"""Pair-aware co-location interference *predictor*: a policy's belief about how much two jobs
slow each other down on a GPU, from measured pairs of other jobs and each job's own profile
(graph features, isolated throughputs; never the simulator's world for that job's pairs).

Model (collaborative filtering with side information, as Paragon/Quasar classify a new workload
against profiled ones: Delimitrou & Kozyrakis, ASPLOS 2013 section 3 and ASPLOS 2014 section
3.2; the "sensitivity / pressure" split is Bubble-Up's, Mars et al., MICRO 2011 section 3).
Per GPU type ``g`` (K80, P100, V100)::

    log s(a | b, g) = mu_g + sens_g(a) + press_g(b)

``s(a | b, g) >= 1`` is the slowdown of job ``a`` while it shares every GPU with ``b``
(isolated throughput / throughput in the pair). ``mu_g``, ``sens_g`` (how much a job suffers)
and ``press_g`` (how much it inflicts) are fitted by ridge least squares (penalty ``lam_cf`` on
the per-type terms) on measured pairs. A job type without measured pairs (a new model) gets
``sens`` and ``press`` from a ridge regression of the measured types' fitted terms on its *side
information* (:data:`SIDE_NAMES`: its batch size relative to its family's and its isolated
V100 / K80 speedup, both from profiling the job alone; :func:`side_vector`), penalty
``lam_side`` chosen by a nested leave-one-model-out over the training families only (grid
:data:`LAM_SIDE_GRID` fixed a priori). A type without isolated throughputs falls back to a
ridge regression (penalty ``lam_feat``, standardised) on its graph features
(:data:`FEATURE_NAMES`). With more than one co-runner the pairwise log slowdowns add (an
extrapolation: pairs only).

Validation (:func:`leave_one_model_out`): every model family in turn is held out (all its batch
sizes, all pairs it takes part in), the predictor is fitted on the rest and scored on the
held-out pairs against the constant-slowdown baseline (median training slowdown).

Training data: Gavel's measured pairs (Narayanan et al., OSDI 2020,
``simulation_throughputs.json``), read by :func:`measured_pairs`. Pure numpy.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

import numpy as np

from .interference import _parse_key

#: Per-job graph features (from ``data/placement/zoo_features.csv`` rows), in this order.
FEATURE_NAMES = ("log10_train_flops", "log10_params", "log10_activation_mib", "log10_memory_mib",
                 "log2_batch_size", "conv_share", "linear_share", "norm_share", "log10_layers")
GPU_TYPES = ("k80", "p100", "v100")

TypeKey = tuple[str, int]  # (model family as in the trace, batch size); A3C/CycleGAN use 1


@dataclass(frozen=True)
class PairRow:
    """One measured pair: slowdown (>= 1) of ``a`` next to ``b`` on ``gpu_type`` (lowercase)."""

    gpu_type: str
    a: TypeKey
    b: TypeKey
    slowdown: float


def gavel_type_key(name: str) -> TypeKey:
    """``"ResNet-18 (batch size 16)"`` -> ``("ResNet-18", 16)``; ``"A3C"`` -> ``("A3C", 1)``."""
    if " (batch size " in name:
        fam, bs = name.split(" (batch size ", 1)
        return fam, int(bs.rstrip(")"))
    return name, 1


def measured_pairs(throughputs: Mapping) -> list[PairRow]:
    """Every single-GPU (scale factor 1) pair Gavel measured on K80/P100/V100 with both
    throughputs > 0: ``s = isolated / paired throughput of a``, clipped to >= 1."""
    rows = []
    for gpu in GPU_TYPES:
        for key, row in throughputs.get(gpu, {}).items():
            a, sf = _parse_key(key)
            alone = row.get("null")
            if sf != 1 or not alone:
                continue
            for other, pair in row.items():
                if other == "null" or not pair or pair[0] <= 0:
                    continue
                b, sfb = _parse_key(other)
                if sfb != 1:
                    continue
                rows.append(PairRow(gpu, gavel_type_key(a), gavel_type_key(b), max(float(alone) / float(pair[0]), 1.0)))
    return rows


def feature_vector(row: Mapping) -> np.ndarray:
    """:data:`FEATURE_NAMES` (9,) of one ``zoo_features.csv`` row (numbers or numeric strings).
    ``ValueError`` if a field is missing or not a positive finite number where a log is taken."""
    try:
        flops, params = float(row["train_flops"]), float(row["params"])
        act, mem, bs = float(row["activation_mib"]), float(row["memory_mib"]), float(row["batch_size"])
        n = [float(row[c]) for c in ("n_conv", "n_linear", "n_activation", "n_norm", "n_other")]
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"feature row {row.get('model', '?')!r}: {err}") from None
    if not (flops > 0 and bs > 0 and all(math.isfinite(v) and v >= 0 for v in (params, act, mem, *n))):
        raise ValueError(f"feature row {row.get('model', '?')!r}: non-positive FLOPs / batch or bad counts")
    tot = sum(n) + 1.0
    return np.array([math.log10(flops), math.log10(params + 1), math.log10(act + 1), math.log10(mem + 1),
                     math.log2(bs), n[0] / tot, n[1] / tot, n[3] / tot, math.log10(tot)])


def features_by_type(feature_rows: Iterable[Mapping]) -> dict[TypeKey, np.ndarray]:
    """``zoo_features.csv`` rows -> ``{(model, batch): features}``; Gavel stand-ins
    (``gavel:ResNet-18``) are keyed by the trace's family name (``ResNet-18``)."""
    out = {}
    for r in feature_rows:
        name = str(r["model"])
        out[(name[6:] if name.startswith("gavel:") else name, int(float(r["batch_size"])))] = feature_vector(r)
    return out


#: Side information of a measured job type (:func:`side_vector`), in this order.
SIDE_NAMES = ("log2_batch_in_family", "log10_v100_over_k80")
#: Ridge penalties the nested leave-one-model-out chooses ``lam_side`` from (fixed a priori).
LAM_SIDE_GRID = (1.0, 3.0, 10.0, 30.0, 100.0)

IsolatedKey = tuple[str, TypeKey]  # (gpu type lowercase, job type)


def isolated_throughputs(throughputs: Mapping) -> dict[IsolatedKey, float]:
    """``{(gpu, type): isolated iterations/s}`` of every single-GPU (scale factor 1) job type
    Gavel measured alone (the ``"null"`` column) with a throughput > 0. These are profiles of
    each job by itself, never a pair."""
    out = {}
    for gpu in GPU_TYPES:
        for key, row in throughputs.get(gpu, {}).items():
            a, sf = _parse_key(key)
            alone = row.get("null")
            if sf == 1 and alone and float(alone) > 0:
                out[(gpu, gavel_type_key(a))] = float(alone)
    return out


def side_vector(t: TypeKey, families: Mapping[str, Sequence[int]],
                isolated: Mapping[IsolatedKey, float]) -> np.ndarray | None:
    """:data:`SIDE_NAMES` (2,) of job type ``t`` or None when its isolated V100 or K80
    throughput is unknown: log2 of its batch size minus the mean log2 batch size of its family
    (``families``: family -> batch sizes with features; the within-family batch trend, larger
    batches press harder and suffer less in Gavel's table) and log10 of its isolated V100 / K80
    speedup (how compute-bound it is alone). Only the job's own profile, never a pair."""
    v, k = isolated.get(("v100", t)), isolated.get(("k80", t))
    if not v or not k:
        return None
    bss = families.get(t[0]) or [t[1]]
    return np.array([math.log2(t[1]) - float(np.mean([math.log2(b) for b in bss])), math.log10(v / k)])


def _cf(rows: Sequence[PairRow], lam_cf: float) -> tuple[float, dict[TypeKey, tuple[float, float]]]:
    """Ridge fit of log s(a|b) = mu + sens(a) + press(b) on one GPU type's pairs."""
    types = sorted({p.a for p in rows} | {p.b for p in rows})
    idx = {t: i for i, t in enumerate(types)}
    nt = len(types)
    D = np.zeros((len(rows), 1 + 2 * nt))
    D[:, 0] = 1.0
    r = np.arange(len(rows))
    D[r, [1 + idx[p.a] for p in rows]] = 1.0
    D[r, [1 + nt + idx[p.b] for p in rows]] = 1.0
    y = np.log([p.slowdown for p in rows])
    reg = lam_cf * np.eye(1 + 2 * nt)
    reg[0, 0] = 0.0
    w = np.linalg.solve(D.T @ D + reg, D.T @ y)
    return float(w[0]), {t: (float(w[1 + i]), float(w[1 + nt + i])) for t, i in idx.items()}


@dataclass
class _Ridge:
    """Ridge regression of (sens, press) on standardised inputs: ``w`` (1 + inputs, 2)."""

    w: np.ndarray
    mean: np.ndarray
    std: np.ndarray

    @classmethod
    def fit(cls, X: np.ndarray, S: np.ndarray, lam: float) -> "_Ridge":
        m, sd = X.mean(0), X.std(0) + 1e-9
        Z = np.c_[np.ones(len(X)), (X - m) / sd]
        reg = lam * np.eye(Z.shape[1])
        reg[0, 0] = 0.0
        return cls(np.linalg.solve(Z.T @ Z + reg, Z.T @ S), m, sd)

    def __call__(self, x: np.ndarray) -> tuple[float, float]:
        s, p = np.r_[1.0, (x - self.mean) / self.std] @ self.w
        return float(s), float(p)


@dataclass
class _GpuFit:
    mu: float
    terms: dict[TypeKey, tuple[float, float]]  # type -> (sens, press), measured types
    by_side: _Ridge | None  # regression on SIDE_NAMES (None: fewer than 3 types with side info)
    by_graph: _Ridge  # regression on FEATURE_NAMES, for a type without side information


@dataclass
class PairSlowdownPredictor:
    """Fitted pair predictor (module docstring). Build with :meth:`fit`."""

    features: dict[TypeKey, np.ndarray]
    fits: dict[str, _GpuFit] = field(default_factory=dict)
    lam_cf: float = 1.0
    lam_feat: float = 100.0
    lam_side: float = 10.0
    isolated: dict[IsolatedKey, float] = field(default_factory=dict)
    families: dict[str, list[int]] = field(default_factory=dict)
    lam_side_scores: dict[float, float] = field(default_factory=dict)

    @classmethod
    def fit(cls, pairs: Sequence[PairRow], features: Mapping[TypeKey, np.ndarray], *,
            isolated: Mapping[IsolatedKey, float] | None = None, lam_cf: float = 1.0,
            lam_feat: float = 100.0, lam_side: float | None = None,
            lam_side_grid: Sequence[float] = LAM_SIDE_GRID) -> "PairSlowdownPredictor":
        """Fit per GPU type on ``pairs`` (types without features are skipped). ``isolated``
        (:func:`isolated_throughputs`) gives the side information; without it every new type
        falls back to the graph-feature regression. ``lam_side=None`` (default) chooses the side
        penalty from ``lam_side_grid`` by a nested leave-one-model-out over the families of
        ``pairs`` only (highest pooled Spearman; ties -> the larger penalty), so a held-out
        family never picks it. ``ValueError`` if a GPU type has fewer than 10 usable pairs or 3
        featured types, or a penalty <= 0."""
        if not (lam_cf > 0 and lam_feat > 0) or (lam_side is not None and not lam_side > 0) \
                or not lam_side_grid or not all(v > 0 for v in lam_side_grid):
            raise ValueError("lam_cf, lam_feat, lam_side and lam_side_grid must be > 0")
        iso = dict(isolated or {})
        fams: dict[str, list[int]] = {}
        for t in features:
            fams.setdefault(t[0], []).append(t[1])
        rows = [p for p in pairs if p.a in features and p.b in features]
        scores: dict[float, float] = {}
        if lam_side is None:
            scores = _nested_lam_side(rows, features, iso, fams, lam_cf, lam_feat, lam_side_grid)
            lam_side = max(sorted(scores, reverse=True), key=lambda v: scores[v])
        self = cls(dict(features), {}, lam_cf, lam_feat, float(lam_side), iso, fams, scores)
        for gpu in sorted({p.gpu_type for p in rows}):
            self.fits[gpu] = self._fit_gpu([p for p in rows if p.gpu_type == gpu], gpu)
        if not self.fits:
            raise ValueError("no pairs to fit")
        return self

    def _fit_gpu(self, rows: Sequence[PairRow], gpu: str) -> _GpuFit:
        types = sorted({p.a for p in rows} | {p.b for p in rows})
        if len(rows) < 10 or len(types) < 3:
            raise ValueError(f"{gpu}: need >= 10 pairs over >= 3 featured job types, got {len(rows)} / {len(types)}")
        mu, terms = _cf(rows, self.lam_cf)
        S = np.array([terms[t] for t in types])
        by_graph = _Ridge.fit(np.array([self.features[t] for t in types]), S, self.lam_feat)
        sides = [(i, side_vector(t, self.families, self.isolated)) for i, t in enumerate(types)]
        sides = [(i, v) for i, v in sides if v is not None]
        by_side = (_Ridge.fit(np.array([v for _, v in sides]), S[[i for i, _ in sides]], self.lam_side)
                   if len(sides) >= 3 else None)
        return _GpuFit(mu, terms, by_side, by_graph)

    def _refit_side(self, fit: _GpuFit) -> _GpuFit:
        """``fit`` with its side regression refitted at the current ``lam_side``."""
        sides = [(t, side_vector(t, self.families, self.isolated)) for t in sorted(fit.terms)]
        sides = [(t, v) for t, v in sides if v is not None]
        if len(sides) < 3:
            return fit
        S = np.array([fit.terms[t] for t, _ in sides])
        return _GpuFit(fit.mu, fit.terms, _Ridge.fit(np.array([v for _, v in sides]), S, self.lam_side), fit.by_graph)

    def _fit_for(self, gpu_type: str) -> _GpuFit:
        g = gpu_type.lower()
        if g in self.fits:
            return self.fits[g]
        for known in self.fits:  # "V100M32" -> v100
            if g.startswith(known):
                return self.fits[known]
        return self.fits.get("v100") or next(iter(self.fits.values()))

    def _terms(self, fit: _GpuFit, t: TypeKey) -> tuple[float, float]:
        if t in fit.terms:
            return fit.terms[t]
        v = side_vector(t, self.families, self.isolated) if fit.by_side is not None else None
        if v is not None:
            return fit.by_side(v)
        f = self.features.get(t)
        if f is None:
            return 0.0, 0.0  # no graph features: the GPU type's average pair
        return fit.by_graph(f)

    def pair_slowdown(self, a: TypeKey, b: TypeKey, gpu_type: str = "v100") -> float:
        """Predicted slowdown (>= 1) of job type ``a`` next to ``b`` on ``gpu_type``."""
        fit = self._fit_for(gpu_type)
        return max(math.exp(fit.mu + self._terms(fit, a)[0] + self._terms(fit, b)[1]), 1.0)

    def slowdown(self, a: TypeKey, others: Sequence[TypeKey], gpu_type: str = "v100") -> float:
        """Predicted slowdown (>= 1) of ``a`` sharing a GPU with all of ``others`` (log
        slowdowns add); 1.0 with no co-runner."""
        return math.exp(sum(math.log(self.pair_slowdown(a, b, gpu_type)) for b in others))

    def describe(self) -> dict:
        side = any(f.by_side is not None for f in self.fits.values())
        return {"kind": "pair-cf-with-side-information" if side else "pair-cf-with-graph-features",
                "gpu_types": sorted(self.fits),
                "lam_cf": self.lam_cf, "lam_feat": self.lam_feat, "lam_side": self.lam_side,
                "lam_side_scores": dict(self.lam_side_scores), "side": list(SIDE_NAMES),
                "measured_types": {g: len(f.terms) for g, f in self.fits.items()}}


def _nested_lam_side(rows: Sequence[PairRow], features: Mapping[TypeKey, np.ndarray],
                     isolated: Mapping[IsolatedKey, float], families: Mapping[str, list[int]],
                     lam_cf: float, lam_feat: float, grid: Sequence[float]) -> dict[float, float]:
    """Pooled Spearman of each ``lam_side`` in ``grid`` over a leave-one-model-out of the
    families in ``rows`` (the caller's training pairs only). An inner fold that cannot be fitted
    (too few pairs) is skipped; all skipped or constant -> every score 0 (the largest wins)."""
    fams = sorted({p.a[0] for p in rows} | {p.b[0] for p in rows})
    pred: dict[float, list[float]] = {v: [] for v in grid}
    true: list[float] = []
    for fam in fams:
        test = [p for p in rows if fam in (p.a[0], p.b[0])]
        train = [p for p in rows if fam not in (p.a[0], p.b[0])]
        try:
            inner = PairSlowdownPredictor.fit(train, features, isolated=isolated, lam_cf=lam_cf,
                                              lam_feat=lam_feat, lam_side=grid[0])
        except ValueError:
            continue
        cf = dict(inner.fits)
        for v in grid:  # the CF terms do not depend on lam_side: refit only the side regression
            inner.lam_side = v
            inner.fits = {g: inner._refit_side(f) for g, f in cf.items()}
            pred[v].extend(inner.pair_slowdown(p.a, p.b, p.gpu_type) for p in test)
        true.extend(p.slowdown for p in test)
    out = {}
    for v in grid:
        s = spearman(pred[v], true) if len(true) > 2 else float("nan")
        out[v] = s if math.isfinite(s) else 0.0
    return out


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman rank correlation (ties get their average rank); nan if either is constant."""
    def ranks(v):
        v = np.asarray(v, float)
        order = np.argsort(v, kind="mergesort")
        r = np.empty(len(v))
        r[order] = np.arange(len(v), dtype=float)
        for val in np.unique(v):  # average ties
            m = v == val
            if m.sum() > 1:
                r[m] = r[m].mean()
        return r
    rx, ry = ranks(x), ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def leave_one_model_out(pairs: Sequence[PairRow], features: Mapping[TypeKey, np.ndarray], **fit_kw) -> dict:
    """Hold out each model family (all its pairs, either side), fit on the rest, predict the
    held-out pairs. Returns pooled ``mae`` (slowdown units), ``spearman``, the constant
    baseline's ``const_mae`` (median training slowdown; its Spearman is undefined), ``n``
    predictions and ``folds`` (per family: n, mae, const_mae, spearman, and the ``lam_side``
    its training families chose by the nested leave-one-model-out unless ``fit_kw`` fixes
    it). A pair of two held-out families is predicted in both folds. ``fit_kw`` go to
    :meth:`PairSlowdownPredictor.fit` (``isolated=`` for the side information)."""
    fams = sorted({p.a[0] for p in pairs} | {p.b[0] for p in pairs})
    pred, true, const, folds = [], [], [], {}
    for fam in fams:
        test = [p for p in pairs if fam in (p.a[0], p.b[0])]
        train = [p for p in pairs if fam not in (p.a[0], p.b[0])]
        if not test or not train:
            continue
        model = PairSlowdownPredictor.fit(train, {k: v for k, v in features.items()}, **fit_kw)
        c = float(np.median([p.slowdown for p in train]))
        pr = np.array([model.pair_slowdown(p.a, p.b, p.gpu_type) for p in test])
        tr = np.array([p.slowdown for p in test])
        folds[fam] = {"n": len(test), "mae": float(np.abs(pr - tr).mean()), "const_mae": float(np.abs(c - tr).mean()),
                      "spearman": spearman(pr, tr), "lam_side": model.lam_side}
        pred.append(pr)
        true.append(tr)
        const.append(np.full(len(tr), c))
    p, t, c = np.concatenate(pred), np.concatenate(true), np.concatenate(const)
    return {"n": len(t), "mae": float(np.abs(p - t).mean()), "const_mae": float(np.abs(c - t).mean()),
            "spearman": spearman(p, t), "folds": folds}


class OutOfFamilyBelief:
    """The pair belief a policy decides with in the simulator (``slowdown(job, others,
    gpu_type) -> float``, JobSpecs in, no world).

    The world (:mod:`placement.core.world`) is Gavel's measured table, so a predictor fitted on
    all of it would let the policy read the world through its training set. Instead a job of a
    measured family gets the prediction of the fit that held out its family (every pair it
    takes part in): what Horus would predict for that model if it were new. A family that is
    not in the measured pairs gets the fit on all pairs (it is new to that fit too). Fits: one
    per measured family plus one on all pairs; ``fit_kw`` go to :meth:`PairSlowdownPredictor.fit`
    (pass ``isolated=isolated_throughputs(table)``: each job's own isolated throughput, which
    Horus has from profiling the job alone, is side information, not a pair); ``ValueError`` as
    :meth:`PairSlowdownPredictor.fit`.
    """

    def __init__(self, pairs: Sequence[PairRow], features: Mapping[TypeKey, np.ndarray], **fit_kw) -> None:
        fams = sorted({p.a[0] for p in pairs} | {p.b[0] for p in pairs})
        self.all = PairSlowdownPredictor.fit(pairs, features, **fit_kw)
        self.by_family = {f: PairSlowdownPredictor.fit([p for p in pairs if f not in (p.a[0], p.b[0])], features,
                                                       **fit_kw) for f in fams}
        self.name = "pair-cf-out-of-family"
        self._cache: dict[tuple, float] = {}  # (job key, other key, GPU type) -> prediction

    @staticmethod
    def key(job) -> TypeKey:
        """(model, batch size) of a JobSpec; A3C/CycleGAN and unknown batch -> batch 1."""
        return job.model, int(job.batch_size or 1)

    def pair(self, job, other, gpu_type: str) -> float:
        """Predicted slowdown (>= 1) of ``job`` next to ``other`` (JobSpecs); memoised per
        (job type, other type, GPU type), the only inputs of the fits."""
        k = (self.key(job), self.key(other), gpu_type)
        v = self._cache.get(k)
        if v is None:
            m = self.by_family.get(job.model, self.all)
            v = self._cache[k] = m.pair_slowdown(k[0], k[1], gpu_type)
        return v

    def slowdown(self, job, others, gpu_type: str) -> float:
        """Predicted slowdown (>= 1) of ``job`` sharing a GPU with ``others`` (log slowdowns add)."""
        return math.exp(sum(math.log(self.pair(job, o, gpu_type)) for o in others))
