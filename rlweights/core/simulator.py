"""The *snapshot* model (``model="snapshot"``): the first, simpler simulation of one workload
window on one cluster setup under one weight vector, kept by name for comparison. The default
model is :mod:`rlweights.core.serverless` (processor sharing over each invocation's whole life,
pulls sharing a node's link, heterogeneous node speeds, keep-alive churn, concurrency limits);
this module also defines the metrics both report (:class:`WindowPerformance`).

Per invocation (in arrival order):

1. **Warm start** if the function has an idle container (the most recently used one is taken).
2. **Cold start** otherwise: the scheduler (:class:`rlweights.core.scheduler.Scheduler` with the
   weights under test) places a new pod; if the node lacks the image it is pulled at
   ``pull_bandwidth_mib_s`` (a pull already under way is shared, as kubelet does), then the
   container starts in ``container_start_s``. The pod keeps its requests reserved until the
   container has been idle for ``keep_alive_s``. When no node fits, idle containers are evicted
   oldest first (as OpenWhisk and Knative reclaim idle capacity); if still none fits, the
   invocation waits for the earliest running invocation to finish (approximation: the cluster
   state is advanced to that time). A function whose pod passes the filters of no node even on
   the fresh cluster (background pods only) can never be placed, whatever the weights: its
   invocations are **unschedulable** (kube-scheduler leaves such a pod Pending; the platform
   rejects the request), counted in ``WindowPerformance.unschedulable`` and left out of the
   latency figures. Latencies are over the served invocations; a window with none served has
   ``mean_s = p95_s = 0`` and ``served = 0``.
3. **Execution** takes ``duration * slowdown`` with ``slowdown = max(1, (busy + cpu) / cores)``:
   CPU in use on the node (background training jobs' use + running invocations' CPU use, which
   may exceed their requests) over its cores, taken when the invocation starts (a snapshot of processor sharing;
   approximation).

End-to-end latency = completion - arrival. Constants (all ASSUMPTIONS unless a source is given):

- ``keep_alive_s = 60``: Knative's default autoscaling stable window (60 s) before scale-down
  (knative.dev docs, "Configuring scale to zero"); Azure Functions keeps instances about 20 min
  (Shahrad et al., ATC 2020) - configurable;
- ``pull_bandwidth_mib_s = 100``: registry pull throughput of about 1 Gbit/s (assumption);
- ``container_start_s = 0.5``: sandbox creation + runtime start (assumption).
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .cluster import ClusterSetup
from .scheduler import Scheduler, normalize_image_name
from .workload import Workload


@dataclass(frozen=True)
class SimConfig:
    """Constants of the snapshot model (module docstring gives their sources); ``model`` names
    it (``"snapshot"``)."""

    keep_alive_s: float = 60.0
    pull_bandwidth_mib_s: float = 100.0
    container_start_s: float = 0.5
    model: ClassVar[str] = "snapshot"

    def __post_init__(self) -> None:
        if self.keep_alive_s < 0 or self.pull_bandwidth_mib_s <= 0 or self.container_start_s < 0:
            raise ValueError("keep_alive_s and container_start_s must be >= 0, pull_bandwidth_mib_s > 0")

    def simulate(self, setup: ClusterSetup, workload: Workload, weights, seed: int = 0) -> "WindowPerformance":
        """:func:`simulate` with this configuration."""
        return simulate(setup, workload, weights, seed, self)


@dataclass(frozen=True)
class WindowPerformance:
    """Performance of one window: ``mean_s`` and ``p95_s`` end-to-end latency [s] over the
    served invocations, number of invocations (all arrivals), cold starts (containers placed),
    image pulls, ``mean_slowdown``, and ``unschedulable`` invocations (their function fits on no
    node of the fresh cluster; not served, not in the latencies). ``mean_slowdown`` is, in the
    serverless model, the mean of latency / isolated duration (:mod:`rlweights.core.serverless`);
    in the snapshot model, the mean contention factor of execution alone. ``expired`` /
    ``evicted``: containers removed by the keep-alive / reclaimed for a pending pod (serverless
    model; 0 in the snapshot model, which does not count them)."""

    mean_s: float
    p95_s: float
    invocations: int
    cold_starts: int
    pulls: int
    mean_slowdown: float
    unschedulable: int = 0
    expired: int = 0
    evicted: int = 0

    @property
    def served(self) -> int:
        """Invocations that ran (``invocations - unschedulable``)."""
        return self.invocations - self.unschedulable

    def metric(self, name: str) -> float:
        """``"mean"`` or ``"p95"`` latency [s], or ``"slowdown"`` (``mean_slowdown``; lower is
        better for all three). Raises ``ValueError`` for another name."""
        if name == "mean":
            return self.mean_s
        if name == "p95":
            return self.p95_s
        if name == "slowdown":
            return self.mean_slowdown
        raise ValueError(f"unknown metric {name!r}; use one of {', '.join(METRICS)}")


#: Names :meth:`WindowPerformance.metric` accepts.
METRICS = ("mean", "p95", "slowdown")


def simulate(setup: ClusterSetup, workload: Workload, weights, seed: int = 0, config: SimConfig = SimConfig()) -> WindowPerformance:
    """Run ``workload`` on a fresh state of ``setup`` with the given score weights.
    Deterministic for equal inputs (``seed`` seeds the scheduler's tie-break generator).
    Raises :class:`rlweights.core.scheduler.SchedulingError` for invalid weights."""
    sched = Scheduler(weights, np.random.default_rng(seed))
    state = setup.state()
    cores = state.alloc_cpu / 1000.0
    busy = np.array([0.0] * len(state))
    if setup.background_usage:
        busy += np.asarray(setup.background_usage, float)
    else:
        for i, pod in setup.background:
            busy[i] += pod.cpu_milli / 1000.0
    bw = config.pull_bandwidth_mib_s * 2**20
    running: list[tuple[float, int, float]] = []  # (end time, node, cores)
    expiry: list[tuple[float, int]] = []  # (expiry time, container id)
    # container: [func, node, free_at, expire_at, alive]
    containers: list[list] = []
    idle_by_func: dict[int, list[int]] = {}
    image_ready: dict[tuple[int, str], float] = {}  # when a node's copy of an image is ready
    for i, node in enumerate(setup.nodes):
        for img in node.images:
            image_ready[(i, normalize_image_name(img))] = float("-inf")
    lat = np.empty(len(workload))
    slow = np.empty(len(workload))
    served = np.ones(len(workload), bool)
    cold = pulls = 0
    fresh = setup.state()
    placeable = [len(sched.feasible_nodes(fn.pod, fresh)) > 0 for fn in workload.functions]

    def release(t: float) -> None:
        while running and running[0][0] <= t:
            _, n, c = heapq.heappop(running)
            busy[n] -= c
        while expiry and expiry[0][0] <= t:
            tt, cid = heapq.heappop(expiry)
            c = containers[cid]
            if c[4] and c[3] == tt:
                kill(cid)

    def kill(cid: int) -> None:
        c = containers[cid]
        c[4] = False
        state.remove_pod(c[1], workload.functions[c[0]].pod)
        idle_by_func[c[0]].remove(cid)

    for k in range(len(workload)):
        t = float(workload.arrival_s[k])
        f = int(workload.func[k])
        prof = workload.functions[f]
        if not placeable[f]:
            served[k] = False
            continue
        release(t)
        idle = [cid for cid in idle_by_func.get(f, ()) if containers[cid][2] <= t]
        if idle:
            cid = max(idle, key=lambda c: containers[c][2])
            node = containers[cid][1]
            start = t
        else:
            cold += 1
            node = sched.select(prof.pod, state)
            while node is None:
                victims = sorted((c for c in range(len(containers)) if containers[c][4] and containers[c][2] <= t),
                                 key=lambda c: containers[c][2])
                if victims:
                    kill(victims[0])
                elif running:
                    t = running[0][0]
                    release(t)
                else:  # the cluster is back to its fresh state, where the pod fits (checked above)
                    raise AssertionError(f"function {prof.func_id}: no node on a fresh cluster")
                node = sched.select(prof.pod, state)
            state.add_pod(node, prof.pod)
            image = normalize_image_name(prof.image)
            ready = image_ready.get((node, image))
            if ready is None:
                pulls += 1
                ready = t + prof.image_bytes / bw
                image_ready[(node, image)] = ready
                state.add_image(node, prof.image, prof.image_bytes)
            start = max(t, ready) + config.container_start_s
            cid = len(containers)
            containers.append([f, node, 0.0, 0.0, True])
            idle_by_func.setdefault(f, []).append(cid)
        c_cores = (prof.cpu_usage_milli or prof.cpu_milli) / 1000.0
        s = max(1.0, (busy[node] + c_cores) / cores[node])
        end = start + float(workload.duration_s[k]) * s
        busy[node] += c_cores
        heapq.heappush(running, (end, node, c_cores))
        c = containers[cid]
        c[2], c[3] = end, end + config.keep_alive_s
        heapq.heappush(expiry, (c[3], cid))
        lat[k] = end - float(workload.arrival_s[k])
        slow[k] = s
    n_unsched = int((~served).sum())
    if not served.any():
        return WindowPerformance(0.0, 0.0, len(workload), 0, 0, 1.0, n_unsched)
    lat, slow = lat[served], slow[served]
    return WindowPerformance(float(lat.mean()), float(np.percentile(lat, 95)), len(workload), cold, pulls,
                             float(slow.mean()), n_unsched)
