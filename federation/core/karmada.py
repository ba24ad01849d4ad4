"""Export a plan as Karmada ``PropagationPolicy`` objects (``policy.karmada.io/v1alpha1``).

One policy per service, selecting its Deployment (``apps/v1``) by name, with
``placement.clusterAffinity.clusterNames`` = the clusters holding its replicas and
``placement.replicaScheduling`` = ``Divided`` / ``Weighted`` with a ``staticWeightList`` giving
each cluster its replica count as weight, so Karmada reproduces the split exactly
(Karmada API reference, PropagationPolicy v1alpha1, ``ReplicaSchedulingStrategy``).
"""
from __future__ import annotations

import re

import yaml

from .orchestrator import Plan

API_VERSION = "policy.karmada.io/v1alpha1"


def _dns_name(s: str) -> str:
    n = re.sub(r"[^a-z0-9-]+", "-", s.lower()).strip("-")
    return n[:253] or "x"


def propagation_policies(plan: Plan, *, namespace: str = "default") -> list[dict]:
    """The policies as plain dicts (one per service, sorted by service name)."""
    out = []
    for svc in sorted(plan.replicas):
        reps = plan.replicas[svc]
        clusters = sorted(reps)
        out.append({
            "apiVersion": API_VERSION,
            "kind": "PropagationPolicy",
            "metadata": {"name": _dns_name(f"{plan.app_name}-{svc}"), "namespace": namespace,
                         "labels": {"tandem.io/planner": _dns_name(plan.method)}},
            "spec": {
                "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": svc}],
                "placement": {
                    "clusterAffinity": {"clusterNames": clusters},
                    "replicaScheduling": {
                        "replicaSchedulingType": "Divided",
                        "replicaDivisionPreference": "Weighted",
                        "weightPreference": {"staticWeightList": [
                            {"targetCluster": {"clusterNames": [c]}, "weight": int(reps[c])} for c in clusters]},
                    },
                },
            },
        })
    return out


def propagation_policy_yaml(plan: Plan, *, namespace: str = "default") -> str:
    """Multi-document YAML of :func:`propagation_policies` (PyYAML ``safe_dump_all``)."""
    return yaml.safe_dump_all(propagation_policies(plan, namespace=namespace), sort_keys=False)
