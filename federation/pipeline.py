"""The federation engine's Django-free entry point (the engine plug, :mod:`webapp.plug`).

``run(params, *, report, record, resume=None) -> dict`` with ``params["task"]``:

* ``"plan"`` (default): plan ``params["application"]`` (a built-in one, or derived from
  ``manifests`` text with entry service ``entry``, :func:`application_of`; the result's
  ``graph`` shows the derived call graph, inferred edges marked) on the member clusters ``params["clusters"]``
  (``[{name, capacity_cores, contention, region}]``; registered clusters are resolved to this
  form by the experiment kind) with links from ``rtt_ms`` / ``bandwidth_mbps`` or Skyplane by
  region; optional ``client`` (or ``users``: cluster -> share, users in several regions), ``method``, ``contention_weight``, ``pinned`` (service ->
  cluster), ``min_clusters`` (service -> clusters it must span), ``routing`` (``proportional``,
  default, or ``locality``: calls and users prefer a replica in their own cluster, else the
  nearest; the plan may then copy services into several clusters, :mod:`federation.core.cost`). With ``previous_replicas``
  (service -> {cluster: n}, a plan in force) and ``unreachable`` (members whose probes fail) it
  re-plans around them (:func:`federation.core.health.replan`): their replicas stay unless
  ``failover`` is true; the result carries the plan diff. Returns the plan, every baseline that
  can place the application (and why the others cannot), their descriptions and the Karmada
  YAML. Records nothing (deterministic: a rerun gives the same result).
* ``"benchmark"``: the degradation sweep and, with ``compare``, the orchestrator against every
  baseline in the harness (:mod:`federation.backends.scenarios`); records each sweep row as
  ``degradation`` and each comparison as ``comparison``; with ``scenarios`` (names) also those
  split-forcing scenarios (``rounds`` each). A rerun starts over (measurements are
  not resumable: the machine's state changed).
* ``"scenarios"``: the split-forcing scenarios (``scenarios``: names, default all; ``rounds``,
  ``duration_s``, ``rate_rps``), each recorded as ``scenario``.

Raises :class:`federation.core.model.FederationError` for parameters the planners reject.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from federation.core import karmada, orchestrator
from federation.core.applications import application_from_text, derived_graph, get_application
from federation.core.model import Federation, FederationError, MemberCluster
from federation.core.network import federation_from_skyplane
from webapp.plug import Record, Report, no_report

TASKS = ("plan", "benchmark", "scenarios")


def federation_from_clusters(params: Mapping[str, Any]) -> Federation:
    """The federation of ``params["clusters"]`` (entered members), links from ``rtt_ms`` and
    ``bandwidth_mbps`` (both or neither) or else Skyplane by region. Raises
    :class:`FederationError`."""
    members = [MemberCluster(c["name"], float(c["capacity_cores"]), float(c.get("contention", 0.0)), c.get("region", ""))
               for c in params.get("clusters") or []]
    if not members:
        raise FederationError("no member clusters")
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


def application_of(params: Mapping[str, Any]):
    """The application of ``params``: derived from ``manifests`` (docker-compose and/or
    Kubernetes YAML text, entry service ``entry``, named ``application``) when given, else the
    built-in one named ``application``. Raises :class:`FederationError`."""
    if params.get("manifests"):
        if not params.get("entry"):
            raise FederationError("manifests need the entry service (entry)")
        return application_from_text(params["manifests"], params["entry"], name=params.get("application") or "")
    return get_application(params["application"])


def plan(params: Mapping[str, Any], report: Report = no_report) -> dict:
    """The ``"plan"`` task (module docstring)."""
    from federation.core.health import replan

    fed = federation_from_clusters(params)
    app = application_of(params)
    client = dict(params["users"]) if params.get("users") else (params.get("client") or None)
    kw = dict(contention_weight=float(params.get("contention_weight", 1.0)), client=client,
              routing=params.get("routing") or "proportional")
    cons = {"pinned": dict(params.get("pinned") or {}) or None, "min_clusters": dict(params.get("min_clusters") or {}) or None}
    report(5, "planning")
    unreachable = set(params.get("unreachable") or [])
    diff = None
    if params.get("previous_replicas"):
        prev = orchestrator.Plan(app.name, "previous", {s: {c: int(n) for c, n in r.items()} for s, r in params["previous_replicas"].items()},
                                 orchestrator.plan_all_in_one(app, fed, **kw).cost)
        missing = [s for s in app.names if s not in prev.replicas]
        if missing:
            raise FederationError(f"previous_replicas lacks services {missing}")
        for r in prev.replicas.values():
            for c in r:
                fed.index(c)
        p, diff = replan(app, fed, prev, unreachable, failover=bool(params.get("failover")), method=params.get("method", "auto"),
                         pinned=cons["pinned"], min_clusters=cons["min_clusters"], **kw)
    else:
        if unreachable:
            raise FederationError("unreachable members need previous_replicas (the plan in force) to re-plan around")
        p = orchestrator.plan(app, fed, method=params.get("method", "auto"), **cons, **kw)
    base_plans, unschedulable = orchestrator.run_baselines(app, fed, **cons, **kw)
    kept_unreachable = unreachable if not params.get("failover") else set()
    out = {
        "application": app.name, "kind": app.kind, "source": app.source, "derivation": app.notes, "graph": derived_graph(app),
        "services": [{"name": s.name, "tier": s.tier, "replicas": s.replicas, "cpu_per_replica": s.cpu_per_replica, "work_ms": s.work_ms}
                     for s in app.services],
        "edges": [{"caller": e.caller, "callee": e.callee, "calls": e.calls, "payload_bytes": e.payload_bytes} for e in app.edges],
        "federation": federation_summary(fed), "client": client, "routing": kw["routing"],
        "plan": p.as_dict(), "baselines": {n: b.as_dict() for n, b in base_plans.items()}, "unschedulable_baselines": unschedulable,
        "baseline_descriptions": dict(orchestrator.BASELINE_DESCRIPTIONS),
        "karmada_yaml": karmada.propagation_policy_yaml(p, app=app, unreachable=kept_unreachable),
    }
    if diff is not None:
        out.update({"unreachable": sorted(unreachable), "failover": bool(params.get("failover")), "diff": diff})
    report(100, f"planned: expected {p.cost.total_ms:.1f} ms per request")
    return out


def degradation_summary(rows: list[dict]) -> dict:
    """Worst latency and contention degradation factor per application, and whether every
    contention target was reached."""
    out: dict[str, dict] = {}
    for r in rows:
        d = out.setdefault(r["app"], {"kind": r["kind"], "max_latency_factor": 0.0, "max_contention_factor": 0.0,
                                      "contention_reached": True})
        key = "max_latency_factor" if r["sweep"] == "latency" else "max_contention_factor"
        d[key] = max(d[key], float(r["factor"]))
        if r.get("reached") is False:
            d["contention_reached"] = False
    return out


def benchmark(params: Mapping[str, Any], report: Report = no_report, record: Record | None = None) -> dict:
    """The ``"benchmark"`` task (module docstring)."""
    from federation.backends.scenarios import compare_plans, degradation_sweep

    apps = list(params.get("applications") or ["hotelReservation"])
    n_cmp = len(apps) if params.get("compare", True) else 0
    share = 100.0 / (1 + n_cmp)
    rate, dur = float(params.get("rate_rps", 4.0)), float(params.get("duration_s", 2.0))
    rows = degradation_sweep(apps, latencies_ms=list(params.get("latencies_ms", [0, 20, 50])),
                             contentions=list(params.get("contentions", [0, 0.5, 0.8])), rate_rps=rate, duration_s=dur,
                             progress=lambda pct, msg: report(pct * share / 100.0, msg))
    if record:
        record("degradation", [_jsonable(r) for r in rows])
    comparisons = []
    for k, a in enumerate(apps[:n_cmp]):
        base = share * (1 + k)
        c = compare_plans(a, rate_rps=rate, duration_s=dur, progress=lambda pct, msg, b=base: report(b + pct * share / 100.0, msg))
        for m in c["measured"].values():
            m.pop("runs", None)
        comparisons.append(c)
        if record:
            record("comparison", [_jsonable(c)])
    out = {"degradation": rows, "comparisons": comparisons, "summary": degradation_summary(rows)}
    if params.get("scenarios"):
        out["scenarios"] = scenarios({"scenarios": list(params["scenarios"]), "rounds": int(params.get("rounds", 3)), "rate_rps": rate,
                                      "duration_s": dur}, report, record)["scenarios"]
        for c in out["scenarios"]:
            for m in c["measured"].values():
                m.pop("p95_runs", None)
    return out


def scenarios(params: Mapping[str, Any], report: Report = no_report, record: Record | None = None) -> dict:
    """The ``"scenarios"`` task (module docstring)."""
    from federation.backends.scenarios import compare_scenario, split_scenarios

    scns = split_scenarios(params.get("application", "hotelReservation"))
    want = params.get("scenarios") or [s.name for s in scns]
    known = [s.name for s in scns]
    bad = [w for w in want if w not in known]
    if bad:
        raise FederationError(f"unknown scenarios {bad}; known: {known}")
    out = []
    todo = [s for s in scns if s.name in want]
    for k, scn in enumerate(todo):
        r = compare_scenario(scn, rounds=int(params.get("rounds", 3)), rate_rps=float(params.get("rate_rps", 4.0)),
                             duration_s=float(params.get("duration_s", 2.0)),
                             progress=lambda pct, msg, k=k: report(100.0 * (k + pct / 100.0) / len(todo), msg))
        out.append(r)
        if record:
            record("scenario", [_jsonable(r)])
    return {"scenarios": out}


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    return x


def run(params: Mapping[str, Any], *, report: Report, record: Record, resume: Mapping[str, list[dict]] | None = None) -> dict:
    """Dispatch on ``params["task"]`` (``plan``, ``benchmark``, ``scenarios``; default ``plan``).
    ``resume`` is accepted and ignored: a plan is deterministic and measurements restart.
    Raises :class:`FederationError` for an unknown task."""
    task = params.get("task", "plan")
    if task == "plan":
        return plan(params, report)
    if task == "benchmark":
        return benchmark(params, report, record)
    if task == "scenarios":
        return scenarios(params, report, record)
    raise FederationError(f"unknown federation task {task!r}; use one of {', '.join(TASKS)}")
