"""Achieved contention, measured from ``/proc`` while the harness runs (Linux).

The model's contention ``rho`` of a cluster is the fraction of CPU other tenants take from the
application there, so a call's CPU time stretches by ``1 / (1 - rho)`` (processor sharing). Two
figures are read per cluster over the measured window:

* ``achieved``: of the time the application's threads in that cluster were runnable, the share
  they spent waiting for a CPU: ``sum wait / sum (run + wait)`` over every thread of its service
  processes, from ``/proc/<pid>/task/<tid>/schedstat`` (fields: time on CPU, time waiting on a
  runqueue, in ns; Linux ``Documentation/scheduler/sched-stats.rst``). That is the ``rho`` the
  application actually saw, hogs and any other load on the CPU set together; ``1 / (1 -
  achieved)`` is its CPU stretch.
* ``hog_share``: CPU time of the ``stress-ng`` hogs (process and workers, ``utime + stime`` from
  ``/proc/<pid>/stat`` via psutil) over ``wall x CPUs in the set``: how much of the set they held.

A hog at 100 % takes the whole CPU while the application sleeps, and the scheduler lets a thread
that wakes after sleeping run ahead of CPU-bound ones (CFS sleeper placement; EEVDF keeps its
lag), so short request bursts wait less than ``rho``: ``achieved`` below the target says the
configured contention was not reached on this machine, and the sweeps report it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import psutil


def thread_schedstat(pid: int) -> tuple[int, int]:
    """``(run_ns, wait_ns)`` summed over the threads of ``pid`` (0, 0 once it is gone)."""
    run = wait = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0, 0
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as fh:
                a, b, _ = fh.read().split()
        except (OSError, ValueError):
            continue
        run += int(a)
        wait += int(b)
    return run, wait


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and its live descendants (0 once gone)."""
    try:
        p = psutil.Process(pid)
        procs = [p] + p.children(recursive=True)
    except psutil.Error:
        return 0.0
    tot = 0.0
    for q in procs:
        try:
            t = q.cpu_times()
            tot += t.user + t.system
        except psutil.Error:
            pass
    return tot


@dataclass
class Snapshot:
    """Counters of one cluster at one instant."""

    run_ns: int
    wait_ns: int
    hog_cpu_s: float
    wall_s: float


def snapshot(service_pids: list[int], hog_pid: int | None) -> Snapshot:
    import time

    run = wait = 0
    for pid in service_pids:
        r, w = thread_schedstat(pid)
        run += r
        wait += w
    return Snapshot(run, wait, tree_cpu_seconds(hog_pid) if hog_pid else 0.0, time.monotonic())


def achieved(before: Snapshot, after: Snapshot, n_cpus: int) -> dict:
    """``{achieved, hog_share, runnable_s}`` between two snapshots (see module docstring);
    ``achieved`` is None when the application never ran there."""
    run, wait = after.run_ns - before.run_ns, after.wait_ns - before.wait_ns
    wall = max(after.wall_s - before.wall_s, 1e-9)
    return {"achieved": round(wait / (run + wait), 4) if run + wait > 0 else None,
            "hog_share": round((after.hog_cpu_s - before.hog_cpu_s) / (wall * n_cpus), 4),
            "runnable_s": round((run + wait) / 1e9, 4)}
