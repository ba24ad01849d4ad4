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
"""
import math

import numpy as np
import pytest
import yaml

from rlweights.core.export import kube_scheduler_config_yaml
from rlweights.core.scheduler import ClusterState, Node, Pod, Scheduler

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


def kube_totals(config_yaml, nodes, placed, pod):
    """Weighted total per node from the exported configuration. ``placed[i]``: pods on node i."""
    (profile,) = yaml.safe_load(config_yaml)["profiles"]
    weights = {p["name"]: p["weight"] for p in profile["plugins"]["score"]["enabled"]}
    args = {c["name"]: c["args"] for c in profile.get("pluginConfig", [])}
    assert set(weights) <= {"NodeResourcesFit", "NodeResourcesBalancedAllocation"}
    out = []
    for node, pods in zip(nodes, placed):
        allp = list(pods) + [pod]
        nz = [sum(p.cpu_milli or DEFAULT_CPU for p in allp), sum(p.memory_bytes or DEFAULT_MEM for p in allp)]
        raw = [sum(p.cpu_milli for p in allp), sum(p.memory_bytes for p in allp)]
        cap = [node.cpu_milli, node.memory_bytes]
        t = 0
        if "NodeResourcesFit" in weights:
            t += weights["NodeResourcesFit"] * kube_fit_score(args["NodeResourcesFit"]["scoringStrategy"], nz, cap)
        if "NodeResourcesBalancedAllocation" in weights:
            t += weights["NodeResourcesBalancedAllocation"] * kube_balanced(raw, cap)
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
    assert model_totals(w, nodes, [[], []], pod) == [101 * 50, 101 * 25]
    assert kube_totals(kube_scheduler_config_yaml(w), nodes, [[], []], pod) == [101 * 50, 101 * 25]


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
