"""Discrete-event, trace-driven, seeded simulator of a GPU cluster under a placement policy.

Events (a binary heap of ``(time, seq, kind, job_id, version)``): arrivals, finishes, for
preemptive policies a periodic re-evaluation tick, and for migrating policies the end of a
migration's checkpoint/restore pause. A running job progresses at rate ``min over its GPUs
of speed / slowdown``: slowdown is the *world's* (:mod:`placement.core.world`: Gavel's measured
pairs, a labelled model elsewhere) given the other jobs on that GPU, and speed the world's
isolated speed of the job on that GPU's type relative to V100 (1 on a V100; a heterogeneous
cluster's K80s run a job at Gavel's measured K80 / V100 throughput ratio); whenever a GPU's set of jobs changes the affected
jobs' remaining work is brought up to date and their finish event re-issued (stale events are
skipped by version). Cost per event: O(GPUs) numpy work plus the policy's.

Migration (policies with ``migrates``, see :meth:`placement.core.policies.Policy.migrate`):
after each placement round, if some GPU is idle and some GPU holds more than one task, the
policy may move co-located jobs. A moved job leaves its old GPUs at once (its co-runners speed
up from that instant), holds its new GPUs (memory and task slot) from that instant, and makes
no progress for ``migration_cost_s`` (checkpoint + restore); it then runs at the rate its new
GPUs give. While paused it still counts as a co-runner for the interference of a job placed
next to it (conservative) but adds nothing to effective utilisation.

Metrics (field terms): per job queueing delay (first start - arrival, s), JCT (finish -
arrival, s), slowdown (JCT / isolated duration), placement (GPU ids, first start);
per cluster makespan (last finish - first arrival, s), GPU utilisation over time (% of all
GPUs, effective = sum over GPUs of min(100, sum of job util / slowdown) / GPUs), mean / median /
p95 JCT, mean queueing delay.
"""
from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

import numpy as np

from .interference import InterferenceModel
from .world import SOURCES, InterferenceWorld, ModelledWorld, as_world, source_shares
from .policies import DEFAULT_MIGRATION_COST_S, Policy
from .types import ClusterState, GPUSpec, JobSpec, expected_remaining_s

ARRIVAL, FINISH, TICK, RESUME = 0, 1, 2, 3


class NeverPlaceableError(ValueError):
    """Jobs that no placement can ever start on this cluster. ``jobs``: list of
    ``(job_id, model)``; the message names each (id, model, GPUs x MiB needed, and how many
    GPUs of the cluster could hold one of its tasks)."""

    def __init__(self, message: str, jobs: list[tuple[int, str]]) -> None:
        super().__init__(message)
        self.jobs = jobs


def _describe(job: JobSpec, capacity: np.ndarray) -> str:
    fit = int((capacity >= job.memory_mib).sum())
    return (f"job {job.job_id} ({job.model or 'unnamed'}) needs {job.num_gpus} GPUs x "
            f"{job.memory_mib:.0f} MiB; {fit} of the cluster's {len(capacity)} GPUs have that much memory")


def never_placeable(jobs: Sequence[JobSpec], gpus: list[GPUSpec]) -> list[JobSpec]:
    """Jobs that could not start even on an empty cluster: fewer than ``num_gpus`` GPUs have
    ``memory_mib`` of capacity (every policy places one task per distinct GPU, on any nodes).
    O(jobs x GPUs) numpy work."""
    cap = np.array([g.memory_mib for g in gpus], dtype=np.float64)
    return [j for j in jobs if int((cap >= j.memory_mib).sum()) < j.num_gpus]


@dataclass
class JobOutcome:
    """Per-job result; times in seconds. ``gpu_ids``: the GPUs it finished on;
    ``preemptions`` / ``migrations``: how often it was suspended / moved."""

    job_id: int
    model: str
    num_gpus: int
    arrival: float
    start: float
    finish: float
    duration: float
    gpu_ids: tuple[int, ...]
    preemptions: int = 0
    migrations: int = 0

    @property
    def queueing_delay(self) -> float:
        return self.start - self.arrival

    @property
    def jct(self) -> float:
        return self.finish - self.arrival

    @property
    def slowdown(self) -> float:
        return self.jct / self.duration


