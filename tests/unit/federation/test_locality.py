"""Locality routing in the cost model, copies of whole services (a chain per user region), the
nearest-fit spill rule and the cut of a chain under capacity.

Every expected figure is worked out by hand in the comments (formulas in federation/core/cost.py).
"""
from __future__ import annotations

import numpy as np
import pytest

from federation.core import karmada, orchestrator as orch
from federation.core.cost import build_problem, evaluate_counts, route_row, routing_matrix, served_shares
from federation.core.model import Application, Edge, Federation, FederationError, MemberCluster, Service

LINE3 = np.array([[0.5, 10.0, 50.0], [10.0, 0.5, 50.0], [50.0, 50.0, 0.5]])


@pytest.mark.parametrize("replicas, routing, expected", [
    # callee in B (2) and C (1). Proportional: every row 2/3, 1/3.
    ((0, 2, 1), "proportional", [[0, 2 / 3, 1 / 3]] * 3),
    # locality: A has none, its nearest with replicas is B (10 < 50); B and C stay home.
    ((0, 2, 1), "locality", [[0, 1, 0], [0, 1, 0], [0, 0, 1]]),
    # callee only in C: everyone goes to C
    ((0, 0, 1), "locality", [[0, 0, 1], [0, 0, 1], [0, 0, 1]]),
])
def test_routing_matrix_by_hand(replicas, routing, expected):
    assert routing_matrix(LINE3, np.array(replicas), routing) == pytest.approx(np.array(expected, float))


def test_locality_ties_split_by_replicas():
    # A is 10 ms from both B and C; the callee has 1 replica in B, 3 in C: A's calls go 1/4, 3/4
    rtt = np.array([[0.5, 10, 10], [10, 0.5, 30], [10, 30, 0.5]])
    assert routing_matrix(rtt, np.array([0, 1, 3]), "locality")[0] == pytest.approx([0, 0.25, 0.75])


def test_route_row_names_clusters_and_rejects_bad_input():
    fed = Federation([MemberCluster(n, 1.0) for n in "ABC"], LINE3, np.ones((3, 3)) * 1000)
    assert route_row(fed, {"B": 2, "C": 1}, "A", "locality") == {"B": 1.0}
    assert route_row(fed, {"B": 2, "C": 1}, "A") == pytest.approx({"B": 2 / 3, "C": 1 / 3})
    with pytest.raises(FederationError, match="unknown routing"):
        route_row(fed, {"B": 1}, "A", "geo")
    with pytest.raises(FederationError, match="at least one replica"):
        routing_matrix(LINE3, np.zeros(3), "locality")


def geo_case(cap_e: float = 1.0, cap_u: float = 1.0) -> tuple[Application, Federation]:
    """a -> b (2 calls); a works 1 ms, b 3 ms per call (b's compute per request 2 x 3 = 6 ms);
    0.1 core each. Clusters E and U, RTT 1 ms inside, 80 ms between. Payloads 0 B (and the
    client payload 0 B in the problems below), so links cost their RTT only."""
    app = Application("g", [Service("a", 1, 0.1, 1.0), Service("b", 1, 0.1, 3.0)], [Edge("a", "b", 2.0, 0)], "a")
    fed = Federation([MemberCluster("E", cap_e), MemberCluster("U", cap_u)], [[1.0, 80.0], [80.0, 1.0]], np.ones((2, 2)) * 1000)
    return app, fed


USERS = {"E": 0.5, "U": 0.5}


