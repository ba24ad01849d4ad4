"""The federation experiment kinds (Django side of the engine plug, :mod:`webapp.plug`).

* ``federation-plan``: :class:`FederationPlanParameters`; runner :func:`plan_run` resolves
  registered clusters (``cluster_ids``) to entered members and calls
  :func:`federation.pipeline.run` with ``task="plan"``. Headline: the plan's expected latency
  against the baseline a user would pick first (nearest-fit; when it cannot place the
  application, the best baseline that fits the clusters' capacity).
* ``federation-benchmark``: :class:`FederationBenchmarkParameters`; runner
  :func:`benchmark_run` (``task="benchmark"``). Headline: measured p95 of the orchestrator's
  plan against the best baseline that fits capacity.
* the demo step :func:`federation_demo`.
"""
from __future__ import annotations

from typing import Any

from rest_framework import serializers

from federation import pipeline
from federation.core.applications import get_application, known_applications
from federation.core.model import Federation, FederationError

CONTENTION_LABEL = "tandem.io/contention"
SCENARIO_NAMES = ["fits-near", "capacity", "pinned-data", "contention", "users-2-regions", "spread", "users-geo", "capacity-chain"]
PAGE = "/federation/"


def resolve_clusters(params: dict[str, Any]) -> dict[str, Any]:
    """``params`` with registered clusters (``cluster_ids``) appended to ``clusters`` as entered
    members (region from the cluster, capacity = sum of its nodes' CPU cores, contention from
    its label ``tandem.io/contention``), ``cluster_ids`` dropped. Raises
    :class:`FederationError` for an unknown id."""
    from django.db.models import Sum

    from webapp.models import Cluster

    out = dict(params)
    clusters = [dict(c) for c in params.get("clusters") or []]
    ids = params.get("cluster_ids") or []
    if ids:
        found = {c.pk: c for c in Cluster.objects.filter(pk__in=ids).annotate(cores=Sum("nodes__cpu_cores"))}
        missing = [i for i in ids if i not in found]
        if missing:
            raise FederationError(f"no registered cluster with id {missing}")
        for i in ids:
            c = found[i]
            try:
                rho = float((c.labels or {}).get(CONTENTION_LABEL, 0.0))
            except (TypeError, ValueError):
                raise FederationError(f"cluster {c.name!r}: label {CONTENTION_LABEL} must be a number in [0, 1)") from None
            clusters.append({"name": c.name, "capacity_cores": float(c.cores or 0.0), "contention": rho, "region": c.region})
    out["clusters"] = clusters
    out.pop("cluster_ids", None)
    return out


def federation_from_parameters(params: dict[str, Any]) -> Federation:
    """The federation of validated parameters (entered and registered members). Raises
    :class:`FederationError`."""
    return pipeline.federation_from_clusters(resolve_clusters(params))


MAX_CLUSTERS = 200


class MemberClusterSerializer(serializers.Serializer):
    """A member cluster entered by hand: name, Skyplane region (optional), cores, contention."""

    name = serializers.CharField(max_length=128)
    region = serializers.CharField(max_length=64, required=False, allow_blank=True, default="")
    capacity_cores = serializers.FloatField(min_value=0.001, max_value=1e6)
    contention = serializers.FloatField(min_value=0.0, max_value=0.99, default=0.0)