@dataclass
class SimulationResult:
    """Outcomes plus cluster metrics. ``util_t``/``util_pct``: time (s) and effective cluster
    utilisation (%) after each event, piecewise constant."""

    policy: str
    jobs: list[JobOutcome]
    util_t: np.ndarray
    util_pct: np.ndarray
    n_gpus: int
    events: int = 0
    metrics: dict = field(default_factory=dict)
    world: dict = field(default_factory=dict)
    durations: str = "estimate"

    def summary(self) -> dict:
        """Cluster metrics (seconds, percent) as a JSON-ready dict."""
        if self.metrics:
            return self.metrics
        if not self.jobs:
            raise ValueError("no job outcomes to summarise (empty trace)")
        jct = np.array([j.jct for j in self.jobs])
        qd = np.array([j.queueing_delay for j in self.jobs])
        t0 = min(j.arrival for j in self.jobs)
        t1 = max(j.finish for j in self.jobs)
        t, u = self.util_t, self.util_pct
        if len(t) > 1:
            dt = np.diff(np.append(t, t1))
            dt = np.clip(dt, 0, None)
            mean_util = float((u * dt).sum() / max(dt.sum(), 1e-9))
        else:
            mean_util = float(u[0]) if len(u) else 0.0
        self.metrics = {
            "policy": self.policy, "jobs": len(self.jobs), "gpus": self.n_gpus,
            "makespan_s": float(t1 - t0), "mean_jct_s": float(jct.mean()),
            "median_jct_s": float(np.median(jct)), "p95_jct_s": float(np.percentile(jct, 95)),
            "mean_queueing_delay_s": float(qd.mean()), "mean_gpu_util_pct": mean_util,
            "mean_slowdown": float(np.mean([j.slowdown for j in self.jobs])), "events": self.events,
            "migrations": int(sum(j.migrations for j in self.jobs)),
            "world": self.world, "durations": self.durations,
        }
        return self.metrics


class _Run:
    __slots__ = ("job", "remaining", "rate", "last", "version", "start", "gpus", "preemptions",
                 "migrations", "resume_at", "finish_at", "source", "speed_source", "interference")

    def __init__(self, job: JobSpec) -> None:
        self.job, self.remaining, self.rate, self.last = job, job.duration, 0.0, 0.0
        self.version, self.start, self.gpus, self.preemptions = 0, None, (), 0
        self.migrations, self.resume_at = 0, -np.inf  # no progress before resume_at (migration)
        self.finish_at = np.nan  # projected finish if it ran alone from its last refresh on (s)
        self.source = "alone"  # where the world's slowdown now in force comes from (world.SOURCES)
        self.speed_source = "reference"  # its GPUs' isolated speed: reference type, measured, modelled
        self.interference = 1.0  # worst co-location slowdown over its GPUs (>= 1), its type's speed apart


