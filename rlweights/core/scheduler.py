"""kube-scheduler's scheduling cycle in plain Python + numpy: filter plugins, score plugins each
normalised to 0-100, a weighted sum, ties broken by a seeded ``numpy.random.Generator``.

Units follow the Kubernetes API objects: CPU in millicores (int), memory and image sizes in bytes
(int). Scores are Go ``int64`` arithmetic (integer division truncates toward zero; all operands
here are non-negative, so ``//`` is the same). Every plugin cites the kube-scheduler source file it
follows (paths in github.com/kubernetes/kubernetes, ``pkg/scheduler/framework/plugins/...``, as of
v1.30); the code is our own.

Plugins are registered by their Kubernetes names in :data:`FILTER_PLUGINS` and
:data:`SCORE_PLUGINS`. The two scoring strategies of ``NodeResourcesFit`` are separate entries
under their pre-1.23 plugin names ``NodeResourcesLeastAllocated`` and
``NodeResourcesMostAllocated`` (how kubescheduler.config.k8s.io/v1beta1 named them), because the
learned weight vector weighs them separately; :mod:`rlweights.core.export` maps them back onto
``NodeResourcesFit`` scoring strategies of the v1 API.
"""
from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

import numpy as np

MAX_NODE_SCORE = 100  # framework.MaxNodeScore (pkg/scheduler/framework/interface.go)
# schedutil.DefaultMilliCPURequest / DefaultMemoryRequest (pkg/scheduler/util/pod_resources.go):
# used for pods that request nothing, by the NodeResourcesFit scorers ("non-zero requests").
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024
# ImageLocality thresholds (pkg/scheduler/framework/plugins/imagelocality/image_locality.go).
MB = 1024 * 1024
IMAGE_MIN_THRESHOLD = 23 * MB
IMAGE_MAX_CONTAINER_THRESHOLD = 1000 * MB

HOSTNAME_KEY = "kubernetes.io/hostname"
ZONE_KEY = "topology.kubernetes.io/zone"


class SchedulingError(ValueError):
    """Bad scheduler input (unknown plugin, weight out of range, malformed object)."""


# --------------------------------------------------------------------------- API objects

@dataclass(frozen=True)
class Taint:
    """``v1.Taint``: effect is ``NoSchedule``, ``PreferNoSchedule`` or ``NoExecute``."""

    key: str
    value: str = ""
    effect: str = "NoSchedule"

    def __post_init__(self) -> None:
        if self.effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            raise SchedulingError(f"taint {self.key!r}: unknown effect {self.effect!r}")


@dataclass(frozen=True)
class Toleration:
    """``v1.Toleration``; operator ``Equal`` (default) or ``Exists``; empty effect matches all."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        """``Toleration.ToleratesTaint`` (staging/src/k8s.io/api/core/v1/toleration.go)."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        if self.operator in ("Equal", ""):
            return self.value == taint.value
        return False


