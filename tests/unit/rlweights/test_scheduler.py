"""Score and filter plugins against scores worked out by hand from kube-scheduler's formulas
(the formulas and their source files are in each plugin's docstring)."""
import numpy as np
import pytest

from rlweights.core.scheduler import (
    KUBE_DEFAULT_WEIGHTS, SCORE_PLUGIN_NAMES, SCORE_PLUGINS, ClusterState, MatchExpression, Node, Pod,
    Scheduler, SchedulingError, SpreadConstraint, Taint, Toleration, load_k8s_objects, parse_quantity,
    weights_vector,
)

GiB = 2**30
MiB = 2**20


def two_nodes():
    """A: 4 cores, 8 GiB, already 1 core + 2 GiB requested; B: 2 cores, 4 GiB, empty."""
    st = ClusterState([Node("a", 4000, 8 * GiB), Node("b", 2000, 4 * GiB)])
    st.add_pod(0, Pod("old", cpu_milli=1000, memory_bytes=2 * GiB))
    return st


POD = Pod("p", cpu_milli=1000, memory_bytes=1 * GiB)


@pytest.mark.parametrize("plugin,expected", [
    # A: cpu (4000-2000)*100//4000 = 50, mem (8-3)*100//8 = 62 -> (50+62)//2 = 56
    # B: cpu (2000-1000)*100//2000 = 50, mem (4-1)*100//4 = 75 -> 62
    ("NodeResourcesLeastAllocated", [56, 62]),
    # A: 50, 3*100//8 = 37 -> 43; B: 50, 25 -> 37
    ("NodeResourcesMostAllocated", [43, 37]),
    # A: f = (0.5, 0.375), std 0.0625 -> int(93.75) = 93; B: (0.5, 0.25), std 0.125 -> 87
    ("NodeResourcesBalancedAllocation", [93, 87]),
])
def test_resource_scores(plugin, expected):
    st = two_nodes()
    got = SCORE_PLUGINS[plugin].score(POD, st, np.arange(2))
    assert got.tolist() == expected


def test_least_allocated_uses_nonzero_defaults_and_zero_when_overcommitted():
    st = ClusterState([Node("a", 1000, 1 * GiB)])
    # best-effort pod counts as 100 m and 200 MiB: cpu 900*100//1000 = 90, mem 824*100//1024 = 80 -> 85
    assert SCORE_PLUGINS["NodeResourcesLeastAllocated"].score(Pod("be"), st, np.arange(1)).tolist() == [85]
    big = Pod("big", cpu_milli=2000, memory_bytes=512 * MiB)
    # cpu over capacity -> 0; mem 512*100//1024 = 50 -> 25; most: cpu capped 100, mem 50 -> 75
    assert SCORE_PLUGINS["NodeResourcesLeastAllocated"].score(big, st, np.arange(1)).tolist() == [25]
    assert SCORE_PLUGINS["NodeResourcesMostAllocated"].score(big, st, np.arange(1)).tolist() == [75]


@pytest.mark.parametrize("size_mib,holders,expected", [
    # 3 nodes; image on node 0 only: int(500 MiB * 1/3) = 174762666 B;
    # 100*(174762666 - 23 MiB) // (1000 MiB - 23 MiB) = 15064541800 // 1024458752 = 14
    (500, [0], [14, 0, 0]),
    # on all three: 100*(524288000 - 24117248) // 1024458752 = 48
    (500, [0, 1, 2], [48, 48, 48]),
    # 3000 MiB on all: clamped at 1000 MiB -> 100
    (3000, [0, 1, 2], [100, 100, 100]),
    # 60 MiB on one node: int(60 MiB/3) = 20 MiB < 23 MiB threshold -> 0
    (60, [0], [0, 0, 0]),
])
def test_image_locality(size_mib, holders, expected):
    st = ClusterState([Node(n, 1000, GiB) for n in "abc"])
    for i in holders:
        st.add_image(i, "fn", size_mib * MiB)
    pod = Pod("p", images=("fn",))  # normalised to fn:latest on both sides
    assert SCORE_PLUGINS["ImageLocality"].score(pod, st, np.arange(3)).tolist() == expected


def spread_cluster():
    st = ClusterState([
        Node("a", 4000, 8 * GiB, labels={"zone": "z1"}),
        Node("b", 4000, 8 * GiB, labels={"zone": "z1"}),
        Node("c", 4000, 8 * GiB, labels={"zone": "z2"}),
        Node("d", 4000, 8 * GiB),  # no zone label
    ])
    for node, n in ((0, 2), (2, 1)):
        for k in range(n):
            st.add_pod(node, Pod(f"f{node}{k}", cpu_milli=10, labels={"app": "f"}))
    st.add_pod(1, Pod("other", cpu_milli=10, labels={"app": "g"}))
    return st


