"""Export means what the model means: for an exported KubeSchedulerConfiguration, the model's
node scores and choice equal kube-scheduler's arithmetic for that configuration, computed here
independently, in scalar integer Python, from the exported YAML itself and the raw pod lists:

- LeastAllocated / MostAllocated: pkg/scheduler/framework/plugins/noderesources/least_allocated.go
  ``leastRequestedScore``, most_allocated.go ``mostRequestedScore``; resource-weighted mean with
  integer division;
- RequestedToCapacityRatio: requested_to_capacity_ratio.go ``requestedToCapacityRatioScorer``
  (shape scores x MaxNodeScore / MaxCustomPriorityScore, zero resource scores dropped from the
  mean, math.Round) over helper/shape_score.go ``BuildBrokenLinearFunction`` (Go truncation);
- BalancedAllocation: balanced_allocation.go ``balancedResourceScorer`` (two resources:
  std = |f_cpu - f_mem| / 2, int64((1 - std) * 100)).

The other four plugins' normalised scores (ImageLocality, PodTopologySpread, TaintToleration,
NodeAffinity; their arithmetic is held by test_scheduler.py) are taken from the model's plugins
and weighted with the weights read from the YAML: what those tests check is the weighting.

Exported weights stay in 1..100 (the range Tandem documents; kube-scheduler itself enforces it
for NodeResourcesFit resource weights, validation_pluginargs.go ``validateResources``, and
accepts any non-overflowing int32 score-plugin weight, framework.go ``NewFramework``).
"""
import math

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from rlweights.core.export import kube_scheduler_config_yaml, volcano_nodeorder_arguments
from rlweights.core.scheduler import (SCORE_PLUGIN_NAMES, SCORE_PLUGINS, ClusterState, MatchExpression, Node, Pod,
                                      Scheduler, SpreadConstraint, Taint, Toleration, in_range_weights)

GiB = 2**30
MiB = 2**20
DEFAULT_CPU, DEFAULT_MEM = 100, 200 * MiB  # schedutil.DefaultMilliCPURequest / DefaultMemoryRequest


def go_div(a, b):
    q = abs(a) // abs(b)
    return -q if (a < 0) != (b < 0) else q