@dataclass(frozen=True)
class MatchExpression:
    """A ``NodeSelectorRequirement``: operator In, NotIn, Exists, DoesNotExist, Gt, Lt."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op == "In":
            return self.key in labels and labels[self.key] in self.values
        if op == "NotIn":
            return self.key not in labels or labels[self.key] not in self.values
        if op == "Exists":
            return self.key in labels
        if op == "DoesNotExist":
            return self.key not in labels
        if op in ("Gt", "Lt"):
            if self.key not in labels or len(self.values) != 1:
                return False
            try:
                lv, rv = int(labels[self.key]), int(self.values[0])
            except ValueError:
                return False
            return lv > rv if op == "Gt" else lv < rv
        raise SchedulingError(f"unknown node selector operator {op!r}")


Term = tuple[MatchExpression, ...]  # a NodeSelectorTerm: all expressions must match (AND)


def term_matches(term: Term, labels: Mapping[str, str]) -> bool:
    """A NodeSelectorTerm matches when all its expressions match; an empty term matches nothing
    (``nodeaffinity.NodeSelector`` semantics, staging/src/k8s.io/component-helpers/scheduling/corev1/nodeaffinity)."""
    return bool(term) and all(e.matches(labels) for e in term)


@dataclass(frozen=True)
class SpreadConstraint:
    """``v1.TopologySpreadConstraint`` with a ``matchLabels`` label selector."""

    max_skew: int
    topology_key: str
    when_unsatisfiable: str = "ScheduleAnyway"
    match_labels: tuple[tuple[str, str], ...] = ()


@dataclass
class Pod:
    """A pod to schedule. ``cpu_milli``/``memory_bytes`` are the sums of its containers'
    requests; ``images`` the container images (one per container).

    ``cache_key``: pods with equal keys have equal affinity, tolerations and images, so the
    scheduler may cache per-node results that depend only on those (the simulator sets it to
    the function id)."""

    name: str
    cpu_milli: int = 0
    memory_bytes: int = 0
    images: tuple[str, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)
    namespace: str = "default"
    node_selector: dict[str, str] = field(default_factory=dict)
    required_terms: tuple[Term, ...] = ()
    preferred_terms: tuple[tuple[int, Term], ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    spread_constraints: tuple[SpreadConstraint, ...] = ()
    cache_key: str | None = None

    def __post_init__(self) -> None:
        if self.cpu_milli < 0 or self.memory_bytes < 0:
            raise SchedulingError(f"pod {self.name}: negative resource request")
        for w, _ in self.preferred_terms:
            if not 1 <= w <= 100:  # validation of PreferredSchedulingTerm.weight
                raise SchedulingError(f"pod {self.name}: preferred term weight {w} not in 1..100")

    @property
    def nonzero_cpu(self) -> int:
        return self.cpu_milli or DEFAULT_MILLI_CPU_REQUEST

    @property
    def nonzero_memory(self) -> int:
        return self.memory_bytes or DEFAULT_MEMORY_REQUEST


@dataclass
class Node:
    """A node: allocatable CPU (millicores), memory (bytes), pod slots; labels, taints and the
    images it holds (``{normalised image name: size in bytes}``, as ``status.images``)."""

    name: str
    cpu_milli: int
    memory_bytes: int
    max_pods: int = 110
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    images: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.cpu_milli <= 0 or self.memory_bytes <= 0:
            raise SchedulingError(f"node {self.name}: allocatable CPU and memory must be positive")
        self.labels.setdefault(HOSTNAME_KEY, self.name)


def normalize_image_name(name: str) -> str:
    """Append ``:latest`` when the image has no tag or digest (imagelocality ``normalizedImageName``)."""
    if name.rfind(":") <= name.rfind("/"):
        name += ":latest"
    return name


# --------------------------------------------------------------------------- cluster state

class ClusterState:
    """Nodes plus what is placed on them, as numpy arrays over nodes (index order = ``nodes``).

    Arrays (shape ``(n,)``, int64): ``alloc_cpu`` / ``alloc_mem`` (allocatable),
    ``req_cpu`` / ``req_mem`` (sum of pod requests), ``nz_cpu`` / ``nz_mem`` (sum of non-zero
    requests), ``n_pods``. ``image_nodes[name]`` is a bool array: which nodes hold the image.
    """

    def __init__(self, nodes: Sequence[Node]) -> None:
        if not nodes:
            raise SchedulingError("a cluster needs at least one node")
        names = [n.name for n in nodes]
        if len(set(names)) != len(names):
            raise SchedulingError("node names must be unique")
        self.nodes = list(nodes)
        n = len(nodes)
        self.alloc_cpu = np.array([x.cpu_milli for x in nodes], dtype=np.int64)
        self.alloc_mem = np.array([x.memory_bytes for x in nodes], dtype=np.int64)
        self.max_pods = np.array([x.max_pods for x in nodes], dtype=np.int64)
        self.req_cpu = np.zeros(n, np.int64)
        self.req_mem = np.zeros(n, np.int64)
        self.nz_cpu = np.zeros(n, np.int64)
        self.nz_mem = np.zeros(n, np.int64)
        self.n_pods = np.zeros(n, np.int64)
        self.image_sizes: dict[str, int] = {}
        self.image_nodes: dict[str, np.ndarray] = {}
        for i, node in enumerate(nodes):
            for img, size in node.images.items():
                self.add_image(i, img, size)
        self._pod_labels: list[dict[tuple[str, frozenset], int]] = [dict() for _ in range(n)]
        self._selector_counts: dict[tuple[str, frozenset], np.ndarray] = {}
        self.static_cache: dict[tuple, object] = {}

    def __len__(self) -> int:
        return len(self.nodes)

    def add_image(self, node_idx: int, image: str, size_bytes: int) -> None:
        """Record that node ``node_idx`` now holds ``image`` (``size_bytes``)."""
        image = normalize_image_name(image)
        arr = self.image_nodes.get(image)
        if arr is None:
            arr = self.image_nodes[image] = np.zeros(len(self.nodes), bool)
        arr[node_idx] = True
        self.image_sizes[image] = int(size_bytes)

    def _label_key(self, pod: Pod) -> tuple[str, frozenset]:
        return (pod.namespace, frozenset(pod.labels.items()))

    def add_pod(self, node_idx: int, pod: Pod) -> None:
        """Account ``pod`` on node ``node_idx`` (requests and labels)."""
        self._update(node_idx, pod, +1)

    def remove_pod(self, node_idx: int, pod: Pod) -> None:
        """Remove a pod previously added with :meth:`add_pod`."""
        self._update(node_idx, pod, -1)

    def _update(self, i: int, pod: Pod, sign: int) -> None:
        self.req_cpu[i] += sign * pod.cpu_milli
        self.req_mem[i] += sign * pod.memory_bytes
        self.nz_cpu[i] += sign * pod.nonzero_cpu
        self.nz_mem[i] += sign * pod.nonzero_memory
        self.n_pods[i] += sign
        key = self._label_key(pod)
        d = self._pod_labels[i]
        d[key] = d.get(key, 0) + sign
        if d[key] == 0:
            del d[key]
        for (ns, sel), arr in self._selector_counts.items():
            if ns == key[0] and sel <= key[1]:
                arr[i] += sign

    def topology_domains(self, key: str) -> np.ndarray:
        """Per node, the index of its value of label ``key`` among the distinct values (-1 when
        the node lacks the label); cached, as node labels do not change."""
        ck = ("topology", key)
        arr = self.static_cache.get(ck)
        if arr is None:
            values = sorted({n.labels[key] for n in self.nodes if key in n.labels})
            pos = {v: i for i, v in enumerate(values)}
            arr = self.static_cache[ck] = np.array([pos.get(n.labels.get(key), -1) if key in n.labels else -1 for n in self.nodes], np.int64)
        return arr

    def matching_pods(self, namespace: str, match_labels: Iterable[tuple[str, str]]) -> np.ndarray:
        """Per node, the number of pods in ``namespace`` whose labels include ``match_labels``."""
        sel = frozenset(match_labels)
        ck = (namespace, sel)
        arr = self._selector_counts.get(ck)
        if arr is None:
            arr = np.zeros(len(self.nodes), np.int64)
            for i, d in enumerate(self._pod_labels):
                arr[i] = sum(c for (ns, lab), c in d.items() if ns == namespace and sel <= lab)
            self._selector_counts[ck] = arr
        return arr


# --------------------------------------------------------------------------- filter plugins

class FilterPlugin(ABC):
    """A filter plugin: ``feasible(pod, state) -> bool array (n,)``."""

    name = ""

    @abstractmethod
    def feasible(self, pod: Pod, state: ClusterState) -> np.ndarray:
        """Bool array (n,) over ``state.nodes``: True where the node can take ``pod``."""


def _cached(state: ClusterState, key: tuple, pod: Pod, compute):
    if pod.cache_key is None:
        return compute()
    full = key + (pod.cache_key,)
    val = state.static_cache.get(full)
    if val is None:
        val = state.static_cache[full] = compute()
    return val


class NodeResourcesFitFilter(FilterPlugin):
    """``NodeResourcesFit`` Filter (noderesources/fit.go, ``fitsRequest``): the pod's requests
    plus the node's requested resources must not exceed allocatable CPU, memory and pod slots."""

    name = "NodeResourcesFit"

    def feasible(self, pod: Pod, state: ClusterState) -> np.ndarray:
        return (
            (state.n_pods + 1 <= state.max_pods)
            & (state.req_cpu + pod.cpu_milli <= state.alloc_cpu)
            & (state.req_mem + pod.memory_bytes <= state.alloc_mem)
        )


