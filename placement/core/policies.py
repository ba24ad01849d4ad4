"""Placement policies behind one interface, used unchanged by the simulator and live placement.

Interface (Gavel/Blox style, one method over plain data)::

    policy.place(queue, state, now, rng) -> list[Placement]

``queue``: waiting :class:`JobSpec` in arrival order; ``state``: :class:`ClusterState` (not
modified: policies work on a scratch copy); ``now``: seconds; ``rng``: ``numpy.random.Generator``.
Preemptive policies (Tiresias) also implement ``preempt(queue, state, now) -> list[job_id]``.
Co-locating policies that migrate (Horus, Horus+, Gandiva; ``migrates = True``) implement
``migrate(state, now, remaining, slowdown, cost_s) -> list[Migration]``, called by the simulator
after ``place``: it un-shares co-located jobs onto GPUs left idle (see :meth:`Policy.migrate`).
FIFO exclusive, SJF and Tiresias never co-locate, so they have nothing to un-share; random
co-location is the naive baseline of the Horus paper and keeps its placements (no migration).
Live placement calls ``place`` only: real jobs are not checkpointed and moved by the platform.

References: Horus = Yeung, Borowiec, Yang, Friday, Harper, Garraghan, "Horus: Interference-aware
and prediction-based scheduling in deep learning systems", IEEE TPDS 33(1), 2022 (the cost
function, queue ordering and Horus+ credit queues are described in its scheduler-design
section; we follow the summary in Tandem SPEC section 2). Tiresias = Gu et al., NSDI 2019
(section 3-4: 2D-LAS with discretised priority queues). Gandiva = Xiao et al., OSDI 2018
(packing and time-slicing). FIFO exclusive = YARN capacity scheduler.
"""
from __future__ import annotations

import bisect

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from .types import ClusterState, JobSpec, Placement, profile_key

#: Default checkpoint/restore time charged per migration (s). An assumption, not a measured
#: figure: suspend at an iteration boundary, copy weights + optimiser state (hundreds of MiB to a
#: few GiB) through host memory, restart the process on the destination GPU(s). Gandiva (Xiao et
#: al., OSDI 2018, section 3.3 "Migration") does this with framework support; ours is a
#: deliberately conservative tens-of-seconds charge, a parameter of the simulator.
DEFAULT_MIGRATION_COST_S = 30.0


@dataclass(frozen=True)
class Migration:
    """A policy's decision to move running ``job_id`` from ``from_gpus`` to ``to_gpus`` (one
    task per GPU). ``saving_s``: the policy's expected saving in seconds (see
    :meth:`Policy.migrate`); ``explanation``: JSON-serialisable reasons."""

    job_id: int
    from_gpus: tuple[int, ...]
    to_gpus: tuple[int, ...]
    saving_s: float
    explanation: dict = field(default_factory=dict)


#: Orders a co-locating policy may place its look-ahead window in. ``utilisation``: highest
#: predicted utilisation first (Horus, TPDS 2022: the hardest to pack go first); ``shortest``:
#: shortest estimated duration first (:attr:`JobSpec.planned`; ties: higher utilisation, then
#: arrival), the SJF order, which minimises mean JCT on one machine (Smith's rule with unit
#: weights); ``fifo``: arrival order.
QUEUE_ORDERS = ("utilisation", "shortest", "fifo")


#: The policies' belief about how fast each GPU type is: peak FP32 throughput in TFLOPS from
#: NVIDIA's datasheets (V100 SXM2 15.7; P100 PCIe 9.3; K80 8.73 per board = 4.37 per GK210
#: GPU). A public spec, not the simulator's world (Gavel's measured per-type throughputs,
#: placement/core/world.py), which it only approximates: ratios of peak FLOPS overstate a K80's
#: gap for jobs bound by input or memory and understate it for others.
PEAK_FP32_TFLOPS: dict[str, float] = {"k80": 4.37, "p100": 9.3, "v100": 15.7}


def believed_speed(gpu_type: str) -> float | None:
    """Peak FP32 TFLOPS of ``gpu_type`` (:data:`PEAK_FP32_TFLOPS`, matched by prefix, any case:
    ``V100M32`` is a V100), or ``None`` for a type the table lacks."""
    g = gpu_type.lower()
    for name, tflops in PEAK_FP32_TFLOPS.items():
        if g.startswith(name):
            return tflops
    return None


def type_slowness(state: ClusterState) -> np.ndarray:
    """Per GPU of ``state``, ``fastest / believed speed - 1`` (0 on the cluster's fastest type
    and on types without a belief; a K80 beside V100s 2.6): the extra run time, as a fraction,
    that a GPU's type is believed to cost against the cluster's fastest. All zeros on a
    homogeneous cluster. (n_gpus,) floats."""
    speeds = [believed_speed(g.gpu_type) for g in state.gpus]
    known = [v for v in speeds if v is not None]
    if not known:
        return np.zeros(len(speeds))
    fastest = max(known)
    return np.array([fastest / v - 1.0 if v is not None else 0.0 for v in speeds])


def check_queue_order(order: str) -> str:
    """``order`` if it is one of :data:`QUEUE_ORDERS`; ``ValueError`` naming them otherwise."""
    if order not in QUEUE_ORDERS:
        raise ValueError(f"unknown queue order {order!r}; known: {', '.join(QUEUE_ORDERS)}")
    return order


def order_key(order: str):
    """The sort key of ``order`` (:data:`QUEUE_ORDERS`): a function of a job returning a tuple,
    ties by arrival."""
    if order == "utilisation":
        return lambda j: (-j.util, j.arrival)
    if order == "shortest":
        return lambda j: (j.planned, -j.util, j.arrival)
    return lambda j: (j.arrival,)


def order_window(window: Sequence[JobSpec], order: str) -> list[JobSpec]:
    """``window`` sorted by ``order`` (:data:`QUEUE_ORDERS`); stable, ties by arrival."""
    return sorted(window, key=order_key(order))


