"""Benchmark of learned scoring weights (Learning to Score, Asenov et al., arXiv 2603.10545).

On unseen PAI cluster setups and unseen generated Azure-2021 workloads, with the same seeds for
every method, measured with the workload model ``--model`` (default ``serverless``,
:mod:`rlweights.core.serverless`; ``snapshot`` is the first model, :mod:`rlweights.core.simulator`,
with its own smaller pairs, :data:`rlweights.pipeline.PAIR_SHAPES`):

- **headroom** per (setup, workload) pair: the best of ``--headroom-vectors`` weight vectors
  (default 300: equal weights, the 128 corners of the weight box including the one-plugin-dominant
  ones, and scrambled Sobol points; :mod:`rlweights.core.headroom`) against equal weights, as
  percentage improvement of the bench's objective (mean end-to-end latency), per eval seed (the
  simulator's tie-break seed), with the winning vector, and its distribution over pairs; beside
  it the best of every vector measured in the run on that pair (the set plus all methods' vectors),
  since the set is a sample and a method can beat it;
- at each budget of ``--budgets`` (default 10, 20, 50 measured weight vectors), the improvement of
  the PPO policy and of every baseline (equal, kube-scheduler's true defaults, random search,
  Optuna TPE, hill climbing, CMA-ES) over equal weights, and PPO against each baseline, mean and
  spread (std) over seeds, with the paper's +33% over fixed weights / +12% over the best baseline
  beside them; each method's share of the headroom;
- the policy's training wall time; environment steps and headroom evaluations per second.

Prints a human table on stderr and ONE JSON line on stdout; writes the per-(budget, scenario,
seed, method) rows to bench/out/rlweights.csv and the headroom rows to
bench/out/rlweights_headroom.csv. Measurements are cached per (pair, seed) across the headroom
search and the budgets (the simulation is deterministic), so budget 50 re-measures nothing that
budget 10 already measured.

    nice -n 5 python bench/rlweights.py                   # shipped policy (data/rlweights/policy)
    nice -n 5 python bench/rlweights.py --budgets 10      # one budget
    nice -n 5 python bench/rlweights.py --train 12000     # train a fresh policy first
    nice -n 5 python bench/rlweights.py --model snapshot  # the first model's pairs and figures
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._args import check_out_path, write_csv_rows  # noqa: E402
from rlweights import pipeline  # noqa: E402
from rlweights.compare import versus  # noqa: E402
from rlweights.core.env import WeightLearningEnv  # noqa: E402
from rlweights.core.headroom import DEFAULT_HEADROOM_VECTORS, distribution, headroom  # noqa: E402

PAPER = {"vs_fixed_percent": 33, "vs_best_baseline_percent": 12}


def env_steps_per_second(scenarios, n: int = 60, seed: int = 0) -> tuple[float, float]:
    """Environment steps per second with random (uncached) weight vectors: per wall-clock
    second and per CPU second of this process (the machine is shared)."""
    env = WeightLearningEnv(scenarios, steps=n)
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    t, c = time.perf_counter(), time.process_time()
    for _ in range(n):
        env.step(rng.uniform(-1, 1, 7).astype(np.float32))
    return n / (time.perf_counter() - t), n / (time.process_time() - c)


def int_list(ap: argparse.ArgumentParser, text: str, flag: str, lo: int, hi: int) -> list[int]:
    """Comma-separated integers in ``lo..hi``; ``ap.error`` otherwise."""
    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        ap.error(f"{flag} must be comma-separated integers, got {text!r}")
    if not vals or any(not lo <= v <= hi for v in vals):
        ap.error(f"{flag} needs integers in {lo}..{hi}, got {text!r}")
    return vals


def per_seed_vs_equal(rows: list[dict], method: str, seeds: list[int]) -> dict[int, float]:
    """Per seed, the mean over pairs of ``method``'s improvement over equal weights (percent)."""
    out = {}
    for seed in seeds:
        x = [r["improvement_vs_equal_percent"] for r in rows
             if r["method"] == method and r["seed"] == seed and not r.get("skipped")]
        if x:
            out[seed] = float(np.mean(x))
    return out


def spread(per_seed: dict) -> dict:
    v = np.array(list(per_seed.values()), float)
    return {"mean": round(float(v.mean()), 2), "std_over_seeds": round(float(v.std()), 2),
            "per_seed": {str(k): round(x, 2) for k, x in per_seed.items()}}


