"""Plain data shared by placement policies, the simulator and live placement.

Units: time in seconds, memory in MiB, utilisation in percent of one GPU (0-100 per job;
a GPU's summed predicted utilisation may exceed 100 when over-committed).
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np


@dataclass(frozen=True)
class JobSpec:
    """A training job as the policies see it.

    ``duration``: run time alone on its GPUs (s); ``util``: predicted GPU utilisation (%) of
    each of its tasks; ``memory_mib``: predicted memory per GPU (MiB); ``num_gpus``: tasks,
    one per GPU; ``estimate``: its run time alone as a scheduler can know it at submission (s;
    ``None``: unknown, policies then use ``duration``, see :attr:`planned`). Raises ``ValueError`` if ``arrival``, ``duration``, ``util`` or
    ``memory_mib`` is NaN, infinite or not a number, ``arrival`` < 0, ``duration`` <= 0,
    ``num_gpus`` < 1 or memory / utilisation < 0.
    """

    job_id: int
    arrival: float
    num_gpus: int
    duration: float
    util: float
    memory_mib: float
    model: str = ""
    batch_size: int = 0
    estimate: float | None = None

    @property
    def planned(self) -> float:
        """The run time alone (s) a scheduler plans with: ``estimate`` (known at submission)
        where set, else ``duration`` (then the trace offers nothing better; an oracle)."""
        return self.duration if self.estimate is None else self.estimate

    def __post_init__(self) -> None:
        if self.estimate is not None and not (isinstance(self.estimate, numbers.Real)
                                              and math.isfinite(self.estimate) and self.estimate > 0):
            raise ValueError(f"job {self.job_id}: estimate must be a finite number > 0 s, got {self.estimate!r}")
        for name in ("arrival", "duration", "util", "memory_mib"):
            v = getattr(self, name)
            if not isinstance(v, numbers.Real) or not math.isfinite(v):
                raise ValueError(f"job {self.job_id}: {name} must be a finite number, got {v!r}")
        if self.arrival < 0:
            raise ValueError(f"job {self.job_id}: arrival must be >= 0 s, got {self.arrival}")
        if self.num_gpus < 1:
            raise ValueError(f"job {self.job_id}: num_gpus must be >= 1, got {self.num_gpus}")
        if self.duration <= 0:
            raise ValueError(f"job {self.job_id}: duration must be > 0 s, got {self.duration}")
        if self.memory_mib < 0 or self.util < 0:
            raise ValueError(f"job {self.job_id}: negative memory or utilisation")


#: Belief about a job that has run past its estimate: it has as much left as it has done so
#: far. For a Pareto-tailed duration with shape ``alpha``, E[X - a | X > a] = a / (alpha - 1)
#: (the mean residual life grows with age, the premise of Tiresias's least-attained-service
#: scheduling, Gu et al., NSDI 2019, section 2.2); ``alpha`` = 2 gives ``a``. An assumption,
#: not fitted to any trace.
OVERRUN_RESIDUAL_FACTOR = 1.0


def expected_remaining_s(planned_s: float, done_s: float) -> float:
    """Isolated seconds of work a scheduler expects a running job still to need, from what it
    can know: the job's estimate ``planned_s`` (:attr:`JobSpec.planned`) and the isolated work
    done so far ``done_s`` (both seconds, >= 0). ``planned_s - done_s`` while the estimate holds;
    once the job has outrun it, ``OVERRUN_RESIDUAL_FACTOR * done_s`` (see there) rather than 0,
    so a job whose estimate was wrong is not treated as about to finish (by the critical-path
    guard's projected ends, or by the migration rule)."""
    left = planned_s - done_s
    if left >= -1e-6 * max(planned_s, 1.0):  # still within the estimate (float noise at its end)
        return max(left, 0.0)
    return OVERRUN_RESIDUAL_FACTOR * done_s


@dataclass(frozen=True)
class GPUSpec:
    """One GPU: ``gpu_id`` (index into the cluster arrays), ``node`` (node index),
    ``gpu_type`` (e.g. "V100"), ``memory_mib`` (capacity)."""

    gpu_id: int
    node: int
    gpu_type: str
    memory_mib: float


@dataclass
class Placement:
    """A policy's decision: run ``job_id`` now on ``gpu_ids`` (one task per GPU).
    ``explanation``: policy-specific, JSON-serialisable (e.g. cost terms of top candidates)."""

    job_id: int
    gpu_ids: tuple[int, ...]
    explanation: dict[str, Any] = field(default_factory=dict)


def profile_key(job: JobSpec) -> tuple:
    """A job's type and profile: (model, batch size, GPUs, utilisation %, memory MiB); never
    its duration, arrival or id. What :attr:`ClusterState.resident_class` groups GPUs by."""
    bs = job.batch_size
    # plain Python values, so equal profiles print (and so order, ClusterState._reclass) alike
    return (str(job.model), int(bs) if isinstance(bs, numbers.Integral) else bs, int(job.num_gpus),
            float(job.util), float(job.memory_mib))


class ClusterState:
    """Occupancy of every GPU as per-GPU numpy arrays (fast for 10^3-10^4 GPUs).

    ``mem_used`` (MiB), ``util_sum`` (% predicted), ``ntasks`` (count) and ``gang_gpus`` (the
    summed ``num_gpus`` of the jobs on the GPU: ``ntasks`` when every one is a 1-GPU job) are
    indexed by gpu_id.
    ``running``: job_id -> (JobSpec, gpu_ids); ``on_gpu``: gpu_id -> ids of the jobs running on
    it (GPUs with none are absent), kept by :meth:`assign` / :meth:`release`;
    ``resident_class``: per GPU, an id of the multiset of its jobs' profiles
    (:func:`profile_key`; 0 = empty), so GPUs holding the same kinds of job share an id, and
    ``resident_profiles[id]`` is that multiset (a tuple of profile keys, in a fixed order; the
    table is append-only and shared by copies); ``attained``: job_id -> GPU-seconds of service
    received so far (Tiresias's 2D attained service), maintained by the simulator / live layer.
    ``end_at`` (s, absolute): projected time the last job now on each GPU would finish if
    every job ran alone from now on (isolated remaining work; a lower bound while shared);
    NaN where unknown (live placement, which does not know progress) or the GPU is empty. The simulator maintains it; policies extend it in their scratch copies as they
    assign (:meth:`note_end`).
    """

    def __init__(self, gpus: list[GPUSpec]) -> None:
        if not gpus:
            raise ValueError("a cluster needs at least one GPU")
        if [g.gpu_id for g in gpus] != list(range(len(gpus))):
            raise ValueError("gpu_id must be 0..n-1 in order")
        self.gpus = gpus
        self.node = np.array([g.node for g in gpus], dtype=np.int64)
        self.capacity = np.array([g.memory_mib for g in gpus], dtype=np.float64)
        self.mem_used = np.zeros(len(gpus))
        self.util_sum = np.zeros(len(gpus))
        self.ntasks = np.zeros(len(gpus), dtype=np.int64)
        self.gang_gpus = np.zeros(len(gpus), dtype=np.int64)
        self.end_at = np.full(len(gpus), np.nan)
        self.track_end = False
        self.resident_class = np.zeros(len(gpus), dtype=np.int64)
        self.resident_profiles: list[tuple] = [()]  # class id -> profiles (shared by copies)
        self._class_ids: dict[tuple, int] = {(): 0}
        self.running: dict[int, tuple[JobSpec, tuple[int, ...]]] = {}
        self.on_gpu: dict[int, tuple[int, ...]] = {}  # gpu_id -> ids of the running jobs on it
        self.attained: dict[int, float] = {}
        self.nodes = np.unique(self.node)
        self._node_gpus = {int(n): np.flatnonzero(self.node == n) for n in self.nodes}
        self.max_gpus_per_node = max(len(v) for v in self._node_gpus.values())

    @property
    def n_gpus(self) -> int:
        return len(self.gpus)

    def node_gpus(self, node: int) -> np.ndarray:
        """GPU ids of ``node``."""
        return self._node_gpus[node]

    def copy(self) -> "ClusterState":
        """A scratch copy a policy can assign into tentatively (arrays copied, specs shared)."""
        c = object.__new__(ClusterState)
        c.__dict__.update(self.__dict__)
        c.mem_used, c.util_sum, c.ntasks = self.mem_used.copy(), self.util_sum.copy(), self.ntasks.copy()
        c.gang_gpus = self.gang_gpus.copy()
        c.end_at = self.end_at.copy()
        c.resident_class = self.resident_class.copy()
        c.running = dict(self.running)
        c.on_gpu = dict(self.on_gpu)
        return c

    def feasible(self, job: JobSpec, k_max: int, *, exclusive: bool = False) -> np.ndarray:
        """Boolean mask of GPUs that can take one task of ``job``: memory left >= job memory
        and fewer than ``k_max`` tasks (``exclusive``: no task at all)."""
        if exclusive:
            return (self.ntasks == 0) & (self.capacity >= job.memory_mib)
        return (self.ntasks < k_max) & (self.capacity - self.mem_used >= job.memory_mib)

    def assign(self, job: JobSpec, gpu_ids: tuple[int, ...]) -> None:
        """Put one task of ``job`` on each of ``gpu_ids``. Raises ``ValueError`` if the job is
        already running or a GPU would go over its memory (nothing changes then)."""
        if job.job_id in self.running:
            raise ValueError(f"job {job.job_id} is already placed")
        if len(set(gpu_ids)) != job.num_gpus:
            raise ValueError(f"job {job.job_id} needs {job.num_gpus} distinct GPUs, got {gpu_ids}")
        if len(gpu_ids) == 1:  # the common case, without numpy's fancy indexing (a third of the cost)
            g = int(gpu_ids[0])
            if g < 0:
                raise IndexError(f"GPU id {g} out of range")
            if self.mem_used[g] + job.memory_mib > self.capacity[g] + 1e-6:
                raise ValueError(f"job {job.job_id} does not fit in the memory of GPUs {gpu_ids}")
            self.mem_used[g] += job.memory_mib
            self.util_sum[g] += job.util
            self.ntasks[g] += 1
            self.gang_gpus[g] += 1
            self.running[job.job_id] = (job, (g,))
            self.on_gpu[g] = self.on_gpu.get(g, ()) + (job.job_id,)
            self._reclass(g, profile_key(job), +1)
            return
        idx = np.fromiter(gpu_ids, dtype=np.int64)
        if idx.min() < 0 or idx.max() >= len(self.gpus):  # numpy would wrap a negative id
            raise IndexError(f"GPU ids {tuple(gpu_ids)} out of range 0..{len(self.gpus) - 1}")
        if np.any(self.mem_used[idx] + job.memory_mib > self.capacity[idx] + 1e-6):
            raise ValueError(f"job {job.job_id} does not fit in the memory of GPUs {gpu_ids}")
        self.mem_used[idx] += job.memory_mib
        self.util_sum[idx] += job.util
        self.ntasks[idx] += 1
        self.gang_gpus[idx] += job.num_gpus
        self.running[job.job_id] = (job, tuple(int(g) for g in gpu_ids))
        key = profile_key(job)
        for g in self.running[job.job_id][1]:
            self.on_gpu[g] = self.on_gpu.get(g, ()) + (job.job_id,)
            self._reclass(g, key, +1)

    def _reclass(self, g: int, key: tuple, sign: int) -> None:
        """Add (``sign`` +1) or remove (-1) one job of profile ``key`` from GPU ``g``'s
        ``resident_class``."""
        have = list(self.resident_profiles[self.resident_class[g]])
        if sign > 0:
            have.append(key)
            have.sort(key=repr)  # a fixed order that never compares None with a number
        else:
            have.remove(key)
        new = tuple(have)
        cid = self._class_ids.get(new)
        if cid is None:
            cid = self._class_ids[new] = len(self.resident_profiles)
            self.resident_profiles.append(new)
        self.resident_class[g] = cid

    def note_end(self, gpu_ids: tuple[int, ...], end_at: float) -> None:
        """Record that a job on ``gpu_ids`` is projected to finish at ``end_at`` (s): each
        GPU's ``end_at`` becomes the later of the two (NaN counts as unknown). No-op unless
        ``track_end``."""
        if not self.track_end:
            return
        idx = np.fromiter(gpu_ids, dtype=np.int64)
        self.end_at[idx] = np.fmax(self.end_at[idx], end_at)

    def release(self, job_id: int) -> tuple[int, ...]:
        """Remove ``job_id``'s tasks; returns the GPUs it held. ``KeyError`` if not running."""
        job, gpu_ids = self.running.pop(job_id)
        idx = np.fromiter(gpu_ids, dtype=np.int64)
        self.mem_used[idx] = np.maximum(self.mem_used[idx] - job.memory_mib, 0.0)
        self.util_sum[idx] = np.maximum(self.util_sum[idx] - job.util, 0.0)
        self.ntasks[idx] -= 1
        self.gang_gpus[idx] -= job.num_gpus
        key = profile_key(job)
        for g in gpu_ids:
            self._reclass(g, key, -1)
            rest = tuple(j for j in self.on_gpu.get(g, ()) if j != job_id)
            if rest:
                self.on_gpu[g] = rest
            else:
                self.on_gpu.pop(g, None)
        return gpu_ids

    def move(self, job_id: int, gpu_ids: tuple[int, ...]) -> tuple[int, ...]:
        """Migrate running ``job_id`` to ``gpu_ids`` (one task per GPU; GPUs it already holds
        may be kept). Returns the GPUs it held before. Raises ``KeyError`` if the job is not
        running, ``ValueError`` (state unchanged) if the new set has the wrong size or a
        GPU would go over its memory once the job's old tasks are removed, and ``IndexError``
        (state unchanged) for a GPU id outside the cluster."""
        job, old = self.running[job_id]
        if len(set(gpu_ids)) != job.num_gpus:
            raise ValueError(f"job {job_id} needs {job.num_gpus} distinct GPUs, got {gpu_ids}")
        self.release(job_id)
        try:
            self.assign(job, gpu_ids)
        except (ValueError, IndexError):  # over memory, or a GPU id outside the cluster
            self.assign(job, old)  # fits: it was there a moment ago
            raise
        return old

    def jobs_on(self, gpu_id: int) -> list[JobSpec]:
        """Jobs with a task on ``gpu_id`` (linear scan; for explanations and tests)."""
        return [j for j, g in self.running.values() if gpu_id in g]


def mixed_cluster(node_types: Sequence[tuple[str, float]], gpus_per_node: int) -> list[GPUSpec]:
    """One node of ``gpus_per_node`` GPUs per entry of ``node_types`` (``(GPU type, memory MiB)``),
    in that order: a heterogeneous cluster whose nodes are each of one type, as Gavel's are.
    ``ValueError`` for no nodes or ``gpus_per_node`` < 1."""
    if not node_types or gpus_per_node < 1:
        raise ValueError("a cluster needs at least one node and gpus_per_node >= 1")
    return [GPUSpec(n * gpus_per_node + i, n, gpu_type, float(memory_mib))
            for n, (gpu_type, memory_mib) in enumerate(node_types) for i in range(gpus_per_node)]


def homogeneous_cluster(n_nodes: int, gpus_per_node: int, *, gpu_type: str = "V100",
                        memory_mib: float = 16384.0) -> list[GPUSpec]:
    """``n_nodes`` x ``gpus_per_node`` identical GPUs (default V100 16 GiB)."""
    if n_nodes < 1 or gpus_per_node < 1:
        raise ValueError("a cluster needs n_nodes >= 1 and gpus_per_node >= 1")
    return [GPUSpec(n * gpus_per_node + i, n, gpu_type, memory_mib)
            for n in range(n_nodes) for i in range(gpus_per_node)]