class Policy(ABC):
    """Base class. ``k_max``: most tasks per GPU; ``exclusive``: a GPU holds one job only."""

    name = "base"
    k_max = 1
    exclusive = True
    preemptive = False
    queue_window: int | None = None  # a policy that only looks at the N oldest jobs says so
    migrates = False  # un-shares co-located jobs onto idle GPUs (simulator only)

    @property
    def migrates_across_types(self) -> bool:
        """Whether :meth:`migrate` may also move a job that shares nothing, from a GPU type it
        believes slower onto an idle faster one (the simulator then passes every running job's
        remaining work, not only co-located jobs'). Default False: the baselines' papers migrate
        only to un-share."""
        return False

    @abstractmethod
    def place(self, queue: Sequence[JobSpec], state: ClusterState, now: float,
              rng: np.random.Generator) -> list[Placement]:
        """Placements to start now for jobs of ``queue`` (oldest first) on ``state``'s GPUs at
        simulated or wall time ``now`` (seconds); ``rng`` for randomised policies. Must not
        exceed any GPU's memory or ``k_max``, nor place a job twice."""

    def preempt(self, queue: Sequence[JobSpec], state: ClusterState, now: float) -> list[int]:
        """Job ids to suspend now (re-queued by the caller). Default: none."""
        return []

    def migrate(self, state: ClusterState, now: float, remaining: Mapping[int, float],
                slowdown: Mapping[int, float], cost_s: float) -> list[Migration]:
        """Un-share co-located jobs onto GPUs that are idle (no task) after placement.

        ``state`` is not modified. ``remaining``: job_id -> isolated seconds of work left
        (for Gavel traces this is known to the scheduler: the job's step count is in its
        command and its isolated throughput is measured; for Philly it is the logged duration,
        an oracle as for SJF); ``slowdown``: job_id -> its current slowdown factor (>= 1);
        both given for (at least) every running job with a task on a GPU it shares (every
        running job when :attr:`migrates_across_types`).
        ``cost_s``: checkpoint/restore time the move costs the job (it makes no progress
        for ``cost_s`` after moving). Returns migrations to apply in order (no job twice,
        destinations idle or the job's own unshared GPUs, memory never exceeded); ``[]``
        unless ``self.migrates``.

        Rule (Gandiva, Xiao et al., OSDI 2018, section 3.3: time-sliced jobs are migrated to
        vacated GPUs): a job with remaining work ``W`` running at slowdown ``s`` finishes in
        about ``W * s`` if it stays shared and ``cost_s + W`` if it moves to exclusive GPUs,
        so it moves only when the saving ``W * (s - 1) - cost_s`` is positive (its co-runners'
        speed-up is a further gain, not counted). Candidates go greedily by saving, largest
        first (ties: lower job id). A job's new GPUs are idle GPUs plus those it holds alone,
        chosen on the fewest nodes (keeping its own GPUs first) and never on more nodes than
        it spans now. A GPU taken by one move is not idle for the next; a job left alone by
        its partner's move is no longer a candidate. For a policy that weighs GPU types (Horus
        with ``w_speed`` > 0) on a cluster of mixed types, the new GPUs are the fastest idle
        ones and the move must pay with their believed type slowness
        (:func:`type_slowness`): ``W * s * (1 + slowness now) > cost_s + W * (1 + slowness
        there)``, ``s`` being the co-location slowdown alone (the simulator passes the world's
        interference, never its per-type speed); with ``s`` = 1 and both slownesses 0 this is the
        rule above. Such a policy (:attr:`migrates_across_types`) also moves a job that shares
        nothing when that inequality holds: a long job started on a slow type while the fast
        GPUs were busy moves to one that freed (Gavel, Narayanan et al., OSDI 2020, section 3,
        re-allocates jobs across GPU types as they come and go; here only onto idle GPUs, by
        belief, never preempting). Saving = left side minus right side.
        """
        if cost_s < 0:
            raise ValueError(f"migration cost must be >= 0 s, got {cost_s}")
        if not self.migrates:
            return []
        idle = state.ntasks == 0
        if not idle.any():
            return []
        # believed extra run time of each GPU's type (0: homogeneous), for policies that weigh
        # GPU types (Horus's ``w_speed`` > 0); the baselines migrate as their papers do, type-blind
        slow = self._type_slowness(state) if getattr(self, "w_speed", 0.0) > 0 else np.zeros(state.n_gpus)
        across = self.migrates_across_types and bool(slow.any())
        slow_l = slow.tolist()
        idle_slow, idle_cap = slow[idle], state.capacity[idle]
        fastest_idle = float(idle_slow.min())
        ranked = []
        for jid, w in remaining.items():
            run = state.running.get(jid)
            if run is None:
                continue
            s = slowdown.get(jid, 1.0)
            if across:  # the saving on the fastest idle type that can hold the job
                gs = run[1]
                here = slow_l[gs[0]] if len(gs) == 1 else max(slow_l[g] for g in gs)
                if s == 1.0 and here <= fastest_idle:
                    continue  # shares nothing and nothing faster is idle (the check below, cheaply)
                fits = idle_cap >= run[0].memory_mib
                if not fits.any():
                    continue
                there = min(here, float(idle_slow[fits].min()))
                if s == 1.0 and there >= here:
                    continue  # shares nothing and nothing faster is idle
                saving = w * (s * (1.0 + here) - (1.0 + there)) - cost_s
            else:  # the rule above, exactly as written (homogeneous clusters, type-blind policies)
                saving = w * (s - 1.0) - cost_s
            if saving > 0:
                ranked.append((-saving, jid))
        if not ranked:
            return []
        ranked.sort()
        scratch = state.copy()
        out: list[Migration] = []
        for neg_saving, jid in ranked:
            job, gpus = scratch.running[jid]
            cur = np.fromiter(gpus, dtype=np.int64)
            shares = bool(np.any(scratch.ntasks[cur] > 1))
            if not shares and not across:
                continue  # no longer shares a GPU
            own = cur[scratch.ntasks[cur] == 1]
            free = np.flatnonzero((scratch.ntasks == 0) & (scratch.capacity >= job.memory_mib))
            if len(free) == 0:
                continue  # none idle with its memory (a job needing less may still move)
            free = free[np.argsort(slow[free], kind="stable")]  # fastest type first
            cand = np.concatenate([own, free])
            if len(cand) < job.num_gpus:
                continue
            cost = np.concatenate([slow[own], 1.0 + slow[free]])
            if job.num_gpus == 1:
                new = (int(free[0]),)
            else:
                new = _fewest_nodes(scratch, cand, cost, job.num_gpus)
                if new is None or len(np.unique(scratch.node[list(new)])) > len(np.unique(scratch.node[cur])):
                    continue
            if set(new) == set(gpus):
                continue  # nowhere better to go
            # on a cluster of mixed types the new GPUs may be slower or faster (belief:
            # type_slowness): the move pays only if W * s * (1 + slowness now) > cost_s + W * (1 +
            # theirs) (s = 1 for a job that shares nothing any more)
            dest, here = float(slow[list(new)].max()), float(slow[cur].max())
            if across or dest > here:
                s_now = slowdown.get(jid, 1.0) if shares else 1.0
                if remaining[jid] * (s_now * (1.0 + here) - (1.0 + dest)) - cost_s <= 0:
                    continue
            scratch.move(jid, new)
            out.append(Migration(jid, gpus, new, -neg_saving, {
                "policy": self.name, "remaining_s": round(float(remaining[jid]), 1),
                "slowdown": round(float(slowdown.get(jid, 1.0)), 4), "cost_s": cost_s}))
        return out

    # -- shared machinery ------------------------------------------------------------------
    def _type_slowness(self, state: ClusterState) -> np.ndarray:
        """:func:`type_slowness` of ``state``'s cluster, computed once per cluster (scratch
        copies share its GPU list)."""
        return self._slowness_of(state)[0]

    def _slowness_of(self, state: ClusterState) -> tuple[np.ndarray, np.ndarray]:
        """(:func:`type_slowness` per GPU, its distinct values ascending), cached per cluster."""
        cached = self.__dict__.get("_slowness")
        if cached is None or cached[0] is not state.gpus:
            slow = type_slowness(state)
            cached = self._slowness = (state.gpus, slow, np.unique(slow))
        return cached[1], cached[2]

    def cost(self, job: JobSpec, state: ClusterState, cand: np.ndarray) -> tuple[np.ndarray, dict]:
        """Cost per candidate GPU (lower is better) and named terms for explanations.
        Default: pack the fewest-task GPU first, lowest id first."""
        c = state.ntasks[cand].astype(float)
        return c, {"tasks": c}

    def candidates(self, job: JobSpec, state: ClusterState, now: float) -> np.ndarray:
        """Boolean mask of GPUs that may take one task of ``job`` now. Default: memory left
        and fewer than ``k_max`` tasks (:meth:`ClusterState.feasible`)."""
        return state.feasible(job, self.k_max, exclusive=self.exclusive)

    def _choose(self, job: JobSpec, state: ClusterState, rng: np.random.Generator, now: float = 0.0):
        """Pick ``job.num_gpus`` GPUs among :meth:`candidates`: lowest cost, fewest nodes for
        multi-GPU jobs. Returns (gpu_ids, explanation) or None if the job cannot be placed now."""
        mask = self.candidates(job, state, now)
        cand = np.flatnonzero(mask)
        if len(cand) < job.num_gpus:
            return None
        cost, terms = self.cost(job, state, cand)
        g = job.num_gpus
        if g == 1:
            best = int(np.argmin(cost))
            gpu_ids = (int(cand[best]),)
        else:
            gpu_ids = _fewest_nodes(state, cand, cost, g)
            if gpu_ids is None:
                return None
        order = np.argsort(cost, kind="stable")[:3]
        expl = {"policy": self.name, "candidates": [
            {"gpu": int(cand[i]), "cost": round(float(cost[i]), 4),
             **{k: round(float(v[i]), 4) for k, v in terms.items()}} for i in order]}
        return gpu_ids, expl

    def _place_in_order(self, ordered: Sequence[JobSpec], state: ClusterState,
                        rng: np.random.Generator, *, head_of_line: bool = False,
                        now: float = 0.0) -> list[Placement]:
        """Place jobs in ``ordered`` order, skipping (or, with ``head_of_line``, stopping at) the
        first that does not fit. Skips jobs dominated by an earlier failure (no less memory and
        no fewer GPUs), which cannot fit either. Each placed job's GPUs get ``end_at`` of at
        least ``now + duration`` in the scratch state, seen by the jobs placed after it."""
        scratch = state.copy()
        out: list[Placement] = []
        failed: list[tuple[float, int]] = []

        def capacity() -> tuple[int, float]:
            # cheap upper bounds: GPUs with a free slot, and the most memory free on one of them
            avail = scratch.ntasks == 0 if self.exclusive else scratch.ntasks < self.k_max
            n = int(avail.sum())
            free = scratch.capacity if self.exclusive else scratch.capacity - scratch.mem_used
            return n, float(free[avail].max()) if n else 0.0

        n_avail, max_free = capacity()
        for job in ordered:
            if n_avail == 0:
                break
            if job.num_gpus > n_avail or job.memory_mib > max_free or any(
                    job.memory_mib >= m and job.num_gpus >= n for m, n in failed):
                if head_of_line:
                    break
                continue
            choice = self._choose(job, scratch, rng, now)
            if choice is None:
                if head_of_line:
                    break
                failed.append((job.memory_mib, job.num_gpus))
                continue
            gpu_ids, expl = choice
            scratch.assign(job, gpu_ids)
            scratch.note_end(gpu_ids, now + job.planned)
            out.append(Placement(job.job_id, gpu_ids, expl))
            n_avail, max_free = capacity()
        return out


