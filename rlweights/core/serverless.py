"""The serverless lab model: a discrete-event simulation of function invocations on a
Kubernetes cluster whose scheduler places every new function container with the weights under
test (issue 22's "faithful lab serverless model"; the default model of the environment, the
baselines and the bench).

Entities and what happens to them (times in seconds, work in reference-CPU seconds):

**Invocations.** Invocation ``k`` of function ``f`` arrives at ``arrival_s[k]`` and carries
``duration_s[k]`` of work: its duration in the trace, taken as its isolated execution time on a
node of speed 1.0 with every CPU it uses available. It is served by one container of ``f``.

**Containers and the scale rule** (Knative's activator and autoscaler, OpenWhisk's invoker):
each container serves at most ``concurrency`` invocations at a time (default 1: one request per
execution environment, as AWS Lambda and Apache OpenWhisk's default action limit). An arriving
invocation goes to a ready container of ``f`` with a free slot (the fullest first, then the most
recently used: packing, so surplus containers go idle); if none has one it waits in ``f``'s
FIFO queue, and when the queue holds more invocations than the containers already being created
for ``f`` can take (``queued > creating * concurrency``) a new container is created, unless
``f`` has ``max_scale`` containers (default: no limit). When a slot frees, the queue's head
takes it; a container still waiting for a node that the queue no longer needs is cancelled.

**Placement** (the only place the weights act; :class:`rlweights.core.scheduler.Scheduler`, kube
-scheduler's filter and weighted score, unchanged): a new container's pod is scheduled on the
*live* cluster state at that instant: the requests of every container alive then (idle ones
included) and background pods, and the images nodes hold then. If no node passes the filters
and evicting every idle container would make room somewhere, idle containers are evicted least
recently used first, one at a time, until it fits (OpenWhisk's invoker reclaims idle containers
so; Kubernetes itself would leave the pod Pending); otherwise no container is evicted and the
pod waits (FIFO) and is retried whenever a container is removed or goes idle. A function whose pod passes the filters of no node even on the fresh
cluster is **unschedulable** whatever the weights: its invocations are counted and left out of
the latencies (as in :mod:`rlweights.core.simulator`).

**Image pulls.** A placed container whose node lacks its image (and is not pulling it already)
starts a pull of the image's size on the node's network link; containers placed while that pull
runs wait for it. Pulls on one node share its link equally (processor sharing of the link's
``link_bandwidth_bytes_s``: with ``p`` pulls each advances at ``bandwidth / p``; kubelet pulls
in parallel with ``serializeImagePulls: false``). Only when a pull finishes does the node hold
the image: the scheduler's ``ImageLocality`` sees it from then on. The container is ready
``container_start_s`` after its image is local.

**Execution: processor sharing over the invocation's whole life.** On node ``n`` with ``C``
CPUs, speed ``s`` and peak memory bandwidth ``B`` (:func:`rlweights.core.cluster.node_performance`),
background pods busy on ``b`` CPUs, and running invocations each using ``c_i`` CPUs
(``cpu_usage_milli / 1000`` of its function) and drawing ``beta_i`` GB/s per CPU, every running
invocation's remaining work decreases at the same rate

    ``r = s * phi * m``,  ``phi = min(1, C / D)`` with ``D = b + sum_i c_i``,
    ``m = min(1, B / (phi * M))`` with ``M = beta_bg * b + sum_i beta_i c_i``,

recomputed at every arrival and departure on the node (the rate is piecewise constant between
events, so finish times are exact). With one-CPU invocations and no background this is
``min(1, C / running) * s``: egalitarian processor sharing with each job capped at one CPU, as
the Linux CFS shares CPUs between runnable threads. ``m`` is the **memory-bandwidth pressure**
term, an ASSUMPTION (no source here models it for serverless functions): the invocations and the
background on a node draw bandwidth in proportion to the CPU they get, and when that exceeds the
node's peak every one of them slows by the same factor ``B / (phi * M)``: the bandwidth bound of
the roofline model (Williams, Waterman and Patterson, CACM 52(4), 2009) applied to the node as a
whole, shared in proportion to demand. ``beta_bg`` = 1 GB/s per busy CPU of the background
(ASSUMPTION: training jobs' data-loader processes).

**Keep-alive and scale to zero.** A container idle (no invocation in flight) for longer than
``keep_alive_s`` is removed and its pod's requests released; a function whose last container goes
is scaled to zero, and its next invocation is a cold start. Default 600 s: AWS Lambda's fixed
10-minute keep-alive (Azure Functions used 20 minutes; both as characterised by Shahrad et al.,
"Serverless in the Wild", USENIX ATC 2020).

**Metrics** (:class:`rlweights.core.simulator.WindowPerformance`), over the served invocations:
end-to-end latency ``finish - arrival`` (queueing, cold start, pull and contended execution
included): mean and p95 (numpy's linear percentile); mean **slowdown** ``latency /
max(duration, 1 ms)``, the latency over the isolated duration (the field's usual definition;
the 1 ms floor is the trace's resolution, so a zero-length invocation does not divide by 0).

Events at the same instant are processed in this order: completions (of executions and of
pulls), then containers becoming ready, then arrivals, then keep-alive expiries (so an
invocation arriving at the very instant a container's keep-alive runs out still finds it); among
equals, in the order they were scheduled. The model is deterministic for equal inputs; ``seed``
seeds only the scheduler's tie-break generator.

Constants (:class:`ServerlessConfig`), with sources:

============================== ============ ===========================================================
parameter                      default      source
============================== ============ ===========================================================
``keep_alive_s``               600 s        AWS Lambda's fixed keep-alive, 10 min (Azure: 20 min);
                                            Shahrad et al., ATC 2020
``concurrency``                1            one request per execution environment: AWS Lambda
                                            ("Lambda function scaling" docs), OpenWhisk's default
``max_scale``                  none         assumption: bounded by the cluster only
``container_start_s``          0.5 s        assumption (sandbox creation and runtime start)
``link_bandwidth_bytes_s``     125e6 B/s    assumption: a 1 Gbit/s registry-facing link per node
``background_membw_gbs_per_cpu`` 1 GB/s     assumption (training jobs' data loaders)
============================== ============ ===========================================================

Node speeds and bandwidths: :mod:`rlweights.core.cluster`; per-function CPU use, memory-bandwidth
demand and image sizes: :mod:`rlweights.core.workload`.
"""
from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .cluster import ClusterSetup
from .scheduler import Scheduler, normalize_image_name
from .simulator import WindowPerformance
from .workload import Workload