def fmt(x, width=7):
    return f"{x:+{width}.2f}" if x is not None else " " * (width - 1) + "-"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policy", default=str(pipeline.SHIPPED_POLICY),
                    help="saved PPO policy to evaluate (default: the shipped one)")
    ap.add_argument("--train", type=int, default=0, help="train a fresh policy with this many steps (64..1000000) "
                    "instead of loading --policy (episodes of the first budget minus one steps; 0: do not train)")
    ap.add_argument("--model", choices=list(pipeline.SIM_MODELS), default=pipeline.DEFAULT_MODEL,
                    help="workload model (default serverless; snapshot: the first, simpler model)")
    ap.add_argument("--eval-seed", type=int, default=5, help="scenario seed of the unseen set (>= 0; training used 0)")
    ap.add_argument("--test-setups", type=int, default=4, help="unseen cluster setups (>= 1; default 4)")
    ap.add_argument("--test-workloads", type=int, default=3, help="unseen workloads per setup (>= 1; default 3)")
    ap.add_argument("--seeds", default="0,1,2", help="comma-separated evaluation seeds (default 0,1,2)")
    ap.add_argument("--budgets", default="10,20,50", help="comma-separated step budgets (each 2..100)")
    ap.add_argument("--budget", type=int, default=None, help="one budget (overrides --budgets)")
    ap.add_argument("--headroom-vectors", type=int, default=DEFAULT_HEADROOM_VECTORS,
                    help="weight vectors per (pair, seed) for the headroom (>= 1; default 300)")
    ap.add_argument("--headroom-seed", type=int, default=0, help="seed of the Sobol part of the headroom set")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "out" / "rlweights.csv"),
                    help="per-(method, pair, seed, budget) CSV (default bench/out/rlweights.csv)")
    ap.add_argument("--headroom-out", default=str(Path(__file__).resolve().parent / "out" / "rlweights_headroom.csv"),
                    help="per-(pair, seed) headroom CSV (default bench/out/rlweights_headroom.csv)")
    a = ap.parse_args()
    seeds = int_list(ap, a.seeds, "--seeds", 0, 2**31 - 1)
    budgets = [a.budget] if a.budget is not None else int_list(ap, a.budgets, "--budgets", 2, 100)
    if a.budget is not None and not 2 <= a.budget <= 100:
        ap.error(f"--budget must be in 2..100, got {a.budget}")
    if a.headroom_vectors < 1:
        ap.error(f"--headroom-vectors must be >= 1, got {a.headroom_vectors} (headroom is the best of these "
                 "vectors against equal weights, which are the first of them)")
    if a.train and not 64 <= a.train <= 1_000_000:
        ap.error("--train must be in 64..1000000 steps")
    if a.test_setups < 1 or a.test_workloads < 1:
        ap.error(f"--test-setups and --test-workloads must be >= 1, got {a.test_setups} and {a.test_workloads}")
    if a.eval_seed < 0 or a.headroom_seed < 0:
        ap.error(f"--eval-seed and --headroom-seed must be >= 0, got {a.eval_seed} and {a.headroom_seed}")
    if len(set(budgets)) != len(budgets):
        ap.error(f"--budgets names a budget twice: {a.budgets!r}")
    if not a.train:  # the two files load_policy reads: POLICY.zip and POLICY.json
        stem = Path(a.policy).with_suffix("") if a.policy.endswith(".zip") else Path(a.policy)
        missing = [str(f) for f in (Path(f"{stem}.zip"), Path(f"{stem}.json")) if not f.is_file()]
        if missing:
            ap.error(f"--policy {a.policy}: not a saved policy (missing {', '.join(missing)})")
    out_csv = check_out_path(ap, a.out)
    hr_csv = check_out_path(ap, a.headroom_out, "--headroom-out")

    policy = a.policy
    if a.train:  # the product's training (rlweights.pipeline.train), at the first budget
        learn = pipeline.LearnParams(mode="train", timesteps=a.train, budget=budgets[0], seed=0, model=a.model)
        train_set, _ = pipeline.build_scenarios(learn)
        policy = str(out_csv.with_name("rlweights_policy"))
        _, _, _, train_wall = pipeline.train(learn, train_set, save_to=policy)
    else:
        train_wall = None
    # the unseen set the pipeline evaluates with these parameters (same names: shared caches)
    evaluate = {"mode": "evaluate", "policy": policy, "seed": a.eval_seed, "test_setups": a.test_setups,
                "test_workloads": a.test_workloads, "eval_seeds": seeds, "model": a.model}
    _, test = pipeline.build_scenarios(pipeline.LearnParams(**evaluate))
    sps, sps_cpu = env_steps_per_second(test)
    for sc in test:
        sc._cache.clear()

    # headroom: every (pair, seed) the comparison evaluates, on the copies compare() will reuse
    caches: dict = {}
    hr_rows, t, c = [], time.perf_counter(), time.process_time()
    for base in test:
        for seed in seeds:
            sc = dataclasses.replace(base, seed=seed, _cache=caches.setdefault((base.name, seed), {}))
            h = headroom(sc, a.headroom_vectors, seed=a.headroom_seed)
            hr_rows.append({"scenario": h.scenario, "seed": seed, "headroom_percent": h.headroom_percent,
                            "equal_metric_s": h.equal_metric, "best_metric_s": h.best_metric,
                            "best_weights": " ".join(map(str, h.best_weights)), "best_kind": h.best_kind,
                            "best_index": h.best_index, "vectors": h.n_vectors, "skipped": h.skipped or ""})
    hr_wall, hr_cpu = time.perf_counter() - t, time.process_time() - c
    hr_evals = sum(len(v) for v in caches.values())
    per_pair = []
    for base in test:
        mine = [r for r in hr_rows if r["scenario"] == base.name]
        vals = [r["headroom_percent"] for r in mine if r["headroom_percent"] is not None]
        per_pair.append({"scenario": base.name, "mean_percent": round(float(np.mean(vals)), 2) if vals else None,
                         "per_seed": {str(r["seed"]): None if r["headroom_percent"] is None else round(r["headroom_percent"], 2)
                                      for r in mine},
                         "best_weights": {str(r["seed"]): [int(x) for x in r["best_weights"].split()] for r in mine},
                         "best_kind": {str(r["seed"]): r["best_kind"] for r in mine}})
    hr_by_key = {(r["scenario"], r["seed"]): r["headroom_percent"] for r in hr_rows}

    # the methods at each budget
    all_rows, by_budget = [], {}
    for b in budgets:
        run = pipeline.run({**evaluate, "budget": b}, caches=caches)
        wall = run["compare_wall_s"]
        rows = run["rows"]
        if train_wall is None:
            train_wall = run["policy_train_wall_s"]
        s = run["summary"]
        measured = [r for r in rows if not r.get("skipped")]
        methods = sorted({r["method"] for r in measured})
        mean_hr = np.mean([hr_by_key[(r["scenario"], r["seed"])] for r in measured if r["method"] == "equal"])
        vs_equal = {m: spread(per_seed_vs_equal(measured, m, seeds)) for m in methods}
        for m in methods:
            vs_equal[m]["share_of_headroom"] = (round(float(s["methods"][m]["mean_improvement_vs_equal_percent"] / mean_hr), 3)
                                                if mean_hr > 0 else None)
        vs = versus(measured, "ppo")
        by_budget[str(b)] = {
            "methods_vs_equal_percent": vs_equal,
            "ppo_vs_percent": {m: {"mean": round(v["mean"], 2), "std_over_seeds": round(v["std_over_seeds"], 2),
                                   "per_seed": {str(k): round(x, 2) for k, x in v["per_seed"].items()}}
                               for m, v in vs.items()},
            "best_baseline": s["best_baseline"],
            "ppo_vs_best_baseline_percent": round(vs[s["best_baseline"]]["mean"], 2),
            "ppo_vs_best_baseline_std_over_seeds": round(vs[s["best_baseline"]]["std_over_seeds"], 2),
            "compare_wall_s": round(wall, 1),
        }
        all_rows += [{"budget": b, **r, "best_weights": " ".join(map(str, r["best_weights"])), "skipped": r.get("skipped") or ""}
                     for r in rows]
    # the best-of-N set is a sample: every vector any method measured on the same (pair, seed) is
    # in its cache, so the best of all of them is a tighter lower bound of the true headroom
    for r in hr_rows:
        cache = caches[(r["scenario"], r["seed"])]
        w_any = min(cache, key=lambda k: (cache[k], k != (100,) * 7))
        eq = r["equal_metric_s"]
        r["best_measured_percent"] = 100.0 * (eq - cache[w_any]) / eq if eq > 0 else None
        r["best_measured_weights"] = " ".join(map(str, w_any))
        r["measured_vectors"] = len(cache)
    for pp in per_pair:
        vals = [r["best_measured_percent"] for r in hr_rows if r["scenario"] == pp["scenario"] and r["best_measured_percent"] is not None]
        pp["best_measured_mean_percent"] = round(float(np.mean(vals)), 2) if vals else None
    write_csv_rows(out_csv, all_rows)
    write_csv_rows(hr_csv, hr_rows)

    hr_pairs = distribution([p["mean_percent"] for p in per_pair])
    hr_all = distribution([r["headroom_percent"] for r in hr_rows])
    measured_pairs = distribution([p["best_measured_mean_percent"] for p in per_pair])
    beaten = sum(1 for r in all_rows if not r["skipped"]
                 and r["improvement_vs_equal_percent"] > hr_by_key[(r["scenario"], r["seed"])] + 1e-9)
    rnd = lambda d: {k: (round(v, 2) if isinstance(v, float) else v) for k, v in d.items()}  # noqa: E731
    result = {
        "bench": "rlweights",
        "model": a.model,
        "headroom": {"vectors_per_pair_seed": a.headroom_vectors, "sobol_seed": a.headroom_seed,
                     "sampling": "equal weights, 7 one-plugin-dominant corners, the other 120 corners of {1,100}^7, "
                                 "then scrambled Sobol points mapped uniformly to 1..100 (rlweights.core.headroom)",
                     "objective": "mean end-to-end latency, percent improvement over equal weights",
                     "per_pair": per_pair, "distribution_over_pairs": rnd(hr_pairs),
                     "distribution_over_pair_seeds": rnd(hr_all),
                     "best_measured_distribution_over_pairs": rnd(measured_pairs),
                     "method_rows_above_headroom": beaten, "method_rows": sum(1 for r in all_rows if not r["skipped"]),
                     "evaluations": hr_evals, "wall_s": round(hr_wall, 1),
                     "evals_per_s": round(hr_evals / hr_wall, 1), "evals_per_cpu_s": round(hr_evals / hr_cpu, 1)},
        "budgets": by_budget,
        "paper": PAPER,
        "unseen_scenarios": len(test), "seeds": seeds,
        "train_wall_s": None if train_wall is None else round(train_wall, 1),
        "env_steps_per_s": round(sps, 1), "env_steps_per_cpu_s": round(sps_cpu, 1),
        "csv": str(out_csv), "headroom_csv": str(hr_csv),
    }
    print_table(result, sys.stderr)
    print(json.dumps(result))