def _fewest_nodes(state: ClusterState, cand: np.ndarray, cost: np.ndarray, g: int):
    """Choose ``g`` GPUs among candidates on as few nodes as possible; ties by summed cost."""
    nodes = state.node[cand]
    uniq, counts = np.unique(nodes, return_counts=True)
    best = None
    for n in uniq[counts >= g]:  # one node suffices
        idx = np.flatnonzero(nodes == n)
        sel = idx[np.argsort(cost[idx], kind="stable")[:g]]
        total = float(cost[sel].sum())
        if best is None or total < best[0]:
            best = (total, sel)
    if best is not None:
        return tuple(int(cand[i]) for i in best[1])
    # span nodes: fullest-available nodes first (fewest nodes), cheapest GPUs within each
    chosen: list[int] = []
    for n in uniq[np.argsort(-counts, kind="stable")]:
        idx = np.flatnonzero(nodes == n)
        idx = idx[np.argsort(cost[idx], kind="stable")]
        chosen.extend(int(cand[i]) for i in idx[: g - len(chosen)])
        if len(chosen) == g:
            return tuple(chosen)
    return None


def _random_choice(policy: Policy, job: JobSpec, state: ClusterState, rng: np.random.Generator, now: float):
    """``job.num_gpus`` GPUs drawn uniformly without replacement from ``policy``'s candidates
    (:meth:`Policy.candidates`), with the explanation; None if too few candidates."""
    cand = np.flatnonzero(policy.candidates(job, state, now))
    if len(cand) < job.num_gpus:
        return None
    gpu_ids = tuple(int(g) for g in rng.choice(cand, size=job.num_gpus, replace=False))
    return gpu_ids, {"policy": policy.name, "candidates": [{"gpu": g} for g in gpu_ids]}