# event priorities at equal times (module docstring)
_CPU_DONE, _PULL_DONE, _READY, _ARRIVE, _EXPIRE = 0, 1, 2, 3, 4
# relative tolerance when deciding that a job's remaining work has reached 0 (float round-off)
_EPS = 1e-9


@dataclass(frozen=True)
class ServerlessConfig:
    """Constants of the serverless model (module docstring gives their sources). ``model`` names
    it (``"serverless"``). Raises ``ValueError`` for a negative time, a concurrency or
    ``max_scale`` below 1, or a non-positive bandwidth."""

    keep_alive_s: float = 600.0
    concurrency: int = 1
    max_scale: int | None = None
    container_start_s: float = 0.5
    link_bandwidth_bytes_s: float = 125e6
    background_membw_gbs_per_cpu: float = 1.0
    model: ClassVar[str] = "serverless"

    def __post_init__(self) -> None:
        if not (self.keep_alive_s >= 0 and self.container_start_s >= 0 and self.background_membw_gbs_per_cpu >= 0):
            raise ValueError("keep_alive_s, container_start_s and background_membw_gbs_per_cpu must be >= 0")
        if isinstance(self.concurrency, bool) or int(self.concurrency) != self.concurrency or self.concurrency < 1:
            raise ValueError(f"concurrency must be an integer >= 1, got {self.concurrency!r}")
        if self.max_scale is not None and (int(self.max_scale) != self.max_scale or self.max_scale < 1):
            raise ValueError(f"max_scale must be None or an integer >= 1, got {self.max_scale!r}")
        if not self.link_bandwidth_bytes_s > 0:
            raise ValueError("link_bandwidth_bytes_s must be > 0")

    def simulate(self, setup: ClusterSetup, workload: Workload, weights, seed: int = 0) -> WindowPerformance:
        """:func:`simulate` with this configuration."""
        return simulate(setup, workload, weights, seed, self)