@pytest.mark.parametrize("counts, routing, total, network", [
    # chain copied in both. Locality: each region: client 1 + 2 calls x 1 = 3 ms; compute 1 + 6 = 7
    ([[1, 1], [1, 1]], "locality", 10.0, 3.0),
    # same counts, proportional: client 0.5 (0.5*1 + 0.5*80) + 0.5 (0.5*80 + 0.5*1) = 40.5;
    # edge 2 x (0.25 x (1 + 80 + 80 + 1)) = 81; network 121.5, compute 7
    ([[1, 1], [1, 1]], "proportional", 128.5, 121.5),
    # everything in E, either routing: client 0.5*1 + 0.5*80 = 40.5, edge 2 x 1 = 2; + 7
    ([[1, 0], [1, 0]], "locality", 49.5, 42.5),
    ([[1, 0], [1, 0]], "proportional", 49.5, 42.5),
    # entry copied, b only in E: E users 1 + 2 x 1 = 3; U users 1 + 2 x 80 = 161 (b's nearest
    # is E); 0.5 x 3 + 0.5 x 161 = 82; + 7. One copy alone does not pay.
    ([[1, 1], [1, 0]], "locality", 89.0, 82.0),
])
def test_cost_with_locality_routing_by_hand(counts, routing, total, network):
    app, fed = geo_case()
    prob = build_problem(app, fed, client=USERS, client_payload_bytes=0, routing=routing)
    c = evaluate_counts(prob, np.array(counts))
    assert c.total_ms == pytest.approx(total)
    assert c.network_ms == pytest.approx(network)
    assert c.compute_ms == pytest.approx(7.0)


def test_served_shares_follow_the_callers():
    # entry in both, b in E only: a serves half its visits in each; b all in E
    app, fed = geo_case()
    prob = build_problem(app, fed, client=USERS, client_payload_bytes=0, routing="locality")
    a, _ = served_shares(prob, np.array([[0.5, 0.5], [1.0, 0.0]]))
    assert a == pytest.approx(np.array([[0.5, 0.5], [1.0, 0.0]]))
    # users all in U, b copied in both, a only in E: a serves in E, so b's calls stay in E
    prob = build_problem(app, fed, client="U", client_payload_bytes=0, routing="locality")
    a, _ = served_shares(prob, np.array([[1.0, 0.0], [0.5, 0.5]]))
    assert a == pytest.approx(np.array([[1.0, 0.0], [1.0, 0.0]]))


def test_users_go_to_the_nearest_entry_when_their_region_has_none():
    # one service with a replica in B and one in C; users all in A: locality goes to B (10 ms),
    # proportional pays 0.5 x 10 + 0.5 x 50 = 30 ms
    app = Application("s", [Service("s", 2, 0.1, 0.0)], [], "s")
    fed = Federation([MemberCluster(n, 1.0) for n in "ABC"], LINE3, np.ones((3, 3)) * 1000)
    for routing, expected in (("locality", 10.0), ("proportional", 30.0)):
        prob = build_problem(app, fed, client="A", client_payload_bytes=0, routing=routing)
        assert evaluate_counts(prob, np.array([[0, 1, 1]])).total_ms == pytest.approx(expected)


def test_a_copy_loads_its_cluster_with_the_full_demand():
    # a and b copied whole into E (0.15 cores) and U: E carries 0.1 + 0.1 = 0.2 cores, 0.05 over
    app, fed = geo_case(cap_e=0.15)
    prob = build_problem(app, fed, client=USERS, client_payload_bytes=0, routing="locality")
    assert evaluate_counts(prob, np.array([[1, 1], [1, 1]])).overload_cores == [pytest.approx(0.05), 0.0]


def test_orchestrator_copies_the_chain_per_region_under_locality():
    app, fed = geo_case()
    p = orch.plan(app, fed, client=USERS, routing="locality")
    assert p.replicas == {"a": {"E": 1, "U": 1}, "b": {"E": 1, "U": 1}}
    assert p.duplicated == ["a", "b"]
    # client 1 + 2 x 1 = 3, plus the 2048 B request over 1000 Mbit/s: 8 x 2048 / 1e6 = 0.016384 ms; compute 7
    assert p.cost.total_ms == pytest.approx(10.016384)
    # proportional routing: a copy never pays; one cluster, 49.5 + 0.016384
    q = orch.plan(app, fed, client=USERS)
    assert all(len(r) == 1 for r in q.replicas.values()) and q.duplicated == []
    assert q.cost.total_ms == pytest.approx(49.516384)
    # nearest-fit (everything in E, the larger share, ties by name) is the 49.5 plan
    assert orch.plan_nearest_fit(app, fed, client=USERS, routing="locality").cost.total_ms == pytest.approx(49.516384)