class FIFOExclusive(Policy):
    """FIFO with exclusive GPUs and head-of-line blocking (YARN capacity-scheduler style)."""

    name = "fifo"

    def place(self, queue, state, now, rng):
        return self._place_in_order(queue, state, rng, head_of_line=True, now=now)


class SJF(Policy):
    """Shortest-job-first, exclusive GPUs, non-preemptive, by :attr:`JobSpec.planned` (the
    estimate known at submission; the true duration only when the simulator runs with
    ``durations="oracle"``, as Tiresias's SRTF baseline); a job that does not fit is skipped."""

    name = "sjf"

    def place(self, queue, state, now, rng):
        return self._place_in_order(sorted(queue, key=lambda j: (j.planned, j.arrival)), state, rng, now=now)


class Tiresias(Policy):
    """Tiresias discretised 2D-LAS (Gu et al., NSDI 2019, sections 3.1-4.1).

    Attained service = GPUs x seconds run so far (``state.attained``). Jobs fall into priority
    queues by thresholds (GPU-seconds, default 3,600 and 36,000); lower queue = higher priority,
    FIFO within a queue; exclusive GPUs. A waiting job may preempt running jobs of a strictly
    lower-priority queue (most attained first) when that frees enough GPUs.
    """

    name = "tiresias"
    preemptive = True

    def __init__(self, thresholds: Sequence[float] = (3600.0, 36000.0)) -> None:
        self.thresholds = np.asarray(sorted(thresholds), dtype=float)
        self._bounds = tuple(float(t) for t in self.thresholds)  # bisect on floats: ~10x np's per call

    def level(self, job_id: int, state: ClusterState) -> int:
        """Priority queue of ``job_id`` (0 = highest): how many thresholds its attained service
        (GPU-seconds) has reached."""
        return bisect.bisect_right(self._bounds, state.attained.get(job_id, 0.0))

    def place(self, queue, state, now, rng):
        ordered = sorted(queue, key=lambda j: (self.level(j.job_id, state), j.arrival))
        return self._place_in_order(ordered, state, rng, now=now)

    def preempt(self, queue, state, now):
        if not queue or not state.running:
            return []
        free = int((state.ntasks == 0).sum())
        head = min(queue, key=lambda j: (self.level(j.job_id, state), j.arrival))
        if head.num_gpus <= free:
            return []
        lvl = self.level(head.job_id, state)
        victims = sorted((jid for jid in state.running if self.level(jid, state) > lvl),
                         key=lambda jid: -state.attained.get(jid, 0.0))
        out, gained = [], 0
        for jid in victims:
            out.append(jid)
            gained += state.running[jid][0].num_gpus
            if free + gained >= head.num_gpus:
                return out
        return []