class FederationParamsMixin(serializers.Serializer):
    """Member clusters (entered, or registered clusters by id) and optional entered matrices;
    without matrices the links come from the Skyplane measurements by region."""

    clusters = MemberClusterSerializer(many=True, required=False)
    cluster_ids = serializers.ListField(child=serializers.IntegerField(min_value=1), required=False, max_length=MAX_CLUSTERS)
    rtt_ms = serializers.ListField(child=serializers.ListField(child=serializers.FloatField(min_value=0)), required=False)
    bandwidth_mbps = serializers.ListField(child=serializers.ListField(child=serializers.FloatField(min_value=1e-6)), required=False)
    client = serializers.CharField(max_length=128, required=False, allow_blank=True, default="")
    users = serializers.DictField(child=serializers.FloatField(min_value=0.0), required=False, default=dict,
                                  help_text="users in several regions: member cluster -> share of the requests (instead of client)")

    def validate(self, attrs):
        from federation.core.model import FederationError

        if not attrs.get("clusters") and not attrs.get("cluster_ids"):
            raise serializers.ValidationError({"clusters": "give member clusters (clusters) or registered cluster ids (cluster_ids)"})
        if len(attrs.get("clusters") or []) > MAX_CLUSTERS:
            raise serializers.ValidationError({"clusters": f"at most {MAX_CLUSTERS} member clusters"})
        attrs["clusters"] = [dict(c) for c in attrs.get("clusters") or []]
        try:
            fed = federation_from_parameters(attrs)
            if attrs.get("client"):
                fed.index(attrs["client"])
            if attrs.get("users"):
                from federation.core.cost import client_shares

                for c in client_shares(attrs["users"]):
                    fed.index(c)
        except FederationError as err:
            raise serializers.ValidationError({"non_field_errors": [str(err)]}) from None
        return attrs


class FederationPlanParameters(FederationParamsMixin):
    """Parameters of a ``federation-plan`` experiment."""

    application = serializers.CharField(max_length=128, help_text=f"built-in: {', '.join(known_applications())}; "
                                        "with manifests: a name for the application")
    manifests = serializers.CharField(required=False, allow_blank=True, default="", max_length=2_000_000, trim_whitespace=False,
                                      help_text="docker-compose and/or Kubernetes YAML (multi-document) of your application")
    entry = serializers.CharField(required=False, allow_blank=True, default="", max_length=128,
                                  help_text="with manifests: the service user requests hit")
    method = serializers.ChoiceField(choices=["auto", "milp", "greedy"], default="auto")
    routing = serializers.ChoiceField(choices=["proportional", "locality"], default="proportional",
                                      help_text="which replica a call or a user reaches: in proportion to replica counts, or the "
                                                "caller's own cluster's (else the nearest); with locality the plan may copy services "
                                                "into several clusters")
    contention_weight = serializers.FloatField(min_value=0.0, max_value=100.0, default=1.0)
    pinned = serializers.DictField(child=serializers.CharField(max_length=128), required=False, default=dict)
    min_clusters = serializers.DictField(child=serializers.IntegerField(min_value=1, max_value=MAX_CLUSTERS), required=False, default=dict,
                                         help_text="service -> member clusters its replicas must span")
    previous_replicas = serializers.DictField(child=serializers.DictField(child=serializers.IntegerField(min_value=0)), required=False,
                                              default=dict, help_text="the plan in force (service -> {cluster: replicas}), to re-plan from")
    unreachable = serializers.ListField(child=serializers.CharField(max_length=128), required=False, default=list,
                                        help_text="members whose health probes fail")
    failover = serializers.BooleanField(default=False, help_text="move replicas off unreachable members (default: keep them)")

    def validate(self, attrs):
        attrs = super().validate(attrs)
        if not attrs.get("manifests") and attrs["application"] not in known_applications():
            raise serializers.ValidationError({"application": f"unknown application {attrs['application']!r}; built-in: "
                                               f"{', '.join(known_applications())}, or give manifests and entry"})
        try:
            app = pipeline.application_of(attrs)
        except FederationError as err:
            raise serializers.ValidationError({"manifests" if attrs.get("manifests") else "application": str(err)}) from None
        for key in ("pinned", "min_clusters", "previous_replicas"):
            bad = [s for s in attrs.get(key, {}) if s not in app.names]
            if bad:
                raise serializers.ValidationError({key: f"unknown services {bad} in {app.name}"})
        fed = federation_from_parameters(attrs)
        try:
            for c in list(attrs.get("unreachable", [])) + list(attrs.get("pinned", {}).values()):
                fed.index(c)
            for reps in attrs.get("previous_replicas", {}).values():
                for c in reps:
                    fed.index(c)
        except FederationError as err:
            raise serializers.ValidationError({"non_field_errors": [str(err)]}) from None
        prev = attrs.get("previous_replicas") or {}
        if prev and (set(app.names) - set(prev) or any(not r or not any(r.values()) for r in prev.values())):
            raise serializers.ValidationError({"previous_replicas": f"give every service of {app.name} with at least one replica; "
                                               f"missing: {sorted(set(app.names) - set(prev))}"})
        if attrs.get("unreachable") and not attrs.get("previous_replicas"):
            raise serializers.ValidationError({"unreachable": "give previous_replicas (the plan in force) to re-plan around unreachable members"})
        return attrs


