"""Federation core: cost model, planners, baselines, manifests, Skyplane matrices, Karmada YAML.

Expected values are worked out by hand in the comments (cost formula in federation/core/cost.py).
"""
from __future__ import annotations

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from federation.core import applications, division, karmada, network, orchestrator as orch, synthetic
from federation.core.cost import assignment_matrix, build_problem, evaluate
from federation.core.model import Application, Edge, Federation, FederationError, MemberCluster, Service


def two_cluster_case(cap_a: float = 10.0) -> tuple[Application, Federation]:
    """a -> b, 2 calls of 1000 B; a works 1 ms, b 3 ms; A uncontended, B at 0.5; RTT 0.5/20 ms;
    1000 Mbit/s everywhere, so 1000 B cost 8*1000/1000/1000 = 0.008 ms. b serves 2 calls per
    request (visits), so its compute is 2*3 = 6 ms uncontended."""
    app = Application("t", [Service("a", 1, 0.1, 1.0), Service("b", 1, 0.1, 3.0)], [Edge("a", "b", 2.0, 1000)], "a")
    fed = Federation([MemberCluster("A", cap_a, 0.0), MemberCluster("B", 1.0, 0.5)],
                     [[0.5, 20.0], [20.0, 0.5]], [[1000.0, 1000.0], [1000.0, 1000.0]])
    return app, fed


@pytest.mark.parametrize("assign, total, network, compute", [
    ((0, 0), 8.016, 1.016, 7.0),     # 2*(0.5+0.008) + (1 + 6)
    ((0, 1), 53.016, 40.016, 13.0),  # 2*(20+0.008) + (1 + 6*2): B's slowdown 1/(1-0.5) = 2
    ((1, 1), 15.016, 1.016, 14.0),   # 2*0.508 + (1+6)*2
    ((1, 0), 48.016, 40.016, 8.0),   # 2*20.008 + 1*2 + 6
])
def test_cost_by_hand(assign, total, network, compute):
    app, fed = two_cluster_case()
    c = evaluate(build_problem(app, fed), assignment_matrix(np.array(assign), 2))
    assert c.total_ms == pytest.approx(total)
    assert c.network_ms == pytest.approx(network)
    assert c.compute_ms == pytest.approx(compute)


def test_split_placement_uses_fraction_products():
    app, fed = two_cluster_case()
    F = np.array([[1.0, 0.0], [0.5, 0.5]])  # b half in A, half in B
    # network 2*(0.5*0.508 + 0.5*20.008) = 20.516; compute 1 + 6*(0.5*1 + 0.5*2) = 10
    assert evaluate(build_problem(app, fed), F).total_ms == pytest.approx(30.516)


def test_client_link_is_added_once_per_request():
    app, fed = two_cluster_case()
    prob = build_problem(app, fed, client="B")
    # both in A: 8.016 + client link B->A: 20 + 2048*8/1000/1000 = 20.016384
    assert evaluate(prob, assignment_matrix(np.array([0, 0]), 2)).total_ms == pytest.approx(28.032384)


@pytest.mark.parametrize("cap_a, expected_assign, expected_total", [
    (10.0, {"a": "A", "b": "A"}, 8.016),   # everything fits in the uncontended cluster
    (0.15, {"a": "B", "b": "B"}, 15.016),  # A holds one service only: co-locate in B beats splitting (48.016)
])
@pytest.mark.parametrize("method", ["milp", "greedy"])
def test_optimal_plan_by_hand(cap_a, expected_assign, expected_total, method):
    app, fed = two_cluster_case(cap_a)
    p = orch.plan(app, fed, method=method)
    assert {s: p.clusters_of(s)[0] for s in ("a", "b")} == expected_assign
    assert p.cost.total_ms == pytest.approx(expected_total)
    assert set(p.explanation) == {"a", "b"}


def test_overcommitted_baseline_is_stretched():
    app, fed = two_cluster_case(cap_a=0.1)
    p = orch.plan_all_in_one(app, fed, cluster="A")
    # load 0.2 cores on 0.1 available: compute x2 -> network 1.016 + compute (1+6)*2
    assert p.cost.overload_cores == [pytest.approx(0.1), 0.0]
    assert p.cost.total_ms == pytest.approx(15.016)