class Horus(Policy):
    """Horus interference-aware co-location (Yeung et al., TPDS 2022; SPEC section 2).

    For each GPU that can take a task (memory left, fewer than ``k_max`` tasks), with memory
    normalised by the GPU's capacity on both sides::

        cost = w_mem * (mem_used + mem_job) / capacity
             + w_util * U,  U = (100 - (util_sum + util_job)) / 100          if the sum <= 100
                            U = overflow * ((util_sum + util_job) - 100) / 100  otherwise
             + w_tasks * tasks already on the GPU
             + w_gang * sum over the jobs already on the GPU of (their GPUs - 1)

    Lowest cost wins; multi-GPU jobs take the fewest nodes. Queue: the ``lookahead`` oldest
    waiting jobs are placed in ``queue_order`` (:data:`QUEUE_ORDERS`); jobs beyond the window
    wait. The paper orders by predicted utilisation, highest first (``"utilisation"``: the
    hardest to pack go first) with a look-ahead window; the default here is ``"shortest"``
    (shortest estimated job first, ties by higher utilisation) over a window of 256: on the
    bench's Gavel, dense and Philly traces the paper's order with a 32-job window left Horus's
    mean JCT 1.27-1.90x the best baseline's (SJF's), the shortest order over 256 jobs 0.996-1.012x
    on Gavel and dense (docs/engines/placement.md). Without an estimate the order is by
    ``duration`` (live placement: the job's step count, a proxy).

    With unit weights an empty GPU never costs more than a shared one (at most
    ``mem + (100 - u)/100``, a shared one at least ``mem + 1``), so Horus co-locates only when
    no idle GPU can take the job. Two additions, both about the makespan tail (without them a
    long job co-located while the cluster is full runs at ~1/1.7 speed on Gavel's measured
    pairs and ends late; on the Gavel traces Horus then lost to FIFO exclusive on makespan on
    4 of 15 VCs, worst +18%):

    * ``migrate`` (default on): when GPUs are still idle after placement, co-located jobs move
      onto them if the move pays (:meth:`Policy.migrate`; Gandiva's migration to vacated GPUs).
    * ``pair_belief`` (default none): a predictor of pair slowdowns from job features
      (:class:`placement.core.pair_predictor.OutOfFamilyBelief`); with it the cost gains
      ``w_pair * pair_cost`` (:meth:`pair_cost`), so among occupied GPUs Horus picks the
      partner with the least predicted interference. Never the simulator's world. The belief
      may read a job's type and profile only (model, batch size, GPUs, utilisation, memory):
      :meth:`pair_cost` is memoised on them (:func:`~placement.core.types.profile_key`).
    * ``max_pair_cost`` (default none; needs ``pair_belief``): share an occupied GPU only when
      its :meth:`pair_cost` is below this. With 1.0, the break-even for mean JCT: two jobs
      that would overlap for a time ``T`` lose ``sum_i (s_i - 1) x T`` of completion time
      together when they share (each runs ``s_i`` times slower), and ``T`` when one waits (or
      is preempted) for the other, so sharing lowers their summed JCT only when ``sum_i (s_i -
      1) < 1`` (e.g. ``s`` < 1.5 each for a symmetric pair). The throughput break-even is
      looser, ``sum_i 1 / s_i > 1`` (Gavel, Narayanan et al., OSDI 2020, section 3.1: space
      sharing pays when the combined normalised throughput exceeds 1, e.g. ``s`` < 2 each),
      so a pair between the two adds throughput (makespan) at the cost of mean JCT. Where a
      job is refused a shared GPU it waits, or with ``las_thresholds`` preempts lower levels.
    * ``las_thresholds`` (default none): Tiresias's discretised least-attained-service levels
      (GPU-seconds, :class:`Tiresias`) put before ``queue_order``, with its preemption; for
      traces whose duration estimates are poor (duration-agnostic, as Tiresias is).
    * ``w_gang`` (default 1): the ``gang`` term. A data-parallel job runs its GPUs in lock step
      (each synchronous step waits for its slowest worker), so co-locating onto one GPU of a
      ``g``-GPU job slows all ``g`` of them; the term counts the resident jobs' other GPUs
      (``ClusterState.gang_gpus - ntasks``), so among shared GPUs Horus picks partners whose
      slowdown costs the fewest GPUs. An addition to the paper's cost (it scores a GPU by its
      own load only). It counts GPUs, so it outweighs the other terms (each about 0-1, or a
      task count): one 4-GPU resident adds 3, more than any utilisation overflow of 1-GPU
      partners. Zero when every resident is a 1-GPU job, so traces of 1-GPU jobs place as
      before. Not modelled: the newcomer's own width (a 16-GPU job sharing one GPU is slowed
      on all 16, priced as for a 1-GPU job). On the bench (docs/engines/placement.md, 7 Dec)
      it lowered mean JCT / best baseline on Gavel 1.012 -> 0.991, dense 0.996 -> 0.986 and
      the Philly windows 1.491 -> 1.401 (makespan 1.082 -> 1.034).
    * ``w_speed`` (default 1): on a cluster of mixed GPU types, the cost gains
      ``w_speed * type_slowness`` (:func:`type_slowness`: the extra run time a GPU's type is
      believed to cost against the cluster's fastest, from datasheet peak FLOPS, never the
      world), so a job goes to a slower type only when the faster ones are taken or loaded;
      it waits for a faster type when believed to finish sooner (:meth:`_better_to_wait`), and
      with ``migrate`` a job on a slower type moves to an idle faster GPU when the move pays
      (:meth:`Policy.migrate`, :attr:`migrates_across_types`). Zero on a homogeneous cluster.
    * ``protect_critical`` (default on): slack-based protection of the critical path, as in
      critical-path scheduling. A co-location of a job ``N`` (isolated duration ``d``) onto an
      occupied GPU ``g`` delays its residents by at most about the overlap,
      ``delay = min(end_at[g] - now, d)`` (exact for a slowdown of 2; Gavel's median pair
      slowdown is 1.72). ``g`` is excluded when ``end_at[g] + delay > H``, with ``H`` a lower
      bound on the makespan from here: the largest of the latest projected isolated finish of
      the running jobs (``max end_at``), ``now + d``, and the work bound ``now + (running work
      left + queued GPU-seconds in the look-ahead window) / GPUs``. So jobs with slack are
      shared freely (queueing delay stays low while the queue is long), and the job(s) that
      define the projected makespan are not slowed by a shorter newcomer. ``end_at`` comes
      from :class:`ClusterState` (the simulator keeps it; NaN, i.e. unknown, in live
      placement, where nothing is excluded).

    Simulations (:func:`placement.pipeline.simulation_policy`) run Horus with
    ``las_thresholds`` (3,600, 36,000), the out-of-family ``pair_belief`` and
    ``max_pair_cost`` 1; the defaults of this class are what live placement uses (it neither
    preempts nor holds the belief).
    """

    name = "horus"
    exclusive = False

    def __init__(self, *, k_max: int = 2, lookahead: int = 256, w_mem: float = 1.0, w_util: float = 1.0,
                 w_tasks: float = 1.0, overflow: float = 4.0, migrate: bool = True,
                 protect_critical: bool = True, pair_belief=None, w_pair: float = 1.0,
                 queue_order: str = "shortest", las_thresholds: Sequence[float] | None = None,
                 w_speed: float = 1.0, w_gang: float = 1.0, max_pair_cost: float | None = None) -> None:
        if k_max < 1 or lookahead < 1:
            raise ValueError("k_max and lookahead must be >= 1")
        if isinstance(w_gang, (bool, str)) or not isinstance(w_gang, (int, float, np.floating, np.integer)) \
                or not (w_gang >= 0 and np.isfinite(w_gang)):
            raise ValueError(f"w_gang must be a finite number >= 0, got {w_gang!r}")
        self.w_gang = float(w_gang)
        if not (w_speed >= 0 and np.isfinite(w_speed)):
            raise ValueError(f"w_speed must be a finite number >= 0, got {w_speed}")
        self.w_speed = float(w_speed)
        self._slowness: tuple | None = None  # (the cluster's GPU list, type_slowness, its levels)
        if las_thresholds is not None:
            t = [float(x) for x in las_thresholds]
            if not t or not all(np.isfinite(x) and x > 0 for x in t):
                raise ValueError(f"las_thresholds must be positive GPU-seconds, got {las_thresholds!r}")
            self.las = Tiresias(thresholds=t)
            self.preemptive = True
        else:
            self.las = None
        self.queue_order = check_queue_order(queue_order)
        if pair_belief is not None and not callable(getattr(pair_belief, "slowdown", None)):
            raise ValueError("pair_belief must have slowdown(job, others, gpu_type) -> float")
        if not (w_pair >= 0 and np.isfinite(w_pair)):
            raise ValueError(f"w_pair must be a finite number >= 0, got {w_pair}")
        self.pair_belief, self.w_pair = pair_belief, float(w_pair)
        if max_pair_cost is not None:
            if isinstance(max_pair_cost, (bool, str)) or not isinstance(max_pair_cost, (int, float, np.floating,
                                                                                      np.integer)) \
                    or not (max_pair_cost > 0 and np.isfinite(max_pair_cost)):
                raise ValueError(f"max_pair_cost must be a finite number > 0, got {max_pair_cost!r}")
            if pair_belief is None:
                raise ValueError("max_pair_cost needs a pair_belief (it bounds the predicted pair cost)")
            max_pair_cost = float(max_pair_cost)
        self.max_pair_cost = max_pair_cost
        self._pair_memo: tuple[object, dict] = (None, {})  # (belief, {types: pair_cost}), see pair_cost
        self._types: tuple | None = None  # (the cluster's GPU list, type names, index per GPU)
        self._last_order: tuple = (None, None, None, None)  # (now, attained, window, order), see _las_order
        self.migrates, self.protect_critical = bool(migrate), bool(protect_critical)
        self._work_bound = -np.inf  # set by place() for the round
        self.k_max, self.lookahead = k_max, lookahead
        self.queue_window = lookahead
        self.w_mem, self.w_util, self.w_tasks, self.overflow = w_mem, w_util, w_tasks, overflow

    @staticmethod
    def work_bound(queue: Sequence[JobSpec], state: ClusterState, now: float) -> float:
        """Makespan lower bound from work (s, absolute): ``now + (sum over GPUs of
        max(end_at - now, 0) + sum over queue of duration x GPUs) / GPUs`` (unknown
        ``end_at`` counts 0)."""
        left = float(np.nan_to_num(state.end_at - now, nan=0.0).clip(0, None).sum())
        return now + (left + sum(j.planned * j.num_gpus for j in queue)) / state.n_gpus

    @property
    def migrates_across_types(self) -> bool:
        """True when Horus migrates and weighs GPU types (``w_speed`` > 0): it then also moves
        unshared jobs from a believed-slower type onto idle faster GPUs (:meth:`Policy.migrate`)."""
        return self.migrates and self.w_speed > 0

    def candidates(self, job, state, now):
        """Feasible GPUs (memory, ``k_max``); with ``protect_critical``, not an occupied GPU
        whose jobs the co-location could push past the makespan bound ``H`` (class
        docstring); with ``max_pair_cost``, not an occupied GPU whose :meth:`pair_cost` is at
        least that. NaN ``end_at`` (unknown, e.g. live placement) does not exclude."""
        mask = state.feasible(job, self.k_max)
        slowness, levels = self._slowness_of(state)
        if self.w_speed > 0 and len(levels) > 1 and mask.any():
            mask &= ~self._better_to_wait(job, state, slowness, now, levels)
        if self.protect_critical:
            known = ~np.isnan(state.end_at)
            if known.any():
                horizon = max(float(state.end_at[known].max()), now + job.planned, self._work_bound)
                with np.errstate(invalid="ignore"):
                    delay = np.minimum(state.end_at - now, job.planned)
                    mask &= ~((state.ntasks > 0) & (state.end_at + delay > horizon))
        if self.max_pair_cost is not None:
            busy = np.flatnonzero(mask & (state.ntasks > 0))
            if len(busy):
                mask[busy[self.pair_cost(job, state, busy) >= self.max_pair_cost]] = False
        return mask

    @staticmethod
    def _better_to_wait(job: JobSpec, state: ClusterState, slowness: np.ndarray, now: float,
                        levels: np.ndarray | None = None) -> np.ndarray:
        """GPUs of a slower type on which ``job`` is believed to finish later than if it waited
        for GPUs of a faster type to free: ``now + planned * (1 + s)`` > ``t + planned * (1 +
        s')``, with ``t`` the time the ``num_gpus``-th GPU of type ``s'`` or faster that can
        hold the job (memory) is projected to free (``end_at``; now if idle; unknown ends count
        as never), ``s' < s``. Boolean (n_gpus,)."""
        out = np.zeros(len(slowness), dtype=bool)
        levels = np.unique(slowness) if levels is None else levels  # ``levels``: np.unique(slowness)
        if len(levels) < 2:
            return out
        free_at = np.where(np.isnan(state.end_at), np.where(state.ntasks == 0, now, np.inf),
                           np.maximum(state.end_at, now))
        holds = state.capacity >= job.memory_mib
        best_finish = np.inf  # best believed finish on a faster type than the current level
        for s in levels:  # fastest first
            here = slowness == s
            if np.isfinite(best_finish):
                out |= here & (now + job.planned * (1.0 + s) > best_finish)
            pool = np.sort(free_at[(slowness <= s) & holds])
            if len(pool) >= job.num_gpus:
                best_finish = min(best_finish, float(pool[job.num_gpus - 1]) + job.planned * (1.0 + s))
        return out

    def cost(self, job, state, cand):
        mem = (state.mem_used[cand] + job.memory_mib) / state.capacity[cand]
        tot = state.util_sum[cand] + job.util
        util = np.where(tot <= 100.0, (100.0 - tot) / 100.0, self.overflow * (tot - 100.0) / 100.0)
        tasks = state.ntasks[cand].astype(float)
        c = self.w_mem * mem + self.w_util * util + self.w_tasks * tasks
        terms = {"memory": mem, "utilisation": util, "tasks": tasks}
        if self.w_gang > 0:
            gang = (state.gang_gpus[cand] - state.ntasks[cand]).astype(float)
            c = c + self.w_gang * gang
            terms["gang"] = gang
        slowness = self._type_slowness(state)
        if self.w_speed > 0 and slowness.any():
            c = c + self.w_speed * slowness[cand]
            terms["type_slowness"] = slowness[cand]
        if self.pair_belief is not None:
            pair = self.pair_cost(job, state, cand)
            c = c + self.w_pair * pair
            terms["pair_slowdown"] = pair
        return c, terms

    def pair_cost(self, job: JobSpec, state: ClusterState, cand: np.ndarray) -> np.ndarray:
        """Predicted interference of putting ``job`` on each candidate GPU, from
        ``pair_belief`` only: ``(s(job | residents) - 1) + sum over residents r of
        (s(r | job and r's other co-runners) - s(r | its co-runners now))`` (slowdown factors,
        0 on an empty GPU). (n_cand,) floats >= 0 (a prediction below 1 is clipped)."""
        out = np.zeros(len(cand))
        busy = np.flatnonzero(state.ntasks[cand] > 0)
        if len(busy) == 0:
            return out
        b = self.pair_belief
        if self._pair_memo[0] is not b:
            self._pair_memo = (b, {})
        memo = self._pair_memo[1]
        names, type_index = self._gpu_types(state)
        g_busy = np.asarray(cand)[busy]
        # GPUs with the same kinds of resident (ClusterState.resident_class) on the same GPU
        # type cost the same: a belief reads job types and profiles only (profile_key)
        combo = state.resident_class[g_busy] * len(names) + type_index[g_busy]
        uniq, first, inv = np.unique(combo, return_index=True, return_inverse=True)
        vals = np.empty(len(uniq))
        me = profile_key(job)
        for u, (c, i) in enumerate(zip(uniq.tolist(), first.tolist())):
            cls, t = divmod(c, len(names))
            k = (me, state.resident_profiles[cls], names[t])
            extra = memo.get(k)
            if extra is None:
                gt = names[t]
                rs = [state.running[j][0] for j in state.on_gpu[int(g_busy[i])]]
                extra = b.slowdown(job, rs, gt) - 1.0
                for r in rs:
                    rest = [o for o in rs if o is not r]
                    extra += b.slowdown(r, rest + [job], gt) - b.slowdown(r, rest, gt)
                extra = memo[k] = max(extra, 0.0)
            vals[u] = extra
        out[busy] = vals[inv.reshape(-1)]
        return out

    def _gpu_types(self, state: ClusterState) -> tuple[list[str], np.ndarray]:
        """(the cluster's GPU type names, each GPU's index into them), computed once per
        cluster (scratch copies share its GPU list)."""
        if self._types is None or self._types[0] is not state.gpus:
            names = sorted({g.gpu_type for g in state.gpus})
            at = {n: i for i, n in enumerate(names)}
            self._types = (state.gpus, names, np.array([at[g.gpu_type] for g in state.gpus], dtype=np.int64))
        return self._types[1], self._types[2]

    def order(self, queue: Sequence[JobSpec], now: float, rng) -> list[JobSpec]:
        """The look-ahead window (the ``lookahead`` oldest waiting jobs) in placement order
        (:data:`QUEUE_ORDERS`, by ``queue_order``)."""
        return order_window(queue[: self.lookahead], self.queue_order)

    def place(self, queue, state, now, rng):
        self._work_bound = self.work_bound(queue, state, now) if self.protect_critical else -np.inf
        if self.las is None:
            ordered = self.order(queue, now, rng)
        elif type(self).order is Horus.order:  # levels first, queue_order within a level: one sort
            ordered = self._las_order(list(queue[: self.lookahead]), state, now)
        else:  # a subclass's own order (Horus+'s groups), then levels (a stable sort keeps it)
            ordered = sorted(self.order(queue, now, rng), key=lambda j: self.las.level(j.job_id, state))
        return self._place_in_order(ordered, state, rng, now=now)

    def _las_order(self, window: list[JobSpec], state: ClusterState, now: float) -> list[JobSpec]:
        """``window`` sorted by :meth:`_las_key`. A waiting job's key never changes while it
        waits (it attains no service), so the order :meth:`preempt` computed at the same
        ``now`` for the same jobs (compared by identity first) in the same simulation (the same
        ``attained`` record) is reused, not re-sorted. So a caller must not change a waiting
        job's ``state.attained`` between the two at the same ``now`` (the simulator only adds
        service to running jobs)."""
        at, attained, seen, ordered = self._last_order
        if at == now and attained is state.attained and seen == window:
            return ordered
        ordered = sorted(window, key=self._las_key(state))
        self._last_order = (now, state.attained, window, ordered)
        return ordered

    def _las_key(self, state: ClusterState):
        """Sort key: (LAS level, then ``queue_order``'s key)."""
        key, bounds, attained = order_key(self.queue_order), self.las._bounds, state.attained
        return lambda j: (bisect.bisect_right(bounds, attained.get(j.job_id, 0.0)), *key(j))

    def preempt(self, queue, state, now):
        """With ``las_thresholds``: when the first job of the look-ahead window by (level,
        ``queue_order``) has too few GPUs it may take (:meth:`candidates`: idle, or shared
        within the bounds), it suspends jobs of strictly lower-priority levels, most attained
        service first, up to the first prefix of that order after whose suspension the head
        has enough such GPUs (Tiresias's rule, :meth:`Tiresias.preempt`, with Horus's
        candidates, checked in a scratch state with those jobs released, in place of a count
        of idle GPUs); else none. Known limits: as in Tiresias's rule, a job early in the
        prefix is suspended even when only a later one's GPUs serve the head; and a GPU that
        stays shared keeps its projected end (``end_at``, the suspended job's included;
        idle ones are cleared), so on mixed GPU types the head may then still prefer to wait
        for a faster type."""
        if self.las is None or not queue or not state.running:
            return []
        window = list(queue[: self.lookahead])
        head = self._las_order(window, state, now)[0]  # the first job place() would try
        self._work_bound = self.work_bound(window, state, now) if self.protect_critical else -np.inf
        if self.candidates(head, state, now).sum() >= head.num_gpus:
            return []
        lvl = self.las.level(head.job_id, state)
        if lvl >= len(self.las._bounds):
            return []
        bound, attained = self.las._bounds[lvl], state.attained  # a lower level: attained >= bound
        victims = sorted((jid for jid in state.running if attained.get(jid, 0.0) >= bound),
                         key=lambda jid: -attained.get(jid, 0.0))
        if not victims:
            return []
        scratch = state.copy()
        out: list[int] = []
        for jid in victims:
            out.append(jid)
            freed = np.fromiter(scratch.release(jid), dtype=np.int64)
            if scratch.track_end:  # an idle GPU is free now, not at its last job's projected end
                idle = freed[scratch.ntasks[freed] == 0]
                scratch.end_at[idle] = np.nan
            # the head must be able to take what the suspensions free (Horus's own candidates:
            # memory, and on mixed types not a GPU it would rather wait than run on), or
            # suspending would only churn: a victim restarts, paying its restore, and the head
            # still waits
            if self.candidates(head, scratch, now).sum() >= head.num_gpus:
                return out
        return []