@dataclass
class ServerlessRun:
    """Everything one simulation recorded, per invocation (arrays of shape ``(m,)``, arrival
    order of the workload): ``start_s`` (when it began executing), ``finish_s``, ``node`` (index
    into the setup's nodes), ``served`` (False: its function is unschedulable; then the other
    entries are NaN / -1); per window: containers ``placed`` (cold starts), ``pulls``,
    ``expired`` (removed by the keep-alive), ``evicted`` (reclaimed for a pending pod),
    ``makespan_s`` (last finish). :attr:`performance` gives the window's metrics."""

    workload: Workload
    start_s: np.ndarray
    finish_s: np.ndarray
    node: np.ndarray
    served: np.ndarray
    placed: int
    pulls: int
    expired: int
    evicted: int

    @property
    def latency_s(self) -> np.ndarray:
        """``finish - arrival`` per served invocation (s)."""
        return self.finish_s[self.served] - self.workload.arrival_s[self.served]

    @property
    def makespan_s(self) -> float:
        """Finish time of the last served invocation (0 when none was served)."""
        return float(self.finish_s[self.served].max()) if self.served.any() else 0.0

    @property
    def performance(self) -> WindowPerformance:
        """The window's :class:`~rlweights.core.simulator.WindowPerformance` (module docstring)."""
        m = len(self.workload)
        unsched = int((~self.served).sum())
        if not self.served.any():
            return WindowPerformance(0.0, 0.0, m, 0, 0, 1.0, unsched, expired=0, evicted=0)
        lat = self.latency_s
        slow = lat / np.maximum(self.workload.duration_s[self.served], 1e-3)
        return WindowPerformance(float(lat.mean()), float(np.percentile(lat, 95)), m, self.placed, self.pulls,
                                 float(slow.mean()), unsched, expired=self.expired, evicted=self.evicted)


class _Container:
    __slots__ = ("cid", "func", "node", "state", "in_flight", "idle_since", "last_used")

    def __init__(self, cid: int, func: int) -> None:
        self.cid, self.func = cid, func
        self.node = -1
        self.state = "pending"  # pending -> starting -> ready -> removed; or pending -> cancelled
        self.in_flight = 0
        self.idle_since: float | None = None
        self.last_used = -math.inf


def simulate(setup: ClusterSetup, workload: Workload, weights, seed: int = 0,
             config: ServerlessConfig = ServerlessConfig()) -> WindowPerformance:
    """Run ``workload`` on a fresh state of ``setup`` with the score weights ``weights`` and
    return the window's metrics (:attr:`ServerlessRun.performance`). See :func:`run`."""
    return run(setup, workload, weights, seed, config).performance


def run(setup: ClusterSetup, workload: Workload, weights, seed: int = 0,
        config: ServerlessConfig = ServerlessConfig()) -> ServerlessRun:
    """Simulate ``workload`` on a fresh state of ``setup`` (background pods placed, no function
    container, the nodes' own images) with a :class:`~rlweights.core.scheduler.Scheduler` of
    ``weights`` whose ties are broken by ``numpy.random.default_rng(seed)``; the model is the
    module docstring's. Returns the per-invocation record. Raises
    :class:`~rlweights.core.scheduler.SchedulingError` for invalid weights and ``ValueError``
    for invalid node performance labels."""
    return _Sim(setup, workload, weights, seed, config).run()