def test_visits_multiply_along_paths():
    app = Application("v", [Service("a"), Service("b"), Service("c")], [Edge("a", "b", 2.0), Edge("b", "c", 3.0), Edge("a", "c", 1.0)], "a")
    assert app.visits() == {"a": 1.0, "b": 2.0, "c": 7.0}


@pytest.mark.parametrize("replicas, weights, expected", [
    # karmada#6424: 2 replicas, a=2, b=1. Priorities v/(2s+1): a 2, b 1 -> a (a now 2/3);
    # b 1 > 2/3 -> b. The old dispenser gave a=2, b=0.
    (2, {"a": 2, "b": 1}, {"a": 1, "b": 1}),
    # Wikipedia's Sainte-Lague example (also Karmada's TestAllocateWebsterSeats): 8 seats,
    # 100k/80k/30k/20k -> 3/3/1/1.
    (8, {"A": 100_000, "B": 80_000, "C": 30_000, "D": 20_000}, {"A": 3, "B": 3, "C": 1, "D": 1}),
    # 5 replicas, 1:1: priorities tie at every step; fewer seats first, then name: a, b, a, b, a.
    (5, {"a": 1, "b": 1}, {"a": 3, "b": 2}),
    # 1 replica, 3 equal weights: the tie goes to the smallest name.
    (1, {"x": 1, "y": 1, "z": 1}, {"x": 1}),
    # weight 0 leaves the cluster out (and never as "weight: 0" in the result).
    (6, {"a": 0, "b": 1, "c": 2}, {"b": 2, "c": 4}),
    # no positive weight: every cluster weight 1.
    (3, {"a": 0, "b": 0}, {"a": 2, "b": 1}),
])
def test_static_weight_division_is_karmadas(replicas, weights, expected):
    assert division.static_weight_division(replicas, weights) == expected


def test_karmada_6735_never_takes_a_replica_away_when_scaling_up():
    """karmada#6735's weights (southcentralus 170, westus 110, eastus2 60). Webster seats in
    order of v/(2s+1): 170 s, 110 w, 60 e, 56.7 s, 36.7 w | 34 s | 22 w ... so 5 -> s2 w2 e1
    and 6 -> s3 w2 e1. The old dispenser (floor, remainders in weight order) gave 5 -> 3/2/0
    and 6 -> 4/1/1: westus lost a replica when the total grew."""
    w = {"southcentralus": 170, "westus": 110, "eastus2": 60}
    assert division.static_weight_division(5, w) == {"southcentralus": 2, "westus": 2, "eastus2": 1}
    assert division.static_weight_division(6, w) == {"southcentralus": 3, "westus": 2, "eastus2": 1}
    prev = {c: 0 for c in w}
    for n in range(1, 60):  # house monotone: every cluster keeps what it had
        cur = division.webster_seats(n, w)
        assert all(cur[c] >= prev[c] for c in w) and sum(cur.values()) == n
        prev = cur


def test_webster_on_top_of_initial_seats():
    # a already has 2 of weight 1 (priority 1/5), b none of weight 1 (priority 1): b, b, then
    # b has 2 (1/5) and ties a at 2 seats: name decides -> a.
    assert division.webster_seats(3, {"a": 1, "b": 1}, {"a": 2}) == {"a": 3, "b": 2}


@pytest.mark.parametrize("bad", [
    lambda: division.static_weight_division(3, {"a": -1}),
    lambda: division.static_weight_division(3, {"a": 1.5}),
    lambda: division.static_weight_division(3, {}),
    lambda: division.webster_seats(-1, {"a": 1}),
    lambda: division.dynamic_weight_division(5, {"a": 2, "b": 2}),  # 4 available < 5
])
def test_division_rejects_bad_input(bad):
    with pytest.raises(FederationError):
        bad()


def test_dynamic_weights_follow_available_replicas():
    app = Application("d", [Service("s", 6, 0.1)], [], "s")
    fed = Federation([MemberCluster("A", 4.0, 0.5), MemberCluster("B", 4.0, 0.0)], np.ones((2, 2)), np.ones((2, 2)) * 100)
    p = orch.plan_karmada_dynamic(app, fed)
    # available replicas 2/0.1 = 20 and 4/0.1 = 40; Webster: 40 B, 20 A, 13.3 B, 8 B, 6.7 A, 5.7 B
    assert p.replicas["s"] == {"A": 2, "B": 4}


