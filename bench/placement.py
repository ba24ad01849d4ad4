"""Placement benchmark.

(a) quality: every policy on the 15 Gavel VC traces, each on a cluster shaped like its trace,
same seed; Horus's makespan, mean JCT, mean queueing delay and mean GPU utilisation as ratios
to FIFO exclusive and to Gandiva, per trace and as a geometric mean over traces. Per trace also
each policy's makespan over the trace's lower bound ``max(arrival + isolated duration) - first
arrival`` (no schedule can beat it: slowdowns are >= 1), which tells a tie at the bound from a
tie above it.
Also (a'): the same policies on generated trace shapes (``--shapes``: each VC with arrivals
compressed x0.5; three 1,000-job windows of the Philly list; each VC on a heterogeneous cluster
of V100, P100 and K80 nodes in equal shares, where the world runs a job at its type's measured
speed), and per shape Horus / random
co-location, Horus / the best baseline per (trace, metric), Horus / FIFO and Horus / Horus with
random partners (``horus-random-partners``: the same queue, guard, migration and preemption, a
uniformly random choice among the same candidate GPUs, so the ratio is what the cost function
adds) (makespan, mean and p95 JCT, queueing delay, utilisation), with the world's source: the
share of co-located job-seconds whose slowdown came from a measured pair
(:mod:`placement.core.world`).
(b) scale: the full Philly job list (82,247 jobs) under Horus: wall time, CPU time and peak RSS
of this process (``ru_maxrss``, so it also covers part (a) when both run).

Every simulation goes through :func:`placement.pipeline.simulate_policies`, the call the
``simulation`` experiment kind and ``manage.py simulate`` make. Prints one JSON line on stdout;
writes one CSV row per (trace, policy) run, with the policy's settings (JSON).
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
from placement import pipeline  # noqa: E402
from placement.core import setup, traces  # noqa: E402
from placement.core.policies import (  # noqa: E402
    DEFAULT_MIGRATION_COST_S, POLICIES, QUEUE_ORDERS, Horus, HorusRandomPartners)

METRICS = ("makespan_s", "mean_jct_s", "p95_jct_s", "mean_queueing_delay_s", "mean_gpu_util_pct")
#: Baselines Horus is judged against: the strongest per (trace, metric) is "best".
BASELINES = ("fifo", "sjf", "tiresias", "gandiva", "random")
#: The Horus paper's headline (Yeung et al., TPDS 2022, abstract: against other DL resource
#: managers on its own testbed / simulation; not our traces, printed for context only).
PAPER = {"gpu_util_gain_up_to_pct": 61.5, "makespan_reduction_pct": [23.7, 30.7], "wait_time_reduction_pct": 68.3}
#: A ratio within this relative distance of 1 counts as a tie (e.g. the same job, arriving at
#: the same time with the same duration, ends both schedules).
TIE = 1e-3


def _pair_bound(text: str) -> float | str:
    """``--max-pair-cost``: a number, or ``none`` (no bound)."""
    if text.strip().lower() == "none":
        return "none"
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a number or 'none', got {text!r}") from None


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
    ap.add_argument("--belief", choices=["none", "pair"], default="pair",
                    help="horus (and horus+) decide with the pair interference belief (out-of-family fits "
                         "of placement.core.pair_predictor; default pair, as simulated horus does) or "
                         "without it (none; also drops horus's pair-cost bound)")
    ap.add_argument("--horus-order", choices=list(QUEUE_ORDERS), default=None,
                    help="queue order of horus's look-ahead window (default: horus's own, shortest; "
                         "horus+ keeps its k-means credit order)")
    ap.add_argument("--horus-las", action=argparse.BooleanOptionalAction, default=True,
                    help="horus puts Tiresias's least-attained-service levels (3,600 / 36,000 "
                         "GPU-seconds) before its queue order and preempts lower levels, as Tiresias does, "
                         "when the first job has too few GPUs it would take (Horus.preempt; default on, "
                         "as simulated horus does; --no-horus-las: the paper's non-preemptive queue)")
    ap.add_argument("--w-speed", type=float, default=None,
                    help="weight of a GPU type's believed slowness in horus's and horus+'s cost (0: "
                         "type-blind, and no waiting for a faster type; default: the policy's own, 1)")
    ap.add_argument("--w-gang", type=float, default=None,
                    help="weight of the gang term in horus's and horus+'s cost (the GPUs of the resident "
                         "jobs that a co-location also slows; 0: the paper's cost; default: the policy's own, 1)")
    ap.add_argument("--max-pair-cost", type=_pair_bound, default=None,
                    help="horus (and the horus-random-partners control) shares an occupied GPU only when "
                         "the believed pair cost (the predicted "
                         "extra slowdowns it adds, summed) is below this; 'none': no bound (default: 1 "
                         "with --belief pair, the break-even for mean JCT, see the Horus docstring; "
                         "none without); a number needs --belief pair")
    ap.add_argument("--lookahead", type=int, default=None,
                    help="horus's look-ahead window, jobs (default: horus's own, 256; horus+ keeps its 64)")
    ap.add_argument("--durations", choices=["estimate", "oracle"], default="estimate",
                    help="what sjf, horus's guard and migration plan with: the estimate known at "
                         "submission (default; Gavel: steps / measured throughput; Philly: history "
                         "median) or the true duration (oracle, labelled)")
    ap.add_argument("--shapes", default="gavel,dense,philly,hetero",
                    help="trace sets for part (a): gavel (the 15 VCs), dense (each VC with arrivals "
                         "compressed x0.5, on the VC's own cluster), philly (3 windows of 1,000 Philly "
                         "jobs, sizes from Philly, Gavel job types by seeded draw), hetero (each VC on at least "
                         "as many GPUs in equal shares of V100, P100 and K80 nodes, as in Gavel); default all four")
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
    if args.w_gang is not None and not (args.w_gang >= 0 and math.isfinite(args.w_gang)):
        ap.error(f"--w-gang must be a finite number >= 0, got {args.w_gang}")
    if args.w_speed is not None and not (args.w_speed >= 0 and math.isfinite(args.w_speed)):
        ap.error(f"--w-speed must be a finite number >= 0, got {args.w_speed}")
    if isinstance(args.max_pair_cost, float):
        if not (args.max_pair_cost > 0 and math.isfinite(args.max_pair_cost)):
            ap.error(f"--max-pair-cost must be a finite number > 0 or 'none', got {args.max_pair_cost}")
        if args.belief != "pair":
            ap.error(f"--max-pair-cost {args.max_pair_cost:g} needs --belief pair (it bounds the believed "
                     f"pair cost; got --belief {args.belief})")
    if args.max_pair_cost is None:  # simulated horus's own: 1 with the belief
        args.max_pair_cost = pipeline.SIMULATED_HORUS["max_pair_cost"] if args.belief == "pair" else "none"
    if args.max_pair_cost == "none":
        args.max_pair_cost = None
    args.shapes = list(dict.fromkeys(v.strip() for v in args.shapes.split(",") if v.strip()))
    if not args.shapes or set(args.shapes) - {"gavel", "dense", "philly", "hetero"}:
        bad = sorted(set(args.shapes) - {"gavel", "dense", "philly", "hetero"})
        ap.error(f"--shapes: comma-separated among gavel, dense, philly, hetero; got {bad or 'nothing'}")
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
    if args.lookahead is not None and args.lookahead < 1:
        ap.error("--lookahead must be >= 1")
    if not args.data.is_dir():
        ap.error(f"--data {args.data}: no such folder")
    try:
        args.tables = setup.load_tables(args.data)
        args.belief_obj = setup.pair_belief(args.data) if args.belief == "pair" else None
    except FileNotFoundError as err:
        ap.error(f"--data {args.data}: not a Tandem data folder ({err.strerror}: {err.filename}; "
                 "see data/SOURCES.md for its layout)")
    from bench._args import check_out_path

    check_out_path(ap, args.csv, "--csv")
    return args


def policy_kwargs(name: str, args: argparse.Namespace) -> dict:
    """Ablation switches: ``--no-migrate`` (gandiva, horus, horus+), ``--no-protect`` (horus,
    horus+), ``--belief pair``, ``--w-speed`` and ``--w-gang`` (horus, horus+),
    ``--horus-las``, ``--max-pair-cost``, ``--lookahead`` and ``--horus-order`` (horus; the
    random-partners control gets every horus switch, :data:`SAME_ORDER`)."""
    kw = {}
    if name in ("horus", "horus+"):  # None: decides without the belief
        kw["pair_belief"] = getattr(args, "belief_obj", None)
    if args.no_migrate and name in ("gandiva", "horus", "horus+"):
        kw["migrate"] = False
    if args.no_protect and name in ("horus", "horus+"):
        kw["protect_critical"] = False
    if name == "horus":
        kw["las_thresholds"] = pipeline.SIMULATED_HORUS["las_thresholds"] if getattr(args, "horus_las", True) else None
    if getattr(args, "w_speed", None) is not None and name in ("horus", "horus+"):
        kw["w_speed"] = args.w_speed
    if getattr(args, "w_gang", None) is not None and name in ("horus", "horus+"):
        kw["w_gang"] = args.w_gang
    if name == "horus":
        kw["max_pair_cost"] = getattr(args, "max_pair_cost", None)
    if getattr(args, "lookahead", None) is not None and name == "horus":
        kw["lookahead"] = args.lookahead
    if name == "horus":
        kw["queue_order"] = horus_order(args)
    if name == SAME_ORDER:  # every Horus switch; the belief only where it bounds the candidates
        kw = policy_kwargs("horus", args)  # (--max-pair-cost): its choice among them is random
        if kw.get("max_pair_cost") is None:
            kw.pop("pair_belief", None)
    return kw


#: Bench-only row: Horus with random partner choice among its own candidates (its queue order,
#: window, guard, migration and preemption kept; :class:`HorusRandomPartners`).
SAME_ORDER = "horus-random-partners"


def horus_order(args: argparse.Namespace) -> str:
    """The queue order Horus runs with in this bench (``--horus-order`` or Horus's default)."""
    return args.horus_order or Horus().queue_order


def make(name: str, args: argparse.Namespace):
    """The policy object for a row name (a name of POLICIES, or :data:`SAME_ORDER`)."""
    kw = policy_kwargs(name, args)
    if name == SAME_ORDER:
        return HorusRandomPartners(**kw)
    return pipeline.simulation_policy(name, args.data, **kw)


def trace_sets(args, tables) -> dict[str, list[tuple[str, list, list]]]:
    """{shape: [(trace name, jobs, gpus)]} for ``args.shapes`` (see ``--shapes``)."""
    from dataclasses import replace

    out: dict = {}
    if {"gavel", "dense", "hetero"} & set(args.shapes):
        for vc in args.vcs:
            jobs = setup.load_trace(f"gavel:{vc}", args.data, tables)
            gpus = setup.cluster(jobs)
            if "gavel" in args.shapes:
                out.setdefault("gavel", []).append((vc, jobs, gpus))
            if "dense" in args.shapes:
                out.setdefault("dense", []).append(
                    (f"dense:{vc}", [replace(j, arrival=j.arrival * 0.5) for j in jobs], gpus))
            if "hetero" in args.shapes:
                out.setdefault("hetero", []).append((f"hetero:{vc}", jobs, traces.heterogeneous_cluster_for_trace(jobs)))
    if "philly" in args.shapes:
        full = setup.load_trace("philly", args.data, tables, seed=args.seed)
        for w in range(3):
            start = (w + 1) * len(full) // 4
            part = full[start:start + 1000]
            t0 = min(j.arrival for j in part)
            jobs = [replace(j, job_id=i, arrival=j.arrival - t0) for i, j in enumerate(part)]
            out.setdefault("philly", []).append((f"philly:w{w}", jobs, setup.cluster(jobs)))
    return out


def versus(rows: list[dict], traces: list[str], base: str, who: str = "horus") -> dict:
    """``who`` / ``base`` per metric over ``traces``: geometric mean, worst and best ratio,
    and how many traces have ratio <= 0.85 and <= 1.05. ``base`` "best": per (trace, metric)
    the strongest of :data:`BASELINES` present (lowest time, highest utilisation)."""
    out = {}
    for m in METRICS:
        hi = m == "mean_gpu_util_pct"
        r = []
        for t in traces:
            h = next((x for x in rows if x["trace"] == t and x["policy"] == who), None)
            if base == "best":
                vals = [x[m] for x in rows if x["trace"] == t and x["policy"] in BASELINES]
                b = (max(vals) if hi else min(vals)) if vals else None
            else:
                b = next((x[m] for x in rows if x["trace"] == t and x["policy"] == base), None)
            if h and b and b > 0 and h[m] > 0:
                r.append(h[m] / b)
        if r:
            a = np.array(r)
            out[m] = {"geomean": round(float(np.exp(np.log(a).mean())), 4),
                      "worst": round(float(a.min() if hi else a.max()), 4),
                      "best": round(float(a.max() if hi else a.min()), 4),
                      "n": len(a), "at_most_0.85": int((a <= 0.85).sum()), "at_most_1.05": int((a <= 1.05).sum())}
    return out


def world_share(rows: list[dict]) -> dict:
    """Pooled over ``rows``: share of all co-located job-seconds whose slowdown the world took
    from a measured pair, a measured scale-1 pair, or its model (and the co-located hours); and
    of all running job-seconds, the share on the reference type (V100) and on other types at a
    measured or a modelled isolated speed (``speed_*_share``; heterogeneous clusters)."""
    sec = {k: float(sum(r.get(f"world_{k}_s", 0.0) for r in rows)) for k in ("measured", "measured_1gpu", "modelled")}
    tot = sum(sec.values())
    speed = {k: float(sum(r.get(f"world_speed_{k}_s", 0.0) for r in rows)) for k in ("reference", "measured", "modelled")}
    run = sum(speed.values())
    return {**{f"{k}_share": round(v / tot, 4) if tot else 0.0 for k, v in sec.items()},
            "colocated_h": round(tot / 3600, 1),
            **{f"speed_{k}_share": round(v / run, 4) if run else 0.0 for k, v in speed.items()}}


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
    tables = args.tables
    rows: list[dict] = []
    out: dict = {"bench": "placement", "seed": args.seed, "migration_cost_s": args.migration_cost_s,
                 "no_migrate": args.no_migrate, "no_protect": args.no_protect}
    out["belief"] = args.belief
    out["horus_order"] = horus_order(args)
    out["horus_lookahead"] = args.lookahead or Horus().lookahead
    out["horus_las"] = args.horus_las
    out["horus_w_gang"] = args.w_gang if args.w_gang is not None else Horus().w_gang
    out["horus_w_speed"] = args.w_speed if args.w_speed is not None else Horus().w_speed
    out["horus_max_pair_cost"] = args.max_pair_cost
    out["durations"] = args.durations
    out["paper"] = PAPER
    out["world"] = tables.world.describe()
    args.row_policies = list(args.policies)
    if "horus" in args.policies:  # Horus with random partners: isolates its cost function
        args.row_policies.append(SAME_ORDER)
    if not args.scale_only:
        lower_bound = {}
        sets = trace_sets(args, tables)
        for shape, items in sets.items():
            for name, jobs, gpus in items:
                lower_bound[name] = max(j.arrival + j.duration for j in jobs) - min(j.arrival for j in jobs)
                policies = {p: make(p, args) for p in args.row_policies}
                for p, res, wall in pipeline.simulate_policies(jobs, gpus, policies, tables.world, seed=args.seed,
                                                               migration_cost_s=args.migration_cost_s,
                                                               durations=args.durations):
                    s = res.summary()
                    w = s.pop("world")
                    rows.append({"shape": shape, "trace": name, "gpus": len(gpus), **s,
                                 **{f"world_{k}": v for k, v in w.items() if k.endswith("_share") or k.endswith("_s")},
                                 "policy": p, "settings": json.dumps(pipeline.describe_policy(policies[p]), sort_keys=True),
                                 "wall_s": wall})
        out["shapes"] = {}
        for shape, items in sets.items():
            names = [n for n, _, _ in items]
            sub = [r for r in rows if r["shape"] == shape]
            out["shapes"][shape] = {
                "traces": len(names),
                "horus_order": horus_order(args),
                **{f"horus_vs_{b}": versus(sub, names, b) for b in ("random", "best", "fifo")},
                **({"horus_vs_random_partners": versus(sub, names, SAME_ORDER)}
                   if SAME_ORDER in args.row_policies else {}),
                **({"horus+_vs_best": versus(sub, names, "best", "horus+")} if "horus+" in args.policies else {}),
                "world_share": {p: world_share([r for r in sub if r["policy"] == p]) for p in args.row_policies},
            }
        args_vcs = args.vcs if "gavel" in sets else []
        per_vc: dict = {}
        rows_g = [r for r in rows if r.get("shape") == "gavel"]
        for base in ("fifo", "gandiva"):
            agg, pv = ratio_summary(rows_g, args_vcs, base)
            out.update({k: round(v, 4) if isinstance(v, float) else v for k, v in agg.items()})
            for vc, d in pv.items():
                per_vc.setdefault(vc, {})[f"vs_{base}"] = d
        for vc in args_vcs:
            per_vc[vc]["makespan_over_lower_bound"] = {
                r["policy"]: round(r["makespan_s"] / lower_bound[vc], 4) for r in rows if r["trace"] == vc}
        out["horus_makespan_at_lower_bound"] = sum(
            per_vc[vc]["makespan_over_lower_bound"]["horus"] <= 1 + TIE for vc in args_vcs)
        out["fifo_makespan_at_lower_bound"] = sum(
            per_vc[vc]["makespan_over_lower_bound"]["fifo"] <= 1 + TIE for vc in args_vcs)
        out["geomean_vs_fifo"] = {}
        for p in args.policies:
            g = {}
            for m in ("makespan_s", "mean_queueing_delay_s", "mean_jct_s"):
                r = [x[m] / f[m] for vc in args_vcs
                     for x in rows_g if x["trace"] == vc and x["policy"] == p
                     for f in rows_g if f["trace"] == vc and f["policy"] == "fifo" and f[m] > 0 and x[m] > 0]
                g[m] = round(float(np.exp(np.mean(np.log(r)))), 4) if r else None
            out["geomean_vs_fifo"][p] = g
        out["migrations"] = {p: int(sum(r["migrations"] for r in rows_g if r["policy"] == p)) for p in args.policies}
        out["per_vc"] = per_vc
    if not args.quality_only:
        t = time.perf_counter()
        cpu0 = time.process_time()
        jobs = setup.load_trace("philly", args.data, tables, seed=args.seed)
        gpus = setup.cluster(jobs)
        horus = make("horus", args)
        (_, res, _), = pipeline.simulate_policies(
            jobs, gpus, {"horus": horus}, tables.world,
            seed=args.seed, migration_cost_s=args.migration_cost_s, durations=args.durations)
        s = res.summary()
        s.pop("world")
        wall = time.perf_counter() - t
        cpu = time.process_time() - cpu0
        rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        rows.append({"trace": "philly-full", "gpus": len(gpus), **s, "policy": "horus",
                     "settings": json.dumps(pipeline.describe_policy(horus), sort_keys=True), "wall_s": wall})
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