class HorusPlus(Horus):
    """Horus+ : k-means queues with credit (Yeung et al., TPDS 2022; SPEC section 2).

    The ``window`` oldest waiting jobs are clustered by k-means (``k`` groups) over their
    resource profile (utilisation/100, memory/16 GiB, log2 GPUs); each group's credit =
    median waiting time x group size; groups are served by credit, highest first, each in
    utilisation order; placement uses the Horus cost.
    """

    name = "horus+"

    def __init__(self, *, k: int = 3, window: int = 64, **kw) -> None:
        super().__init__(**kw)
        self.k, self.window = k, window
        self.queue_window = window

    def order(self, queue, now, rng):
        jobs = list(queue[: self.window])
        if len(jobs) <= self.k:
            return sorted(jobs, key=lambda j: (-j.util, j.arrival))
        x = np.array([[j.util / 100.0, j.memory_mib / 16384.0, np.log2(j.num_gpus)] for j in jobs])
        labels = kmeans(x, self.k, rng)
        groups = []
        for c in range(self.k):
            members = [j for j, lab in zip(jobs, labels) if lab == c]
            if members:
                credit = float(np.median([now - j.arrival for j in members])) * len(members)
                groups.append((credit, members))
        groups.sort(key=lambda t: -t[0])
        return [j for _, m in groups for j in sorted(m, key=lambda j: (-j.util, j.arrival))]


