"""Environment steps per second of the serverless model (rlweights.core.serverless) on large real
clusters: seeded samples of the real Alibaba PAI machine table (1,897 machines; the whole table
at ``--sizes ... 1897``), each loaded at the serverless pairs' offered load per node
(:data:`rlweights.pipeline.PAIR_SHAPES`: the middle of 16-43x the Azure sample's rates for 12
nodes, so the rate scale grows with the node count), so the invocations per window grow with
the cluster. A step of :class:`rlweights.core.env.WeightLearningEnv` is one simulated window
with a new weight vector (random actions, nothing cached).

This is how a large cluster is kept cheap to learn on: a seeded sample of its nodes with the
workload scaled to the sample (``--sizes``); the full table shows what a step costs without
sampling.

Prints a table on stderr and ONE JSON line on stdout; writes bench/out/rlweights_scale.csv.

    nice -n 19 python bench/rlweights_scale.py                        # 16, 64, 256 nodes and all 1,897
    nice -n 19 python bench/rlweights_scale.py --sizes 64 --steps 10
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
from rlweights.core.cluster import load_pai_machines, sample_cluster_setup  # noqa: E402
from rlweights.core.env import SimScenario, WeightLearningEnv  # noqa: E402
from rlweights.core.workload import function_stats, generate_workload, read_azure_trace  # noqa: E402
from rlweights.pipeline import PAIR_SHAPES  # noqa: E402


def rate_per_node() -> float:
    """Rate scale per node of the serverless pairs: the middle of their rate-scale range over
    the middle of their node-count range (29.5 / 12)."""
    shape = PAIR_SHAPES["serverless"]
    return float(np.mean(shape["rate_scale"]) / np.mean(shape["n_nodes"]))


def measure(n_nodes: int, steps: int, window_s: float, seed: int) -> dict:
    """One cluster size: build the pair, then time the environment's reset (the equal-weights
    reference window) and ``steps`` steps with random actions, per wall second and per CPU
    second of this process."""
    machines = load_pai_machines()
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    setup = sample_cluster_setup(rng, n_nodes, machines, name=f"pai{n_nodes}")
    wl = generate_workload(function_stats(read_azure_trace()), rng, window_s, rate_per_node() * n_nodes,
                           name=f"gen{n_nodes}")
    build_s = time.perf_counter() - t0
    env = WeightLearningEnv([SimScenario(setup, wl)], steps=steps)
    t, c = time.perf_counter(), time.process_time()
    env.reset(seed=seed)
    reset_wall, reset_cpu = time.perf_counter() - t, time.process_time() - c
    act = np.random.default_rng(seed + 1)
    t, c = time.perf_counter(), time.process_time()
    for _ in range(steps):
        env.step(act.uniform(-1, 1, 7).astype(np.float32))
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    return {"nodes": n_nodes, "cores": int(sum(nd.cpu_milli for nd in setup.nodes) / 1000),
            "invocations": len(wl), "window_s": window_s, "rate_scale": round(rate_per_node() * n_nodes, 2),
            "build_s": round(build_s, 2),
            "reset_wall_s": round(reset_wall, 2), "reset_cpu_s": round(reset_cpu, 2), "steps": steps,
            "step_wall_s": round(wall / steps, 3), "step_cpu_s": round(cpu / steps, 3),
            "steps_per_s": round(steps / wall, 3), "steps_per_cpu_s": round(steps / cpu, 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="16,64,256,1897", help="comma-separated node counts (1..1897)")
    ap.add_argument("--steps", type=int, default=3, help="environment steps timed per size (>= 1)")
    ap.add_argument("--window", type=float, default=120.0, help="workload window [s] (> 0)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the node sample, the workload and the actions")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "out" / "rlweights_scale.csv"))
    a = ap.parse_args()
    try:
        sizes = [int(x) for x in a.sizes.split(",") if x.strip()]
    except ValueError:
        ap.error(f"--sizes must be comma-separated integers, got {a.sizes!r}")
    if not sizes or any(not 1 <= s <= 1897 for s in sizes):
        ap.error(f"--sizes needs node counts in 1..1897, got {a.sizes!r}")
    if a.steps < 1 or not a.window > 0:
        ap.error("--steps must be >= 1 and --window > 0")
    out = check_out_path(ap, a.out)
    rows = []
    for n in sizes:
        r = measure(n, a.steps, a.window, a.seed)
        rows.append(r)
        print(f"{n:5d} nodes {r['cores']:6d} cores {r['invocations']:7d} invocations: "
              f"{r['step_wall_s']:8.3f} s/step wall ({r['steps_per_s']:.3f} steps/s), "
              f"{r['step_cpu_s']:8.3f} s/step CPU ({r['steps_per_cpu_s']:.3f} steps/CPU-s)", file=sys.stderr)
    write_csv_rows(out, rows)
    print(json.dumps({"bench": "rlweights_scale", "model": "serverless", "rate_per_node": round(rate_per_node(), 4),
                      "rows": rows, "csv": str(out)}))


if __name__ == "__main__":
    main()
