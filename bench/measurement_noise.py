"""How far one kernel's measured run time moves between measurement sessions on this machine,
against its spread inside one session, and how much of that comparing two kernels timed back to
back removes (issue 6: why single Trimmer-vs-baseline runs cannot show a 3 % latency target here).

What it measures
----------------
Two real kernels of the heaviest task of ``--model`` (the product's extraction and selection,
as ``bench/tuning_energy.py``: largest weight x FLOP), each the MetaSchedule design space of the LLVM target sampled with a
different random state (``post-order-apply``, then the space's postprocessors), built once. Then,
like DOPpler's measurement worker (``tuning.backends.doppler.worker.measure_in_worker``), one
**session** per kernel and step: fresh random arguments, one timed repeat of at least
``--min-repeat-ms`` that fixes the number of runs per repeat, then ``--repeats - 1`` more;
``--sessions`` steps, the two kernels' sessions back to back (A, B, A, B, ...), ``--gap-s`` of
idle between steps (a tuning round measures one kernel every few hundredths of a second, but a
task's best and a later round's candidates are measured minutes apart). Last, one
**continuous** session per kernel of ``--sessions x --repeats`` repeats back to back.

Figures (per kernel)
--------------------
within_session_cv     median over sessions of the repeats' standard deviation / mean
between_session_p90_p10
                      90th over 10th percentile of the session means (the mean of a session is
                      what a MetaSchedule tuning record's ``run_secs`` average to)
between_session_max_min
                      largest over smallest session mean
continuous_p90_p10    the same percentiles over the continuous session's repeats
and for the pair (row ``A/B``): ``median_ratio`` and ``paired_ratio_p90_p10`` /
``paired_ratio_max_min``, the same spreads of the per-step ratio mean(A) / mean(B), i.e. how stable a comparison of the two kernels is when both are timed
within a fraction of a second of each other; against the kernels' own between-session figures it
shows how much of the spread is the machine's speed moving, not the kernels.

DOPpler's own measurement (row ``B doppler``)
---------------------------------------------
Kernel B measured ``--sessions`` times by DOPpler's measurement function itself
(``tuning.backends.doppler.worker.measure_in_worker``, in this process, the kernel exported as a
shared library as the runner's build workers do). ``between_session_p90_p10`` / ``max_min`` of
the means it returns (what a tuning record holds) say how far one candidate's recorded time moves
between two measurements of it. (Until 2026-12-04 this row had a ``paired`` twin, DOPpler's paired
timing, since removed: docs/engines/tuning.md, "Paired timing (removed)".)

Usage (about 2 minutes; run it alone or under ``flock /tmp/tandem-bench.lock``):
  python bench/measurement_noise.py --model mobilenet_v2 --sessions 40
Prints one JSON line; writes bench/out/measurement_noise.csv (one row per kernel and one for the
pair) and bench/out/measurement_noise.json (every session's repeats).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from _args import check_out_path, check_torchvision_models, write_csv_rows  # noqa: E402


def sample_kernel(task_mod, target, rand_state: int):
    """One schedule of the task's design space (post-order-apply, random decisions from
    ``rand_state``) with the space's postprocessors applied, built for ``target``.
    Returns (runtime module, args info as JSON). Raises RuntimeError if no postprocessed
    schedule is valid."""
    from tvm.driver import build as tvm_build
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    ctx = ms.TuneContext(mod=task_mod, target=target, space_generator="post-order-apply",
                         search_strategy="evolutionary", num_threads=1, rand_state=rand_state)
    for sch in ctx.generate_design_space():
        if all(p.apply(sch) for p in ctx.space_generator.postprocs):
            mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(sch.mod)
            rt = tvm_build(mod, target=target)
            # the scheduled module's arguments, as MetaSchedule's runner gets them: with weight
            # prepacking the schedule picks its own weight layout
            args_info = [a.as_json() for a in ms.arg_info.ArgInfo.from_entry_func(sch.mod, remove_preproc=True)]
            return rt, args_info
    raise RuntimeError(f"no design space of rand_state {rand_state} passed the postprocessors")


def session(rt, args_info, repeats: int, min_repeat_ms: int) -> list[float]:
    """One DOPpler-like measurement session: fresh random arguments, one timed repeat of at least
    ``min_repeat_ms`` (TVM picks the runs per repeat), then ``repeats - 1`` more with that number
    of runs. Returns seconds per run of each repeat, shape (repeats,)."""
    import math

    import tvm
    from tvm.s_tir.meta_schedule.runner.utils import alloc_argument_common

    dev = tvm.cpu(0)
    f_fill = tvm.get_global_func("tvm.contrib.random.random_fill_for_measure")
    args = alloc_argument_common(f_fill, dev, args_info, 1)[0]
    first = rt.time_evaluator(rt.entry_name, dev, number=1, repeat=1, min_repeat_ms=min_repeat_ms)
    costs = [float(c) for c in first(*args).results]
    if repeats > 1:
        number = max(1, math.ceil(min_repeat_ms / max(costs[0] * 1e3, 1e-6)))
        more = rt.time_evaluator(rt.entry_name, dev, number=number, repeat=repeats - 1, min_repeat_ms=0)
        costs.extend(float(c) for c in more(*args).results)
    return costs


def doppler_sessions(kernels: dict, args) -> list[list[float]]:
    """Kernel B measured ``args.sessions`` times (``args.gap_s`` apart) by DOPpler's measurement
    function itself (:func:`tuning.backends.doppler.worker.measure_in_worker`, in this process,
    the kernel exported as a shared library as the runner's build workers do, the screen off).
    Returns per session the run seconds per repeat (what a tuning record's ``run_secs`` would
    hold), shape (sessions, repeats)."""
    import tempfile

    from tuning.backends.doppler import worker
    from tuning.backends.doppler.slots import SlotSpec
    from tuning.core.doppler import DopplerConfig

    cfg = DopplerConfig()
    path = str(Path(tempfile.mkdtemp(prefix="measurement-noise-")) / "B.so")
    kernels["B"][0].export_library(path)
    worker._WORKER["slot"] = SlotSpec(kind="cpu", name="cpu", num_threads=args.threads)
    evalcfg = {"min_repeat_ms": args.min_repeat_ms, "min_repeats": cfg.min_repeats, "max_repeats": args.repeats,
               "ci_rel_halfwidth": cfg.ci_rel_halfwidth, "screen_ratio": 0.0, "best_s": None}
    out: list[list[float]] = []
    for _ in range(args.sessions):
        time.sleep(args.gap_s)
        costs, _ = worker.measure_in_worker(path, "cpu", kernels["B"][1], evalcfg)
        out.append(costs)
    return out


def spread(values) -> dict:
    """p90/p10 and max/min of positive values (shape (n,), n >= 2)."""
    import numpy as np

    x = np.asarray(values, dtype=float)
    p10, p90 = np.percentile(x, [10, 90])
    return {"p90_p10": float(p90 / p10), "max_min": float(x.max() / x.min())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="mobilenet_v2", help="torchvision model whose heaviest task is measured (default: %(default)s)")
    ap.add_argument("--threads", type=int, default=2, help="TVM runtime threads (default: %(default)s, as bench/tuning_energy.py)")
    ap.add_argument("--sessions", type=int, default=40, help="measurement sessions per kernel (default: %(default)s)")
    ap.add_argument("--repeats", type=int, default=6, help="timed repeats per session, >= 2 (default: %(default)s, DOPpler's max_repeats)")
    ap.add_argument("--min-repeat-ms", type=int, default=10, help="floor of one repeat, ms (default: %(default)s, DOPpler's)")
    ap.add_argument("--gap-s", type=float, default=0.5, help="idle seconds between two steps (default: %(default)s)")
    ap.add_argument("--out", default=str(REPO / "bench" / "out" / "measurement_noise.csv"))
    args = ap.parse_args()
    for name in ("threads", "min_repeat_ms"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.repeats < 2:
        ap.error("--repeats must be >= 2 (the within-session spread needs two)")
    if args.sessions < 2:
        ap.error("--sessions must be >= 2")
    if not (args.gap_s >= 0 and args.gap_s < 3600):
        ap.error("--gap-s must be in [0, 3600)")
    model = check_torchvision_models(ap, args.model, "--model")
    if len(model) != 1:
        ap.error("--model takes one model")
    out_csv = check_out_path(ap, args.out)
    # the kernels' threads are fixed before TVM's runtime starts its thread pool
    os.environ["TVM_NUM_THREADS"] = str(args.threads)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)

    import numpy as np
    import tvm

    from tuning_energy import fixed_subset, host_target

    target_json = host_target(args.threads)
    target = tvm.target.Target(target_json)
    (task, flop), = fixed_subset(model[0], target_json, 1)
    print(f"# {model[0]}: {task.task_name} ({flop / 1e6:.0f} MFLOP), target {target_json}", file=sys.stderr, flush=True)
    kernels = {name: sample_kernel(task.dispatched[0], target, rs) for name, rs in (("A", 0), ("B", 1))}
    for rt, info in kernels.values():
        session(rt, info, 1, args.min_repeat_ms)  # first load and first run outside the figures
    sessions: dict[str, list[list[float]]] = {"A": [], "B": []}
    for step in range(args.sessions):
        time.sleep(args.gap_s)
        for name, (rt, info) in kernels.items():
            sessions[name].append(session(rt, info, args.repeats, args.min_repeat_ms))
        if (step + 1) % 10 == 0:
            print(f"# {step + 1}/{args.sessions} steps", file=sys.stderr, flush=True)
    continuous = {name: session(rt, info, args.sessions * args.repeats, args.min_repeat_ms)
                  for name, (rt, info) in kernels.items()}
    doppler = doppler_sessions(kernels, args)

    rows, detail = [], {"model": model[0], "task": str(task.task_name), "target": target_json, "args": vars(args),
                        "sessions_s": sessions, "continuous_s": continuous, "doppler_s": doppler}
    blank = {"median_session_mean_ms": "", "within_session_cv": "", "between_session_p90_p10": "",
             "between_session_max_min": "", "continuous_p90_p10": "", "median_ratio": "",
             "paired_ratio_p90_p10": "", "paired_ratio_max_min": ""}
    for name in kernels:
        means = [float(np.mean(s)) for s in sessions[name]]
        cvs = [float(np.std(s, ddof=1) / np.mean(s)) for s in sessions[name]]
        between, cont = spread(means), spread(continuous[name])
        rows.append({"kernel": name, **blank, "median_session_mean_ms": round(float(np.median(means)) * 1e3, 5),
                     "within_session_cv": round(float(np.median(cvs)), 4),
                     "between_session_p90_p10": round(between["p90_p10"], 4),
                     "between_session_max_min": round(between["max_min"], 4),
                     "continuous_p90_p10": round(cont["p90_p10"], 4)})
    ratios = [float(np.mean(a) / np.mean(b)) for a, b in zip(sessions["A"], sessions["B"])]
    pr = spread(ratios)
    rows.append({"kernel": "A/B", **blank, "median_ratio": round(float(np.median(ratios)), 5),
                 "paired_ratio_p90_p10": round(pr["p90_p10"], 4), "paired_ratio_max_min": round(pr["max_min"], 4)})
    means = [float(np.mean(c)) for c in doppler]
    between = spread(means)
    rows.append({"kernel": "B doppler", **blank,
                 "median_session_mean_ms": round(float(np.median(means)) * 1e3, 5),
                 "within_session_cv": round(float(np.median([np.std(c, ddof=1) / np.mean(c)
                                                             for c in doppler if len(c) > 1] or [0.0])), 4),
                 "between_session_p90_p10": round(between["p90_p10"], 4),
                 "between_session_max_min": round(between["max_min"], 4)})
    write_csv_rows(out_csv, rows)
    out_csv.with_suffix(".json").write_text(json.dumps(detail))
    print(json.dumps({"model": model[0], "task": str(task.task_name), "rows": rows}))


if __name__ == "__main__":
    main()