class FederationBenchmarkParameters(serializers.Serializer):
    """Parameters of a ``federation-benchmark`` experiment (harness runs on the worker's CPUs)."""

    applications = serializers.ListField(child=serializers.ChoiceField(choices=known_applications()), min_length=1, max_length=5,
                                         default=lambda: ["hotelReservation", "inference"])
    latencies_ms = serializers.ListField(child=serializers.FloatField(min_value=0.0, max_value=500.0), min_length=1, max_length=8,
                                         default=lambda: [0.0, 20.0, 50.0])
    contentions = serializers.ListField(child=serializers.FloatField(min_value=0.0, max_value=0.95), min_length=1, max_length=6,
                                        default=lambda: [0.0, 0.5, 0.8])
    rate_rps = serializers.FloatField(min_value=0.5, max_value=50.0, default=4.0)
    duration_s = serializers.FloatField(min_value=0.5, max_value=30.0, default=2.0)
    compare = serializers.BooleanField(default=True, help_text="also run the orchestrator's plan against every baseline")
    scenarios = serializers.ListField(child=serializers.ChoiceField(choices=SCENARIO_NAMES), required=False, default=list, max_length=10,
                                      help_text="split-forcing scenarios to run as well: " + ", ".join(SCENARIO_NAMES))
    rounds = serializers.IntegerField(min_value=1, max_value=10, default=3, help_text="runs of each scenario x plan")


def plan_run(experiment, reporter) -> dict:
    """Runner of ``federation-plan`` (deterministic, so a rerun gives the same result)."""
    from webapp.experiments import run_pipeline

    return run_pipeline(experiment, reporter, pipeline.run, params={**resolve_clusters(experiment.parameters), "task": "plan"})


def benchmark_run(experiment, reporter) -> dict:
    """Runner of ``federation-benchmark``: the degradation sweep and, if ``compare``, the
    orchestrator against every baseline, in the harness. Cancellation stops at the next progress
    report; the harness stops every process it started on the way out. A rerun starts over, and
    replaces the rows an interrupted run recorded."""
    from webapp.experiments import run_pipeline

    return run_pipeline(experiment, reporter, pipeline.run, params={**experiment.parameters, "task": "benchmark"},
                        restart_tables=("degradation", "comparison", "scenario"))


def _user_baseline(result: dict, key: str) -> tuple[str, float] | None:
    """(name, value) of the baseline a user would pick: nearest-fit when it could place the
    application, else the lowest of those that fit capacity."""
    base = result.get("baselines") or {}
    fits = {n: b for n, b in base.items() if not any(b["cost"].get("overload_cores") or [])}
    if "nearest-fit" in fits:
        return "nearest-fit", fits["nearest-fit"]["cost"][key]
    if not fits:
        return None
    n = min(fits, key=lambda k: fits[k]["cost"][key])
    return n, fits[n]["cost"][key]


def plan_headline(experiment):
    """The plan's expected latency against the baseline a user would pick (see module doc)."""
    from webapp.experiments import Headline

    r = experiment.result or {}
    pick = _user_baseline(r, "total_ms")
    if not r.get("plan") or pick is None:
        return None
    ours = r["plan"]["cost"]["total_ms"]
    return Headline("federation", f"expected latency per request, {r['application']} (model)", f"{ours:.1f} ms", pick[0],
                    f"{pick[1]:.1f} ms", ratio=ours / pick[1] if pick[1] else None,
                    note=r.get("baseline_descriptions", {}).get(pick[0], ""))


