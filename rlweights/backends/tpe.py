"""Optuna TPE (Bayesian optimisation; Bergstra et al., NeurIPS 2011) as a weight-optimisation
baseline with the same step budget as the others."""
from __future__ import annotations

import numpy as np

from rlweights.core.env import N_PLUGINS, Scenario
from rlweights.core.scheduler import SCORE_PLUGIN_NAMES


def tpe_search(scenario: Scenario, budget: int, rng: np.random.Generator, w_min: int = 1, w_max: int = 100):
    """``budget`` trials of ``optuna.samplers.TPESampler`` (seeded from ``rng``; the first
    ``min(5, budget // 2)`` trials are random start-up trials). Returns ``[(weights, metric)]``."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = optuna.samplers.TPESampler(seed=int(rng.integers(2**31)), n_startup_trials=max(1, min(5, budget // 2)))
    study = optuna.create_study(direction="minimize", sampler=sampler)
    hist = []

    def objective(trial):
        w = np.array([trial.suggest_int(n, w_min, w_max) for n in SCORE_PLUGIN_NAMES], np.int64)
        m = float(scenario.evaluate(w))
        hist.append((w.tolist(), m))
        return m

    study.optimize(objective, n_trials=budget)
    assert all(len(h[0]) == N_PLUGINS for h in hist)
    return hist
