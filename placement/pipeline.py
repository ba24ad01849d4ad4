"""The placement engine's Django-free pipeline (engine plug, :mod:`webapp.plug`): replay a
trace under one or more policies. Used by the ``simulation`` experiment kind (through
:func:`webapp.experiments.run_pipeline`), ``manage.py simulate`` and the demo.

``run(params, *, report, record, resume=None, on_outcomes=None, data_dir=None) -> dict``:
``params`` as validated by :class:`placement.experiment.SimulationParams` (``trace``,
``policies``, ``cluster``, ``seed``, ``limit``). After each policy finishes, one row
``{"policy", "params", "result"}`` is recorded in table ``"policies"``; on a rerun with
``resume={"policies": rows}`` a policy whose row has the same parameters is not simulated
again (its recorded result is used; its per-job outcomes were stored when it ran).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from .core import setup, simulator
from .core.policies import DEFAULT_MIGRATION_COST_S, Policy, make_policy
from .core.simulator import SimulationResult
from .core.types import GPUSpec, JobSpec

DEFAULT_DATA_DIR = Path(__file__).resolve().parents[1] / "data"


def _downsample(t: np.ndarray, u: np.ndarray, n: int = 200) -> dict:
    if len(t) <= n:
        return {"t": t.tolist(), "util": u.tolist()}
    idx = np.linspace(0, len(t) - 1, n).astype(int)
    return {"t": t[idx].tolist(), "util": u[idx].tolist()}


TIRESIAS_TO_TORCHVISION = {"inception3": "inception_v3", "inception4": "inception_v3"}


def predicted_profile(tables: setup.Tables, gpu_type: str = "V100"):
    """(model, batch) -> (util %, memory MiB) from graph features alone, the Horus way: the
    XGBoost predictor (trained on the profile rows of ``gpu_type``) for utilisation, the graph
    estimate for memory. Tiresias's ``inception4`` is not in torchvision; ``inception_v3``
    stands in for it."""
    from .backends.features import model_features
    from .backends.predictor import UtilisationPredictor

    pred = UtilisationPredictor(tables.profile_rows, tables.feature_rows)
    cache: dict = {}

    def lookup(model: str, bs: int):
        name = TIRESIAS_TO_TORCHVISION.get(model, model)
        if (name, bs) not in cache:
            row = next((r for r in tables.feature_rows if r["model"] == name and int(r["batch_size"]) == bs), None)
            feats = row or model_features(name, bs).as_dict()
            cache[(name, bs)] = (pred.predict(feats, gpu_type=gpu_type).value, float(feats["memory_mib"]))
        return cache[(name, bs)]

    return lookup


#: What Horus runs with in simulation beyond its class defaults: Tiresias's least-attained-
#: service levels with preemption, and the pair belief (:func:`setup.pair_belief`) bounding
#: which GPUs it shares at the break-even for mean JCT (``max_pair_cost`` 1, see
#: :class:`~placement.core.policies.Horus`). Checked on four trace shapes before it became the
#: default (docs/engines/placement.md, 7 Dec 2026); Horus+ gets the belief only (its cost's
#: ``w_pair`` term). Live placement keeps the class defaults: it does not preempt and has no
#: attained service to rank by.
SIMULATED_HORUS: dict[str, Any] = {"las_thresholds": (3600.0, 36000.0), "max_pair_cost": 1.0}


def simulation_policy(name: str, data_dir: Path | None = None, **overrides) -> Policy:
    """The policy ``name`` as simulations run it (the ``simulation`` kind, ``manage.py
    simulate``, the demo and ``bench/placement.py``): for ``horus``, :data:`SIMULATED_HORUS`
    with the pair belief of ``data_dir`` (default the repository's ``data/``); for ``horus+``
    that belief in its cost (``w_pair`` term); any other policy with its class defaults.
    ``overrides`` are keyword arguments of the policy's class and win (``pair_belief=None``
    drops the bound too, ``las_thresholds=None`` the levels). ``KeyError`` for an unknown
    name, ``ValueError`` / ``TypeError`` as the class raises."""
    kw: dict[str, Any] = {}
    if name in ("horus", "horus+"):
        kw = {**SIMULATED_HORUS, "pair_belief": None} if name == "horus" else {"pair_belief": None}
        if overrides.get("pair_belief", ...) is ...:
            kw["pair_belief"] = setup.pair_belief(Path(data_dir) if data_dir is not None else DEFAULT_DATA_DIR)
    kw.update(overrides)
    if name == "horus" and kw.get("pair_belief") is None and "max_pair_cost" not in overrides:
        kw.pop("max_pair_cost")  # the bound needs the belief
    return make_policy(name, **kw)


def describe_policy(policy: Policy) -> dict:
    """The settings a result depends on beyond the policy's name, for reports: Horus's LAS
    levels (GPU-seconds), pair belief and bound; ``{}`` for other policies."""
    if not hasattr(policy, "max_pair_cost"):
        return {}
    las = getattr(policy, "las", None)
    return {"las_thresholds_gpu_s": None if las is None else [float(t) for t in las.thresholds],
            "pair_belief": getattr(policy.pair_belief, "name", None) if policy.pair_belief is not None else None,
            "max_pair_cost": policy.max_pair_cost}


def _key(params: Mapping[str, Any]) -> dict:
    """The parameters that determine one policy's result (the policy list aside)."""
    return {k: params.get(k) for k in ("trace", "cluster", "seed", "limit")}