def test_dynamic_weights_see_earlier_services_and_refuse_what_does_not_fit():
    # s1 takes 3 x 0.5 of A's 2 cores and B's 1 core: avail A 4, B 2 -> Webster 4 A, 2 B, 1.33 A -> A2 B1
    # then s2 (1 core each): A has 2 - 1 = 1 core left, B 1 - 0.5 = 0.5: avail 1, 0 -> A1.
    app = Application("d", [Service("s1", 3, 0.5), Service("s2", 1, 1.0)], [], "s1")
    fed = Federation([MemberCluster("A", 2.0), MemberCluster("B", 1.0)], np.ones((2, 2)), np.ones((2, 2)) * 100)
    p = orch.plan_karmada_dynamic(app, fed)
    assert p.replicas == {"s1": {"A": 2, "B": 1}, "s2": {"A": 1}}
    big = Application("d", [Service("s1", 3, 0.5), Service("s2", 2, 1.0)], [], "s1")
    with pytest.raises(FederationError, match="unschedulable"):
        orch.plan_karmada_dynamic(big, fed)


def test_nearest_fit_takes_the_nearest_cluster_that_holds_everything():
    app = Application("n", [Service("a", 2, 0.5), Service("b", 1, 1.0)], [Edge("a", "b")], "a")  # 2 cores
    fed = Federation([MemberCluster("home", 1.0), MemberCluster("near", 2.0), MemberCluster("far", 16.0)],
                     [[0.5, 10, 80], [10, 0.5, 80], [80, 80, 0.5]], np.ones((3, 3)) * 1e4)
    assert orch.plan_nearest_fit(app, fed, client="home").replicas == {"a": {"near": 2}, "b": {"near": 1}}
    # no cluster holds 2 cores: spill in call order (a, then b): a (1 core) fills x, b spills to y
    tiny = Federation([MemberCluster("x", 1.0), MemberCluster("y", 1.0)], [[0.5, 10], [10, 0.5]], np.ones((2, 2)) * 1e4)
    assert orch.plan_nearest_fit(app, tiny, client="x").replicas == {"a": {"x": 2}, "b": {"y": 1}}
    # 0.8 cores each: a (1 core) fits neither, even spilling
    smaller = Federation([MemberCluster("x", 0.8), MemberCluster("y", 0.8)], [[0.5, 10], [10, 0.5]], np.ones((2, 2)) * 1e4)
    with pytest.raises(FederationError, match="no single cluster.*without room"):
        orch.plan_nearest_fit(app, smaller, client="x")
    plans, why = orch.run_baselines(app, smaller, client="x")
    assert "nearest-fit" in why and "nearest-fit" not in plans and "karmada-static" in plans


@pytest.mark.parametrize("bad", [
    lambda: MemberCluster("x", 0.0),
    lambda: MemberCluster("x", 1.0, 1.0),
    lambda: Federation([MemberCluster("a", 1)], [[0, 1]], [[1]]),
    lambda: Federation([MemberCluster("a", 1)], [[0]], [[0]]),
    lambda: Application("c", [Service("a"), Service("b")], [Edge("a", "b"), Edge("b", "a")], "a"),
    lambda: Application("c", [Service("a")], [], "zzz"),
])
def test_bad_input_is_rejected(bad):
    with pytest.raises(FederationError):
        bad()


def test_infeasible_capacity_is_a_clear_error():
    app, fed = two_cluster_case()
    big = Application("big", [Service("a", 20, 1.0)], [], "a")  # 20 cores > 10 + 0.5 available
    with pytest.raises(FederationError, match="needs 20.00 cores"):
        orch.plan_milp(big, fed)


small = st.tuples(st.integers(1, 4), st.integers(1, 3), st.integers(0, 2**31 - 1))


@settings(max_examples=25, deadline=None)
@given(small)
def test_milp_equals_brute_force(case):
    n_services, n_clusters, seed = case
    rng = np.random.default_rng(seed)
    fed = synthetic.random_federation(rng, n_clusters, capacity_range=(0.5, 3.0))
    app = synthetic.random_application(rng, n_services, cpu_range=(0.1, 0.6), max_replicas=2)
    try:
        best, _ = orch.brute_force(app, fed, client="c0")
    except FederationError:
        with pytest.raises(FederationError):
            orch.plan_milp(app, fed, client="c0")
        return
    m = orch.plan_milp(app, fed, client="c0")
    assert m.cost.total_ms == pytest.approx(best, rel=1e-6)
    assert all(x == 0 for x in m.cost.overload_cores)
    try:
        g = orch.plan_greedy(app, fed, client="c0")
    except FederationError:
        return
    assert g.cost.total_ms >= best - 1e-6
    assert all(x == 0 for x in g.cost.overload_cores)  # greedy never overcommits either


