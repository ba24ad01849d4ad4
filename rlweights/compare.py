"""Side-by-side comparison of the PPO policy and the baselines on the same scenarios with the
same step budget and seeds. Improvement of a method over equal weights on one scenario:
``100 * (L_equal - L_method) / L_equal`` (percent; ``L`` = best metric the method measured)."""
from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from rlweights.core.baselines import BASELINES, best_of
from rlweights.core.env import Scenario, SimScenario

from .backends.tpe import tpe_search

METHODS = {**BASELINES, "tpe": tpe_search}


def compare(scenarios: Sequence[Scenario], budget: int, seeds: Sequence[int], model=None, cfg=None,
            w_min: int = 1, w_max: int = 100, progress=None, caches: dict | None = None) -> list[dict]:
    """One row per (scenario, seed, method): ``best_metric``, ``best_weights``,
    ``improvement_vs_equal_percent``. The seed drives both the method's generator and, for a
    :class:`~rlweights.core.env.SimScenario`, the scheduler's tie-break generator in the
    simulation, identically for every method. ``model``/``cfg``: a trained PPO policy to include as
    method ``"ppo"``. ``progress(done, total)`` after each scenario and seed. ``caches``: an
    optional dict, keyed ``(scenario name, seed)``, of the measurement caches of the
    :class:`~rlweights.core.env.SimScenario` copies, kept across calls so that runs at several
    budgets (and :func:`rlweights.core.headroom.headroom` on the same copies) share measurements;
    the simulation is deterministic, so a cached metric equals a re-measured one. Scenarios given
    the same name must then be the same pair.

    A scenario whose equal-weights metric is not positive (an empty window, or one where no
    invocation could be served) has no defined improvement: it gets a single row per seed with
    ``method = "equal"``, ``improvement_vs_equal_percent = None`` and ``skipped`` giving the
    reason, and no method is run on it. :func:`summarise` leaves such rows out and counts them."""
    from .backends.sb3 import policy_experiment

    rows = []
    total = len(scenarios) * len(seeds)
    done = 0
    for base in scenarios:
        for seed in seeds:
            cache = {} if caches is None else caches.setdefault((base.name, seed), {})
            sc = dataclasses.replace(base, seed=seed, _cache=cache) if isinstance(base, SimScenario) else base
            eq_w, eq_m = best_of(METHODS["equal"](sc, budget, np.random.default_rng(seed), w_min, w_max))
            if not eq_m > 0:
                rows.append({"scenario": sc.name, "seed": seed, "method": "equal", "best_metric": eq_m,
                             "best_weights": list(eq_w), "improvement_vs_equal_percent": None,
                             "skipped": "equal-weights metric is not positive (empty window or nothing served)"})
                done += 1
                if progress:
                    progress(done, total)
                continue
            results = {}
            for name, fn in METHODS.items():
                hist = fn(sc, budget, np.random.default_rng(seed), w_min, w_max)
                results[name] = best_of(hist)
            if model is not None:
                results["ppo"] = best_of(policy_experiment(model, cfg, sc, budget, seed=seed))
            eq = results["equal"][1]
            for name, (w, m) in results.items():
                rows.append({"scenario": sc.name, "seed": seed, "method": name, "best_metric": m, "best_weights": list(w),
                             "improvement_vs_equal_percent": 100.0 * (eq - m) / eq})
            done += 1
            if progress:
                progress(done, total)
    return rows


def summarise(rows: list[dict]) -> dict:
    """Mean and standard deviation (over scenarios and seeds) of each method's improvement over
    equal weights; and, if ``ppo`` is present, PPO's improvement over the best baseline
    (the baseline with the highest mean improvement), ``100 * (L_base - L_ppo) / L_base`` per row.
    Rows marked ``skipped`` by :func:`compare` are left out; ``skipped_rows`` counts them."""
    skipped = sum(1 for r in rows if r.get("skipped"))
    rows = [r for r in rows if not r.get("skipped")]
    methods = sorted({r["method"] for r in rows})
    out = {"methods": {}, "skipped_rows": skipped}
    for m in methods:
        x = np.array([r["improvement_vs_equal_percent"] for r in rows if r["method"] == m])
        out["methods"][m] = {"mean_improvement_vs_equal_percent": float(x.mean()), "std": float(x.std())}
    baselines = [m for m in methods if m not in ("ppo", "equal")]
    if "ppo" in methods and baselines:
        best = max(baselines, key=lambda m: out["methods"][m]["mean_improvement_vs_equal_percent"])
        key = lambda r: (r["scenario"], r["seed"])  # noqa: E731
        base = {key(r): r["best_metric"] for r in rows if r["method"] == best}
        imp = np.array([100.0 * (base[key(r)] - r["best_metric"]) / base[key(r)] for r in rows if r["method"] == "ppo"])
        out["best_baseline"] = best
        out["ppo_vs_best_baseline_percent"] = float(imp.mean())
        out["ppo_vs_best_baseline_std"] = float(imp.std())
        out["ppo_vs_equal_percent"] = out["methods"]["ppo"]["mean_improvement_vs_equal_percent"]
    return out


def versus(rows: list[dict], method: str = "ppo") -> dict:
    """``method`` against every other method in ``rows`` (one :func:`compare` run: one budget):
    per seed, the mean over scenarios of ``100 * (L_other - L_method) / L_other`` (percent,
    positive = ``method`` measured a lower metric), then the mean and the standard deviation
    (population, ``ddof=0``) of those per-seed values. Returns ``{other: {"mean", "std_over_seeds",
    "per_seed": {seed: value}, "pairs"}}``; rows marked ``skipped`` are left out. Raises
    ``ValueError`` when ``method`` has no rows."""
    rows = [r for r in rows if not r.get("skipped")]
    mine = {(r["scenario"], r["seed"]): r["best_metric"] for r in rows if r["method"] == method}
    if not mine:
        raise ValueError(f"no rows for method {method!r}")
    seeds = sorted({s for _, s in mine})
    out = {}
    for other in sorted({r["method"] for r in rows} - {method}):
        theirs = {(r["scenario"], r["seed"]): r["best_metric"] for r in rows if r["method"] == other}
        per_seed = {}
        for seed in seeds:
            x = [100.0 * (theirs[k] - mine[k]) / theirs[k] for k in mine if k[1] == seed and k in theirs]
            if x:
                per_seed[seed] = float(np.mean(x))
        if per_seed:
            v = np.array(list(per_seed.values()))
            out[other] = {"mean": float(v.mean()), "std_over_seeds": float(v.std()), "per_seed": per_seed,
                          "pairs": sum(1 for k in mine if k in theirs)}
    return out
