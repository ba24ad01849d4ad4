"""Placement benchmark. (a) quality: every policy on the 15 Gavel VC traces, each on a cluster
shaped like its trace, seed 0; Horus's makespan, mean JCT, mean queueing delay and mean GPU
utilisation as ratios to FIFO exclusive and to Gandiva (per trace and geometric mean).
(b) scale: the full Philly job list under Horus: wall time and peak RSS.
Prints one JSON line; writes bench/out/placement.csv. Run: nice python bench/placement.py"""
from __future__ import annotations

import csv
import json
import resource
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from placement.core import setup, simulator  # noqa: E402
from placement.core.policies import POLICIES, make_policy  # noqa: E402

METRICS = ("makespan_s", "mean_jct_s", "mean_queueing_delay_s", "mean_gpu_util_pct")


def main() -> None:
    data = ROOT / "data"
    skip_quality = "--scale-only" in sys.argv
    tables = setup.load_tables(data)
    rows = []
    if not skip_quality:
        for vc in setup.GAVEL_VCS:
            jobs = setup.load_trace(f"gavel:{vc}", data, tables)
            gpus = setup.cluster(jobs)
            for p in POLICIES:
                t = time.perf_counter()
                s = simulator.simulate(jobs, gpus, make_policy(p), tables.interference, seed=0).summary()
                rows.append({"trace": vc, "gpus": len(gpus), **s, "wall_s": time.perf_counter() - t})
    ratios = {}
    for base in ("fifo", "gandiva"):
        for m in METRICS:
            r = []
            for vc in setup.GAVEL_VCS:
                h = next((x for x in rows if x["trace"] == vc and x["policy"] == "horus"), None)
                b = next((x for x in rows if x["trace"] == vc and x["policy"] == base), None)
                if h and b and b[m] > 0 and h[m] > 0:
                    r.append(h[m] / b[m])
            if r:
                ratios[f"horus_vs_{base}_{m}_geomean"] = float(np.exp(np.mean(np.log(r))))
                ratios[f"horus_vs_{base}_{m}_wins"] = int(sum(v < 1 for v in r)) if m != "mean_gpu_util_pct" else int(sum(v > 1 for v in r))
    t = time.perf_counter()
    cpu0 = time.process_time()
    jobs = setup.load_trace("philly", data, tables, seed=0)
    gpus = setup.cluster(jobs)
    s = simulator.simulate(jobs, gpus, make_policy("horus"), tables.interference, seed=0).summary()
    wall = time.perf_counter() - t
    cpu = time.process_time() - cpu0
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rows.append({"trace": "philly-full", "gpus": len(gpus), **s, "wall_s": wall})
    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    keys = sorted({k for r in rows for k in r})
    with open(out / "placement.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    print(json.dumps({"bench": "placement", **{k: round(v, 4) if isinstance(v, float) else v for k, v in ratios.items()},
                      "philly_jobs": len(jobs), "philly_gpus": len(gpus), "philly_wall_s": round(wall, 1), "philly_cpu_s": round(cpu, 1),
                      "philly_peak_rss_mib": round(rss_mib, 1), "philly_horus_makespan_s": s["makespan_s"],
                      "interference_r2": tables.interference.r2, "interference_mae": tables.interference.mae,
                      "interference_pairs": tables.interference.n}))


if __name__ == "__main__":
    main()
