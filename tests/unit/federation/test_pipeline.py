"""The engine plug: federation.pipeline.run (Django-free) and the kinds' headlines."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import yaml

from federation import pipeline
from federation.core import karmada
from federation.core.model import FederationError
from webapp.plug import Collect, no_report

CLUSTERS = [
    {"name": "home", "region": "aws:eu-west-1", "capacity_cores": 1.0},
    {"name": "near", "region": "azure:westeurope", "capacity_cores": 4.0},
    {"name": "hub", "region": "aws:us-east-1", "capacity_cores": 16.0},
]


def run(**p):
    return pipeline.run({"application": "sockshop", "clusters": CLUSTERS, "client": "home", **p}, report=no_report, record=Collect())


def test_plan_task_gives_plan_baselines_descriptions_and_valid_yaml():
    r = run()
    assert set(r["baselines"]) | set(r["unschedulable_baselines"]) == set(r["baseline_descriptions"])
    assert r["plan"]["cost"]["total_ms"] <= min(b["cost"]["total_ms"] for b in r["baselines"].values()
                                                if not any(b["cost"]["overload_cores"])) + 1e-6
    docs = [d for d in yaml.safe_load_all(r["karmada_yaml"]) if d["kind"] == "PropagationPolicy"]
    assert docs and all(karmada.validate_policy(d) == [] for d in docs)


def test_replan_keeps_or_moves_replicas_on_an_unreachable_member():
    first = run()["plan"]["replicas"]
    used = sorted({c for r in first.values() for c in r})
    gone = used[0]
    on_gone = {s for s, r in first.items() if gone in r}
    kept = run(previous_replicas=first, unreachable=[gone])
    assert all(kept["plan"]["replicas"][s] == first[s] for s in on_gone)
    assert kept["diff"] == [d for d in kept["diff"] if d["service"] not in on_gone]
    assert "cluster.karmada.io/unreachable" in kept["karmada_yaml"]
    moved = run(previous_replicas=first, unreachable=[gone], failover=True)
    assert all(gone not in r for r in moved["plan"]["replicas"].values())
    assert on_gone <= {d["service"] for d in moved["diff"]}
    assert "cluster.karmada.io/unreachable" not in moved["karmada_yaml"]


def test_plan_task_with_locality_routing_copies_the_chain_per_region():
    """Users half in eu-west-1 (home's region, which cannot hold sockshop) and half in
    us-east-1 (hub): with locality routing a copy in hub serves the us half locally, so the plan
    duplicates services and exports them as Karmada Duplicated, CRD-valid; proportional routing
    never copies."""
    users = {"home": 0.5, "hub": 0.5}
    loc = pipeline.run({"application": "sockshop", "clusters": CLUSTERS, "users": users, "routing": "locality"},
                       report=no_report, record=Collect())
    assert loc["routing"] == "locality" and loc["plan"]["duplicated"]
    assert all(set(loc["plan"]["replicas"][s]) >= {"hub"} for s in loc["plan"]["duplicated"])
    prop = pipeline.run({"application": "sockshop", "clusters": CLUSTERS, "users": users}, report=no_report, record=Collect())
    assert prop["plan"]["duplicated"] == [] and loc["plan"]["cost"]["total_ms"] < prop["plan"]["cost"]["total_ms"]
    docs = [d for d in yaml.safe_load_all(loc["karmada_yaml"]) if d["kind"] == "PropagationPolicy"]
    assert any(d["spec"]["placement"]["replicaScheduling"].get("replicaSchedulingType") == "Duplicated" for d in docs)
    assert all(karmada.validate_policy(d) == [] for d in docs)
    with pytest.raises(FederationError, match="unknown routing"):
        pipeline.run({"application": "sockshop", "clusters": CLUSTERS, "users": users, "routing": "anycast"},
                     report=no_report, record=Collect())


def test_bad_tasks_and_inputs_are_refused():
    with pytest.raises(FederationError, match="unknown federation task"):
        pipeline.run({"task": "nope"}, report=no_report, record=Collect())
    with pytest.raises(FederationError, match="previous_replicas"):
        run(unreachable=["home"])
    with pytest.raises(FederationError, match="unknown scenarios"):
        pipeline.run({"task": "scenarios", "scenarios": ["nope"]}, report=no_report, record=Collect())


def test_plan_headline_is_against_the_baseline_a_user_would_pick():
    from federation.experiment import plan_headline

    r = run()
    h = plan_headline(SimpleNamespace(result=r))
    assert h.baseline_name == "nearest-fit"  # it can place sockshop (1.2 cores) in near
    assert h.ratio == pytest.approx(r["plan"]["cost"]["total_ms"] / r["baselines"]["nearest-fit"]["cost"]["total_ms"])
    assert h.note == r["baseline_descriptions"]["nearest-fit"]


def test_users_in_several_regions_through_the_parameters():
    from federation.experiment import FederationPlanParameters

    r = run(users={"home": 1, "hub": 1})
    assert r["client"] == {"home": 1, "hub": 1}
    ok = FederationPlanParameters(data={"application": "sockshop", "clusters": CLUSTERS, "users": {"home": 1, "hub": 1}})
    assert ok.is_valid(), ok.errors
    bad = FederationPlanParameters(data={"application": "sockshop", "clusters": CLUSTERS, "users": {"mars": 1}})
    assert not bad.is_valid() and "mars" in str(bad.errors)


def test_the_benchmark_kind_offers_exactly_the_scenarios_that_exist():
    from federation.backends.scenarios import split_scenarios
    from federation.experiment import SCENARIO_NAMES

    assert SCENARIO_NAMES == [s.name for s in split_scenarios()]


def test_replan_parameters_are_validated_before_anything_runs():
    from federation.experiment import FederationPlanParameters

    base = {"application": "sockshop", "clusters": CLUSTERS, "client": "home"}
    partial = FederationPlanParameters(data={**base, "previous_replicas": {"front-end": {"near": 1}}, "unreachable": ["near"]})
    assert not partial.is_valid() and "previous_replicas" in partial.errors
    alone = FederationPlanParameters(data={**base, "unreachable": ["near"]})
    assert not alone.is_valid() and "unreachable" in alone.errors
    full = run()["plan"]["replicas"]
    ok = FederationPlanParameters(data={**base, "previous_replicas": full, "unreachable": ["near"], "failover": True})
    assert ok.is_valid(), ok.errors