class HorusRandomPartners(Horus):
    """Ablation of Horus's cost function: Horus's queue order, window, critical-path guard,
    migration and (with ``las_thresholds``) preemption, but each job goes to uniformly random
    GPUs among the candidates Horus would consider (:meth:`Horus.candidates`; idle and shared
    alike, as :class:`RandomColocation`). Horus / this policy measures what choosing partners
    by predicted utilisation and memory adds, everything else equal. Not in :data:`POLICIES`
    (a benchmark's control, not a policy to deploy)."""

    name = "horus-random-partners"

    def _choose(self, job, state, rng, now=0.0):
        return _random_choice(self, job, state, rng, now)


def kmeans(x: np.ndarray, k: int, rng: np.random.Generator, iters: int = 20) -> np.ndarray:
    """Lloyd's k-means on rows of ``x`` (n, d); k-means++-free random init from ``rng``.
    Returns labels (n,)."""
    centres = x[rng.choice(len(x), size=k, replace=False)]
    labels = np.zeros(len(x), dtype=int)
    for _ in range(iters):
        d = ((x[:, None, :] - centres[None, :, :]) ** 2).sum(-1)
        new = d.argmin(1)
        if np.array_equal(new, labels) and _ > 0:
            break
        labels = new
        for c in range(k):
            if np.any(labels == c):
                centres[c] = x[labels == c].mean(0)
    return labels


