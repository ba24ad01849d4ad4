"""Services of the federation engine: the runners of the ``federation-plan`` and
``federation-benchmark`` experiment kinds and the demo step."""
from __future__ import annotations

from typing import Any

import numpy as np

from federation.core import karmada, orchestrator
from federation.core.applications import get_application
from federation.core.model import Federation, FederationError, MemberCluster
from federation.core.network import federation_from_skyplane

CONTENTION_LABEL = "tandem.io/contention"


def federation_from_parameters(params: dict[str, Any]) -> Federation:
    """Build the federation of validated parameters: entered ``clusters`` and/or registered
    ``cluster_ids`` (region from the cluster, capacity = sum of its nodes' CPU cores, contention
    from its label ``tandem.io/contention``), links from ``rtt_ms``/``bandwidth_mbps`` if given,
    else from Skyplane by region. Raises :class:`FederationError`."""
    from django.db.models import Sum

    from webapp.models import Cluster

    members = [MemberCluster(c["name"], float(c["capacity_cores"]), float(c.get("contention", 0.0)), c.get("region", ""))
               for c in params.get("clusters") or []]
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
                raise FederationError(f"cluster {c.name!r}: label {CONTENTION_LABEL} must be a number 0-1") from None
            members.append(MemberCluster(c.name, float(c.cores or 0.0), rho, c.region))
    if params.get("rtt_ms") is not None or params.get("bandwidth_mbps") is not None:
        if params.get("rtt_ms") is None or params.get("bandwidth_mbps") is None:
            raise FederationError("give both rtt_ms and bandwidth_mbps, or neither (then Skyplane data by region)")
        try:
            return Federation(members, np.array(params["rtt_ms"], float), np.array(params["bandwidth_mbps"], float))
        except ValueError as err:  # ragged lists
            raise FederationError(f"matrices must be square lists of numbers: {err}") from None
    return federation_from_skyplane(members)


def federation_summary(fed: Federation) -> dict:
    return {"names": fed.names, "regions": [c.region for c in fed.clusters], "capacity_cores": [c.capacity_cores for c in fed.clusters],
            "contention": [c.contention for c in fed.clusters], "rtt_ms": fed.rtt_ms.round(3).tolist(),
            "bandwidth_mbps": fed.bandwidth_mbps.round(1).tolist()}


def federation_plan_compute(params: dict[str, Any]) -> dict:
    """Plan the application and every baseline; the result dict stored on the experiment."""
    fed = federation_from_parameters(params)
    app = get_application(params["application"])
    client = params.get("client") or None
    kw = dict(contention_weight=float(params.get("contention_weight", 1.0)), client=client)
    plan = orchestrator.plan(app, fed, method=params.get("method", "auto"), pinned=params.get("pinned") or None, **kw)
    base_plans, unschedulable = orchestrator.run_baselines(app, fed, **kw)
    baselines = {name: p.as_dict() for name, p in base_plans.items()}
    return {
        "application": app.name, "kind": app.kind, "source": app.source, "derivation": app.notes,
        "services": [{"name": s.name, "tier": s.tier, "replicas": s.replicas, "cpu_per_replica": s.cpu_per_replica, "work_ms": s.work_ms}
                     for s in app.services],
        "edges": [{"caller": e.caller, "callee": e.callee, "calls": e.calls, "payload_bytes": e.payload_bytes} for e in app.edges],
        "federation": federation_summary(fed), "client": client,
        "plan": plan.as_dict(), "baselines": baselines, "unschedulable_baselines": unschedulable,
        "baseline_descriptions": orchestrator.BASELINE_DESCRIPTIONS,
        "karmada_yaml": karmada.propagation_policy_yaml(plan, app=app),
    }


def federation_plan_run(experiment, reporter) -> dict:
    """Runner of ``federation-plan`` (deterministic, so a rerun gives the same result)."""
    reporter.report(5, "planning")
    result = federation_plan_compute(experiment.parameters)
    reporter.report(100, f"planned: expected {result['plan']['cost']['total_ms']:.1f} ms per request")
    return result


def federation_benchmark_run(experiment, reporter) -> dict:
    """Runner of ``federation-benchmark``: the degradation sweep and, if ``compare``, the
    orchestrator against every baseline, in the harness. Cancellation stops at the next progress
    report; the harness stops every process it started on the way out. A rerun starts over."""
    from federation.backends.scenarios import compare_plans, degradation_sweep

    p = experiment.parameters
    apps = list(p.get("applications") or ["hotelReservation"])
    n_cmp = len(apps) if p.get("compare", True) else 0
    share = 100.0 * 1 / (1 + n_cmp)
    rows = degradation_sweep(apps, latencies_ms=list(p.get("latencies_ms", [0, 20, 50])), contentions=list(p.get("contentions", [0, 0.5, 0.8])),
                             rate_rps=float(p.get("rate_rps", 4.0)), duration_s=float(p.get("duration_s", 2.0)),
                             progress=lambda pct, msg: reporter.report(pct * share / 100.0, msg))
    comparisons = []
    for k, a in enumerate(apps[:n_cmp]):
        base = share * (1 + k)
        comparisons.append(compare_plans(a, rate_rps=float(p.get("rate_rps", 4.0)), duration_s=float(p.get("duration_s", 2.0)),
                                         progress=lambda pct, msg, b=base: reporter.report(b + pct * share / 100.0, msg)))
    for c in comparisons:
        for m in c["measured"].values():
            m.pop("runs", None)
    return {"degradation": rows, "comparisons": comparisons, "summary": degradation_summary(rows)}


def degradation_summary(rows: list[dict]) -> dict:
    """Worst latency and contention degradation factor per application."""
    out: dict[str, dict] = {}
    for r in rows:
        d = out.setdefault(r["app"], {"kind": r["kind"], "max_latency_factor": 0.0, "max_contention_factor": 0.0})
        key = "max_latency_factor" if r["sweep"] == "latency" else "max_contention_factor"
        d[key] = max(d[key], float(r["factor"]))
    return out


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
