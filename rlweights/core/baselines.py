"""Baselines for the weight-optimisation experiment, each given the same step budget (number of
weight vectors measured): equal weights, kube-scheduler's default weights, random search, hill
climbing. (Optuna TPE lives in :mod:`rlweights.backends.tpe`, as it imports optuna.)

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


BASELINES = {
    "equal": equal_weights,
    "kube-default": kube_default,
    "random-search": random_search,
    "hill-climbing": hill_climbing,
}