# ---- data-derived inputs ---------------------------------------------------------------

def test_skyplane_matrix_values():
    # latency.csv: aws:eu-west-1 <-> aws:us-east-1 measured 84.930 and 84.936 ms -> median 84.933;
    # throughput.csv: 4311402... and 4318135... bit/s -> median 4314.77 Mbit/s
    rtt, bw = network.skyplane_matrices(["aws:eu-west-1", "aws:us-east-1"])
    assert rtt[0, 1] == rtt[1, 0] == pytest.approx(84.933)
    assert rtt[0, 0] == 0.5
    assert bw[0, 1] == pytest.approx(4314.77, abs=0.01)


def test_skyplane_unknown_region():
    with pytest.raises(FederationError, match="mars"):
        network.skyplane_matrices(["aws:eu-west-1", "mars:olympus"])


def test_sockshop_graph_from_manifests():
    app = applications.get_application("sockshop")
    edges = {(e.caller, e.callee) for e in app.edges}
    assert app.entry == "front-end"
    assert ("user", "user-db") in edges        # env MONGO_HOST=user-db:27017
    assert ("carts", "carts-db") in edges      # stem rule
    assert ("front-end", "orders") in edges    # entry fan-out
    assert "edge-router" not in app.names and "rabbitmq" not in app.names
    assert app.service("payment").cpu_per_replica == pytest.approx(0.099)  # requests.cpu: 99m


def test_hotel_reservation_graph_from_compose():
    app = applications.get_application("hotelReservation")
    edges = {(e.caller, e.callee) for e in app.edges}
    assert ("reservation", "memcached-reserve") in edges  # depends_on
    assert ("rate", "mongodb-rate") in edges
    assert "consul" not in app.names and "jaeger" not in app.names
    assert app.service("mongodb-geo").tier == "db"
    assert app.service("frontend").cpu_per_replica == pytest.approx(0.1)  # kubernetes requests.cpu: 100m


def test_manifest_errors(tmp_path):
    bad = tmp_path / "x.yml"
    bad.write_text("services: [unclosed")
    with pytest.raises(FederationError, match="not valid YAML"):
        applications.application_from_manifests([bad], "a")
    ok = tmp_path / "y.yml"
    ok.write_text("services:\n  a: {image: x}\n")
    with pytest.raises(FederationError, match="entry service"):
        applications.application_from_manifests([ok], "nope")


def test_every_application_type_plans():
    fed = Federation([MemberCluster("A", 64.0, 0.1), MemberCluster("B", 64.0, 0.2)], [[0.5, 30], [30, 0.5]], [[1e4, 1e3], [1e3, 1e4]])
    for name in applications.known_applications():
        p = orch.plan(applications.get_application(name), fed, client="A")
        assert p.cost.total_ms > 0


def test_propagation_policy_structure():
    app, fed = two_cluster_case()
    plan = orch.plan_karmada_static(app, fed)  # a and b: 1 replica each, both land in A (Webster tie -> name)
    docs = list(yaml.safe_load_all(karmada.propagation_policy_yaml(plan, namespace="shop", app=app)))
    pols = [d for d in docs if d["kind"] == "PropagationPolicy"]
    assert len(pols) == 2 and not [d for d in docs if d["kind"] == "ServiceExport"]  # nothing crosses clusters
    for d in pols:
        assert d["apiVersion"] == "policy.karmada.io/v1alpha1" and d["metadata"]["namespace"] == "shop"
        sel = d["spec"]["resourceSelectors"]
        svc = sel[0]["name"]
        assert [(s["apiVersion"], s["kind"], s["name"]) for s in sel] == [("apps/v1", "Deployment", svc), ("v1", "Service", svc)]
        assert d["spec"]["propagateDeps"] is True
        pl = d["spec"]["placement"]
        rs = pl["replicaScheduling"]
        assert rs["replicaSchedulingType"] == "Divided" and rs["replicaDivisionPreference"] == "Weighted"
        weights = rs["weightPreference"]["staticWeightList"]
        assert [w["targetCluster"]["clusterNames"][0] for w in weights] == pl["clusterAffinity"]["clusterNames"]
        assert {w["targetCluster"]["clusterNames"][0]: w["weight"] for w in weights} == plan.replicas[svc]
        assert karmada.validate_policy(d) == []