class _Sim:
    """One simulation (see :func:`run`); the state lives in plain lists indexed by node."""

    def __init__(self, setup: ClusterSetup, workload: Workload, weights, seed: int, config: ServerlessConfig) -> None:
        self.cfg, self.wl = config, workload
        self.sched = Scheduler(weights, np.random.default_rng(seed))
        self.state = setup.state()
        n = len(self.state)
        perf = setup.node_perf()
        self.cores = [c / 1000.0 for c in self.state.alloc_cpu.tolist()]
        self.speed = [p.speed for p in perf]
        self.membw = [p.membw_gbs for p in perf]
        bg = setup.background_cores()
        # CPU processor sharing per node: virtual clock (work done by each running job so far),
        # its last update, its rate, the CPUs and bandwidth demanded, the running jobs
        self.vclock, self.vtime, self.rate = [0.0] * n, [0.0] * n, [0.0] * n
        self._bg = list(bg)
        self._bg_bw = [b * config.background_membw_gbs_per_cpu for b in bg]
        self.demand, self.bwdemand = list(self._bg), list(self._bg_bw)
        self.running: list[list[tuple[float, int]]] = [[] for _ in range(n)]
        self.cpu_ver = [0] * n
        # the network link per node, shared equally by its pulls (bytes per pull so far)
        self.lclock, self.ltime, self.lcount = [0.0] * n, [0.0] * n, [0] * n
        self.lpulls: list[list[tuple[float, int]]] = [[] for _ in range(n)]
        self.link_ver = [0] * n
        self.pull_info: dict[int, tuple[int, str, int, list[_Container]]] = {}
        self.pulling: dict[tuple[int, str], int] = {}
        for i in range(n):
            self.rate[i] = self._rate(i)
        self.events: list[tuple] = []
        self.seq = 0
        fns = workload.functions
        self.cpu = [(f.cpu_usage_milli or f.cpu_milli) / 1000.0 for f in fns]
        self.beta = [f.membw_gbs_per_cpu for f in fns]
        self.images = [normalize_image_name(f.image) for f in fns]
        self.queue: list[deque[int]] = [deque() for _ in fns]
        self.alive: list[list[_Container]] = [[] for _ in fns]
        self.creating = [0] * len(fns)  # pending + starting containers per function
        self.pending: deque[_Container] = deque()
        # a pod that failed to be placed fails again until a pod is removed or a container goes
        # idle (evictable): ``epoch`` counts those changes, ``failed_at[f]`` the epoch of f's failure
        self.epoch = 0
        self.failed_at = [-1] * len(fns)
        self.idle_heap: list[tuple[float, int, _Container]] = []  # LRU order (stale entries skipped)
        self.idle: dict[int, _Container] = {}  # the idle ready containers now, by id
        self.containers: list[_Container] = []
        m = len(workload)
        self.start = np.full(m, np.nan)
        self.finish = np.full(m, np.nan)
        self.node_of = np.full(m, -1, np.int64)
        self.cont_of: dict[int, _Container] = {}
        self.placed = self.pulls = self.expired = self.evicted = 0

    # ------------------------------------------------------------------ events
    def _push(self, t: float, prio: int, *payload) -> None:
        self.seq += 1
        heapq.heappush(self.events, (t, prio, self.seq, payload))

    def run(self) -> ServerlessRun:
        wl = self.wl
        fresh = self.state
        placeable = [len(self.sched.feasible_nodes(f.pod, fresh)) > 0 for f in wl.functions]
        served = np.array([placeable[int(f)] for f in wl.func], bool) if len(wl) else np.zeros(0, bool)
        for k in np.flatnonzero(served):
            self._push(float(wl.arrival_s[k]), _ARRIVE, int(k))
        remaining = int(served.sum())
        while remaining:
            if not self.events:  # cannot happen: every waiting invocation has something to wait for
                raise AssertionError("serverless simulation stalled with invocations left")
            t, prio, _, payload = heapq.heappop(self.events)
            if prio == _CPU_DONE:
                remaining -= self._cpu_done(t, *payload)
            elif prio == _PULL_DONE:
                self._pull_done(t, *payload)
            elif prio == _READY:
                self._ready(t, payload[0])
            elif prio == _ARRIVE:
                self._arrive(t, payload[0])
            else:
                self._expire(t, *payload)
        return ServerlessRun(wl, self.start, self.finish, self.node_of, served, self.placed, self.pulls,
                             self.expired, self.evicted)

    # ------------------------------------------------------------------ CPU processor sharing
    def _rate(self, i: int) -> float:
        d = self.demand[i]
        phi = 1.0 if d <= self.cores[i] else self.cores[i] / d
        bw = phi * self.bwdemand[i]
        mem = 1.0 if bw <= self.membw[i] else self.membw[i] / bw
        return self.speed[i] * phi * mem

    def _advance(self, i: int, t: float) -> None:
        self.vclock[i] += self.rate[i] * (t - self.vtime[i])
        self.vtime[i] = t

    def _reschedule_cpu(self, i: int, t: float) -> None:
        self.rate[i] = self._rate(i)
        self.cpu_ver[i] += 1
        if self.running[i]:
            left = max(self.running[i][0][0] - self.vclock[i], 0.0)
            self._push(t + left / self.rate[i], _CPU_DONE, i, self.cpu_ver[i])

    def _execute(self, k: int, c: _Container, t: float) -> None:
        i, f = c.node, c.func
        self._advance(i, t)
        heapq.heappush(self.running[i], (self.vclock[i] + float(self.wl.duration_s[k]), k))
        self.demand[i] += self.cpu[f]
        self.bwdemand[i] += self.beta[f] * self.cpu[f]
        c.in_flight += 1
        c.idle_since = None
        self.idle.pop(c.cid, None)
        self.start[k], self.node_of[k] = t, i
        self.cont_of[k] = c
        self._reschedule_cpu(i, t)

    def _cpu_done(self, t: float, i: int, ver: int) -> int:
        if ver != self.cpu_ver[i]:
            return 0
        self._advance(i, t)
        run = self.running[i]
        tol = _EPS * max(1.0, abs(self.vclock[i]))
        freed = []
        while run and run[0][0] <= self.vclock[i] + tol:
            _, k = heapq.heappop(run)
            f = int(self.wl.func[k])
            self.finish[k] = t
            self.demand[i] -= self.cpu[f]
            self.bwdemand[i] -= self.beta[f] * self.cpu[f]
            c = self.cont_of.pop(k)
            c.in_flight -= 1
            c.last_used = t
            freed.append(c)
        if not run:  # back to the background alone: drop the sums' float round-off
            self.demand[i], self.bwdemand[i] = self._bg[i], self._bg_bw[i]
        self._reschedule_cpu(i, t)
        for c in freed:
            self._dispatch(c.func, t)
        for c in freed:
            if c.state == "ready" and c.in_flight == 0 and c.idle_since is None:
                self._went_idle(c, t)
        return len(freed)

    # ------------------------------------------------------------------ image pulls
    def _advance_link(self, i: int, t: float) -> None:
        if self.lcount[i]:
            self.lclock[i] += self.cfg.link_bandwidth_bytes_s / self.lcount[i] * (t - self.ltime[i])
        self.ltime[i] = t

    def _reschedule_link(self, i: int, t: float) -> None:
        self.link_ver[i] += 1
        if self.lpulls[i]:
            left = max(self.lpulls[i][0][0] - self.lclock[i], 0.0)
            self._push(t + left * self.lcount[i] / self.cfg.link_bandwidth_bytes_s, _PULL_DONE, i, self.link_ver[i])

    def _start_pull(self, i: int, image: str, size: int, c: _Container, t: float) -> None:
        self._advance_link(i, t)
        pid = len(self.pull_info)
        self.pull_info[pid] = (i, image, size, [c])
        self.pulling[(i, image)] = pid
        self.lcount[i] += 1
        heapq.heappush(self.lpulls[i], (self.lclock[i] + size, pid))
        self.pulls += 1
        self._reschedule_link(i, t)

    def _pull_done(self, t: float, i: int, ver: int) -> None:
        if ver != self.link_ver[i]:
            return
        self._advance_link(i, t)
        tol = _EPS * max(1.0, abs(self.lclock[i]))
        while self.lpulls[i] and self.lpulls[i][0][0] <= self.lclock[i] + tol:
            _, pid = heapq.heappop(self.lpulls[i])
            node, image, size, waiting = self.pull_info[pid]
            self.lcount[i] -= 1
            del self.pulling[(node, image)]
            self.state.add_image(node, image, size)
            for c in waiting:
                self._push(t + self.cfg.container_start_s, _READY, c)
        self._reschedule_link(i, t)

    # ------------------------------------------------------------------ containers
    def _create(self, f: int, t: float) -> None:
        c = _Container(len(self.containers), f)
        self.containers.append(c)
        self.alive[f].append(c)
        self.creating[f] += 1
        self.pending.append(c)
        self._place_pending(t)

    def _place(self, c: _Container, t: float) -> bool:
        pod = self.wl.functions[c.func].pod
        node = self.sched.select(pod, self.state)
        if node is None and not self._fits_without_idle(pod):
            return False  # evicting every idle container would not make room: evict none
        while node is None:
            victim = self._lru_idle()
            if victim is None:
                return False
            self._remove(victim)
            self.evicted += 1
            node = self.sched.select(pod, self.state)
        self.state.add_pod(node, pod)
        c.node, c.state = node, "starting"
        self.placed += 1
        f = c.func
        image, size = self.images[f], int(self.wl.functions[f].image_bytes)
        have = self.state.image_nodes.get(image)
        if size <= 0 or (have is not None and have[node]):
            self._push(t + self.cfg.container_start_s, _READY, c)
        elif (node, image) in self.pulling:
            self.pull_info[self.pulling[(node, image)]][3].append(c)
        else:
            self._start_pull(node, image, size, c, t)
        return True

    def _place_pending(self, t: float) -> None:
        """Try every pending pod in FIFO order (cancelled ones are dropped). Pods of one function
        are identical, so once one fails the others of its function are not tried in this pass."""
        for _ in range(len(self.pending)):
            c = self.pending.popleft()
            if c.state != "pending":
                continue
            if self.failed_at[c.func] == self.epoch or not self._place(c, t):
                self.failed_at[c.func] = self.epoch
                self.pending.append(c)

    def _fits_without_idle(self, pod) -> bool:
        """Whether ``pod`` would pass the filters of some node if every idle container were gone.
        The filters read only the requests and pod counts of the state (labels, taints and
        affinity do not change), so those three arrays are lowered by the idle containers' pods
        for the check and restored."""
        if not self.idle:
            return False
        st = self.state
        saved = st.req_cpu.copy(), st.req_mem.copy(), st.n_pods.copy()
        for c in self.idle.values():
            p = self.wl.functions[c.func].pod
            st.req_cpu[c.node] -= p.cpu_milli
            st.req_mem[c.node] -= p.memory_bytes
            st.n_pods[c.node] -= 1
        ok = len(self.sched.feasible_nodes(pod, st)) > 0
        st.req_cpu[:], st.req_mem[:], st.n_pods[:] = saved
        return ok

    def _lru_idle(self) -> _Container | None:
        while self.idle_heap:
            since, _, c = heapq.heappop(self.idle_heap)
            if c.state == "ready" and c.in_flight == 0 and c.idle_since == since:
                return c
        return None

    def _remove(self, c: _Container) -> None:
        self.state.remove_pod(c.node, self.wl.functions[c.func].pod)
        c.state = "removed"
        self.epoch += 1
        self.idle.pop(c.cid, None)
        self.alive[c.func].remove(c)

    def _ready(self, t: float, c: _Container) -> None:
        c.state = "ready"
        self.creating[c.func] -= 1
        self._dispatch(c.func, t)
        if c.in_flight == 0 and c.idle_since is None and c.state == "ready":
            self._went_idle(c, t)

    def _went_idle(self, c: _Container, t: float) -> None:
        c.idle_since = t
        self.epoch += 1
        self.idle[c.cid] = c
        heapq.heappush(self.idle_heap, (t, c.cid, c))
        self._push(t + self.cfg.keep_alive_s, _EXPIRE, c, t)
        if self.pending:
            self._place_pending(t)

    def _expire(self, t: float, c: _Container, since: float) -> None:
        if c.state == "ready" and c.in_flight == 0 and c.idle_since == since:
            self._remove(c)
            self.expired += 1
            if self.pending:
                self._place_pending(t)

    # ------------------------------------------------------------------ invocations
    def _arrive(self, t: float, k: int) -> None:
        f = int(self.wl.func[k])
        self.queue[f].append(k)
        self._dispatch(f, t)
        q, conc = len(self.queue[f]), self.cfg.concurrency
        if q > self.creating[f] * conc and (self.cfg.max_scale is None or len(self.alive[f]) < self.cfg.max_scale):
            self._create(f, t)

    def _dispatch(self, f: int, t: float) -> None:
        """Give ``f``'s queued invocations to its ready containers' free slots (the fullest
        container first, then the most recently used), then cancel pending containers the
        queue no longer needs."""
        q, conc = self.queue[f], self.cfg.concurrency
        while q:
            best = None
            for c in self.alive[f]:
                if c.state == "ready" and c.in_flight < conc:
                    if best is None or (c.in_flight, c.last_used, c.cid) > (best.in_flight, best.last_used, best.cid):
                        best = c
            if best is None:
                break
            self._execute(q.popleft(), best, t)
        starting = sum(1 for c in self.alive[f] if c.state == "starting")
        while self.creating[f] > starting and len(q) <= (self.creating[f] - 1) * conc:
            newest = max((c for c in self.alive[f] if c.state == "pending"), key=lambda c: c.cid)
            newest.state = "cancelled"
            self.alive[f].remove(newest)
            self.creating[f] -= 1
