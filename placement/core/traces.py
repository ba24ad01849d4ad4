"""Trace readers: Gavel per-VC traces, the Philly job list, the Tiresias 60-job trace.

Each reader turns rows into :class:`JobSpec` using a ``profile`` callable
``(model, batch_size) -> (util %, memory MiB)`` (predicted/derived, never invented here) and
raises :class:`TraceError` naming the file, line number and column of a malformed row;
nothing is returned for a file with any bad row.
"""
from __future__ import annotations

import csv
import json
import re
from datetime import datetime
from pathlib import Path
from typing import Callable

import numpy as np

from .types import GPUSpec, JobSpec, homogeneous_cluster, mixed_cluster

Profile = Callable[[str, int], tuple[float, float]]
_GAVEL_TYPE = re.compile(r"^(?P<family>.+?)(?: \(batch size (?P<bs>\d+)\))?$")


class TraceError(ValueError):
    """A malformed trace row: ``path``, ``line`` (1-based), ``column`` (name), message."""

    def __init__(self, path, line: int, column: str, message: str) -> None:
        super().__init__(f"{path}: line {line}, column {column!r}: {message}")
        self.path, self.line, self.column = str(path), line, column


def parse_gavel_job_type(job_type: str) -> tuple[str, int]:
    """"ResNet-50 (batch size 64)" -> ("ResNet-50", 64); "A3C" -> ("A3C", 1)."""
    m = _GAVEL_TYPE.match(job_type.strip())
    if not m:
        raise ValueError(f"not a Gavel job type: {job_type!r}")
    return m.group("family"), int(m.group("bs") or 1)


def _num(path, line, column, text, kind=float):
    try:
        v = kind(text)
    except (TypeError, ValueError):
        raise TraceError(path, line, column, f"expected a number, got {text!r}") from None
    if not np.isfinite(v) or v < 0:
        raise TraceError(path, line, column, f"expected a finite non-negative number, got {text!r}")
    return v


def read_gavel_trace(path: Path, throughputs: dict, profile: Profile, *, gpu_type: str = "v100",
                     limit: int | None = None) -> list[JobSpec]:
    """Gavel ``msr`` trace (TSV, 7 fields: job_type, command, num_steps_arg, needs_data_dir,
    total_steps, arrival_time s, scale_factor = GPUs). Duration = total_steps / Gavel's measured
    isolated throughput (steps/s) of (job_type, scale_factor) on ``gpu_type``; where Gavel has
    no multi-GPU measurement of the type (Recommendation, A3C, CycleGAN), its single-GPU
    throughput is used (data-parallel steps assumed to take as long as one GPU's)."""
    cols = ["job_type", "command", "num_steps_arg", "needs_data_dir", "total_steps", "arrival_time", "scale_factor"]
    table = throughputs[gpu_type]
    jobs = []
    with open(path, newline="") as fh:
        for ln, row in enumerate(csv.reader(fh, delimiter="\t"), start=1):
            if limit is not None and len(jobs) >= limit:
                break
            if len(row) != 7:
                raise TraceError(path, ln, cols[min(len(row), 6)], f"expected 7 tab-separated fields, got {len(row)}")
            steps = _num(path, ln, "total_steps", row[4], int)
            arrival = _num(path, ln, "arrival_time", row[5])
            sf = _num(path, ln, "scale_factor", row[6], int)
            key = f"('{row[0]}', {sf})"
            if key not in table:  # Gavel measured multi-GPU runs of some types only
                key = f"('{row[0]}', 1)"
            if key not in table:
                raise TraceError(path, ln, "job_type", f"no Gavel throughput for {row[0]!r} on {sf} GPUs")
            family, bs = parse_gavel_job_type(row[0])
            util, mem = profile(family, bs)
            dur = max(steps, 1) / float(table[key]["null"])
            # estimate = duration: known at submission (steps in the command, Gavel's measured
            # isolated throughput), Gavel's own assumption
            jobs.append(JobSpec(len(jobs), arrival, max(sf, 1), dur, util, mem, family, bs, estimate=dur))
    return jobs


