"""The "simulation" experiment kind: replay a trace under one or more policies on a cluster.

Parameters (validated by :class:`SimulationParams`): ``trace`` (``gavel:<vc>``, ``philly``,
``tiresias60``), ``policies`` (names from :data:`placement.core.policies.POLICIES`), ``cluster``
("NxG" nodes x GPUs per node, V100 16 GiB; empty = shaped like the trace; at most 10,000 nodes,
16 GPUs per node, 100,000 GPUs, and enough GPUs for the trace's largest job), ``seed``, ``limit``
(first N jobs; 0 = all). Deterministic for given parameters, so a redelivered task stores the
same result.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import time

import numpy as np
from django.conf import settings
from rest_framework import serializers

from .core import setup, simulator
from .core.policies import POLICIES, make_policy


class SimulationParams(serializers.Serializer):
    trace = serializers.CharField(default="gavel:2869ce")
    policies = serializers.ListField(child=serializers.ChoiceField(choices=list(POLICIES)), min_length=1,
                                     default=lambda: ["fifo", "gandiva", "horus"])
    cluster = serializers.RegexField(r"^(\d+x\d+)?$", required=False, allow_blank=True, default="")
    seed = serializers.IntegerField(min_value=0, default=0)
    limit = serializers.IntegerField(min_value=0, default=0)

    def validate_trace(self, value: str) -> str:
        if value in ("philly", "tiresias60"):
            return value
        if value.startswith("gavel:") and value[6:] in setup.GAVEL_VCS:
            return value
        raise serializers.ValidationError(
            f"unknown trace {value!r}; use philly, tiresias60 or gavel:<vc> with vc in {', '.join(setup.GAVEL_VCS)}")

    def validate_policies(self, value):
        if len(set(value)) != len(value):
            raise serializers.ValidationError("a policy is listed twice")
        return value

    def validate_cluster(self, value: str) -> str:
        if value:
            try:
                setup.parse_cluster_shape(value)
            except ValueError as err:
                raise serializers.ValidationError(str(err)) from None
        return value

    def validate(self, attrs):
        """With an explicit cluster, read the trace (milliseconds for Gavel, ~1 s for Philly)
        and reject a cluster too small for its largest job, naming the job."""
        if attrs.get("cluster"):
            n, g = setup.parse_cluster_shape(attrs["cluster"])
            data = Path(settings.DATA_DIR)
            # GPU counts do not depend on the profile; a constant one avoids fitting the predictor
            try:
                jobs = setup.load_trace(attrs["trace"], data, setup.load_tables(data), seed=attrs.get("seed", 0),
                                        limit=attrs.get("limit") or None, profile=lambda model, bs: (50.0, 0.0))
            except ValueError as err:
                raise serializers.ValidationError({"trace": [str(err)]}) from None
            msg = setup.largest_job_error(jobs, n * g)
            if msg:
                raise serializers.ValidationError({"cluster": [msg]})
        return attrs


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


def run_simulations(params: dict[str, Any], report: Callable[[float, str], None] | None = None,
                    on_outcomes: Callable[[str, list], None] | None = None, *,
                    report_every_s: float = 0.5) -> dict:
    """Run every policy in ``params`` and return the JSON result: per-policy summary metrics,
    JCT quantiles (for the CDF), queueing delays quantiles and utilisation over time.
    ``on_outcomes(policy, [JobOutcome])`` receives each policy's per-job outcomes.

    ``report(percent, message)`` is also called from inside each simulation (the simulator's
    progress callback, every few hundred events) at most once per ``report_every_s`` seconds, so
    a reporter that raises (``ExperimentCancelled``) stops a long run within about that time.
    ``ValueError`` for a trace or cluster that cannot be simulated."""
    data = Path(settings.DATA_DIR)
    tables = setup.load_tables(data)
    profile = predicted_profile(tables) if params["trace"] == "tiresias60" else None
    jobs = setup.load_trace(params["trace"], data, tables, seed=params.get("seed", 0),
                            limit=params.get("limit") or None, profile=profile)
    gpus = setup.cluster(jobs, params.get("cluster") or None)
    out: dict[str, Any] = {"trace": params["trace"], "jobs": len(jobs), "gpus": len(gpus), "policies": {},
                           "interference": tables.interference.as_dict(), "world": tables.world.describe()}
    names = params["policies"]
    q = np.linspace(0, 100, 101)
    for i, name in enumerate(names):
        if report:
            report(100.0 * i / len(names), f"simulating {name} ({i + 1}/{len(names)})")
        progress = None
        if report:
            last = [time.monotonic()]

            def progress(done: int, total: int, i: int = i, name: str = name) -> None:
                now = time.monotonic()
                if now - last[0] >= report_every_s:
                    last[0] = now
                    report(100.0 * (i + done / max(total, 1)) / len(names),
                           f"simulating {name} ({i + 1}/{len(names)}): {done}/{total} jobs done")

        r = simulator.simulate(jobs, gpus, make_policy(name), tables.world, seed=params.get("seed", 0),
                               progress=progress)
        if on_outcomes is not None:
            on_outcomes(name, r.jobs)
        jct = np.array([o.jct for o in r.jobs])
        qd = np.array([o.queueing_delay for o in r.jobs])
        out["policies"][name] = {"summary": r.summary(), "jct_quantiles_s": np.percentile(jct, q).tolist(),
                                 "queueing_quantiles_s": np.percentile(qd, q).tolist(),
                                 "utilisation": _downsample(r.util_t, r.util_pct)}
    if report:
        report(100.0, "done")
    return out


def simulation_run(experiment, reporter) -> dict:
    """Experiment runner (``webapp.experiments``): ``experiment.parameters`` -> result dict."""
    from .services import simulation_outcomes_store

    params = SimulationParams(data=experiment.parameters)
    params.is_valid(raise_exception=True)
    return run_simulations(dict(params.validated_data), reporter.report,
                           lambda policy, jobs: simulation_outcomes_store(experiment=experiment, policy=policy, jobs=jobs))


def register() -> None:
    from webapp.experiments import ExperimentKind, register_experiment_kind

    register_experiment_kind(ExperimentKind(kind="simulation", run=simulation_run,
                                            parameters_serializer=SimulationParams, queue="cpu"))
    from webapp.demo import register_demo_step

    from .demo import run_placement_demo

    register_demo_step("placement", run_placement_demo, order=20)
