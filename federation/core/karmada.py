"""Export a plan as Karmada ``PropagationPolicy`` objects (``policy.karmada.io/v1alpha1``).

One policy per service, selecting its Deployment (``apps/v1``) and its Service (``v1``, the name
the callers resolve; Karmada propagates a non-workload resource to every selected cluster), with
``propagateDeps: true`` so the ConfigMaps and Secrets the Deployment references go with it
(Karmada API reference, PropagationPolicy v1alpha1). Placement:

* ``clusterAffinity.clusterNames`` = the clusters holding the service's replicas, and
  ``replicaScheduling`` = ``Divided`` / ``Weighted`` with a ``staticWeightList`` giving each of
  those clusters its replica count as weight. A cluster with no replicas is left out, never
  given ``weight: 0``: the CRD requires ``weight >= 1`` (karmada#6202). Karmada's Webster division
  (:mod:`federation.core.division`) reproduces the split exactly when the weights are the counts
  (a divisor method gives each cluster ``round(v_c / d)`` for a common divisor ``d``; with ``v``
  the counts, ``d = 1`` gives the counts themselves; tested).
* ``replicaScheduling: Duplicated`` instead for a service the plan copies whole into several
  clusters (``Plan.duplicated``, a chain per user region under locality routing): every cluster
  in ``clusterNames`` runs the Deployment's full ``replicas``.
* ``spreadConstraints`` when a divided service spans several clusters: ``spreadByField: cluster`` with
  ``minGroups = maxGroups =`` that number (valid under Karmada's admission rule that a field
  spread must include ``cluster``: ``ValidateSpreadConstraint``).
* ``clusterTolerations`` for a service kept on an unreachable member (re-planning without
  failover, karmada#1640): tolerate ``cluster.karmada.io/unreachable`` and
  ``cluster.karmada.io/not-ready`` ``NoExecute`` with no ``tolerationSeconds``, so Karmada's taint
  manager does not evict the replicas (its default toleration is 300 s).

Services called from another cluster are exported too (``ServiceExport`` in the callee's
clusters, ``ServiceImport`` in the callers', Kubernetes Multi-Cluster Services API
``multicluster.x-k8s.io/v1alpha1`` as Karmada's multi-cluster service guide uses), each with its
own policy. The ``ServiceExport`` templates are emitted with the policies; the ``ServiceImport``
needs the Service's ports, which the application model does not carry, so only its policy is.

:func:`validate_policy` checks a policy against the CRD's schema (``data/karmada-crd/``) and
Karmada's webhook rules for spread constraints.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path

import yaml

from .model import Application, FederationError
from .orchestrator import Plan

API_VERSION = "policy.karmada.io/v1alpha1"
MCS_API = "multicluster.x-k8s.io/v1alpha1"
SCHEMA_PATH = Path(__file__).resolve().parents[2] / "data" / "karmada-crd" / "propagationpolicy.schema.yaml"
UNREACHABLE_TAINTS = ("cluster.karmada.io/not-ready", "cluster.karmada.io/unreachable")


def _dns_name(s: str) -> str:
    n = re.sub(r"[^a-z0-9-]+", "-", s.lower()).strip("-")
    return n[:253].rstrip("-") or "x"


def _policy(plan: Plan, name: str, selectors: list[dict], placement: dict, namespace: str, deps: bool = False) -> dict:
    spec: dict = {"resourceSelectors": selectors}
    if deps:
        spec["propagateDeps"] = True
    spec["placement"] = placement
    return {"apiVersion": API_VERSION, "kind": "PropagationPolicy",
            "metadata": {"name": _dns_name(name), "namespace": namespace, "labels": {"tandem.io/planner": _dns_name(plan.method)}},
            "spec": spec}


def propagation_policies(plan: Plan, *, namespace: str = "default", app: Application | None = None,
                         unreachable: set[str] | frozenset[str] = frozenset()) -> list[dict]:
    """The policies as plain dicts: one per service (sorted by name), then, when ``app`` is
    given, one per ``ServiceExport`` / ``ServiceImport`` of a service called across clusters.
    ``unreachable``: members currently unreachable; a service with replicas there gets the
    tolerations above (the plan kept them, so failover was not requested). Raises
    :class:`FederationError` for a plan with a non-positive replica count."""
    out = []
    for svc in sorted(plan.replicas):
        reps = {c: int(n) for c, n in plan.replicas[svc].items()}
        if any(n < 0 for n in reps.values()):
            raise FederationError(f"negative replica count for {svc!r}: {reps}")
        reps = {c: n for c, n in reps.items() if n > 0}  # karmada#6202: never weight 0
        if not reps:
            raise FederationError(f"service {svc!r} has no replicas to export")
        clusters = sorted(reps)
        placement: dict = {"clusterAffinity": {"clusterNames": clusters}}
        kept = sorted(set(clusters) & set(unreachable))
        if kept:
            placement["clusterTolerations"] = [{"key": k, "operator": "Exists", "effect": "NoExecute"} for k in UNREACHABLE_TAINTS]
        if svc in plan.duplicated:
            if len(set(reps.values())) != 1:
                raise FederationError(f"duplicated service {svc!r} must have the same replicas in every cluster: {reps}")
            # a whole copy in every cluster of clusterAffinity: the Deployment's own replicas each
            placement["replicaScheduling"] = {"replicaSchedulingType": "Duplicated"}
        else:
            if len(clusters) > 1:
                placement["spreadConstraints"] = [{"spreadByField": "cluster", "minGroups": len(clusters), "maxGroups": len(clusters)}]
            placement["replicaScheduling"] = {
                "replicaSchedulingType": "Divided",
                "replicaDivisionPreference": "Weighted",
                "weightPreference": {"staticWeightList": [{"targetCluster": {"clusterNames": [c]}, "weight": reps[c]}
                                                          for c in clusters]},
            }
        selectors = [{"apiVersion": "apps/v1", "kind": "Deployment", "name": svc}, {"apiVersion": "v1", "kind": "Service", "name": svc}]
        out.append(_policy(plan, f"{plan.app_name}-{svc}", selectors, placement, namespace, deps=True))
    if app is not None:
        for svc, callers in sorted(cross_cluster_callers(plan, app).items()):
            serving = sorted(plan.replicas[svc])
            out.append(_policy(plan, f"{plan.app_name}-{svc}-export", [{"apiVersion": MCS_API, "kind": "ServiceExport", "name": svc}],
                               {"clusterAffinity": {"clusterNames": serving}}, namespace))
            out.append(_policy(plan, f"{plan.app_name}-{svc}-import", [{"apiVersion": MCS_API, "kind": "ServiceImport", "name": svc}],
                               {"clusterAffinity": {"clusterNames": callers}}, namespace))
    return out


def cross_cluster_callers(plan: Plan, app: Application) -> dict[str, list[str]]:
    """Callee service -> clusters that call it but hold none of its replicas (sorted)."""
    out: dict[str, set[str]] = {}
    for e in app.edges:
        where = set(plan.replicas.get(e.callee, {}))
        for c in plan.replicas.get(e.caller, {}):
            if c not in where:
                out.setdefault(e.callee, set()).add(c)
    return {k: sorted(v) for k, v in out.items()}


def mcs_resources(plan: Plan, app: Application, *, namespace: str = "default") -> list[dict]:
    """The ``ServiceExport`` templates the MCS export policies select (one per service called
    across clusters)."""
    return [{"apiVersion": MCS_API, "kind": "ServiceExport", "metadata": {"name": svc, "namespace": namespace}}
            for svc in sorted(cross_cluster_callers(plan, app))]


def propagation_policy_yaml(plan: Plan, *, namespace: str = "default", app: Application | None = None,
                            unreachable: set[str] | frozenset[str] = frozenset()) -> str:
    """Multi-document YAML (PyYAML ``safe_dump_all``): the ``ServiceExport`` templates (when
    ``app`` is given), then :func:`propagation_policies`."""
    docs = (mcs_resources(plan, app, namespace=namespace) if app is not None else []) + \
        propagation_policies(plan, namespace=namespace, app=app, unreachable=unreachable)
    return yaml.safe_dump_all(docs, sort_keys=False)


@functools.cache
def _validator():
    import jsonschema

    schema = yaml.safe_load(SCHEMA_PATH.read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def validate_policy(doc: dict) -> list[str]:
    """Problems with one PropagationPolicy (empty list: valid): JSON-Schema errors against the
    schema transcribed from Karmada's CRD (``data/karmada-crd/``, each as ``path: message``),
    then Karmada's admission rules for ``spreadConstraints`` (``ValidateSpreadConstraint``,
    ``pkg/util/validation/validation.go``): ``spreadByField`` and ``spreadByLabel`` never
    together, ``minGroups``/``maxGroups`` not negative, ``maxGroups >= minGroups`` when set, and
    a field spread must include ``spreadByField: cluster``."""
    errs = [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in _validator().iter_errors(doc)]
    sc = (((doc.get("spec") or {}).get("placement") or {}).get("spreadConstraints")) or []
    fields = set()
    for i, c in enumerate(sc if isinstance(sc, list) else []):
        if not isinstance(c, dict):
            continue
        if c.get("spreadByField") and c.get("spreadByLabel"):
            errs.append(f"spreadConstraints/{i}: spreadByLabel should not co-exist with spreadByField")
        lo, hi = c.get("minGroups", 0) or 0, c.get("maxGroups", 0) or 0
        if isinstance(lo, int) and isinstance(hi, int):
            if lo < 0 or hi < 0:
                errs.append(f"spreadConstraints/{i}: minGroups and maxGroups must not be negative")
            if hi > 0 and hi < lo:
                errs.append(f"spreadConstraints/{i}: maxGroups({hi}) lower than minGroups({lo}) is not allowed")
        if c.get("spreadByField"):
            fields.add(c["spreadByField"])
    if fields and "cluster" not in fields:
        errs.append("spreadConstraints: a spreadByField constraint needs spreadByField: cluster as well")
    return errs
