"""Placement benchmark.

(a) quality: every policy on the 15 Gavel VC traces, each on a cluster shaped like its trace,
same seed; Horus's makespan, mean JCT, mean queueing delay and mean GPU utilisation as ratios
to FIFO exclusive and to Gandiva, per trace and as a geometric mean over traces. Per trace also
each policy's makespan over the trace's lower bound ``max(arrival + isolated duration) - first
arrival`` (no schedule can beat it: slowdowns are >= 1), which tells a tie at the bound from a
tie above it.
(b) scale: the full Philly job list (82,247 jobs) under Horus: wall time, CPU time and peak RSS
of this process (``ru_maxrss``, so it also covers part (a) when both run).

Prints one JSON line on stdout; writes one CSV row per (trace, policy) run.
Run (timing runs go through the shared bench lock)::

    flock /tmp/tandem-bench.lock nice -n 5 python bench/placement.py
    python bench/placement.py --help
    python bench/placement.py --quality-only --no-migrate --no-protect    # Horus as first built
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import resource
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from placement.core import setup, simulator  # noqa: E402
from placement.core.policies import DEFAULT_MIGRATION_COST_S, POLICIES, make_policy  # noqa: E402

METRICS = ("makespan_s", "mean_jct_s", "mean_queueing_delay_s", "mean_gpu_util_pct")
#: A ratio within this relative distance of 1 counts as a tie (e.g. the same job, arriving at
#: the same time with the same duration, ends both schedules).
TIE = 1e-3


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description="Placement benchmark: policies on the 15 Gavel VC traces (ratios of Horus to "
                    "FIFO exclusive and to Gandiva) and the full Philly list under Horus (wall time, "
                    "peak memory). Prints one JSON line.")
    part = ap.add_mutually_exclusive_group()
    part.add_argument("--scale-only", action="store_true", help="only part (b), the Philly run")
    part.add_argument("--quality-only", action="store_true", help="only part (a), the Gavel traces")
    ap.add_argument("--policies", default=",".join(POLICIES),
                    help="comma-separated policies for part (a); must include horus, fifo and gandiva "
                         f"(default: all: {','.join(POLICIES)})")
    ap.add_argument("--vcs", default=",".join(setup.GAVEL_VCS), help="comma-separated Gavel VCs (default: all 15)")
    ap.add_argument("--seed", type=int, default=0, help="simulation seed, and Philly's model draw (default 0)")
    ap.add_argument("--migration-cost-s", type=float, default=DEFAULT_MIGRATION_COST_S,
                    help="checkpoint/restore pause charged per migration, seconds "
                         f"(default {DEFAULT_MIGRATION_COST_S:g})")
    ap.add_argument("--no-migrate", action="store_true",
                    help="ablation: gandiva, horus and horus+ do not migrate co-located jobs")
    ap.add_argument("--no-protect", action="store_true",
                    help="ablation: horus and horus+ without the critical-path guard")
    ap.add_argument("--data", type=Path, default=ROOT / "data", help="data directory (default: repo data/)")
    ap.add_argument("--csv", type=Path, default=ROOT / "bench" / "out" / "placement.csv",
                    help="per-run CSV output (default bench/out/placement.csv)")
    args = ap.parse_args(argv)
    args.policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    unknown = [p for p in args.policies if p not in POLICIES]
    if unknown:
        ap.error(f"unknown policies {unknown}; known: {', '.join(POLICIES)}")
    if not args.scale_only and not {"horus", "fifo", "gandiva"} <= set(args.policies):
        ap.error("--policies must include horus, fifo and gandiva (the ratios are Horus / FIFO and Horus / Gandiva)")
    args.vcs = [v.strip() for v in args.vcs.split(",") if v.strip()]
    bad = [v for v in args.vcs if v not in setup.GAVEL_VCS]
    if bad:
        ap.error(f"unknown Gavel VCs {bad}; known: {', '.join(setup.GAVEL_VCS)}")
    if not args.scale_only and not args.vcs:
        ap.error("--vcs is empty")
    args.vcs = list(dict.fromkeys(args.vcs))  # a VC named twice is simulated once
    if not (args.migration_cost_s >= 0 and math.isfinite(args.migration_cost_s)):
        ap.error("--migration-cost-s must be a finite number >= 0")
    if args.seed < 0:
        ap.error("--seed must be >= 0")
    if not args.data.is_dir():
        ap.error(f"--data {args.data}: no such folder")
    from _args import check_out_path

    check_out_path(ap, args.csv, "--csv")
    return args


def policy_kwargs(name: str, args: argparse.Namespace) -> dict:
    """Ablation switches: ``--no-migrate`` (gandiva, horus, horus+), ``--no-protect`` (horus, horus+)."""
    kw = {}
    if args.no_migrate and name in ("gandiva", "horus", "horus+"):
        kw["migrate"] = False
    if args.no_protect and name in ("horus", "horus+"):
        kw["protect_critical"] = False
    return kw


def ratio_summary(rows: list[dict], vcs: list[str], base: str) -> tuple[dict, dict]:
    """Horus / ``base`` per VC and aggregated. Returns (aggregates, per-VC ratios). For the time
    metrics a ratio < 1 is a win, for utilisation > 1; a VC where either value is 0 (no
    queueing at all) has no ratio for that metric and is left out of its geometric mean."""
    agg: dict = {}
    per_vc: dict = {vc: {} for vc in vcs}
    for m in METRICS:
        r = []
        for vc in vcs:
            h = next((x for x in rows if x["trace"] == vc and x["policy"] == "horus"), None)
            b = next((x for x in rows if x["trace"] == vc and x["policy"] == base), None)
            if h and b and b[m] > 0 and h[m] > 0:
                v = h[m] / b[m]
                r.append(v)
                per_vc[vc][m] = round(v, 4)
        if not r:
            continue
        r_arr = np.array(r)
        better = r_arr > 1 + TIE if m == "mean_gpu_util_pct" else r_arr < 1 - TIE
        worse = r_arr < 1 - TIE if m == "mean_gpu_util_pct" else r_arr > 1 + TIE
        key = f"horus_vs_{base}_{m}"
        agg[f"{key}_geomean"] = float(np.exp(np.mean(np.log(r_arr))))
        agg[f"{key}_wins"] = int(better.sum())
        agg[f"{key}_ties"] = int(len(r_arr) - better.sum() - worse.sum())
        agg[f"{key}_losses"] = int(worse.sum())
        agg[f"{key}_worst"] = float(r_arr.min() if m == "mean_gpu_util_pct" else r_arr.max())
        agg[f"{key}_n"] = len(r_arr)
    return agg, per_vc


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    tables = setup.load_tables(args.data)
    rows: list[dict] = []
    out: dict = {"bench": "placement", "seed": args.seed, "migration_cost_s": args.migration_cost_s,
                 "no_migrate": args.no_migrate, "no_protect": args.no_protect}
    if not args.scale_only:
        lower_bound = {}
        for vc in args.vcs:
            jobs = setup.load_trace(f"gavel:{vc}", args.data, tables)
            gpus = setup.cluster(jobs)
            lower_bound[vc] = max(j.arrival + j.duration for j in jobs) - min(j.arrival for j in jobs)
            for p in args.policies:
                t = time.perf_counter()
                s = simulator.simulate(jobs, gpus, make_policy(p, **policy_kwargs(p, args)), tables.world,
                                       seed=args.seed, migration_cost_s=args.migration_cost_s).summary()
                rows.append({"trace": vc, "gpus": len(gpus), **s, "wall_s": time.perf_counter() - t})
        per_vc: dict = {}
        for base in ("fifo", "gandiva"):
            agg, pv = ratio_summary(rows, args.vcs, base)
            out.update({k: round(v, 4) if isinstance(v, float) else v for k, v in agg.items()})
            for vc, d in pv.items():
                per_vc.setdefault(vc, {})[f"vs_{base}"] = d
        for vc in args.vcs:
            per_vc[vc]["makespan_over_lower_bound"] = {
                r["policy"]: round(r["makespan_s"] / lower_bound[vc], 4) for r in rows if r["trace"] == vc}
        out["horus_makespan_at_lower_bound"] = sum(
            per_vc[vc]["makespan_over_lower_bound"]["horus"] <= 1 + TIE for vc in args.vcs)
        out["fifo_makespan_at_lower_bound"] = sum(
            per_vc[vc]["makespan_over_lower_bound"]["fifo"] <= 1 + TIE for vc in args.vcs)
        out["geomean_vs_fifo"] = {}
        for p in args.policies:
            g = {}
            for m in ("makespan_s", "mean_queueing_delay_s", "mean_jct_s"):
                r = [x[m] / f[m] for vc in args.vcs
                     for x in rows if x["trace"] == vc and x["policy"] == p
                     for f in rows if f["trace"] == vc and f["policy"] == "fifo" and f[m] > 0 and x[m] > 0]
                g[m] = round(float(np.exp(np.mean(np.log(r)))), 4) if r else None
            out["geomean_vs_fifo"][p] = g
        out["migrations"] = {p: int(sum(r["migrations"] for r in rows if r["policy"] == p)) for p in args.policies}
        out["per_vc"] = per_vc
    if not args.quality_only:
        t = time.perf_counter()
        cpu0 = time.process_time()
        jobs = setup.load_trace("philly", args.data, tables, seed=args.seed)
        gpus = setup.cluster(jobs)
        s = simulator.simulate(jobs, gpus, make_policy("horus", **policy_kwargs("horus", args)), tables.world,
                               seed=args.seed, migration_cost_s=args.migration_cost_s).summary()
        wall = time.perf_counter() - t
        cpu = time.process_time() - cpu0
        rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        rows.append({"trace": "philly-full", "gpus": len(gpus), **s, "wall_s": wall})
        out.update({"philly_jobs": len(jobs), "philly_gpus": len(gpus), "philly_wall_s": round(wall, 1),
                    "philly_cpu_s": round(cpu, 1), "philly_peak_rss_mib": round(rss_mib, 1),
                    "philly_horus_makespan_s": round(s["makespan_s"], 1),
                    "philly_horus_mean_queueing_delay_s": round(s["mean_queueing_delay_s"], 1),
                    "philly_horus_migrations": s["migrations"]})
    out.update({"interference_r2": round(tables.interference.r2, 4), "interference_mae": round(tables.interference.mae, 4),
                "interference_pairs": tables.interference.n})
    args.csv.parent.mkdir(parents=True, exist_ok=True)
    keys = sorted({k for r in rows for k in r})
    with open(args.csv, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