def benchmark_headline(experiment):
    """Measured p95 of the orchestrator's plan against the best baseline that fits capacity."""
    from webapp.experiments import Headline

    comps = (experiment.result or {}).get("comparisons") or []
    if not comps:
        return None
    c = comps[0]
    meas = c["measured"]
    fits = [m for m in meas if m != "orchestrator" and not any(c["plans"][m]["cost"].get("overload_cores") or [])]
    if "orchestrator" not in meas or not fits:
        return None
    best = min(fits, key=lambda m: meas[m]["p95_ms"])
    ours, theirs = meas["orchestrator"]["p95_ms"], meas[best]["p95_ms"]
    return Headline("federation", f"measured p95, {c['app']} in the harness", f"{ours:.1f} ms", best, f"{theirs:.1f} ms",
                    ratio=ours / theirs if theirs else None, note="best baseline that fits the clusters' capacity")


def page(experiment) -> str:
    return PAGE


DEMO_CLUSTERS = [
    {"name": "eu-west", "region": "aws:eu-west-1", "capacity_cores": 1.0, "contention": 0.3},
    {"name": "westeurope", "region": "azure:westeurope", "capacity_cores": 4.0, "contention": 0.1},
    {"name": "us-east", "region": "aws:us-east-1", "capacity_cores": 16.0, "contention": 0.0},
]


DEMO_BENCHMARK = {"applications": ["hotelReservation"], "latencies_ms": [0.0, 50.0], "contentions": [0.0, 0.5],
                  "rate_rps": 4.0, "duration_s": 1.0, "compare": True}


def federation_demo(*, owner, stdout) -> None:
    """Demo step: plan DeathStarBench hotelReservation over three member clusters with Skyplane
    inter-region latencies (a ``federation-plan`` experiment run here), run the plan in the
    harness for 2 s and print measured latency, then run a small ``federation-benchmark``
    experiment (:data:`DEMO_BENCHMARK`, about 15 s) owned by ``owner`` so /federation/ shows
    the degradation curves and the orchestrator-vs-baselines comparison."""
    from federation.backends.harness import run_scenario
    from webapp.services import experiment_create, experiment_run

    params = {"application": "hotelReservation", "clusters": DEMO_CLUSTERS, "client": "eu-west"}
    exp = experiment_create(owner=owner, kind="federation-plan", parameters=params, name="demo: hotelReservation over 3 regions")
    exp = experiment_run(experiment_id=exp.pk)
    if exp.state != "succeeded":
        stdout.write(f"federation plan failed: {exp.error.splitlines()[0] if exp.error else exp.state}\n")
        return
    res = exp.result
    stdout.write(f"federation: planned {res['application']} over {', '.join(res['federation']['names'])}: expected "
                 f"{res['plan']['cost']['total_ms']:.1f} ms/request (baselines: "
                 + ", ".join(f"{k} {v['cost']['total_ms']:.1f}" for k, v in res["baselines"].items()) + ")\n")
    fed = federation_from_parameters(params)
    r = run_scenario(get_application("hotelReservation"), fed, res["plan"]["replicas"], client="eu-west", rate_rps=4, duration_s=2.0)
    stdout.write(f"federation: harness ran the plan for 2 s: p50 {r.p50_ms:.1f} ms, p95 {r.p95_ms:.1f} ms, {r.ok} requests, "
                 f"{r.errors} errors\n")
    bench = experiment_create(owner=owner, kind="federation-benchmark", parameters=DEMO_BENCHMARK,
                              name="demo: hotelReservation degradation sweep and plan comparison")
    bench = experiment_run(experiment_id=bench.pk)
    if bench.state != "succeeded":
        stdout.write(f"federation benchmark failed: {bench.error.splitlines()[0] if bench.error else bench.state}\n")
        return
    s = bench.result["summary"]["hotelReservation"]
    p95 = {m: v["p95_ms"] for m, v in bench.result["comparisons"][0]["measured"].items()}
    stdout.write(f"federation: benchmark experiment {bench.pk}: worst latency factor x{s['max_latency_factor']:.2f}, worst contention "
                 f"factor x{s['max_contention_factor']:.2f}; p95 " + ", ".join(f"{m} {v:.1f} ms" for m, v in p95.items())
                 + "; see /federation/\n")