def _fed3() -> Federation:
    return Federation([MemberCluster("A", 3.0, 0.1), MemberCluster("B", 64.0, 0.2), MemberCluster("C", 2.0)],
                      [[0.5, 30, 60], [30, 0.5, 40], [60, 40, 0.5]], np.ones((3, 3)) * 1e4)


def test_every_exported_policy_is_crd_valid_and_never_weight_zero():
    """Every built-in application, planned by the orchestrator and every baseline that can place
    it, exports only policies the CRD schema and Karmada's webhook rules accept."""
    fed = _fed3()
    n = 0
    for name in applications.known_applications():
        app = applications.get_application(name)
        plans, _ = orch.run_baselines(app, fed, client="A")
        plans["orchestrator"] = orch.plan(app, fed, client="A")
        for plan in plans.values():
            for d in karmada.propagation_policies(plan, app=app):
                assert karmada.validate_policy(d) == [], (name, plan.method, d["metadata"]["name"])
                for w in (d["spec"]["placement"].get("replicaScheduling") or {}).get("weightPreference", {}).get("staticWeightList", []):
                    assert w["weight"] >= 1
                n += 1
    assert n > 50


def test_exported_weights_reproduce_the_split_under_karmadas_division():
    # 7 replicas spread 4/2/1: Karmada divides 7 by weights 4:2:1 (Webster) back into 4/2/1.
    app = Application("w", [Service("s", 7, 0.1)], [], "s")
    plan = orch.Plan("w", "test", {"s": {"A": 4, "B": 2, "C": 1}}, orch.plan_all_in_one(app, _fed3()).cost)
    (pol,) = karmada.propagation_policies(plan)
    wl = pol["spec"]["placement"]["replicaScheduling"]["weightPreference"]["staticWeightList"]
    weights = {w["targetCluster"]["clusterNames"][0]: w["weight"] for w in wl}
    assert division.static_weight_division(7, weights) == {"A": 4, "B": 2, "C": 1}
    assert pol["spec"]["placement"]["spreadConstraints"] == [{"spreadByField": "cluster", "minGroups": 3, "maxGroups": 3}]


def test_zero_replica_clusters_are_dropped_not_weighted_zero():
    app = Application("z", [Service("s", 2, 0.1)], [], "s")
    plan = orch.Plan("z", "test", {"s": {"A": 2, "B": 0}}, orch.plan_all_in_one(app, _fed3()).cost)
    (pol,) = karmada.propagation_policies(plan)
    assert pol["spec"]["placement"]["clusterAffinity"]["clusterNames"] == ["A"]
    assert "spreadConstraints" not in pol["spec"]["placement"]
    with pytest.raises(FederationError, match="no replicas"):
        karmada.propagation_policies(orch.Plan("z", "test", {"s": {"A": 0}}, plan.cost))


def test_services_called_across_clusters_are_exported_and_imported():
    app = Application("x", [Service("a"), Service("b")], [Edge("a", "b")], "a")
    plan = orch.Plan("x", "test", {"a": {"A": 1}, "b": {"B": 1}}, orch.plan_all_in_one(app, _fed3()).cost)
    docs = list(yaml.safe_load_all(karmada.propagation_policy_yaml(plan, app=app)))
    assert [d["kind"] for d in docs].count("ServiceExport") == 1
    by_name = {d["metadata"]["name"]: d for d in docs if d["kind"] == "PropagationPolicy"}
    assert by_name["x-b-export"]["spec"]["placement"]["clusterAffinity"]["clusterNames"] == ["B"]
    assert by_name["x-b-import"]["spec"]["placement"]["clusterAffinity"]["clusterNames"] == ["A"]
    assert by_name["x-b-import"]["spec"]["resourceSelectors"][0]["kind"] == "ServiceImport"
    assert all(karmada.validate_policy(d) == [] for d in by_name.values())