@pytest.mark.parametrize("key,expected", [
    # zones: z1 has 2 matching pods, z2 1; size 2 -> w = ln 4 = 1.386
    # raw a = b = round(2.77) = 3, c = round(1.39) = 1; d ignored -> 0
    # normalise: 100*(3+1-s)//3 -> a 33, b 33, c 100
    ("zone", [33, 33, 100, 0]),
    # hostname: counts 2, 0, 1, 0 over 4 domains, w = ln 6 = 1.792
    # raw: round(3.58) = 4, 0, round(1.79) = 2, 0; max 4 min 0: 100*(4-s)//4 -> 0, 100, 50, 100
    ("kubernetes.io/hostname", [0, 100, 50, 100]),
])
def test_pod_topology_spread(key, expected):
    st = spread_cluster()
    pod = Pod("new", labels={"app": "f"},
              spread_constraints=(SpreadConstraint(1, key, "ScheduleAnyway", (("app", "f"),)),))
    assert SCORE_PLUGINS["PodTopologySpread"].score(pod, st, np.arange(4)).tolist() == expected


def test_pod_topology_spread_counts_after_add_and_remove():
    st = spread_cluster()
    sel = (("app", "f"),)
    assert st.matching_pods("default", sel).tolist() == [2, 0, 1, 0]
    p = Pod("x", labels={"app": "f", "v": "1"})
    st.add_pod(3, p)
    assert st.matching_pods("default", sel).tolist() == [2, 0, 1, 1]
    st.remove_pod(3, p)
    assert st.matching_pods("default", sel).tolist() == [2, 0, 1, 0]
    assert st.matching_pods("other-ns", sel).tolist() == [0, 0, 0, 0]


def test_pod_topology_spread_without_soft_constraints_is_zero_and_all_equal_is_100():
    st = spread_cluster()
    assert SCORE_PLUGINS["PodTopologySpread"].score(Pod("n"), st, np.arange(4)).tolist() == [0, 0, 0, 0]
    pod = Pod("n", spread_constraints=(SpreadConstraint(1, "zone", "ScheduleAnyway", (("app", "zzz"),)),))
    assert SCORE_PLUGINS["PodTopologySpread"].score(pod, st, np.arange(4)).tolist() == [100, 100, 100, 0]


@pytest.mark.parametrize("tolerations,expected", [
    # intolerable PreferNoSchedule taints: 0, 1, 2 -> 100*s//2 = 0, 50, 100 -> reversed 100, 50, 0
    ((), [100, 50, 0]),
    # tolerating "gpu" leaves 0, 0, 1 -> 0, 0, 100 -> 100, 100, 0
    ((Toleration("gpu", "Exists"),), [100, 100, 0]),
    # a NoSchedule-only toleration does not count for scoring
    ((Toleration("gpu", "Exists", effect="NoSchedule"),), [100, 50, 0]),
    # tolerate everything -> all 0 -> reverse -> all 100
    ((Toleration(operator="Exists"),), [100, 100, 100]),
])
def test_taint_toleration_score(tolerations, expected):
    soft = lambda k: Taint(k, "true", "PreferNoSchedule")  # noqa: E731
    st = ClusterState([
        Node("a", 1000, GiB),
        Node("b", 1000, GiB, taints=(soft("gpu"),)),
        Node("c", 1000, GiB, taints=(soft("gpu"), soft("spot"), Taint("x", "", "NoSchedule"))),
    ])
    pod = Pod("p", tolerations=tolerations + (Toleration("x", "Exists", effect="NoSchedule"),))
    assert SCORE_PLUGINS["TaintToleration"].score(pod, st, np.arange(3)).tolist() == expected


@pytest.mark.parametrize("terms,expected", [
    # raw: a 10+30 = 40, b 30, c 10 -> 100*s//40 = 100, 75, 25
    (((10, (MatchExpression("zone", "In", ("z1",)),)), (30, (MatchExpression("type", "In", ("cpu",)),))), [100, 75, 25]),
    # no preferred terms -> all 0
    ((), [0, 0, 0]),
    # 7 on "type NotIn gpu" -> a 7, b 7, c 0 -> 100, 100, 0
    (((7, (MatchExpression("type", "NotIn", ("gpu",)),)),), [100, 100, 0]),
])
def test_node_affinity_score(terms, expected):
    st = ClusterState([
        Node("a", 1000, GiB, labels={"zone": "z1", "type": "cpu"}),
        Node("b", 1000, GiB, labels={"zone": "z2", "type": "cpu"}),
        Node("c", 1000, GiB, labels={"zone": "z1", "type": "gpu"}),
    ])
    assert SCORE_PLUGINS["NodeAffinity"].score(Pod("p", preferred_terms=terms), st, np.arange(3)).tolist() == expected


