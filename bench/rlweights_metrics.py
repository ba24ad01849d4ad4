"""Headroom of the bench's unseen pairs on each metric the models report (mean and p95 latency,
mean slowdown), from one simulation per weight vector, and the bound the workload itself puts on
mean-latency headroom.

For every unseen pair of ``bench/rlweights.py`` (same parameters: ``--eval-seed``,
``--test-setups``, ``--test-workloads``, ``--model``) and one tie-break seed, the first
``--vectors`` vectors of :func:`rlweights.core.headroom.headroom_vectors` are simulated once each
and the headroom (best against equal weights, %) is taken per metric. With the serverless model
it also records, for equal weights, the mean waiting time (arrival to start: queueing, cold
start, pull), the mean execution time and the mean isolated duration: every node's speed is at
most 1.0 on the PAI table, so no weight vector brings the mean latency below the mean isolated
duration, and ``100 * (1 - isolated / latency)`` bounds the mean-latency headroom.

Prints one JSON line on stdout and writes bench/out/rlweights_metrics.csv (one row per pair).

    nice -n 19 python bench/rlweights_metrics.py                    # serverless, seed 0, 300 vectors
    nice -n 19 python bench/rlweights_metrics.py --model snapshot
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._args import check_out_path, write_csv_rows  # noqa: E402
from rlweights import pipeline  # noqa: E402
from rlweights.core.headroom import DEFAULT_HEADROOM_VECTORS, distribution, headroom_vectors  # noqa: E402
from rlweights.core.serverless import run  # noqa: E402
from rlweights.core.simulator import METRICS  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=list(pipeline.SIM_MODELS), default=pipeline.DEFAULT_MODEL)
    ap.add_argument("--eval-seed", type=int, default=5, help="scenario seed of the unseen set (as bench/rlweights.py)")
    ap.add_argument("--test-setups", type=int, default=4)
    ap.add_argument("--test-workloads", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0, help="the simulation's tie-break seed")
    ap.add_argument("--vectors", type=int, default=DEFAULT_HEADROOM_VECTORS, help="headroom vectors (>= 1)")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "out" / "rlweights_metrics.csv"))
    a = ap.parse_args()
    if a.vectors < 1 or a.test_setups < 1 or a.test_workloads < 1 or a.eval_seed < 0 or a.seed < 0:
        ap.error("--vectors, --test-setups and --test-workloads must be >= 1, the seeds >= 0")
    out = check_out_path(ap, a.out)
    p = pipeline.LearnParams(mode="evaluate", seed=a.eval_seed, test_setups=a.test_setups,
                             test_workloads=a.test_workloads, model=a.model)
    _, test = pipeline.build_scenarios(p)
    vecs = headroom_vectors(a.vectors, 0)
    rows = []
    t, c = time.perf_counter(), time.process_time()
    for sc in test:
        vals = {m: [] for m in METRICS}
        for w in vecs:
            perf = sc.config.simulate(sc.setup, sc.workload, w, a.seed)
            for m in METRICS:
                vals[m].append(perf.metric(m))
        row = {"scenario": sc.name, "nodes": len(sc.setup.nodes), "invocations": len(sc.workload)}
        for m in METRICS:
            v = np.array(vals[m])
            row[f"equal_{m}"] = float(v[0])
            row[f"headroom_{m}_percent"] = float(100.0 * (v[0] - v.min()) / v[0]) if v[0] > 0 else None
        if a.model == "serverless":
            r = run(sc.setup, sc.workload, vecs[0], a.seed, sc.config)
            s = r.served
            wait = (r.start_s - sc.workload.arrival_s)[s].mean()
            isolated = sc.workload.duration_s[s].mean()
            row.update(wait_s=float(wait), exec_s=float((r.finish_s - r.start_s)[s].mean()), isolated_s=float(isolated),
                       mean_latency_bound_percent=float(100.0 * (1.0 - isolated / r.performance.mean_s)))
        rows.append(row)
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    write_csv_rows(out, rows)
    rnd = lambda d: {k: (round(v, 2) if isinstance(v, float) else v) for k, v in d.items()}  # noqa: E731
    result = {"bench": "rlweights_metrics", "model": a.model, "seed": a.seed, "vectors": len(vecs), "pairs": len(test),
              "headroom_over_pairs": {m: rnd(distribution([r[f"headroom_{m}_percent"] for r in rows])) for m in METRICS},
              "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "csv": str(out)}
    if a.model == "serverless":
        result["mean_latency_bound_over_pairs"] = rnd(distribution([r["mean_latency_bound_percent"] for r in rows]))
        result["isolated_share_of_mean_latency"] = round(float(np.mean([r["isolated_s"] / r["equal_mean"] for r in rows])), 3)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