@pytest.mark.parametrize("mutate, message", [
    (lambda p: p["spec"]["placement"]["replicaScheduling"]["weightPreference"]["staticWeightList"][0].update(weight=0), "minimum"),
    (lambda p: p["spec"].update(resourceSelectors=[]), "resourceSelectors"),
    (lambda p: p["spec"]["resourceSelectors"][0].pop("kind"), "kind"),
    (lambda p: p["spec"]["placement"]["replicaScheduling"].update(replicaDivisionPreference="Even"), "Even"),
    (lambda p: p["spec"]["placement"].update(spreadConstraint=[]), "spreadConstraint"),  # misspelt field
    (lambda p: p["spec"]["placement"].update(spreadConstraints=[{"spreadByField": "region", "minGroups": 2}]), "cluster"),
    (lambda p: p["spec"]["placement"].update(spreadConstraints=[{"spreadByField": "cluster", "minGroups": 3, "maxGroups": 2}]), "maxGroups"),
    (lambda p: p["spec"]["placement"].update(spreadConstraints=[{"spreadByField": "cluster", "spreadByLabel": "x"}]), "co-exist"),
    (lambda p: p["metadata"].update(name="Not_A_Name"), "name"),
])
def test_validator_rejects_what_karmada_rejects(mutate, message):
    app = Application("v", [Service("s", 3, 0.1)], [], "s")
    plan = orch.Plan("v", "test", {"s": {"A": 2, "B": 1}}, orch.plan_all_in_one(app, _fed3()).cost)
    (pol,) = karmada.propagation_policies(plan)
    assert karmada.validate_policy(pol) == []
    mutate(pol)
    errs = karmada.validate_policy(pol)
    assert errs and any(message in e for e in errs), errs


def test_unreachable_cluster_replicas_get_tolerations():
    app = Application("u", [Service("s", 2, 0.1), Service("t", 1, 0.1)], [], "s")
    plan = orch.Plan("u", "test", {"s": {"A": 1, "B": 1}, "t": {"C": 1}}, orch.plan_all_in_one(app, _fed3()).cost)
    pols = {p["metadata"]["name"]: p for p in karmada.propagation_policies(plan, unreachable={"A"})}
    tol = pols["u-s"]["spec"]["placement"]["clusterTolerations"]
    assert {(t["key"], t["effect"]) for t in tol} == {("cluster.karmada.io/unreachable", "NoExecute"), ("cluster.karmada.io/not-ready", "NoExecute")}
    assert all("tolerationSeconds" not in t for t in tol)  # tolerate for as long as it lasts: no eviction
    assert "clusterTolerations" not in pols["u-t"]["spec"]["placement"]
    assert all(karmada.validate_policy(p) == [] for p in pols.values())



def _line3() -> Federation:
    # A (users), B 10 ms away, C 50 ms away; 1000 Mbit/s everywhere
    return Federation([MemberCluster("A", 1.0), MemberCluster("B", 1.0), MemberCluster("C", 8.0)],
                      [[0.5, 10, 50], [10, 0.5, 50], [50, 50, 0.5]], np.ones((3, 3)) * 1000.0)


def test_spread_puts_the_second_replica_in_the_next_nearest_cluster():
    # one service, 2 replicas, must span 2 clusters. Cost = client link to the entry's replicas:
    # {A, B}: 0.5 * (0.5 + d) + 0.5 * (10 + d) with d = 2048 B * 8 / 1000 Mbit/s / 1000 = 0.016384 ms
    app = Application("s", [Service("s", 2, 0.1, 0.0)], [], "s")
    p = orch.plan(app, _line3(), client="A", min_clusters={"s": 2})
    assert p.replicas["s"] == {"A": 1, "B": 1}
    assert p.cost.total_ms == pytest.approx(0.5 * (0.5 + 0.016384) + 0.5 * (10 + 0.016384))
    with pytest.raises(FederationError, match="cannot span"):
        orch.plan(app, _line3(), client="A", min_clusters={"s": 3})  # 2 replicas cannot span 3 clusters
    with pytest.raises(FederationError, match="unknown service"):
        orch.plan(app, _line3(), client="A", min_clusters={"zz": 2})


