"""Headroom of a (cluster setup, workload) pair: how much any weight vector can gain over equal
weights there, estimated as the best of a fixed, seeded set of weight vectors.

The claim "a learned policy gains X% over fixed weights" is only testable where some weight
vector gains that much; this module measures it with the scenario's own evaluation (the same
:meth:`rlweights.core.env.Scenario.evaluate` every method of the comparison is scored by, so the
same objective, the same simulator seed and the same cache), no new model.

The set (:func:`headroom_vectors`) covers the weights' documented range ``w_min..w_max``
(integers; 1..100 by default, the range kube-scheduler accepts for score-plugin weights,
:mod:`rlweights.core.env`) in this order, the first ``n`` taken:

1. equal weights ``[w_max] * 7`` (the reference, so ``headroom >= 0`` by construction);
2. the 7 one-plugin-dominant corners (``w_max`` on one plugin, ``w_min`` on the others: the
   nearest the range allows to one-hot vectors, as weights of 0 are outside it);
3. the other corners of the box ``{w_min, w_max}^7`` in binary order (plugin 0 as the most
   significant bit, ``w_min`` = 0, ``w_max`` = 1), 120 of them, so 128 corners in all;
4. points of a scrambled Sobol sequence in ``[0, 1)^7`` (``scipy.stats.qmc.Sobol``,
   ``scramble=True``, seeded with ``seed``; Owen scrambling, Joe and Kuo's direction numbers)
   mapped to integers by ``w_min + floor(u * (w_max - w_min + 1))``, a uniform draw over the
   integer box; vectors equal to earlier ones are skipped.

With the default ``n = 300``: 1 + 7 + 120 corners and 172 Sobol points. A box with fewer than
``n`` distinct integer vectors (a tiny range) gives all of them.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from .env import N_PLUGINS, Scenario

#: Headroom vectors per pair by default (issue 22: "the best of at least 300 weight vectors").
DEFAULT_HEADROOM_VECTORS = 300


def _kinds(n_plugins: int) -> tuple[int, int]:
    """(end of the equal + one-plugin block, end of the corner block) as indices of the sequence."""
    return 1 + n_plugins, 2**n_plugins


def headroom_vectors(n: int, seed: int = 0, w_min: int = 1, w_max: int = 100, n_plugins: int = N_PLUGINS) -> np.ndarray:
    """The first ``n`` weight vectors of the headroom set (module docstring), shape
    ``(min(n, (w_max - w_min + 1) ** n_plugins), n_plugins)``, int64, every entry in
    ``w_min..w_max``, no two rows equal, row 0 the equal weights ``[w_max] * n_plugins``.
    ``seed`` seeds the Sobol scrambling only (the corners do not depend on it).

    Raises ``ValueError`` for ``n < 1``, a range that is not integers ``0 <= w_min < w_max``, or
    ``n_plugins < 1``."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"need at least 1 headroom vector, got {n!r}")
    if not (isinstance(w_min, (int, np.integer)) and isinstance(w_max, (int, np.integer)) and 0 <= w_min < w_max):
        raise ValueError(f"weight range must be integers 0 <= w_min < w_max, got {w_min}..{w_max}")
    if n_plugins < 1:
        raise ValueError("n_plugins must be >= 1")
    n = int(min(n, (w_max - w_min + 1) ** n_plugins))
    out: list[tuple[int, ...]] = [(w_max,) * n_plugins]
    out += [tuple(w_max if j == i else w_min for j in range(n_plugins)) for i in range(n_plugins)]
    seen = set(out)
    for bits in itertools.product((w_min, w_max), repeat=n_plugins):
        if len(out) >= n:
            break
        if bits not in seen:
            seen.add(bits)
            out.append(bits)
    if len(out) < n:
        from scipy.stats import qmc

        sobol = qmc.Sobol(d=n_plugins, scramble=True, seed=np.random.default_rng(seed))
        span = w_max - w_min + 1
        while len(out) < n:
            # powers of two keep the Sobol sequence's balance; draw in blocks until enough are new
            m = int(np.ceil(np.log2(max(n - len(out), 2))))
            u = sobol.random_base2(m) if sobol.num_generated == 0 else sobol.random(2**m)
            for row in np.minimum(w_min + np.floor(u * span), w_max).astype(np.int64):
                t = tuple(int(x) for x in row)
                if t not in seen:
                    seen.add(t)
                    out.append(t)
                    if len(out) == n:
                        break
    return np.asarray(out[:n], dtype=np.int64)