def kube_fit_score(strategy, req, cap):
    """NodeResourcesFit score of one node; ``req``/``cap`` are [cpu, mem] non-zero requests."""
    kind = strategy["type"]
    if kind == "LeastAllocated":
        return sum(0 if r > c else (c - r) * 100 // c for r, c in zip(req, cap)) // 2
    if kind == "MostAllocated":
        return sum(min(r, c) * 100 // c for r, c in zip(req, cap)) // 2
    assert kind == "RequestedToCapacityRatio"
    shape = [(p["utilization"], p["score"] * 10) for p in strategy["requestedToCapacityRatio"]["shape"]]

    def f(u):
        for i, (ui, si) in enumerate(shape):
            if u <= ui:
                if i == 0:
                    return si
                u0, s0 = shape[i - 1]
                return s0 + go_div((si - s0) * (u - u0), ui - u0)
        return shape[-1][1]

    total = wsum = 0
    for r, c in zip(req, cap):
        s = f(100 if r > c else r * 100 // c)
        if s > 0:
            total, wsum = total + s, wsum + 1
    return 0 if wsum == 0 else math.floor(total / wsum + 0.5)


def kube_balanced(req, cap):
    f = [min(r / c, 1.0) for r, c in zip(req, cap)]
    return int((1 - abs(f[0] - f[1]) / 2) * 100)


OTHER_PLUGINS = ("ImageLocality", "PodTopologySpread", "TaintToleration", "NodeAffinity")


def kube_totals(config_yaml, nodes, placed, pod, other_scores=None):
    """Weighted total per node from the exported configuration. ``placed[i]``: pods on node i;
    ``other_scores[name][i]``: node i's normalised score of one of :data:`OTHER_PLUGINS`."""
    (profile,) = yaml.safe_load(config_yaml)["profiles"]
    weights = {p["name"]: p["weight"] for p in profile["plugins"]["score"]["enabled"]}
    args = {c["name"]: c["args"] for c in profile.get("pluginConfig", [])}
    assert set(weights) <= {"NodeResourcesFit", "NodeResourcesBalancedAllocation"} | set(other_scores or {})
    out = []
    for i, (node, pods) in enumerate(zip(nodes, placed)):
        allp = list(pods) + [pod]
        nz = [sum(p.cpu_milli or DEFAULT_CPU for p in allp), sum(p.memory_bytes or DEFAULT_MEM for p in allp)]
        raw = [sum(p.cpu_milli for p in allp), sum(p.memory_bytes for p in allp)]
        cap = [node.cpu_milli, node.memory_bytes]
        t = 0
        if "NodeResourcesFit" in weights:
            t += weights["NodeResourcesFit"] * kube_fit_score(args["NodeResourcesFit"]["scoringStrategy"], nz, cap)
        if "NodeResourcesBalancedAllocation" in weights:
            t += weights["NodeResourcesBalancedAllocation"] * kube_balanced(raw, cap)
        for name in OTHER_PLUGINS:
            if name in weights:
                t += weights[name] * int(other_scores[name][i])
        out.append(t)
    return out


def model_totals(weights, nodes, placed, pod):
    st = ClusterState(nodes)
    for i, pods in enumerate(placed):
        for p in pods:
            st.add_pod(i, p)
    return Scheduler(weights, np.random.default_rng(0)).total_scores(pod, st, np.arange(len(nodes))).tolist()


def test_hand_worked_zero_resource_score_is_dropped_from_the_mean():
    # wL 1, wM 100: shape 0 -> floor(10/101 + .5) = 0, 100 -> floor(1000/101 + .5) = 10; x10: f(u) = u
    nodes = [Node("a", 100_000, 4 * GiB), Node("b", 100_000, 8 * GiB)]
    pod = Pod("p", cpu_milli=100, memory_bytes=2 * GiB)
    w = [1, 100, 0, 0, 0, 0, 0]
    # a: cpu u = 100*100//100000 = 0 -> 0 (dropped), mem u 50 -> 50; mean over 1 resource = 50
    # b: cpu dropped, mem u 25 -> 25. Without the drop they would be 25 and 12.
    # NodeResourcesFit weighs 101 / gcd(101) = 1 (the only plugin: an exact rescale into 1..100)
    assert model_totals(w, nodes, [[], []], pod) == [50, 25]
    assert kube_totals(kube_scheduler_config_yaml(w), nodes, [[], []], pod) == [50, 25]


def test_hand_worked_decreasing_shape_truncates_toward_zero():
    # wL 2, wM 1: shape 0 -> floor(20/3 + .5) = 7, 100 -> floor(10/3 + .5) = 3; x10: 70 .. 30
    # cpu 1000 of 3000 -> u 33: 70 + trunc(-40 * 33 / 100) = 70 - 13 = 57 (floor would give 56)
    # mem 1 of 4 GiB -> u 25: 70 - 10 = 60; round(117 / 2) = round(58.5) = 59; weight 3 -> 177
    nodes = [Node("a", 3000, 4 * GiB)]
    pod = Pod("p", cpu_milli=1000, memory_bytes=1 * GiB)
    assert model_totals([2, 1, 0, 0, 0, 0, 0], nodes, [[]], pod) == [177]
    assert kube_totals(kube_scheduler_config_yaml([2, 1, 0, 0, 0, 0, 0]), nodes, [[]], pod) == [177]


def random_state(rng):
    n = int(rng.integers(2, 9))
    nodes = [Node(f"n{i}", int(rng.choice([2000, 4000, 8000, 16000, 32000, 96000])),
                  int(rng.choice([4, 8, 16, 64, 256, 512])) * GiB) for i in range(n)]
    placed = []
    for node in nodes:
        pods = []
        for k in range(int(rng.integers(0, 6))):
            cpu = int(rng.choice([0, int(rng.integers(1, node.cpu_milli // 2 + 1))]))
            mem = int(rng.choice([0, int(rng.integers(1, node.memory_bytes // 2 + 1))]))
            pods.append(Pod(f"{node.name}-{k}", cpu_milli=cpu, memory_bytes=mem))
        placed.append(pods)
    pod = Pod("new", cpu_milli=int(rng.choice([0, int(rng.integers(1, 4000))])),
              memory_bytes=int(rng.choice([0, int(rng.integers(1, 8 * GiB))])))
    return nodes, placed, pod


@pytest.mark.parametrize("seed", range(4))
def test_random_states_model_equals_kube_arithmetic(seed):
    rng = np.random.default_rng(seed)
    checked = both = 0
    for _ in range(300):
        nodes, placed, pod = random_state(rng)
        wl, wm, wb = (int(x) for x in rng.integers(0, 101, 3))
        wl, wm = (wl, wm) if wl or wm else (1, 1)
        w = [wl, wm, wb, 0, 0, 0, 0]
        assert all(0 <= x <= 100 for x in w)
        kube = kube_totals(kube_scheduler_config_yaml(w), nodes, placed, pod)
        model = model_totals(w, nodes, placed, pod)
        assert model == kube, (w, pod, [n.name for n in nodes])
        # same node choice: the same set of best nodes (ties are broken at random by both)
        assert {i for i, t in enumerate(model) if t == max(model)} == {i for i, t in enumerate(kube) if t == max(kube)}
        checked += 1
        both += wl > 0 and wm > 0
    assert checked == 300 and both > 150  # most draws exercise RequestedToCapacityRatio


# --------------------------------------------------------------------------- weights in range

@pytest.mark.parametrize("raw,expected", [
    ([30, 10, 5], [30, 10, 5]),                 # all <= 100: unchanged
    ([100, 0, 100], [100, 0, 100]),
    ([0, 0, 0], [0, 0, 0]),
    ([200, 2, 4, 100], [100, 1, 2, 50]),        # gcd 2: exact
    ([160, 5], [32, 1]),                        # gcd 5: exact
    ([200, 1, 1], [100, 1, 1]),                 # 100 * 1 / 200 = 0.5 -> 1 (half up)
    ([160, 7], [100, 4]),                       # 700 / 160 = 4.375 -> 4
    ([150, 100, 1, 0], [100, 67, 1, 0]),        # 66.67 -> 67; 0.67 -> 1; 0 stays off
    ([1000, 999, 3], [100, 100, 1]),            # 99.9 -> 100; 0.3 -> 0 -> raised to 1
    ([101, 0], [1, 0]),                         # gcd 101: exact
    ([101, 2], [100, 2]),                       # 200 / 101 = 1.98 -> 2
    ([300, 3, 0, 600], [50, 1, 0, 100]),        # gcd 3 -> (100, 1, 0, 200), then x 1/2: 0.5 -> 1
])
def test_in_range_weights_table(raw, expected):
    assert in_range_weights(raw) == expected


def test_in_range_weights_rejects_negative():
    with pytest.raises(ValueError):
        in_range_weights([5, -1])


def test_fit_weight_over_100_is_exported_in_range_and_an_exact_rescale_keeps_the_choice():
    # wL 100, wM 100 (the old export wrote NodeResourcesFit 200), BalancedAllocation 50:
    # profile (200, 50), gcd 50 -> (4, 1): every total divides by 50, so the choice is unchanged
    w = [100, 100, 50, 0, 0, 0, 0]
    enabled = {p["name"]: p["weight"] for p in yaml.safe_load(kube_scheduler_config_yaml(w))["profiles"][0]["plugins"]["score"]["enabled"]}
    assert enabled == {"NodeResourcesFit": 4, "NodeResourcesBalancedAllocation": 1}
    rng = np.random.default_rng(7)
    for _ in range(50):
        nodes, placed, pod = random_state(rng)
        model = model_totals(w, nodes, placed, pod)
        kube = kube_totals(kube_scheduler_config_yaml(w), nodes, placed, pod)
        assert model == kube
        # the unscaled profile (200 x fit + 50 x balanced, same shape) is exactly 50 x the exported one
        unscaled = _with_weights(kube_scheduler_config_yaml(w), {"NodeResourcesFit": 200, "NodeResourcesBalancedAllocation": 50})
        assert [50 * t for t in kube] == kube_totals(yaml.safe_dump(unscaled), nodes, placed, pod)


def test_hand_worked_rounding_would_flip_the_choice_so_the_model_scores_the_exported_weights():
    # LeastAllocated 160, BalancedAllocation 7 (the export API takes weights up to 1000): no
    # common divisor, so the profile is rounded: 160 -> 100, 7 * 100 / 160 = 4.375 -> 4.
    nodes = [Node("a", 100_000, 100 * GiB), Node("b", 100_000, 100 * GiB)]
    placed = [[Pod("x", cpu_milli=40_000, memory_bytes=26 * GiB)], [Pod("y", cpu_milli=63_000, memory_bytes=1 * GiB)]]
    pod = Pod("p", cpu_milli=1000, memory_bytes=1 * GiB)
    # a: cpu 41000/100000, mem 27/100 GiB: least (59 + 73) // 2 = 66; balanced (1 - 0.14 / 2) * 100 = 93
    # b: cpu 64000/100000, mem 2/100 GiB:  least (36 + 98) // 2 = 67; balanced (1 - 0.62 / 2) * 100 = 69
    # unscaled: a 160 * 66 + 7 * 93 = 11211 > b 160 * 67 + 7 * 69 = 11203 -> a
    # exported: a 100 * 66 + 4 * 93 = 6972 < b 100 * 67 + 4 * 69 = 6976 -> b
    w = {"NodeResourcesLeastAllocated": 160, "NodeResourcesBalancedAllocation": 7}
    y = kube_scheduler_config_yaml(w)
    enabled = {p["name"]: p["weight"] for p in yaml.safe_load(y)["profiles"][0]["plugins"]["score"]["enabled"]}
    assert enabled == {"NodeResourcesFit": 100, "NodeResourcesBalancedAllocation": 4}
    assert kube_totals(y, nodes, placed, pod) == [6972, 6976]
    assert model_totals(w, nodes, placed, pod) == [6972, 6976]  # the model measures what is exported
    st_ = ClusterState(nodes)
    for i, pods in enumerate(placed):
        for p in pods:
            st_.add_pod(i, p)
    assert Scheduler(w, np.random.default_rng(0)).select(pod, st_) == 1
    assert volcano_nodeorder_arguments(w) == {
        "leastrequested.weight": 100, "mostrequested.weight": 0, "balancedresource.weight": 4,
        "imagelocality.weight": 0, "podtopologyspread.weight": 0, "tainttoleration.weight": 0, "nodeaffinity.weight": 0}


ZONE = "topology.kubernetes.io/zone"


def rich_state(rng):
    """:func:`random_state` plus zone labels, PreferNoSchedule taints, images and labelled pods,
    and a pod with an image, a soft spread constraint, a preferred term and maybe a toleration,
    so that all seven plugins score."""
    nodes, placed, pod = random_state(rng)
    for node in nodes:
        if rng.random() < 0.8:
            node.labels[ZONE] = f"z{int(rng.integers(0, 3))}"
        node.labels["kind"] = str(rng.choice(["cpu", "gpu"]))
        if rng.random() < 0.4:
            node.taints = (Taint("gpu", "", "PreferNoSchedule"),)
        if rng.random() < 0.5:
            node.images["fn:v1"] = int(rng.integers(10, 900)) * MiB
    placed = [[Pod(p.name, cpu_milli=p.cpu_milli, memory_bytes=p.memory_bytes,
                   labels={"app": "f"} if rng.random() < 0.5 else {}) for p in pods] for pods in placed]
    pod = Pod("new", cpu_milli=pod.cpu_milli, memory_bytes=pod.memory_bytes, images=("fn:v1",), labels={"app": "f"},
              preferred_terms=((int(rng.integers(1, 101)), (MatchExpression("kind", "In", ("cpu",)),)),),
              spread_constraints=(SpreadConstraint(1, ZONE, "ScheduleAnyway", (("app", "f"),)),),
              tolerations=(Toleration("gpu", "Exists"),) if rng.random() < 0.3 else ())
    return nodes, placed, pod


def exported(w):
    """(kube profile weights by name, volcano arguments) of the export of ``w``."""
    y = kube_scheduler_config_yaml(w)
    (profile,) = yaml.safe_load(y)["profiles"]
    return y, {p["name"]: p["weight"] for p in profile["plugins"]["score"]["enabled"]}, volcano_nodeorder_arguments(w)


WEIGHT = st.one_of(st.integers(1, 100), st.integers(0, 1000))


@settings(max_examples=150, deadline=None, derandomize=True)
@given(w=st.lists(WEIGHT, min_size=7, max_size=7).filter(any), seed=st.integers(0, 2**32 - 1))
def test_every_exported_weight_is_in_range_and_the_model_still_equals_kube(w, seed):
    y, enabled, volcano = exported(w)
    assert all(isinstance(v, int) and 1 <= v <= 100 for v in enabled.values()), enabled
    want = ({"NodeResourcesFit"} if w[0] or w[1] else set()) | {n for n, x in zip(SCORE_PLUGIN_NAMES[2:], w[2:]) if x}
    assert set(enabled) == want
    assert all(0 <= v <= 100 for v in volcano.values())
    assert [v > 0 for v in volcano.values()] == [x > 0 for x in w]  # 0 = off, and only 0
    # the unscaled kube profile (NodeResourcesFit = wL + wM): if every weight fits, nothing changes
    raw = {"NodeResourcesFit": w[0] + w[1], **dict(zip(SCORE_PLUGIN_NAMES[2:], w[2:]))}
    raw = {k: v for k, v in raw.items() if v}
    if max(raw.values()) <= 100:
        assert enabled == raw
    exact = all(enabled[k] * max(raw.values()) == v * max(enabled.values()) for k, v in raw.items())
    rng = np.random.default_rng(seed)
    for _ in range(3):
        nodes, placed, pod = rich_state(rng)
        state = ClusterState(nodes)
        for i, pods in enumerate(placed):
            for p in pods:
                state.add_pod(i, p)
        idx = np.arange(len(nodes))
        other = {n: SCORE_PLUGINS[n].score(pod, state, idx).tolist() for n in OTHER_PLUGINS}
        model = Scheduler(w, np.random.default_rng(0)).total_scores(pod, state, idx).tolist()
        kube = kube_totals(y, nodes, placed, pod, other_scores=other)
        assert model == kube
        if exact:  # a uniform rescale: the unscaled profile's totals are the same multiple of every node's
            unscaled = kube_totals(yaml.safe_dump(_with_weights(y, raw)), nodes, placed, pod, other_scores=other)
            assert [t * max(enabled.values()) for t in unscaled] == [t * max(raw.values()) for t in kube]


def _with_weights(config_yaml, weights):
    doc = yaml.safe_load(config_yaml)
    for p in doc["profiles"][0]["plugins"]["score"]["enabled"]:
        p["weight"] = weights[p["name"]]
    return doc