def test_no_copy_where_capacity_has_no_room_for_the_chain():
    # U holds one 0.1-core service only: copying a alone costs 89 (above), copying b alone
    # lowers nothing (U's users reach b through a in E), so the plan stays whole in E: 49.5
    app, fed = geo_case(cap_u=0.15)
    p = orch.plan(app, fed, client=USERS, routing="locality")
    assert p.duplicated == [] and p.cost.total_ms == pytest.approx(49.516384)
    assert p.replicas == {"a": {"E": 1}, "b": {"E": 1}}


def test_replicate_chains_leaves_a_proportional_plan_alone():
    app, fed = geo_case()
    start = orch.plan(app, fed, client=USERS)
    assert orch.replicate_chains(app, fed, start, client=USERS, routing="proportional") is start


def test_duplicated_services_export_as_karmada_duplicated():
    app, fed = geo_case()
    p = orch.plan(app, fed, client=USERS, routing="locality")
    pols = {d["metadata"]["name"]: d for d in karmada.propagation_policies(p, app=app)}
    rs = pols["g-a"]["spec"]["placement"]
    assert rs["replicaScheduling"] == {"replicaSchedulingType": "Duplicated"}
    assert rs["clusterAffinity"]["clusterNames"] == ["E", "U"] and "spreadConstraints" not in rs
    assert all(karmada.validate_policy(d) == [] for d in pols.values())
    # every cluster holds what it calls: nothing is exported across clusters
    assert karmada.cross_cluster_callers(p, app) == {}
    assert orch.duplicated_services(app, {"a": {"E": 1, "U": 1}, "b": {"E": 1}}) == ["a"]
    assert orch.duplicated_services(Application("d", [Service("s", 2)], [], "s"), {"s": {"E": 1, "U": 1}}) == []  # divided


def tree() -> tuple[Application, Federation]:
    """p -> q (1 call), q -> r (5 calls), q -> t (1 call); 0.1 core each, no CPU work, 0 B
    payloads. H (users) holds 0.2 cores, N 0.3; RTT 0.5 ms inside, 10 ms between; the users'
    2048 B request adds 0.016384 ms at 1000 Mbit/s."""
    app = Application("t", [Service(n, 1, 0.1, 0.0) for n in "pqrt"],
                      [Edge("p", "q", 1.0, 0), Edge("q", "r", 5.0, 0), Edge("q", "t", 1.0, 0)], "p")
    fed = Federation([MemberCluster("H", 0.2), MemberCluster("N", 0.3)], [[0.5, 10.0], [10.0, 0.5]], np.ones((2, 2)) * 1000)
    return app, fed


def test_nearest_fit_spills_in_call_order():
    # call order p, q, r, t; H takes p and q (0.2), r does not fit: r and t spill to N.
    # Cost: client 0.5 + 0.016384, p->q 0.5, q->r 5 x 10, q->t 10 = 61.016384
    app, fed = tree()
    p = orch.plan_nearest_fit(app, fed, client="H")
    assert p.replicas == {"p": {"H": 1}, "q": {"H": 1}, "r": {"N": 1}, "t": {"N": 1}}
    assert p.cost.total_ms == pytest.approx(61.016384)
    assert "spilling" in p.explanation["p"]