def simulate_policies(jobs: Sequence[JobSpec], gpus: list[GPUSpec], policies: Mapping[str, Policy], world, *,
                      seed: int = 0, migration_cost_s: float = DEFAULT_MIGRATION_COST_S, durations: str = "estimate",
                      report: Callable[[float, str], None] | None = None, report_every_s: float = 0.5,
                      first: int = 1, of: int | None = None) -> Iterator[tuple[str, SimulationResult, float]]:
    """Replay one trace under each policy in turn, the call every entry shares (:func:`run`,
    hence the ``simulation`` kind and ``manage.py simulate``, and ``bench/placement.py``).

    ``jobs`` / ``gpus``: the trace and cluster (:func:`placement.core.setup.load_trace`,
    :func:`~placement.core.setup.cluster`); ``policies``: ``{row name: policy object}`` (built
    by :func:`placement.core.policies.make_policy`, with any ablation switches); ``world``: the
    ground truth of co-location slowdowns (``Tables.world``), never shown to the policies.
    Yields ``(name, SimulationResult, wall seconds)`` as each policy finishes. ``report(percent,
    message)``: called before each policy and from inside each simulation at most once per
    ``report_every_s`` seconds (a reporter that raises stops the run); ``first`` / ``of`` number
    the policies in its messages ("simulating fifo (1/3)"). Raises what
    :func:`placement.core.simulator.simulate` raises (``ValueError`` for a trace that cannot be
    simulated)."""
    n = len(policies)
    of = of if of is not None else first - 1 + n
    for i, (name, policy) in enumerate(policies.items()):
        label = f"simulating {name} ({first + i}/{of})"
        progress = None
        if report:
            report(100.0 * i / max(n, 1), label)
            last = [time.monotonic()]

            def progress(done: int, total: int, i: int = i, label: str = label) -> None:
                now = time.monotonic()
                if now - last[0] >= report_every_s:
                    last[0] = now
                    report(100.0 * (i + done / max(total, 1)) / n, f"{label}: {done}/{total} jobs done")

        t = time.perf_counter()
        r = simulator.simulate(jobs, gpus, policy, world, seed=seed, migration_cost_s=migration_cost_s,
                               durations=durations, progress=progress)
        yield name, r, time.perf_counter() - t


def run(params: Mapping[str, Any], *, report: Callable[[float, str], None] | None = None,
        record: Callable[[str, list], None] | None = None, resume: Mapping[str, list] | None = None,
        on_outcomes: Callable[[str, list], None] | None = None, data_dir: Path | None = None,
        report_every_s: float = 0.5) -> dict:
    """Run every policy in ``params`` and return the JSON result: per-policy summary metrics,
    JCT quantiles (for the CDF), queueing delays quantiles and utilisation over time.
    ``on_outcomes(policy, [JobOutcome])`` receives each policy's per-job outcomes.

    ``report(percent, message)`` is also called from inside each simulation (the simulator's
    progress callback, every few hundred events) at most once per ``report_every_s`` seconds, so
    a reporter that raises (``ExperimentCancelled``) stops a long run within about that time.
    ``ValueError`` for a trace or cluster that cannot be simulated. ``record`` / ``resume``:
    see the module docstring; ``data_dir`` defaults to the repository's ``data/``."""
    data = Path(data_dir) if data_dir is not None else DEFAULT_DATA_DIR
    done = {r["policy"]: r["result"] for r in (resume or {}).get("policies", [])
            if r.get("params") == _key(params)}
    tables = setup.load_tables(data)
    profile = predicted_profile(tables) if params["trace"] == "tiresias60" else None
    jobs = setup.load_trace(params["trace"], data, tables, seed=params.get("seed", 0),
                            limit=params.get("limit") or None, profile=profile)
    gpus = setup.cluster(jobs, params.get("cluster") or None)
    out: dict[str, Any] = {"trace": params["trace"], "jobs": len(jobs), "gpus": len(gpus), "policies": {},
                           "interference": tables.interference.as_dict(), "world": tables.world.describe()}
    names = list(params["policies"])
    todo = [n for n in names if n not in done]
    kept = [n for n in names if n in done]
    for k, name in enumerate(kept):
        out["policies"][name] = done[name]
        if report:
            report(100.0 * (k + 1) / len(names), f"{name}: kept from the earlier run ({k + 1}/{len(names)})")

    q = np.linspace(0, 100, 101)
    for k, name in enumerate(todo):
        base = len(kept) + k  # policies done before this one

        def scaled(pct: float, msg: str, base: int = base) -> None:
            report(100.0 * (base + pct / 100.0) / len(names), msg)

        # built when its turn comes: Horus's pair belief takes seconds to fit, and the
        # policies before it report progress meanwhile
        if report and name in ("horus", "horus+"):
            report(100.0 * base / len(names), f"{name}: loading the pair belief ({base + 1}/{len(names)})")
        policy = simulation_policy(name, data)
        for _, r, _wall in simulate_policies(jobs, gpus, {name: policy}, tables.world, seed=params.get("seed", 0),
                                             report=scaled if report else None, report_every_s=report_every_s,
                                             first=base + 1, of=len(names)):
            if on_outcomes is not None:
                on_outcomes(name, r.jobs)
            jct = np.array([o.jct for o in r.jobs])
            qd = np.array([o.queueing_delay for o in r.jobs])
            out["policies"][name] = {"summary": r.summary(), "settings": describe_policy(policy),
                                     "jct_quantiles_s": np.percentile(jct, q).tolist(),
                                     "queueing_quantiles_s": np.percentile(qd, q).tolist(),
                                     "utilisation": _downsample(r.util_t, r.util_pct)}
            if record is not None:
                record("policies", [{"policy": name, "params": _key(params), "result": out["policies"][name]}])
    out["policies"] = {n: out["policies"][n] for n in names}
    if report:
        report(100.0, "done")
    return out