class TaintTolerationFilter(FilterPlugin):
    """``TaintToleration`` Filter (tainttoleration/taint_toleration.go): every ``NoSchedule``
    and ``NoExecute`` taint of the node must be tolerated by the pod."""

    name = "TaintToleration"

    def feasible(self, pod: Pod, state: ClusterState) -> np.ndarray:
        def compute() -> np.ndarray:
            return np.array([
                all(any(t.tolerates(taint) for t in pod.tolerations)
                    for taint in node.taints if taint.effect in ("NoSchedule", "NoExecute"))
                for node in state.nodes
            ], dtype=bool)
        return _cached(state, ("filter", self.name), pod, compute)


class NodeAffinityFilter(FilterPlugin):
    """``NodeAffinity`` Filter (nodeaffinity/node_affinity.go): ``nodeSelector`` labels must all
    match, and when required terms exist at least one term (OR) must match all its expressions (AND)."""

    name = "NodeAffinity"

    def feasible(self, pod: Pod, state: ClusterState) -> np.ndarray:
        def compute() -> np.ndarray:
            out = np.ones(len(state), bool)
            for i, node in enumerate(state.nodes):
                if any(node.labels.get(k) != v for k, v in pod.node_selector.items()):
                    out[i] = False
                elif pod.required_terms and not any(term_matches(t, node.labels) for t in pod.required_terms):
                    out[i] = False
            return out
        return _cached(state, ("filter", self.name), pod, compute)


# --------------------------------------------------------------------------- score plugins

class ScorePlugin(ABC):
    """A score plugin: ``score(pod, state, idx) -> int64 array`` for the feasible nodes ``idx``
    (indices into ``state.nodes``), already normalised to 0..100 (``MAX_NODE_SCORE``)."""

    name = ""

    @abstractmethod
    def score(self, pod: Pod, state: ClusterState, idx: np.ndarray) -> np.ndarray:
        """int64 array (len(idx),) of node scores in 0..MAX_NODE_SCORE for the feasible nodes ``idx``."""


def default_normalize(scores: np.ndarray, reverse: bool = False) -> np.ndarray:
    """``helper.DefaultNormalizeScore(MaxNodeScore, reverse, scores)``
    (pkg/scheduler/framework/plugins/helper/normalize_score.go): scale by ``100 * s // max(s)``;
    all-zero scores stay 0 (or become 100 when ``reverse``); ``reverse`` maps s to ``100 - s``."""
    scores = np.asarray(scores, dtype=np.int64)
    mx = int(scores.max()) if scores.size else 0
    if mx == 0:
        return np.full_like(scores, MAX_NODE_SCORE if reverse else 0)
    out = MAX_NODE_SCORE * scores // mx
    return MAX_NODE_SCORE - out if reverse else out


def _resource_arrays(pod: Pod, state: ClusterState, idx: np.ndarray, nonzero: bool):
    if nonzero:
        cpu = state.nz_cpu[idx] + pod.nonzero_cpu
        mem = state.nz_mem[idx] + pod.nonzero_memory
    else:
        cpu = state.req_cpu[idx] + pod.cpu_milli
        mem = state.req_mem[idx] + pod.memory_bytes
    return cpu, mem, state.alloc_cpu[idx], state.alloc_mem[idx]