def history_estimates(jobs: list[JobSpec], *, window: int = 200, default_s: float = 3600.0) -> list[JobSpec]:
    """``jobs`` with ``estimate`` set from history, for traces without step counts (Philly,
    Tiresias): the median isolated duration of the last ``window`` jobs of the same GPU count
    whose isolated run would have ended by this job's arrival (``arrival + duration <= t``, a
    stand-in for "finished before", since the true finish depends on the schedule); else of
    any GPU count; else ``default_s``. Runtime predictors from job history are what Tiresias
    (NSDI 2019, section 2.2) argues a scheduler can have; O(n log n + n x window)."""
    from collections import defaultdict, deque
    from dataclasses import replace

    order = sorted(jobs, key=lambda j: (j.arrival, j.job_id))
    ended = sorted(jobs, key=lambda j: j.arrival + j.duration)
    by_size: dict[int, deque] = defaultdict(lambda: deque(maxlen=window))
    anyone: deque = deque(maxlen=window)
    k = 0
    est: dict[int, float] = {}
    for j in order:
        while k < len(ended) and ended[k].arrival + ended[k].duration <= j.arrival:
            by_size[ended[k].num_gpus].append(ended[k].duration)
            anyone.append(ended[k].duration)
            k += 1
        hist = by_size.get(j.num_gpus) or anyone
        est[j.job_id] = float(np.median(hist)) if hist else default_s
    return [replace(j, estimate=est[j.job_id]) for j in jobs]


def read_tiresias_trace(path: Path, profile: Profile, *, batch_size: int = 32) -> list[JobSpec]:
    """Tiresias CSV (``job_id,num_gpu,submit_time,iterations,model_name,duration,interval``);
    duration in seconds as given, ``estimate`` by :func:`history_estimates`; models (vgg19,
    inception4, ...) profiled at ``batch_size``."""
    jobs = []
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        need = ["job_id", "num_gpu", "submit_time", "model_name", "duration"]
        missing = [c for c in need if c not in (reader.fieldnames or [])]
        if missing:
            raise TraceError(path, 1, missing[0], "missing column")
        for ln, row in enumerate(reader, start=2):
            gpus = _num(path, ln, "num_gpu", row["num_gpu"], int)
            dur = _num(path, ln, "duration", row["duration"])
            if gpus < 1 or dur <= 0:
                raise TraceError(path, ln, "num_gpu" if gpus < 1 else "duration", "must be positive")
            model = (row["model_name"] or "").strip()
            if not model:
                raise TraceError(path, ln, "model_name", "empty")
            util, mem = profile(model, batch_size)
            jobs.append(JobSpec(int(_num(path, ln, "job_id", row["job_id"], int)),
                                _num(path, ln, "submit_time", row["submit_time"]), gpus, dur, util, mem,
                                model, batch_size))
    return history_estimates(jobs) if jobs else jobs


def read_philly(path: Path, models: list[tuple[str, int]], profile: Profile, *, seed: int = 0,
                limit: int | None = None) -> list[JobSpec]:
    """Philly job list (``timestamp,duration,num_gpus,gpu_time,cluster``), arrivals relative to
    the earliest timestamp; ``estimate`` by :func:`history_estimates`. The rows carry no model, so each job gets one by this documented,
    seeded rule: job i takes ``models[k]`` with k drawn uniformly by
    ``numpy.random.default_rng(seed)`` in file order (independent of duration and size)."""
    rng = np.random.default_rng(seed)
    raw = []
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        for c in ("timestamp", "duration", "num_gpus"):
            if c not in (reader.fieldnames or []):
                raise TraceError(path, 1, c, "missing column")
        for ln, row in enumerate(reader, start=2):
            if limit is not None and len(raw) >= limit:
                break
            try:
                ts = datetime.strptime(row["timestamp"], "%Y-%m-%d %H:%M:%S").timestamp()
            except (TypeError, ValueError):
                raise TraceError(path, ln, "timestamp", f"expected YYYY-MM-DD HH:MM:SS, got {row['timestamp']!r}") from None
            dur = _num(path, ln, "duration", row["duration"])
            gpus = int(_num(path, ln, "num_gpus", row["num_gpus"]))
            if gpus < 1:
                raise TraceError(path, ln, "num_gpus", "must be >= 1")
            raw.append((ts, max(dur, 1.0), gpus))
    if not raw:
        raise TraceError(path, 1, "timestamp", "no job rows (empty trace)")
    picks = rng.integers(0, len(models), size=len(raw))
    cache = {m: profile(*m) for m in models}
    t0 = min(r[0] for r in raw)
    return history_estimates([JobSpec(i, ts - t0, g, d, cache[models[k]][0], cache[models[k]][1], models[k][0],
                                      models[k][1]) for i, ((ts, d, g), k) in enumerate(zip(raw, picks))])


