"""Every method of the comparison at the bench's budgets 10, 20 and 50: exactly ``budget``
measured vectors (one for the fixed references), inside the range; Optuna TPE's random
start-up trials sized to the budget, not Optuna's default of 10 (which would make TPE random
search at budget 10)."""
import numpy as np
import pytest

from rlweights.backends import tpe
from rlweights.compare import METHODS


class Quadratic:
    name = "quad"

    def evaluate(self, w):
        return 10.0 + float(np.sum((np.asarray(w, float) - 30.0) ** 2)) / 1000.0


@pytest.mark.parametrize("budget", [10, 20, 50])
def test_every_method_measures_the_budget(budget):
    assert set(METHODS) == {"equal", "kube-default", "random-search", "hill-climbing", "cma-es", "tpe"}
    for name, fn in METHODS.items():
        hist = fn(Quadratic(), budget, np.random.default_rng(0), 1, 100)
        assert len(hist) == (1 if name in ("equal", "kube-default") else budget), name
        if name != "kube-default":
            assert all(1 <= x <= 100 for w, _ in hist for x in w), name


@pytest.mark.parametrize("budget,startup", [(10, 5), (20, 5), (50, 5), (4, 2), (2, 1)])
def test_tpe_start_up_trials_are_sized_to_the_budget(budget, startup, monkeypatch):
    import optuna

    seen = {}
    real = optuna.samplers.TPESampler

    def spy(**kw):
        seen.update(kw)
        return real(**kw)

    monkeypatch.setattr(optuna.samplers, "TPESampler", spy)
    hist = tpe.tpe_search(Quadratic(), budget, np.random.default_rng(0))
    assert len(hist) == budget
    # min(5, budget // 2), at least 1: some TPE-guided trials at every budget
    assert seen["n_startup_trials"] == startup and startup < budget