def test_filters():
    st = ClusterState([
        Node("small", 500, GiB, labels={"type": "cpu"}),
        Node("tainted", 4000, 8 * GiB, labels={"type": "cpu"}, taints=(Taint("gpu", "", "NoSchedule"),)),
        Node("gpu", 4000, 8 * GiB, labels={"type": "gpu"}),
        Node("ok", 4000, 8 * GiB, labels={"type": "cpu"}),
    ])
    s = Scheduler(KUBE_DEFAULT_WEIGHTS, np.random.default_rng(0))
    pod = Pod("p", cpu_milli=1000, memory_bytes=GiB, required_terms=((MatchExpression("type", "In", ("cpu",)),),))
    assert s.feasible_nodes(pod, st).tolist() == [3]
    tolerant = Pod("q", cpu_milli=1000, tolerations=(Toleration("gpu", "Exists"),), node_selector={"type": "cpu"})
    assert s.feasible_nodes(tolerant, st).tolist() == [1, 3]
    assert s.select(Pod("huge", cpu_milli=5000), st) is None


def test_weighted_sum_and_seeded_tie_break():
    st = two_nodes()
    # LeastAllocated only: B (62) beats A (56); MostAllocated only: A (43) beats B (37)
    assert Scheduler({"NodeResourcesLeastAllocated": 1}, np.random.default_rng(0)).select(POD, st) == 1
    assert Scheduler({"NodeResourcesMostAllocated": 1}, np.random.default_rng(0)).select(POD, st) == 0
    # weights 1 and 2: kube's NodeResourcesFit weight 3, RequestedToCapacityRatio shape
    # 0 -> round(10/3) = 3, 100 -> round(20/3) = 7, scaled x10: f(u) = 30 + 40 * u // 100.
    # A: cpu 2000/4000 -> u 50 -> 50, mem 3/8 -> u 37 -> 44; round(94/2) = 47 -> 3 * 47 = 141
    # B: cpu 1000/2000 -> 50, mem 1/4 -> u 25 -> 40; round(90/2) = 45 -> 135 -> A
    s = Scheduler({"NodeResourcesLeastAllocated": 1, "NodeResourcesMostAllocated": 2}, np.random.default_rng(0))
    assert s.total_scores(POD, st, np.arange(2)).tolist() == [141, 135]
    # identical empty nodes tie: the seeded generator picks; both are reachable, same seed same pick
    twins = ClusterState([Node("x", 1000, GiB), Node("y", 1000, GiB)])
    picks = [Scheduler(KUBE_DEFAULT_WEIGHTS, np.random.default_rng(seed)).select(POD, twins) for seed in range(20)]
    assert set(picks) == {0, 1}
    assert picks == [Scheduler(KUBE_DEFAULT_WEIGHTS, np.random.default_rng(seed)).select(POD, twins) for seed in range(20)]


@pytest.mark.parametrize("bad", [{"Nope": 1}, [1, 2], [1, 1, 1, 1, 1, 1, -1], [1.5, 1, 1, 1, 1, 1, 1]])
def test_bad_weights_rejected(bad):
    with pytest.raises(SchedulingError):
        weights_vector(bad)


def test_registry_uses_kubernetes_names():
    assert SCORE_PLUGIN_NAMES == (
        "NodeResourcesLeastAllocated", "NodeResourcesMostAllocated", "NodeResourcesBalancedAllocation",
        "ImageLocality", "PodTopologySpread", "TaintToleration", "NodeAffinity")


@pytest.mark.parametrize("q,value", [("100m", 0.1), ("4", 4.0), (64, 64.0), ("32Gi", 32 * GiB), ("256000Mi", 256000 * MiB), ("1k", 1000.0)])
def test_parse_quantity(q, value):
    assert parse_quantity(q) == pytest.approx(value)


def test_load_yaml_examples():
    nodes, pods = load_k8s_objects("data/k8s-scheduler-sim-examples")
    by = {n.name: n for n in nodes}
    assert by["pai-node-00"].cpu_milli == 64000 and by["pai-node-00"].memory_bytes == 256000 * MiB
    assert by["pai-node-00"].labels["alibabacloud.com/gpu-card-model"] == "V100"
    assert by["node"].cpu_milli == 4000 and by["node"].memory_bytes == 32 * GiB
    gp = {p.name: p for p in pods}["gpu-pod-00"]
    assert (gp.cpu_milli, gp.memory_bytes, gp.images) == (4000, 9216 * MiB, ("tensorflow:latest",))
    with pytest.raises(SchedulingError):
        parse_quantity("12 cores")
