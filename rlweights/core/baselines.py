"""Baselines for the weight-optimisation experiment, each given the same step budget (number of
weight vectors measured): equal weights, kube-scheduler's default weights, random search, hill
climbing, CMA-ES. (Optuna TPE lives in :mod:`rlweights.backends.tpe`, as it imports optuna.)

Every method returns its history ``[(weights, metric), ...]``; the result of an experiment is
the best (lowest) metric in it (:func:`best_of`).
"""
from __future__ import annotations

import numpy as np

from .env import N_PLUGINS, Scenario, run_experiment
from .scheduler import KUBE_DEFAULT_WEIGHTS, weights_vector


def best_of(history: list[tuple[list[int], float]]) -> tuple[list[int], float]:
    """The (weights, metric) pair with the lowest metric (the first among equals)."""
    return min(history, key=lambda h: h[1])


def equal_weights(scenario: Scenario, budget: int, rng: np.random.Generator, w_min: int = 1, w_max: int = 100):
    """All plugins weigh the same (one measurement: it is deterministic)."""
    return run_experiment(scenario, lambda t, h: np.full(N_PLUGINS, w_max), 1)


def kube_default(scenario: Scenario, budget: int, rng: np.random.Generator, w_min: int = 1, w_max: int = 100):
    """kube-scheduler's default weights (:data:`KUBE_DEFAULT_WEIGHTS`), one measurement."""
    return run_experiment(scenario, lambda t, h: weights_vector(KUBE_DEFAULT_WEIGHTS), 1)


def random_search(scenario: Scenario, budget: int, rng: np.random.Generator, w_min: int = 1, w_max: int = 100):
    """``budget`` weight vectors drawn uniformly from the integer range."""
    return run_experiment(scenario, lambda t, h: rng.integers(w_min, w_max + 1, N_PLUGINS), budget)


def hill_climbing(scenario: Scenario, budget: int, rng: np.random.Generator, w_min: int = 1, w_max: int = 100,
                  step: float = 0.2):
    """First-improvement stochastic hill climbing: start at the middle of the range, then
    perturb the best vector so far with Gaussian noise of ``step * (w_max - w_min)`` per weight
    (rounded, clipped); keep the candidate when it is better."""
    sigma = step * (w_max - w_min)

    def propose(t, hist):
        if t == 0:
            return np.full(N_PLUGINS, (w_min + w_max) // 2)
        best = np.asarray(best_of(hist)[0], float)
        return np.clip(np.round(best + rng.normal(0, sigma, N_PLUGINS)), w_min, w_max)

    return run_experiment(scenario, propose, budget)


def _fold_into_unit_box(x: np.ndarray) -> np.ndarray:
    """Reflect every coordinate of ``x`` into ``[0, 1]`` (a triangle wave of period 2: 1.2 -> 0.8,
    -0.3 -> 0.3, 2.5 -> 0.5): boundary handling by reflection, the unsmoothed form of pycma's
    ``BoundTransform`` (Hansen, pycma ``cma.transformations``). Same shape as ``x``."""
    t = np.mod(np.asarray(x, float), 2.0)
    return np.where(t <= 1.0, t, 2.0 - t)


def cma_es(scenario: Scenario, budget: int, rng: np.random.Generator, w_min: int = 1, w_max: int = 100,
           sigma0: float = 0.3):
    """CMA-ES, (mu/mu_w, lambda) with rank-one and rank-mu updates and cumulative step-size
    adaptation, default strategy parameters of Hansen, "The CMA Evolution Strategy: A Tutorial"
    (arXiv:1604.00772, Table 1 and Fig. 6): ``lambda = 4 + floor(3 ln n)`` (9 for n = 7).
    Searches ``x`` from the centre of ``[0, 1]^n`` with step ``sigma0``; a candidate is measured
    as ``round(w_min + fold(x) * (w_max - w_min))`` where ``fold`` reflects ``x`` back into the
    box (:func:`_fold_into_unit_box`). Clipping instead would make the metric flat outside the
    box, so a mean that drifts past a bound gets no signal back and the search stalls (it did:
    stuck at the first 60 measurements on a 7-D quadratic with its optimum at 0.19 / 0.8).
    Stops after ``budget`` measurements (the last generation may be partial). Returns
    ``[(weights, metric), ...]``."""
    n = N_PLUGINS
    lam = 4 + int(3 * np.log(n))
    mu = lam // 2
    wts = np.log(mu + 0.5) - np.log(np.arange(1, mu + 1))
    wts /= wts.sum()
    mueff = 1.0 / float(np.sum(wts**2))
    cc = (4 + mueff / n) / (n + 4 + 2 * mueff / n)
    cs = (mueff + 2) / (n + mueff + 5)
    c1 = 2 / ((n + 1.3) ** 2 + mueff)
    cmu = min(1 - c1, 2 * (mueff - 2 + 1 / mueff) / ((n + 2) ** 2 + mueff))
    damps = 1 + 2 * max(0.0, np.sqrt((mueff - 1) / (n + 1)) - 1) + cs
    chi_n = np.sqrt(n) * (1 - 1 / (4 * n) + 1 / (21 * n * n))
    mean, sigma = np.full(n, 0.5), sigma0
    cov, pc, ps = np.eye(n), np.zeros(n), np.zeros(n)
    hist: list[tuple[list[int], float]] = []
    gen = 0
    while len(hist) < budget:
        evals, basis = np.linalg.eigh(cov)
        d = np.sqrt(np.maximum(evals, 1e-20))
        y = (rng.standard_normal((lam, n)) * d) @ basis.T  # y_k ~ N(0, C)
        f = []
        for k in range(lam):
            if len(hist) == budget:
                return hist
            w = np.round(w_min + _fold_into_unit_box(mean + sigma * y[k]) * (w_max - w_min)).astype(np.int64)
            m = float(scenario.evaluate(w))
            hist.append((w.tolist(), m))
            f.append(m)
        sel = y[np.argsort(f, kind="stable")[:mu]]
        y_w = wts @ sel
        mean = mean + sigma * y_w
        c_inv_sqrt = basis @ np.diag(1 / d) @ basis.T
        ps = (1 - cs) * ps + np.sqrt(cs * (2 - cs) * mueff) * (c_inv_sqrt @ y_w)
        gen += 1
        hsig = float(np.linalg.norm(ps) / np.sqrt(1 - (1 - cs) ** (2 * gen)) / chi_n < 1.4 + 2 / (n + 1))
        pc = (1 - cc) * pc + hsig * np.sqrt(cc * (2 - cc) * mueff) * y_w
        cov = ((1 - c1 - cmu) * cov + c1 * (np.outer(pc, pc) + (1 - hsig) * cc * (2 - cc) * cov)
               + cmu * (sel.T * wts) @ sel)
        sigma *= float(np.exp((cs / damps) * (np.linalg.norm(ps) / chi_n - 1)))
    return hist


BASELINES = {
    "equal": equal_weights,
    "kube-default": kube_default,
    "random-search": random_search,
    "hill-climbing": hill_climbing,
    "cma-es": cma_es,
}