def cluster_for_trace(jobs: list[JobSpec], *, gpus_per_node: int = 8, load: float = 1.0,
                      gpu_type: str = "V100", memory_mib: float = 16384.0) -> list[GPUSpec]:
    """A homogeneous cluster "shaped like the trace": enough GPUs for the largest job and for
    the trace's average demand (sum of GPUs x duration / arrival span) divided by ``load``,
    rounded up to whole nodes of ``gpus_per_node``. ``ValueError`` for an empty job list."""
    if not jobs:
        raise ValueError("empty trace: no jobs to shape a cluster for")
    span = max(max(j.arrival for j in jobs) - min(j.arrival for j in jobs), 1.0)
    demand = sum(j.num_gpus * j.duration for j in jobs) / span
    need = max(max(j.num_gpus for j in jobs), int(np.ceil(demand / load)), gpus_per_node)
    return homogeneous_cluster(int(np.ceil(need / gpus_per_node)), gpus_per_node, gpu_type=gpu_type,
                               memory_mib=memory_mib)


#: The GPU types of Gavel's heterogeneous cluster (OSDI 2020, section 7: 36 V100, 36 P100 and
#: 36 K80 GPUs) with their memory per GPU (MiB; a K80 board's GK210 has 12 GB)
GAVEL_GPU_TYPES: tuple[tuple[str, float], ...] = (("V100", 16384.0), ("P100", 16384.0), ("K80", 12288.0))


def heterogeneous_cluster_for_trace(jobs: list[JobSpec], *, gpus_per_node: int = 8,
                                    types: tuple[tuple[str, float], ...] = GAVEL_GPU_TYPES) -> list[GPUSpec]:
    """The nodes :func:`cluster_for_trace` gives, rounded up to a multiple of ``len(types)``,
    in equal shares of each GPU type (``(type, memory MiB)``, default Gavel's V100 / P100 /
    K80), node types in turn; more rounds of nodes only where a job's tasks would not all find
    a GPU with their memory. So at least the GPUs of the homogeneous V100 cluster (up to three
    times as many for a VC of one or two nodes), mostly slower ones.
    ``ValueError`` for an empty job list or a job whose tasks no type has the memory for."""
    rounds = -(-len({g.node for g in cluster_for_trace(jobs, gpus_per_node=gpus_per_node)}) // len(types))
    # and more rounds (one node of each type) where some job's tasks would not all find a GPU
    # with their memory (a 24-GPU job of 16 GiB tasks on 24 GPUs of which a third are 12 GiB K80s)
    for j in jobs:
        fitting = sum(1 for _, mem in types if mem >= j.memory_mib)
        if fitting == 0:
            raise ValueError(f"job {j.job_id} ({j.model or 'unnamed'}) needs {j.memory_mib:.0f} MiB per GPU; "
                             f"the largest of {', '.join(t for t, _ in types)} has {max(m for _, m in types):.0f}")
        rounds = max(rounds, -(-j.num_gpus // (fitting * gpus_per_node)))
    return mixed_cluster([types[n % len(types)] for n in range(rounds * len(types))], gpus_per_node)


def load_throughputs(path: Path) -> dict:
    """Gavel's ``simulation_throughputs.json``."""
    with open(path) as fh:
        return json.load(fh)