class LeastAllocated(ScorePlugin):
    """``NodeResourcesFit`` with ``LeastAllocated`` strategy (noderesources/least_allocated.go):
    per resource ``(cap - req) * 100 // cap`` (0 when req > cap), then the resource-weighted mean
    ``sum(score_r * w_r) // sum(w_r)`` with cpu and memory weights 1 (the default
    ``resources``). ``req`` = node's non-zero requested + the pod's non-zero request."""

    name = "NodeResourcesLeastAllocated"

    def score(self, pod: Pod, state: ClusterState, idx: np.ndarray) -> np.ndarray:
        cpu, mem, ccap, mcap = _resource_arrays(pod, state, idx, nonzero=True)
        s_cpu = np.where(cpu > ccap, 0, (ccap - cpu) * MAX_NODE_SCORE // ccap)
        s_mem = np.where(mem > mcap, 0, (mcap - mem) * MAX_NODE_SCORE // mcap)
        return (s_cpu + s_mem) // 2


class MostAllocated(ScorePlugin):
    """``NodeResourcesFit`` with ``MostAllocated`` strategy (noderesources/most_allocated.go):
    per resource ``min(req, cap) * 100 // cap``, then the resource-weighted mean (cpu 1, memory 1)."""

    name = "NodeResourcesMostAllocated"

    def score(self, pod: Pod, state: ClusterState, idx: np.ndarray) -> np.ndarray:
        cpu, mem, ccap, mcap = _resource_arrays(pod, state, idx, nonzero=True)
        s_cpu = np.minimum(cpu, ccap) * MAX_NODE_SCORE // ccap
        s_mem = np.minimum(mem, mcap) * MAX_NODE_SCORE // mcap
        return (s_cpu + s_mem) // 2


#: ``config.MaxCustomPriorityScore`` (pkg/scheduler/apis/config/types_pluginargs.go): shape
#: scores of ``RequestedToCapacityRatio`` are integers 0..10 (11 levels).
MAX_CUSTOM_PRIORITY_SCORE = 10


def fit_shape(w_least: int, w_most: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """The two-point ``RequestedToCapacityRatio`` shape ``((0, s0), (100, s100))`` standing for
    the pair of weights (LeastAllocated ``w_least``, MostAllocated ``w_most``), both > 0:
    ``s0 = floor(10 * wL / W + 1/2)``, ``s100 = floor(10 * wM / W + 1/2)`` with ``W = wL + wM``
    (``wL * (100 - u) + wM * u`` is linear in utilisation ``u``; the shape keeps it up to kube's
    11 score levels). Used both by the model (:class:`RequestedToCapacityRatio`) and by the
    export (:mod:`rlweights.core.export`), so the two cannot drift apart."""
    total = w_least + w_most
    if w_least <= 0 or w_most <= 0:
        raise SchedulingError("fit_shape needs both weights > 0")
    return ((0, (2 * MAX_CUSTOM_PRIORITY_SCORE * w_least + total) // (2 * total)),
            (100, (2 * MAX_CUSTOM_PRIORITY_SCORE * w_most + total) // (2 * total)))


def _go_div(a: np.ndarray, b) -> np.ndarray:
    """Go's integer division (truncates toward zero), element-wise on int64 arrays."""
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (np.asarray(b) < 0), -q, q)


def broken_linear(shape, p: np.ndarray) -> np.ndarray:
    """``helper.BuildBrokenLinearFunction`` (pkg/scheduler/framework/plugins/helper/shape_score.go):
    the piecewise-linear function through ``shape = [(utilization, score), ...]`` (utilization
    ascending) at integer utilisations ``p`` (int64 array), in Go integer arithmetic: below the
    first point its score, above the last point its score, between points
    ``s[i-1] + (s[i] - s[i-1]) * (p - u[i-1]) / (u[i] - u[i-1])`` truncated toward zero."""
    p = np.asarray(p, np.int64)
    out = np.full(p.shape, shape[-1][1], np.int64)
    done = np.zeros(p.shape, bool)
    for i, (u, sc) in enumerate(shape):
        hit = ~done & (p <= u)
        if i == 0:
            out[hit] = sc
        else:
            u0, s0 = shape[i - 1]
            out[hit] = s0 + _go_div((sc - s0) * (p[hit] - u0), u - u0)
        done |= hit
    return out


class RequestedToCapacityRatio(ScorePlugin):
    """``NodeResourcesFit`` with the ``RequestedToCapacityRatio`` strategy
    (pkg/scheduler/framework/plugins/noderesources/requested_to_capacity_ratio.go,
    ``requestedToCapacityRatioScorer`` / ``buildRequestedToCapacityRatioScorerFunction``):
    shape scores scaled by ``MaxNodeScore / MaxCustomPriorityScore`` (= 10); per resource
    (cpu, memory, weight 1 each; non-zero requests as for the other strategies) utilisation
    ``req * 100 // cap`` (``100`` when ``req > cap``) through :func:`broken_linear`; a resource
    whose score is 0 is **dropped from the mean** (neither its score nor its weight counts); node
    score ``math.Round(sum / weightSum)`` (0 when every resource scored 0).

    ``shape``: ``[(utilization 0..100, score 0..10), ...]``; here :func:`fit_shape`."""

    name = "NodeResourcesFit"

    def __init__(self, shape) -> None:
        self.shape = tuple((int(u), int(sc) * (MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE)) for u, sc in shape)

    def score(self, pod: Pod, state: ClusterState, idx: np.ndarray) -> np.ndarray:
        cpu, mem, ccap, mcap = _resource_arrays(pod, state, idx, nonzero=True)
        total = np.zeros(len(idx), np.int64)
        wsum = np.zeros(len(idx), np.int64)
        for req, cap in ((cpu, ccap), (mem, mcap)):
            util = np.where(req > cap, 100, req * 100 // cap)
            sc = broken_linear(self.shape, util)
            pos = sc > 0
            total += np.where(pos, sc, 0)
            wsum += pos
        # math.Round: half away from zero; scores are >= 0
        return np.where(wsum == 0, 0, np.floor(total / np.maximum(wsum, 1) + 0.5)).astype(np.int64)


class BalancedAllocation(ScorePlugin):
    """``NodeResourcesBalancedAllocation`` (noderesources/balanced_allocation.go,
    ``balancedResourceScorer``): fractions ``f_r = min(req_r / cap_r, 1)`` for cpu and memory
    (requests without non-zero defaults); with two resources ``std = |f_cpu - f_mem| / 2``;
    score ``int64((1 - std) * 100)``."""

    name = "NodeResourcesBalancedAllocation"

    def score(self, pod: Pod, state: ClusterState, idx: np.ndarray) -> np.ndarray:
        cpu, mem, ccap, mcap = _resource_arrays(pod, state, idx, nonzero=False)
        f_cpu = np.minimum(cpu / ccap, 1.0)
        f_mem = np.minimum(mem / mcap, 1.0)
        std = np.abs((f_cpu - f_mem) / 2)
        return ((1 - std) * MAX_NODE_SCORE).astype(np.int64)  # Go int64() truncates


class ImageLocality(ScorePlugin):
    """``ImageLocality`` (imagelocality/image_locality.go). For each container image the node
    holds: ``int64(size * numNodesWithImage / totalNumNodes)`` (the "spread" scaling, so images
    present everywhere do not attract pods); the sum is clamped to
    ``[23 MiB, 1000 MiB * numContainers]`` and mapped linearly to 0..100:
    ``100 * (sum - min) // (max - min)``. No NormalizeScore step."""

    name = "ImageLocality"

    def score(self, pod: Pod, state: ClusterState, idx: np.ndarray) -> np.ndarray:
        total_nodes = len(state)
        sums = np.zeros(len(idx), np.int64)
        for img in pod.images:
            img = normalize_image_name(img)
            have = state.image_nodes.get(img)
            if have is None:
                continue
            scaled = int(float(state.image_sizes[img]) * (float(have.sum()) / float(total_nodes)))
            sums += np.where(have[idx], scaled, 0)
        max_threshold = IMAGE_MAX_CONTAINER_THRESHOLD * max(len(pod.images), 1)
        sums = np.clip(sums, IMAGE_MIN_THRESHOLD, max_threshold)
        return MAX_NODE_SCORE * (sums - IMAGE_MIN_THRESHOLD) // (max_threshold - IMAGE_MIN_THRESHOLD)


class PodTopologySpread(ScorePlugin):
    """``PodTopologySpread`` scoring (podtopologyspread/scoring.go), soft constraints
    (``ScheduleAnyway``) only. For each constraint, ``cnt`` = matching pods in the node's
    topology domain (all nodes with the key count); raw score ``round(sum_c cnt_c * w_c +
    (maxSkew_c - 1))`` with ``w_c = log(size_c + 2)``, ``size_c`` = number of topology domains
    among the feasible nodes. Nodes lacking a constraint's key are ignored (score 0); when no
    node carries the key, every node scores 0 (the plugin cannot tell them apart).
    NormalizeScore: ``100 * (max + min - s) // max`` over non-ignored nodes (100 for all when
    max is 0). A pod without soft constraints gets 0 everywhere (the plugin is skipped)."""

    name = "PodTopologySpread"

    def score(self, pod: Pod, state: ClusterState, idx: np.ndarray) -> np.ndarray:
        soft = [c for c in pod.spread_constraints if c.when_unsatisfiable == "ScheduleAnyway"]
        if not soft or len(idx) == 0:
            return np.zeros(len(idx), np.int64)
        raw = np.zeros(len(idx), float)
        ignored = np.zeros(len(idx), bool)
        for c in soft:
            dom = state.topology_domains(c.topology_key)  # (n,) domain index, -1 without the key
            d_idx = dom[idx]
            ignored |= d_idx < 0
            counts = state.matching_pods(pod.namespace, c.match_labels)
            has = dom >= 0
            # minlength >= 1: when no node carries the key every node is ignored (kube's
            # IgnoredNodes in PreScore) and the lookup below must still be in bounds
            per_domain = np.bincount(dom[has], weights=counts[has], minlength=max(int(dom.max()) + 1, 1))
            size = len(np.unique(d_idx[d_idx >= 0]))
            w = math.log(size + 2)
            cnt_arr = np.where(d_idx >= 0, per_domain[np.maximum(d_idx, 0)], 0.0)
            raw += cnt_arr * w + float(c.max_skew - 1)
        scores = np.floor(raw + 0.5).astype(np.int64)  # math.Round (half away from zero, raw >= 0)
        valid = ~ignored
        out = np.zeros(len(idx), np.int64)
        if not valid.any():
            return out
        mn, mx = int(scores[valid].min()), int(scores[valid].max())
        if mx == 0:
            out[valid] = MAX_NODE_SCORE
            return out
        out[valid] = MAX_NODE_SCORE * (mx + mn - scores[valid]) // mx
        return out


class TaintTolerationScore(ScorePlugin):
    """``TaintToleration`` Score (tainttoleration/taint_toleration.go): raw score = number of the
    node's ``PreferNoSchedule`` taints the pod does not tolerate (only tolerations with an empty
    or ``PreferNoSchedule`` effect count); NormalizeScore = ``DefaultNormalizeScore(100,
    reverse=True)``: fewer intolerable taints, higher score."""

    name = "TaintToleration"

    def score(self, pod: Pod, state: ClusterState, idx: np.ndarray) -> np.ndarray:
        def compute() -> np.ndarray:
            tols = [t for t in pod.tolerations if t.effect in ("", "PreferNoSchedule")]
            return np.array([
                sum(1 for taint in node.taints if taint.effect == "PreferNoSchedule"
                    and not any(t.tolerates(taint) for t in tols))
                for node in state.nodes
            ], dtype=np.int64)
        raw = _cached(state, ("score", self.name), pod, compute)[idx]
        return default_normalize(raw, reverse=True)


class NodeAffinityScore(ScorePlugin):
    """``NodeAffinity`` Score (nodeaffinity/node_affinity.go): raw score = sum of the weights of
    the pod's ``preferredDuringSchedulingIgnoredDuringExecution`` terms the node matches;
    NormalizeScore = ``DefaultNormalizeScore(100, reverse=False)``."""

    name = "NodeAffinity"

    def score(self, pod: Pod, state: ClusterState, idx: np.ndarray) -> np.ndarray:
        def compute() -> np.ndarray:
            return np.array([
                sum(w for w, term in pod.preferred_terms if term_matches(term, node.labels))
                for node in state.nodes
            ], dtype=np.int64)
        raw = _cached(state, ("score", self.name), pod, compute)[idx]
        return default_normalize(raw, reverse=False)


FILTER_PLUGINS: dict[str, FilterPlugin] = {
    p.name: p for p in (NodeResourcesFitFilter(), TaintTolerationFilter(), NodeAffinityFilter())
}
SCORE_PLUGINS: dict[str, ScorePlugin] = {
    p.name: p for p in (
        LeastAllocated(), MostAllocated(), BalancedAllocation(), ImageLocality(),
        PodTopologySpread(), TaintTolerationScore(), NodeAffinityScore(),
    )
}
#: Order of the learned weight vector (index i weighs ``SCORE_PLUGIN_NAMES[i]``).
SCORE_PLUGIN_NAMES: tuple[str, ...] = tuple(SCORE_PLUGINS)

#: kube-scheduler's default score weights (pkg/scheduler/apis/config/v1/default_plugins.go):
#: TaintToleration 3, NodeAffinity 2, PodTopologySpread 2, NodeResourcesFit 1 (LeastAllocated
#: strategy by default), NodeResourcesBalancedAllocation 1, ImageLocality 1. MostAllocated is
#: not a default strategy, so it weighs 0 (off); giving it 1 would make the profile a flat
#: RequestedToCapacityRatio, not kube's defaults.
KUBE_DEFAULT_WEIGHTS: dict[str, int] = {
    "NodeResourcesLeastAllocated": 1,
    "NodeResourcesMostAllocated": 0,
    "NodeResourcesBalancedAllocation": 1,
    "ImageLocality": 1,
    "PodTopologySpread": 2,
    "TaintToleration": 3,
    "NodeAffinity": 2,
}


def weights_vector(weights: Mapping[str, int] | Sequence[int] | np.ndarray) -> np.ndarray:
    """A weight vector in :data:`SCORE_PLUGIN_NAMES` order (int64, shape ``(7,)``) from a dict
    by plugin name (missing plugins weigh 0) or a sequence. Raises :class:`SchedulingError` for
    unknown names, wrong lengths, negative or non-integer weights."""
    if isinstance(weights, Mapping):
        unknown = set(weights) - set(SCORE_PLUGIN_NAMES)
        if unknown:
            raise SchedulingError(f"unknown score plugin(s) {sorted(unknown)}; known: {list(SCORE_PLUGIN_NAMES)}")
        vals = [weights.get(n, 0) for n in SCORE_PLUGIN_NAMES]
    else:
        vals = list(np.asarray(weights).ravel())
        if len(vals) != len(SCORE_PLUGIN_NAMES):
            raise SchedulingError(f"weight vector needs {len(SCORE_PLUGIN_NAMES)} entries, got {len(vals)}")
    out = np.zeros(len(vals), np.int64)
    for i, v in enumerate(vals):
        if isinstance(v, bool) or not float(v).is_integer():
            raise SchedulingError(f"weight of {SCORE_PLUGIN_NAMES[i]} must be an integer, got {v!r}")
        if v < 0:
            raise SchedulingError(f"weight of {SCORE_PLUGIN_NAMES[i]} must be >= 0, got {v}")
        out[i] = int(v)
    return out


#: Largest score-plugin weight Tandem exports, and the one weight range it documents for score
#: plugins (``1..MAX_PLUGIN_WEIGHT``, 0 = off): the learned action range
#: (:mod:`rlweights.core.env`), and the range kube-scheduler itself enforces for the weights
#: of ``NodeResourcesFit`` resources (``validateResources`` in
#: pkg/scheduler/apis/config/validation/validation_pluginargs.go: 1..100) and of preferred
#: node-affinity terms. kube-scheduler's framework (pkg/scheduler/framework/runtime/framework.go,
#: ``NewFramework``) accepts any positive int32 score-plugin weight whose total times
#: ``MaxNodeScore`` does not overflow int64; staying in 1..100 keeps exported profiles
#: comparable with hand-written ones and far from that bound.
MAX_PLUGIN_WEIGHT = 100


def in_range_weights(values: Sequence[int], limit: int = MAX_PLUGIN_WEIGHT) -> list[int]:
    """Non-negative integer weights brought into ``0..limit`` (0 stays 0 = plugin off, a
    positive weight stays >= 1), changing the argmax of ``sum_k w_k * s_k`` as little as
    possible:

    1. every weight <= ``limit``: unchanged;
    2. otherwise divide by the greatest common divisor of the positive weights: if the largest
       is then <= ``limit`` this is an exact uniform rescale, which keeps every node's order
       and every tie for any scores;
    3. otherwise scale by ``limit / max(w)`` and round half up (exact integer arithmetic),
       raising positive weights that round to 0 to 1. The largest weight becomes ``limit``.
       Rounding can change the order of two nodes whose weighted totals were close, so the
       model scores with these weights (:class:`Scheduler`): what is exported is what was
       measured. Example: ``(200, 1, 1)`` -> ``(100, 1, 1)`` (exact: ``(100, 0.5, 0.5)``).

    Returns a list of ints. Raises :class:`SchedulingError` for a negative weight."""
    vals = [int(v) for v in values]
    if any(v < 0 for v in vals):
        raise SchedulingError(f"weights must be >= 0, got {vals}")
    top = max(vals, default=0)
    if top <= limit:
        return vals
    g = math.gcd(*vals)
    vals = [v // g for v in vals]
    top //= g
    if top <= limit:
        return vals
    return [0 if v == 0 else max(1, (2 * limit * v + top) // (2 * top)) for v in vals]


def kube_profile_weights(weights) -> dict[str, int]:
    """The score-plugin weights of the kube-scheduler profile that stands for a learned weight
    vector (``weights`` as for :func:`weights_vector`), by kube plugin name, positive only:
    ``NodeResourcesFit`` weighs ``wL + wM`` (both strategies on: RequestedToCapacityRatio with
    :func:`fit_shape`), ``wL`` or ``wM`` (one strategy); the other five plugins their own weight;
    then :func:`in_range_weights` brings all of them into ``1..MAX_PLUGIN_WEIGHT`` together
    (with learned weights in 1..100 only ``wL + wM`` can exceed 100). Used by both
    :class:`Scheduler` and :mod:`rlweights.core.export`, so the model scores exactly the
    exported profile."""
    w = weights_vector(weights)
    names = ["NodeResourcesFit"] + list(SCORE_PLUGIN_NAMES[2:])
    raw = [int(w[0]) + int(w[1])] + [int(x) for x in w[2:]]
    return {n: v for n, v in zip(names, in_range_weights(raw)) if v > 0}


class Scheduler:
    """One kube-scheduler profile: all filter plugins, the score plugins with their weights.

    ``weights``: see :func:`weights_vector`; plugins weighing 0 are not run (disabled).
    ``rng``: ties between nodes with equal total score are broken uniformly at random, like
    ``selectHost`` (pkg/scheduler/schedule_one.go) does with reservoir sampling.

    LeastAllocated and MostAllocated are two strategies of kube's one ``NodeResourcesFit``
    plugin. When both weigh > 0 the profile scores what kube-scheduler would score for the
    exported configuration (:mod:`rlweights.core.export`): ``NodeResourcesFit`` with weight
    ``wL + wM`` and the :class:`RequestedToCapacityRatio` strategy with shape
    :func:`fit_shape` ``(wL, wM)`` - not the weighted sum ``wL * least + wM * most``, which no
    kube configuration expresses. The plugin weights are those of the exported profile,
    :func:`kube_profile_weights`: unchanged while every one is <= 100 (``wL + wM`` included),
    otherwise brought into 1..100 together by :func:`in_range_weights` (exact when a common
    divisor allows it, else rounded, and then the rounded weights are what the model scores).
    """

    def __init__(self, weights, rng: np.random.Generator) -> None:
        self.weights = weights_vector(weights)
        self.rng = rng
        profile = kube_profile_weights(self.weights)
        wl, wm = int(self.weights[0]), int(self.weights[1])
        self._active: list[tuple[ScorePlugin, int]] = []
        if "NodeResourcesFit" in profile:
            fit = (RequestedToCapacityRatio(fit_shape(wl, wm)) if wl > 0 and wm > 0
                   else SCORE_PLUGINS[SCORE_PLUGIN_NAMES[0] if wl > 0 else SCORE_PLUGIN_NAMES[1]])
            self._active.append((fit, profile["NodeResourcesFit"]))
        self._active += [(SCORE_PLUGINS[n], profile[n]) for n in SCORE_PLUGIN_NAMES[2:] if n in profile]

    def feasible_nodes(self, pod: Pod, state: ClusterState) -> np.ndarray:
        """Indices of the nodes that pass every filter plugin."""
        mask = np.ones(len(state), bool)
        for plugin in FILTER_PLUGINS.values():
            mask &= plugin.feasible(pod, state)
        return np.flatnonzero(mask)

    def scores(self, pod: Pod, state: ClusterState, idx: np.ndarray) -> dict[str, np.ndarray]:
        """Normalised 0..100 score of each active plugin for the nodes ``idx``."""
        return {p.name: p.score(pod, state, idx) for p, _ in self._active}

    def total_scores(self, pod: Pod, state: ClusterState, idx: np.ndarray) -> np.ndarray:
        """Weighted sum ``sum_k w_k * score_k`` for the nodes ``idx`` (int64)."""
        total = np.zeros(len(idx), np.int64)
        for p, w in self._active:
            total += w * p.score(pod, state, idx)
        return total

    def select(self, pod: Pod, state: ClusterState) -> int | None:
        """Index of the chosen node, or ``None`` when no node passes the filters."""
        idx = self.feasible_nodes(pod, state)
        if len(idx) == 0:
            return None
        if len(idx) == 1:
            return int(idx[0])
        total = self.total_scores(pod, state, idx)
        best = np.flatnonzero(total == total.max())
        return int(idx[best[0]] if len(best) == 1 else idx[self.rng.choice(best)])


# --------------------------------------------------------------------------- YAML objects

_QTY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$")
_SUFFIX = {
    "": 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
}


def parse_quantity(q) -> float:
    """A Kubernetes ``resource.Quantity`` (``"100m"``, ``"32Gi"``, ``4``) as a float in base
    units (cores, bytes). Raises :class:`SchedulingError` for malformed quantities."""
    m = _QTY.match(str(q).strip())
    if not m or m.group(2) not in _SUFFIX:
        raise SchedulingError(f"malformed resource quantity {q!r}")
    return float(m.group(1)) * _SUFFIX[m.group(2)]


def _expr(d: dict) -> MatchExpression:
    return MatchExpression(d["key"], d["operator"], tuple(str(v) for v in d.get("values") or ()))


def node_from_k8s(obj: dict, default_name: str = "node") -> Node:
    """A :class:`Node` from a Kubernetes ``v1.Node`` dict (``status.allocatable`` or
    ``capacity``, ``metadata.labels``, ``spec.taints``, ``status.images``)."""
    try:
        meta = obj.get("metadata") or {}
        status = obj.get("status") or {}
        alloc = status.get("allocatable") or status.get("capacity") or {}
        images = {}
        for im in status.get("images") or []:
            for name in im.get("names") or []:
                images[normalize_image_name(name)] = int(im.get("sizeBytes", 0))
        return Node(
            name=meta.get("name") or meta.get("generateName", default_name).rstrip("-") or default_name,
            cpu_milli=int(round(parse_quantity(alloc["cpu"]) * 1000)),
            memory_bytes=int(parse_quantity(alloc["memory"])),
            max_pods=int(parse_quantity(alloc.get("pods", 110))),
            labels={k: str(v) for k, v in (meta.get("labels") or {}).items()},
            taints=tuple(Taint(t["key"], str(t.get("value", "")), t["effect"]) for t in (obj.get("spec") or {}).get("taints") or []),
            images=images,
        )
    except (KeyError, TypeError, AttributeError) as err:
        raise SchedulingError(f"not a usable v1.Node: missing {err}") from None


def pod_from_k8s(obj: dict, default_name: str = "pod") -> Pod:
    """A :class:`Pod` from a Kubernetes ``v1.Pod`` dict: container requests (limits when no
    requests, as the API server defaults them), images, labels, nodeSelector, node affinity,
    tolerations and topology spread constraints."""
    try:
        meta = obj.get("metadata") or {}
        spec = obj["spec"]
        cpu = mem = 0.0
        images = []
        for c in spec.get("containers") or []:
            res = c.get("resources") or {}
            req = res.get("requests") or res.get("limits") or {}
            cpu += parse_quantity(req.get("cpu", 0))
            mem += parse_quantity(req.get("memory", 0))
            if c.get("image"):
                images.append(normalize_image_name(c["image"]))
        na = (spec.get("affinity") or {}).get("nodeAffinity") or {}
        required = tuple(
            tuple(_expr(e) for e in term.get("matchExpressions") or [])
            for term in ((na.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or [])
        )
        preferred = tuple(
            (int(p["weight"]), tuple(_expr(e) for e in (p.get("preference") or {}).get("matchExpressions") or []))
            for p in na.get("preferredDuringSchedulingIgnoredDuringExecution") or []
        )
        tols = tuple(
            Toleration(t.get("key", ""), t.get("operator", "Equal"), str(t.get("value", "")), t.get("effect", ""))
            for t in spec.get("tolerations") or []
        )
        spread = tuple(
            SpreadConstraint(int(c["maxSkew"]), c["topologyKey"], c.get("whenUnsatisfiable", "DoNotSchedule"),
                             tuple(sorted(((c.get("labelSelector") or {}).get("matchLabels") or {}).items())))
            for c in spec.get("topologySpreadConstraints") or []
        )
        return Pod(
            name=meta.get("name") or meta.get("generateName", default_name).rstrip("-") or default_name,
            namespace=meta.get("namespace", "default"),
            cpu_milli=int(round(cpu * 1000)), memory_bytes=int(mem), images=tuple(images),
            labels={k: str(v) for k, v in (meta.get("labels") or {}).items()},
            node_selector={k: str(v) for k, v in (spec.get("nodeSelector") or {}).items()},
            required_terms=required, preferred_terms=preferred, tolerations=tols, spread_constraints=spread,
        )
    except (KeyError, TypeError, AttributeError) as err:
        raise SchedulingError(f"not a usable v1.Pod: missing {err}") from None


def load_k8s_objects(path) -> tuple[list[Node], list[Pod]]:
    """Read Nodes and Pods from a YAML file (multi-document) or every ``*.yaml`` under a folder
    (PyYAML ``safe_load_all``); other kinds are ignored. Objects without ``kind`` are classified
    by shape (``status.allocatable`` -> Node, ``spec.containers`` -> Pod), as the simulator
    templates have none."""
    from pathlib import Path

    import yaml

    p = Path(path)
    files = sorted(p.rglob("*.yaml")) if p.is_dir() else [p]
    nodes, pods = [], []
    for f in files:
        with open(f) as fh:
            for obj in yaml.safe_load_all(fh):
                if not isinstance(obj, dict):
                    continue
                kind = obj.get("kind")
                if kind is None:
                    if (obj.get("status") or {}).get("allocatable"):
                        kind = "Node"
                    elif (obj.get("spec") or {}).get("containers"):
                        kind = "Pod"
                if kind == "Node":
                    nodes.append(node_from_k8s(obj, default_name=f"node-{len(nodes)}"))
                elif kind == "Pod":
                    pods.append(pod_from_k8s(obj, default_name=f"pod-{len(pods)}"))
    return nodes, pods