def test_spread_respects_capacity():
    # A and B hold 1 core each; 4 replicas of 0.5 cores must span 3 clusters: A and B can take 2
    # each, the spread needs C too, and no cluster may exceed its cores.
    app = Application("s", [Service("s", 4, 0.5, 1.0)], [], "s")
    p = orch.plan(app, _line3(), client="A", min_clusters={"s": 3})
    assert len(p.replicas["s"]) == 3 and sum(p.replicas["s"].values()) == 4
    assert not any(p.cost.overload_cores)


def test_karmada_spread_selects_by_available_replicas_and_splits_evenly():
    # available replicas of 0.1-core pods: A 10, B 10, C 80 -> top 2: C (80), then A (10, name before B)
    app = Application("s", [Service("s", 3, 0.1, 1.0)], [], "s")
    p = orch.plan_karmada_spread(app, _line3(), client="A", min_clusters={"s": 2})
    # equal weights, 3 replicas (Webster): A and C tie at 1 with 0 seats -> A (name); C (1 > 1/3);
    # A and C tie at 1/3 with 1 seat each -> A. So A 2, C 1.
    assert p.replicas["s"] == {"A": 2, "C": 1}


def test_nearest_fit_keeps_pins_and_fills_the_nearest_cluster():
    app = Application("p", [Service("web", 1, 0.5), Service("db", 1, 0.5, tier="db")], [Edge("web", "db")], "web")
    p = orch.plan_nearest_fit(app, _line3(), client="A", pinned={"db": "C"})
    assert p.replicas == {"web": {"A": 1}, "db": {"C": 1}}


def test_binding_constraints_name_what_binds():
    from federation.backends.scenarios import binding_constraints, split_scenarios

    by = {s.name: s for s in split_scenarios()}
    assert binding_constraints(by["capacity"])["capacity"]["binds"]
    b = binding_constraints(by["pinned-data"])
    assert b["pinned"]["binds"] and not b["capacity"]["binds"]
    assert binding_constraints(by["spread"])["spread"]["binds"]


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 10_000))
def test_greedy_ends_at_a_local_optimum_of_single_moves(seed):
    """The incremental local search's bookkeeping against the full cost: after planning, no
    single service moved to another cluster with room lowers evaluate()'s total."""
    rng = np.random.default_rng(seed)
    fed = synthetic.random_federation(rng, 4, capacity_range=(1.0, 4.0))
    app = synthetic.random_application(rng, 9, cpu_range=(0.1, 0.5), max_replicas=2)
    try:
        g = orch.plan_greedy(app, fed, client="c0", time_limit=5.0)
    except FederationError:
        return
    prob = build_problem(app, fed, client="c0")
    assign = np.array([fed.index(next(iter(g.replicas[s.name]))) for s in app.services])
    base = evaluate(prob, assignment_matrix(assign, prob.C)).total_ms
    assert base == pytest.approx(g.cost.total_ms)
    load = np.zeros(prob.C)
    np.add.at(load, assign, prob.demand)
    for s in range(prob.S):
        for c in range(prob.C):
            if c == assign[s] or load[c] + prob.demand[s] > prob.capacity[c] + 1e-9:
                continue
            a2 = assign.copy()
            a2[s] = c
            assert evaluate(prob, assignment_matrix(a2, prob.C)).total_ms >= base - 1e-6


def test_users_in_several_regions_pay_the_share_weighted_link():
    # one service in A; users 75 % in A (0.5 ms), 25 % in C (50 ms); d = 2048 B over 1000 Mbit/s = 0.016384 ms
    app = Application("u", [Service("s", 1, 0.1, 0.0)], [], "s")
    fed = _line3()
    prob = build_problem(app, fed, client={"A": 3, "C": 1})
    F = assignment_matrix(np.array([0]), 3)
    assert evaluate(prob, F).total_ms == pytest.approx(0.75 * (0.5 + 0.016384) + 0.25 * (50 + 0.016384))
    # the planner puts it where the weighted link is least: A (0.75*0.5 + 0.25*50 = 12.9) beats
    # B (0.75*10 + 0.25*50 = 20) and C (0.75*50 + 0.25*0.5 = 37.6)
    assert orch.plan(app, fed, client={"A": 3, "C": 1}).replicas == {"s": {"A": 1}}
    with pytest.raises(FederationError, match="shares"):
        build_problem(app, fed, client={"A": 0})
