"""The "simulation" experiment kind: replay a trace under one or more policies on a cluster.

Parameters (validated by :class:`SimulationParams`): ``trace`` (``gavel:<vc>``, ``philly``,
``tiresias60``), ``policies`` (names from :data:`placement.core.policies.POLICIES`), ``cluster``
("NxG" nodes x GPUs per node, V100 16 GiB; empty = shaped like the trace; at most 10,000 nodes,
16 GPUs per node, 100,000 GPUs, and enough GPUs for the trace's largest job), ``seed`` (0 to
2**31 - 1), ``limit`` (first N jobs; 0 = all; at most 1,000,000). Deterministic for given
parameters, so a redelivered task stores the same result.
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Callable

from django.conf import settings
from rest_framework import serializers

from . import pipeline
from .core import setup
from .core.policies import POLICIES
from .pipeline import TIRESIAS_TO_TORCHVISION, predicted_profile  # noqa: F401  (re-exported)


#: Largest ``seed``: the signed 32-bit range every engine's generators accept (numpy, TVM, torch),
#: as weight learning bounds its own.
MAX_SEED = 2**31 - 1
#: Largest ``limit``: ten times the largest shipped trace (Philly, 82,248 jobs); a larger one would
#: mean "all" and is refused rather than stored as a number nothing can use.
MAX_TRACE_JOBS = 1_000_000


class SimulationParams(serializers.Serializer):
    trace = serializers.CharField(default="gavel:2869ce")
    policies = serializers.ListField(
        child=serializers.ChoiceField(choices=list(POLICIES), error_messages={
            "invalid_choice": f'"{{input}}" is not a policy; known: {", ".join(POLICIES)}'}),
        min_length=1, default=lambda: ["fifo", "gandiva", "horus"], error_messages={
            "not_a_list": 'policies must be a JSON list of names, e.g. ["fifo", "horus"], not {input_type} '
                          '(the simulate command takes a comma string; the API takes a list)'})
    cluster = serializers.RegexField(r"^(\d+x\d+)?$", required=False, allow_blank=True, default="", error_messages={
        "invalid": "cluster must be NxG (nodes x GPUs per node, e.g. 16x8), or empty for a cluster shaped like the trace"})
    seed = serializers.IntegerField(min_value=0, max_value=MAX_SEED, default=0)
    limit = serializers.IntegerField(min_value=0, max_value=MAX_TRACE_JOBS, default=0,
                                     help_text="replay the first N jobs of the trace; 0 = all")

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


def run_simulations(params: dict[str, Any], report: Callable[[float, str], None] | None = None,
                    on_outcomes: Callable[[str, list], None] | None = None, **kw) -> dict:
    """:func:`placement.pipeline.run` on ``settings.DATA_DIR`` without recording (the simulate
    command and the demo)."""
    return pipeline.run(params, report=report, on_outcomes=on_outcomes, data_dir=Path(settings.DATA_DIR), **kw)


def simulation_run(experiment, reporter) -> dict:
    """Experiment runner (``webapp.experiments``): ``experiment.parameters`` -> result dict."""
    from .services import simulation_outcomes_store

    params = SimulationParams(data=experiment.parameters)
    params.is_valid(raise_exception=True)
    from webapp.experiments import run_pipeline

    def outcomes(policy, jobs):
        simulation_outcomes_store(experiment=experiment, policy=policy, jobs=jobs)

    return run_pipeline(experiment, reporter, functools.partial(pipeline.run, on_outcomes=outcomes,
                                                                data_dir=Path(settings.DATA_DIR)),
                        params=dict(params.validated_data))


def _hours(s: float) -> str:
    return f"{s / 3600:.1f} h" if s >= 3600 else f"{s / 60:.1f} min"


def simulation_headline(experiment):
    """Horus's (else Horus+'s) mean JCT against the strongest other policy of the run (lowest
    mean JCT among fifo, sjf, tiresias, gandiva, random, horus+ where present), with the
    world's measured share of Horus's co-located time; ``None`` without Horus or a baseline."""
    from webapp.experiments import Headline

    pols = (experiment.result or {}).get("policies") or {}
    ours = "horus" if "horus" in pols else "horus+" if "horus+" in pols else None
    if ours is None:
        return None
    others = {k: v["summary"]["mean_jct_s"] for k, v in pols.items() if k not in (ours, "horus", "horus+")}
    if not others:
        return None
    base = min(others, key=others.get)
    mine = pols[ours]["summary"]["mean_jct_s"]
    world = pols[ours]["summary"].get("world") or {}
    measured = world.get("measured_share", 0.0) + world.get("measured_1gpu_share", 0.0)
    note = (f"{experiment.parameters.get('trace')}; strongest of {', '.join(sorted(others))}; "
            f"world: {100 * measured:.0f}% of co-located time from measured pairs")
    return Headline(engine="placement", metric=f"mean JCT ({ours})", ours=_hours(mine), baseline_name=base,
                    baseline=_hours(others[base]), ratio=mine / others[base] if others[base] > 0 else None,
                    better="lower", note=note)


def register() -> None:
    from webapp.experiments import ExperimentKind, register_experiment_kind

    from django.urls import reverse

    register_experiment_kind(ExperimentKind(
        kind="simulation", run=simulation_run, parameters_serializer=SimulationParams, queue="cpu",
        headline=simulation_headline, page=lambda e: reverse("placement:simulation", args=[e.pk])))
    from webapp.demo import register_demo_step

    from .demo import run_placement_demo

    register_demo_step("placement", run_placement_demo, order=20)