def simulate(jobs: Sequence[JobSpec], gpus: list[GPUSpec], policy: Policy,
             world: InterferenceWorld | ModelledWorld | InterferenceModel, *, seed: int = 0, tick_s: float = 600.0,
             migration_cost_s: float = DEFAULT_MIGRATION_COST_S,
             progress: Callable[[int, int], None] | None = None,
             progress_every: int = 256, durations: str = "estimate") -> SimulationResult:
    """Replay ``jobs`` on ``gpus`` under ``policy``; deterministic for a given ``seed``.

    ``world``: the ground truth of co-location slowdowns (:mod:`placement.core.world`; an
    :class:`InterferenceModel` is wrapped as a :class:`ModelledWorld`). It is never passed to
    the policy, which sees only ``JobSpec`` predictions and the :class:`ClusterState`. The
    result's ``world`` (and ``summary()["world"]``) gives the world's name and the co-located
    job-seconds (and shares) whose slowdown was measured, measured at scale factor 1, or
    modelled.

    ``migration_cost_s``: pause (s) charged to every migration (only policies with
    ``migrates`` migrate) and to every restart of a preempted job (checkpoint restore; until
    3 Dec 2026 preemption was free, which favoured Tiresias). Raises :class:`NeverPlaceableError` (a ``ValueError``) naming every
    job that can never be placed: before the run if fewer than ``num_gpus`` GPUs have its
    memory (:func:`never_placeable`), and during it if the policy leaves jobs queued while
    nothing runs and nothing more will arrive (the state can no longer change, so the run
    would never end; Tiresias's re-evaluation tick would otherwise loop for ever).
    ``ValueError`` if ``jobs`` is empty, job ids repeat, ``migration_cost_s`` < 0 or
    ``durations`` is not ``"estimate"`` / ``"oracle"``.

    ``durations``: what policies plan with (SJF's order, Horus's critical-path guard through
    ``ClusterState.end_at``, the migration rule's remaining work). ``"estimate"`` (default):
    each job's :attr:`JobSpec.planned` (its ``estimate``, known at submission; the true duration
    where a job has none), remaining = planned - work done, floored at 0. ``"oracle"``: the true
    isolated duration, an explicit, labelled option. The result's ``durations`` says which, and
    how many jobs had no estimate. ``progress(done, total)`` (jobs finished,
    jobs in all) is called every ``progress_every`` events and once at the end; an exception it
    raises (e.g. a cancellation) propagates and stops the run.
    """
    if not migration_cost_s >= 0:
        raise ValueError(f"migration_cost_s must be >= 0 s, got {migration_cost_s}")
    if len(jobs) == 0:
        raise ValueError("empty trace: no jobs to simulate")
    if durations not in ("estimate", "oracle"):
        raise ValueError(f"durations must be 'estimate' or 'oracle', got {durations!r}")
    if durations == "oracle":
        jobs = [replace(j, estimate=j.duration) for j in jobs]
        duration_label = "oracle"
    else:
        missing = sum(j.estimate is None for j in jobs)
        duration_label = "estimate" if not missing else f"estimate ({missing} jobs without one: true duration)"
    world = as_world(world)
    coloc = dict.fromkeys(SOURCES, 0.0)
    typed = dict.fromkeys(("reference", "measured", "modelled"), 0.0)  # job-seconds by speed source
    world_speed = getattr(world, "speed", None)
    speeds: dict[tuple[int, str], tuple[float, str]] = {}

    def speed(job: JobSpec, gpu_type: str) -> tuple[float, str]:
        """The world's isolated speed of ``job`` on ``gpu_type`` (1.0 on the reference type)."""
        key = (job.job_id, gpu_type)
        if key not in speeds:
            speeds[key] = world_speed(job, gpu_type) if world_speed is not None else (1.0, "reference")
        return speeds[key]
    rng = np.random.default_rng(seed)
    state = ClusterState(gpus)
    state.track_end = True  # this simulator keeps end_at (projected isolated finish per GPU)
    if len({j.job_id for j in jobs}) != len(jobs):
        raise ValueError("job ids must be unique")
    bad = never_placeable(jobs, gpus)
    if bad:
        raise NeverPlaceableError(f"{len(bad)} job(s) can never be placed: "
                                  + "; ".join(_describe(j, state.capacity) for j in bad[:10])
                                  + ("; ..." if len(bad) > 10 else ""), [(j.job_id, j.model) for j in bad])
    runs = {j.job_id: _Run(j) for j in jobs}
    # a policy that weighs GPU types may move unshared jobs to faster idle GPUs (mixed clusters only)
    across_types = policy.migrates and policy.migrates_across_types and len({g.gpu_type for g in gpus}) > 1
    heap: list = []
    planned_ends: list = []  # (projected isolated finish, job id, run version), see overrun()
    seq = 0
    for j in sorted(jobs, key=lambda j: (j.arrival, j.job_id)):
        heap.append((j.arrival, seq, ARRIVAL, j.job_id, 0))
        seq += 1
    heapq.heapify(heap)
    queue: dict[int, JobSpec] = {}  # insertion-ordered: arrival order (re-queued go last)
    on_gpu: list[list[int]] = [[] for _ in gpus]
    eff = np.zeros(len(gpus))
    outcomes: list[JobOutcome] = []
    util_t: list[float] = []
    util_v: list[float] = []
    n_events = 0
    tick_pending = False

    def advance(r: _Run, now: float) -> None:
        ran = now - max(r.last, r.resume_at)  # no progress during a migration pause
        if r.rate > 0 and ran > 0:
            if r.source in coloc:
                coloc[r.source] += ran
            typed[r.speed_source] += ran
            r.remaining -= ran * r.rate
            state.attained[r.job.job_id] = state.attained.get(r.job.job_id, 0.0) + ran * r.job.num_gpus
        r.last = now

    def refresh(gpu_set: set[int], now: float) -> None:
        nonlocal seq
        affected = {jid for g in gpu_set for jid in on_gpu[g]}
        for jid in affected:
            advance(runs[jid], now)
        sd_cache: dict[tuple[int, int], float] = {}
        for jid in affected:
            r = runs[jid]
            worst, source = 1.0, "alone"
            rate, speed_source = np.inf, "reference"
            for g in r.gpus:
                others = [runs[o].job for o in on_gpu[g] if o != jid]
                s, src = world.slowdown(r.job, others, gpus[g].gpu_type) if others else (1.0, "alone")
                sd_cache[(jid, g)] = s
                if s > worst or (source == "alone" and src != "alone"):
                    worst, source = max(worst, s), src
                v, vsrc = speed(r.job, gpus[g].gpu_type)
                rate = min(rate, v / s)  # the slowest GPU sets the pace (synchronous data parallel)
                if vsrc == "modelled" or speed_source == "reference":
                    speed_source = vsrc
            r.rate, r.source, r.speed_source, r.interference = rate, source, speed_source, worst
            r.version += 1
            # planned finish if it ran alone from now: planned run time - work done (>= 0)
            r.finish_at = max(now, r.resume_at) + expected_remaining_s(r.job.planned, r.job.duration - r.remaining)
            heapq.heappush(planned_ends, (r.finish_at, jid, r.version))
            heapq.heappush(heap, (max(now, r.resume_at) + max(r.remaining, 0.0) / r.rate, seq, FINISH, jid,
                                  r.version))
            seq += 1
        for g in gpu_set.union(*(runs[j].gpus for j in affected)):
            state.end_at[g] = max((runs[o].finish_at for o in on_gpu[g]), default=np.nan)
        for g in gpu_set:
            eff[g] = min(100.0, sum(runs[o].job.util / sd_cache.get((o, g), 1.0) for o in on_gpu[g]
                                    if runs[o].resume_at <= now))

    def overrun(now: float) -> None:
        """Projected ends that have passed while their job still runs (its estimate was short):
        re-project them with :func:`expected_remaining_s`, so ``state.end_at`` never shows a
        running job as already finished."""
        while planned_ends and planned_ends[0][0] < now:
            _, jid, version = heapq.heappop(planned_ends)
            r = runs[jid]
            if r.version != version or jid not in state.running:
                continue
            ran = max(now - max(r.last, r.resume_at), 0.0)
            done = r.job.duration - (r.remaining - ran * r.rate)
            r.finish_at = max(now, r.resume_at) + expected_remaining_s(r.job.planned, done)
            heapq.heappush(planned_ends, (r.finish_at, jid, r.version))
            for g in r.gpus:
                state.end_at[g] = max(runs[o].finish_at for o in on_gpu[g])

    def migrate(now: float) -> set[int]:
        """Ask the policy to un-share jobs onto idle GPUs; apply its moves. Returns GPUs touched."""
        nonlocal seq
        if not np.any(state.ntasks == 0):
            return set()
        if across_types:  # every running job may move to a faster idle GPU
            movable = list(state.running)
        else:  # jobs on a shared GPU
            movable = [jid for g in np.flatnonzero(state.ntasks > 1) for jid in on_gpu[g]]
        if not movable:
            return set()
        remaining: dict[int, float] = {}
        slowdown: dict[int, float] = {}
        for jid in movable:
            if jid not in remaining:
                r = runs[jid]
                ran = max(now - max(r.last, r.resume_at), 0.0)
                done = r.job.duration - (r.remaining - ran * r.rate)
                remaining[jid] = expected_remaining_s(r.job.planned, done)
                # what co-location costs it (observed), not its GPUs' type speed: the
                # policy weighs types with its own belief (policies.type_slowness)
                slowdown[jid] = r.interference
        touched: set[int] = set()
        for m in policy.migrate(state, now, remaining, slowdown, migration_cost_s):
            r = runs[m.job_id]
            if tuple(r.gpus) != tuple(m.from_gpus):
                raise RuntimeError(f"{policy.name}: migration of job {m.job_id} from {m.from_gpus}, "
                                   f"but it runs on {r.gpus}")
            advance(r, now)
            state.move(m.job_id, m.to_gpus)  # raises if over memory or not running
            for g in r.gpus:
                on_gpu[g].remove(m.job_id)
            for g in m.to_gpus:
                on_gpu[g].append(m.job_id)
            touched.update(r.gpus)
            touched.update(m.to_gpus)
            r.gpus = tuple(m.to_gpus)
            r.resume_at = now + migration_cost_s
            r.migrations += 1
            if migration_cost_s > 0:  # a free move has no pause to end: a RESUME at this very
                # time would only ask the policy again at the same state (it could loop for ever)
                heapq.heappush(heap, (r.resume_at, seq, RESUME, m.job_id, r.migrations))
                seq += 1
        return touched

    def schedule(now: float) -> None:
        nonlocal tick_pending, seq
        if policy.preemptive and queue:
            for r in [runs[jid] for jid in state.running]:
                advance(r, now)
            victims = policy.preempt(list(queue.values()), state, now)
            freed: set[int] = set()
            for jid in victims:
                r = runs[jid]
                state.release(jid)
                for g in r.gpus:
                    on_gpu[g].remove(jid)
                freed.update(r.gpus)
                r.rate, r.version, r.gpus, r.resume_at, r.source = 0.0, r.version + 1, (), -np.inf, "alone"
                r.preemptions += 1
                queue[jid] = r.job
            if freed:
                refresh(freed, now)
        overrun(now)
        if queue:
            waiting = list(queue.values()) if policy.queue_window is None else \
                list(itertools.islice(queue.values(), policy.queue_window))
            placements = policy.place(waiting, state, now, rng)
            touched: set[int] = set()
            for p in placements:
                job = queue.pop(p.job_id)
                state.assign(job, p.gpu_ids)
                r = runs[p.job_id]
                r.gpus, r.last = p.gpu_ids, now
                if r.start is None:
                    r.start = now
                elif r.preemptions and migration_cost_s > 0:  # restored from its checkpoint
                    r.resume_at = now + migration_cost_s
                    heapq.heappush(heap, (r.resume_at, seq, RESUME, p.job_id, r.migrations))
                    seq += 1
                for g in p.gpu_ids:
                    on_gpu[g].append(p.job_id)
                touched.update(p.gpu_ids)
            if touched:
                refresh(touched, now)
        if policy.migrates:  # on GPUs still idle after placement, with rates up to date
            moved = migrate(now)
            if moved:
                refresh(moved, now)
        if policy.preemptive and queue and not tick_pending:
            heapq.heappush(heap, (now + tick_s, seq, TICK, -1, 0))
            seq += 1
            tick_pending = True

    total = len(jobs)
    arrivals_left = total

    def stuck(now: float) -> None:
        """Nothing runs, nothing will arrive, yet jobs wait: raise, naming the jobs the policy
        cannot place even alone on the (now empty) cluster; the rest wait behind them (FIFO's
        head-of-line blocking)."""
        left = list(queue.values())
        never = [j for j in left if not policy.place([j], state, now, rng)] or left
        blocked = len(left) - len(never)
        raise NeverPlaceableError(
            f"{policy.name}: {len(never)} job(s) can never be placed (nothing running, none arriving, "
            f"at t={now:.0f} s): " + "; ".join(_describe(j, state.capacity) for j in never[:10])
            + ("; ..." if len(never) > 10 else "")
            + (f"; {blocked} more job(s) wait behind them" if blocked else ""),
            [(j.job_id, j.model) for j in never])

    while heap:
        now, _, kind, jid, version = heapq.heappop(heap)
        n_events += 1
        if progress is not None and n_events % progress_every == 0:
            progress(len(outcomes), total)
        if kind == FINISH:
            r = runs[jid]
            if version != r.version or jid not in state.running:
                continue
            advance(r, now)
            state.release(jid)
            for g in r.gpus:
                on_gpu[g].remove(jid)
            refresh(set(r.gpus), now)
            outcomes.append(JobOutcome(jid, r.job.model, r.job.num_gpus, r.job.arrival, r.start, now,
                                       r.job.duration, r.gpus, r.preemptions, r.migrations))
        elif kind == ARRIVAL:
            queue[jid] = runs[jid].job
            arrivals_left -= 1
        elif kind == RESUME:
            r = runs[jid]
            if version != r.migrations or jid not in state.running or r.resume_at != now:
                continue
            refresh(set(r.gpus), now)  # its tasks count towards utilisation again
        else:
            tick_pending = False
        # batch simultaneous events before asking the policy
        if heap and heap[0][0] == now and heap[0][2] != TICK:
            continue
        schedule(now)
        util_t.append(now)
        util_v.append(float(eff.sum() / len(gpus)))
        if queue and not state.running and arrivals_left == 0:
            stuck(now)
    if len(outcomes) != total:
        stuck(now)
    if progress is not None:
        progress(total, total)
    outcomes.sort(key=lambda o: o.job_id)
    return SimulationResult(policy.name, outcomes, np.array(util_t), np.array(util_v), len(gpus), n_events,
                            world={**world.describe(), **source_shares(coloc),
                                   **{f"speed_{k}_s": round(v, 1) for k, v in typed.items()}},
                            durations=duration_label)