def vector_kind(index: int, n_plugins: int = N_PLUGINS) -> str:
    """Which block of :func:`headroom_vectors` row ``index`` comes from: ``"equal"``,
    ``"one-plugin"``, ``"corner"`` or ``"sobol"``."""
    one_end, corner_end = _kinds(n_plugins)
    if index == 0:
        return "equal"
    if index < one_end:
        return "one-plugin"
    return "corner" if index < corner_end else "sobol"


@dataclass(frozen=True)
class Headroom:
    """Result of :func:`headroom` on one scenario.

    ``equal_metric`` / ``best_metric``: the scenario's metric (seconds of latency for a
    :class:`~rlweights.core.env.SimScenario`; lower is better) with equal weights and with the
    best vector of the set; ``best_weights``: that vector (7 integers, plugin order of
    :data:`rlweights.core.scheduler.SCORE_PLUGIN_NAMES`); ``best_index`` / ``best_kind``: its
    row in :func:`headroom_vectors` and block; ``headroom_percent``:
    ``100 * (equal_metric - best_metric) / equal_metric`` (>= 0), or ``None`` with ``skipped``
    giving the reason when the equal-weights metric is not positive (an empty window: no
    improvement is defined, as in :func:`rlweights.compare.compare`); ``n_vectors``:
    vectors measured."""

    scenario: str
    equal_metric: float
    best_metric: float
    best_weights: list[int]
    best_index: int
    best_kind: str
    headroom_percent: float | None
    n_vectors: int
    skipped: str | None = None


def headroom(scenario: Scenario, n_vectors: int = DEFAULT_HEADROOM_VECTORS, seed: int = 0, w_min: int = 1,
             w_max: int = 100) -> Headroom:
    """Best of the first ``n_vectors`` vectors of :func:`headroom_vectors` (``seed`` seeds
    their Sobol part) on ``scenario``, measured with ``scenario.evaluate`` (for a
    :class:`~rlweights.core.env.SimScenario` the simulation's tie-break seed is the scenario's own
    ``seed`` field, and results land in its cache), against equal weights. Ties go to the
    earlier vector, so equal weights win a tie and the headroom is never negative.

    Cost: ``n_vectors`` evaluations (fewer when cached; about 20-60 per wall second for the
    bench's 4-5-node PAI setups and 120-s generated windows on a loaded 2-core machine).
    Raises ``ValueError`` as :func:`headroom_vectors` does."""
    vecs = headroom_vectors(n_vectors, seed, w_min, w_max, N_PLUGINS)
    eq = float(scenario.evaluate(vecs[0]))
    if not eq > 0:
        return Headroom(scenario.name, eq, eq, vecs[0].tolist(), 0, "equal", None, 1,
                        skipped="equal-weights metric is not positive (empty window or nothing served)")
    best_i, best_m = 0, eq
    for i in range(1, len(vecs)):
        m = float(scenario.evaluate(vecs[i]))
        if m < best_m:
            best_i, best_m = i, m
    return Headroom(scenario.name, eq, best_m, vecs[best_i].tolist(), best_i, vector_kind(best_i),
                    100.0 * (eq - best_m) / eq, len(vecs))


def distribution(values) -> dict:
    """``{"n", "min", "median", "p90", "max", "mean"}`` of ``values`` (percent; numpy's linear
    percentile), ``None`` entries left out; all statistics ``None`` when nothing is left."""
    x = np.array([v for v in values if v is not None], dtype=float)
    if x.size == 0:
        return {"n": 0, "min": None, "median": None, "p90": None, "max": None, "mean": None}
    return {"n": int(x.size), "min": float(x.min()), "median": float(np.median(x)),
            "p90": float(np.percentile(x, 90)), "max": float(x.max()), "mean": float(x.mean())}