class Gandiva(Policy):
    """Gandiva-style packing (Xiao et al., OSDI 2018, section 4): an empty GPU if any, else the
    GPU with the lowest summed utilisation, with no overflow penalty; time-slicing lets up to
    ``k_max`` (default 4) jobs share a GPU, their progress slowed by the interference model.
    ``migrate`` (default on): time-sliced jobs move to vacated GPUs (OSDI 2018, section 3.3),
    by the same rule as Horus (:meth:`Policy.migrate`)."""

    name = "gandiva"
    exclusive = False

    def __init__(self, *, k_max: int = 4, migrate: bool = True) -> None:
        if k_max < 1:
            raise ValueError("k_max must be >= 1")
        self.k_max = k_max
        self.migrates = bool(migrate)

    def cost(self, job, state, cand):
        u = state.util_sum[cand] + job.util
        empty = (state.ntasks[cand] == 0).astype(float)
        return u / 100.0 - 10.0 * empty, {"utilisation_after": u}

    def place(self, queue, state, now, rng):
        return self._place_in_order(queue, state, rng, now=now)


class RandomColocation(Policy):
    """Random co-location: each job, in FIFO order (or ``queue_order``, :data:`QUEUE_ORDERS`,
    over the ``lookahead`` oldest waiting jobs if set: to isolate a co-locating policy's
    partner choice from its queue order and window), goes to uniformly random feasible GPUs
    (memory left, at most ``k_max`` tasks)."""

    name = "random"
    exclusive = False

    def __init__(self, *, k_max: int = 2, queue_order: str = "fifo", lookahead: int | None = None) -> None:
        if lookahead is not None and lookahead < 1:
            raise ValueError("lookahead must be >= 1")
        self.k_max = k_max
        self.queue_order = check_queue_order(queue_order)
        self.queue_window = lookahead

    def _choose(self, job, state, rng, now=0.0):
        return _random_choice(self, job, state, rng, now)

    def place(self, queue, state, now, rng):
        window = queue if self.queue_window is None else queue[: self.queue_window]
        return self._place_in_order(order_window(window, self.queue_order), state, rng, now=now)


@dataclass(frozen=True)
class PolicyInfo:
    name: str
    cls: type


POLICIES: dict[str, type[Policy]] = {
    "fifo": FIFOExclusive, "sjf": SJF, "tiresias": Tiresias, "gandiva": Gandiva,
    "horus": Horus, "horus+": HorusPlus, "random": RandomColocation,
}


def make_policy(name: str, **kwargs) -> Policy:
    """Instantiate a policy by name; ``KeyError`` listing the known names otherwise."""
    try:
        return POLICIES[name](**kwargs)
    except KeyError:
        raise KeyError(f"unknown policy {name!r}; known: {', '.join(POLICIES)}") from None