def test_next_fit_never_goes_back_to_a_cluster_it_left():
    # 0.6 cores, A holds 0.4 and B 0.5: neither alone. x (0.3) fills A up to 0.3; y (0.2) does
    # not fit: spill to B; z (0.1) would fit A's 0.1 left but next-fit has moved on: B.
    # (First-fit would put z back in A.)
    app = Application("n", [Service("x", 1, 0.3), Service("y", 1, 0.2), Service("z", 1, 0.1)], [Edge("x", "y"), Edge("y", "z")], "x")
    fed = Federation([MemberCluster("A", 0.4), MemberCluster("B", 0.5)], [[0.5, 10], [10, 0.5]], np.ones((2, 2)) * 1000)
    assert orch.plan_nearest_fit(app, fed, client="A").replicas == {"x": {"A": 1}, "y": {"B": 1}, "z": {"B": 1}}


def test_spill_keeps_pins_where_they_are():
    # db pinned to B (0.5 of its 0.6 cores); web and api (0.6 cores) fit no cluster's free cores
    # (A 0.4, B 0.1, C 0.5): web in A, api spills to B (0.1 left after db: no), then C.
    app = Application("k", [Service("web", 1, 0.3), Service("api", 1, 0.3), Service("db", 1, 0.5, tier="db")],
                      [Edge("web", "api"), Edge("api", "db")], "web")
    fed = Federation([MemberCluster("A", 0.4), MemberCluster("B", 0.6), MemberCluster("C", 0.5)], LINE3, np.ones((3, 3)) * 1000)
    p = orch.plan_nearest_fit(app, fed, client="A", pinned={"db": "B"})
    assert p.replicas == {"web": {"A": 1}, "api": {"C": 1}, "db": {"B": 1}}


@pytest.mark.parametrize("method", ["milp", "greedy"])
def test_orchestrator_cuts_the_cheap_edge(method):
    # keep q and r (5 calls) together: H {p}, N {q, r, t} cuts only p->q (1 call):
    # client 0.516384 + p->q 10 + q->r 5 x 0.5 + q->t 0.5 = 13.516384
    app, fed = tree()
    p = orch.plan(app, fed, client="H", method=method)
    assert p.replicas == {"p": {"H": 1}, "q": {"N": 1}, "r": {"N": 1}, "t": {"N": 1}}
    assert p.cost.total_ms == pytest.approx(13.516384)
    best, _ = orch.brute_force(app, fed, client="H")
    assert best == pytest.approx(13.516384)
    # Karmada dynamic weights: p -> N (3 > 2 available), q tie 2/2 -> H (name), r -> N, t tie -> H:
    # client 10.016384 + p->q 10 + q->r 50 + q->t 0.5 = 70.516384
    d = orch.plan_karmada_dynamic(app, fed, client="H")
    assert d.replicas == {"p": {"N": 1}, "q": {"H": 1}, "r": {"N": 1}, "t": {"H": 1}}
    assert d.cost.total_ms == pytest.approx(70.516384)


def test_split_scenarios_expect_the_orchestrator_ahead_where_a_split_pays():
    """The two scenarios built for it: in the model, the orchestrator's plan is below every
    baseline that fits (the harness then measures it)."""
    from federation.backends.scenarios import split_scenarios

    by = {s.name: s for s in split_scenarios()}
    geo, chain = by["users-geo"], by["capacity-chain"]
    assert geo.routing == "locality" and chain.routing == "proportional"
    for scn in (geo, chain):
        p = orch.plan(scn.app, scn.fed, client=scn.client, routing=scn.routing, **scn.constraints())
        base, _ = orch.run_baselines(scn.app, scn.fed, client=scn.client, routing=scn.routing, **scn.constraints())
        fits = {m: b for m, b in base.items() if not any(b.cost.overload_cores)}
        assert "nearest-fit" in fits
        assert p.cost.total_ms < min(b.cost.total_ms for b in fits.values()) - 10.0
    assert set(orch.plan(geo.app, geo.fed, client=geo.client, routing="locality").duplicated) == set(geo.app.names)
    cut = orch.plan(chain.app, chain.fed, client=chain.client)
    assert cut.clusters_of("decode") == cut.clusters_of("detect")
    nf = orch.plan_nearest_fit(chain.app, chain.fed, client=chain.client)
    assert nf.clusters_of("decode") != nf.clusters_of("detect")
