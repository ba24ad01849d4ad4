"""Member health from probes, and re-planning around an unreachable member (karmada#1640)."""
from __future__ import annotations

import numpy as np
import pytest

from federation.core import health, karmada, orchestrator as orch
from federation.core.model import Application, Edge, Federation, FederationError, MemberCluster, Service


def test_state_changes_only_after_the_threshold():
    t = health.HealthTracker(failure_threshold_s=30, success_threshold_s=10)
    assert t.state("A") == "unknown"
    assert t.observe("A", True, 0.0) == "ready"      # first probe sets it
    assert t.observe("A", False, 5.0) == "ready"     # failing since 5 s
    assert t.observe("A", False, 34.0) == "ready"    # 29 s < 30 s
    assert t.observe("A", False, 35.0) == "unreachable"
    assert t.observe("A", True, 36.0) == "unreachable"
    assert t.observe("A", False, 40.0) == "unreachable"  # the success streak broke: start again
    assert t.observe("A", True, 41.0) == "unreachable"
    assert t.observe("A", True, 51.0) == "ready"     # 10 s of successes
    assert t.unreachable() == set()
    with pytest.raises(FederationError):
        health.HealthTracker(failure_threshold_s=-1)


def case() -> tuple[Application, Federation, orch.Plan]:
    # users in A; a -> b -> c; A and B near each other (5 ms), C far (60 ms); A holds 0.2 cores
    app = Application("h", [Service("a", 1, 0.1, 1.0), Service("b", 1, 0.1, 1.0), Service("c", 1, 0.1, 1.0)],
                      [Edge("a", "b"), Edge("b", "c")], "a")
    fed = Federation([MemberCluster("A", 0.2), MemberCluster("B", 1.0), MemberCluster("C", 4.0)],
                     [[0.5, 5, 60], [5, 0.5, 60], [60, 60, 0.5]], np.ones((3, 3)) * 1e4)
    return app, fed, orch.plan(app, fed, client="A")


def test_unreachable_member_keeps_its_replicas_without_failover():
    app, fed, before = case()
    (where_b,) = before.replicas["b"]
    new, diff = health.replan(app, fed, before, {where_b}, client="A")
    assert new.replicas["b"] == before.replicas["b"]  # karmada#1640: not evicted
    # nothing new lands on the unreachable member
    assert [s for s, r in new.replicas.items() if where_b in r and s not in {x for x, rr in before.replicas.items() if where_b in rr}] == []
    assert all(d["service"] not in {"b"} for d in diff)
    yaml_docs = karmada.propagation_policies(new, unreachable={where_b})
    b_pol = next(p for p in yaml_docs if p["metadata"]["name"] == "h-b")
    assert {t["key"] for t in b_pol["spec"]["placement"]["clusterTolerations"]} == set(karmada.UNREACHABLE_TAINTS)
    assert all(karmada.validate_policy(p) == [] for p in yaml_docs)


def test_failover_moves_them_and_shows_the_diff():
    app, fed, before = case()
    gone = sorted({c for r in before.replicas.values() for c in r})[0]
    moved = sorted(s for s, r in before.replicas.items() if gone in r)
    new, diff = health.replan(app, fed, before, {gone}, failover=True, client="A")
    assert all(gone not in r for r in new.replicas.values())
    assert {d["service"] for d in diff} >= set(moved)
    for d in diff:
        if d["service"] in moved:
            assert d["from"] == before.replicas[d["service"]] and gone not in d["to"]
    pols = karmada.propagation_policies(new)
    assert all("clusterTolerations" not in p["spec"]["placement"] for p in pols)


def test_split_service_on_an_unreachable_member_keeps_its_split():
    app = Application("s", [Service("web", 2, 0.1, 1.0)], [], "web")
    fed = Federation([MemberCluster("A", 1.0), MemberCluster("B", 1.0)], [[0.5, 5], [5, 0.5]], np.ones((2, 2)) * 1e4)
    before = orch.plan(app, fed, client="A", min_clusters={"web": 2})
    assert before.replicas["web"] == {"A": 1, "B": 1}
    new, diff = health.replan(app, fed, before, {"B"}, client="A")
    assert new.replicas["web"] == {"A": 1, "B": 1} and diff == []
    moved, diff = health.replan(app, fed, before, {"B"}, failover=True, client="A")
    assert moved.replicas["web"] == {"A": 2}
    assert diff == [{"service": "web", "from": {"A": 1, "B": 1}, "to": {"A": 2}}]


def test_bad_replan_input():
    app, fed, before = case()
    with pytest.raises(FederationError, match="unknown member"):
        health.replan(app, fed, before, {"Z"})
    with pytest.raises(FederationError, match="pinned to an unreachable"):
        health.replan(app, fed, before, {"C"}, failover=True, pinned={"c": "C"})