def print_table(r: dict, fh) -> None:
    """The human-readable form of the result (same numbers as the JSON)."""
    h = r["headroom"]
    seeds = [str(s) for s in r["seeds"]]
    p = lambda *x: print(*x, file=fh)  # noqa: E731
    p(f"Headroom ({r['model']} model): best of {h['vectors_per_pair_seed']} weight vectors vs equal weights, "
      "% of mean latency "
      f"({h['evaluations']} evaluations, {h['evals_per_s']}/s wall)")
    p(f"{'pair':28} {'mean':>7} " + " ".join(f"{'seed ' + s:>7}" for s in seeds) + f" {'any':>7}"
      f"   winning vector (seed {seeds[0]})")
    for pp in h["per_pair"]:
        p(f"{pp['scenario']:28} {fmt(pp['mean_percent'])} " + " ".join(fmt(pp["per_seed"].get(s)) for s in seeds)
          + f" {fmt(pp['best_measured_mean_percent'])}   {pp['best_weights'][seeds[0]]} ({pp['best_kind'][seeds[0]]})")
    p("(any: the best vector measured by anything in this run on the pair, mean over seeds; "
      f"{h['method_rows_above_headroom']} of {h['method_rows']} method rows beat the best-of-{h['vectors_per_pair_seed']})")
    for label, d in (("over pairs", h["distribution_over_pairs"]), ("over pairs x seeds", h["distribution_over_pair_seeds"]),
                     ("of 'any' over pairs", h["best_measured_distribution_over_pairs"])):
        if d["n"]:
            p(f"distribution {label} (n={d['n']}): min {d['min']:+.2f}  median {d['median']:+.2f}  "
              f"p90 {d['p90']:+.2f}  max {d['max']:+.2f}  mean {d['mean']:+.2f}")
    paper = r["paper"]
    for b, res in r["budgets"].items():
        p("")
        p(f"Budget {b}: improvement over equal weights and PPO against each method, % (mean +- std over seeds "
          f"{','.join(seeds)}; {r['unseen_scenarios']} unseen pairs)")
        p(f"{'method':16} {'vs equal':>8} {'+-':>5} {'of headroom':>11}   {'PPO vs it':>9} {'+-':>5}")
        for m, v in sorted(res["methods_vs_equal_percent"].items(), key=lambda kv: -kv[1]["mean"]):
            share = v["share_of_headroom"]
            vs = res["ppo_vs_percent"].get(m)
            p(f"{m:16} {v['mean']:+8.2f} {v['std_over_seeds']:5.2f} {'-' if share is None else f'{share:.2f}':>11}   "
              + (f"{vs['mean']:+9.2f} {vs['std_over_seeds']:5.2f}" if vs else f"{'':>9} {'':>5}"))
        ppo = res["methods_vs_equal_percent"]["ppo"]
        p(f"PPO vs fixed (equal) weights {ppo['mean']:+.2f} (paper +{paper['vs_fixed_percent']}%); "
          f"PPO vs the best baseline ({res['best_baseline']}) {res['ppo_vs_best_baseline_percent']:+.2f} "
          f"+- {res['ppo_vs_best_baseline_std_over_seeds']:.2f} (paper +{paper['vs_best_baseline_percent']}%); "
          f"compare {res['compare_wall_s']} s")


if __name__ == "__main__":
    main()
