"""DOPpler against MetaSchedule's defaults, side by side in one run.

For each model: tune the SAME tasks (the ``--tasks N`` heaviest by weight x FLOP, the rule of
``manage.py tune --max-tasks``) with the SAME trial budget, batch size, seed, target, thread
count and task scheduler (``round-robin``, ``--trials`` per task) twice, each tuning one call of
the product's pipeline (:func:`tuning.pipeline.run`, as ``manage.py tune`` runs it):

* ``local``: MetaSchedule's ``LocalBuilder`` + ``LocalRunner`` (Tandem's runner "local");
* ``doppler``: DOPpler's warm build workers + parallel runner (Tandem's runner "doppler").

Each tuning's wall time is split by the pipeline's own runner-neutral round accounting
(:func:`tune_once`: build = inside ``Builder.build``, measurement = inside ``Runner.run`` plus
blocked on its futures, search = the rest of each round, setup = making the runner, DOPpler's
warm-up of its workers). The pipeline's own whole-model measurement is skipped
(``TuningHooks(measure_model=False)``): instead the bench imports and extracts the model once
with the pipeline's functions, compiles it with each arm's database and times both arms
alternately (A B B A) in fresh subprocesses (median of ``--repeats`` runs), and times the tuned
subset's kernels of both arms interleaved in one subprocess. PyTorch eager is timed in the same
passes (``eager_median_s``, ``local_vs_eager``, ``doppler_vs_eager``): whether the budget reaches
it. Figures: total tuning wall-time ratio (doppler / local), measurement-phase ratio, final
latency ratio (end to end and subset), the split for both, DOPpler's DOP trajectory.
``--tasks all`` tunes every task of the model (the whole-model comparison of issue 20).

Prints ONE JSON line and writes a CSV (one row per model x runner) to ``--out``.
Example: ``nice -n 10 python bench/tuning_parallel.py --models resnet18,mobilenet_v2 --tasks 2
--trials 32 --trials-per-round 8``.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings.dev")


def warm_parent(extracted, selected, threads: int, seed: int, work_dir: Path) -> float:
    """Pay the tuning process's one-time costs before either arm is timed: registering the
    target's TVM tensor intrinsics as the product does (:mod:`tuning.backends.intrinsics`; all
    backends' took 80-95 s on this loaded 2-core machine, otherwise charged to the search of
    whichever arm tunes first) and xgboost,
    and generating the selected tasks' design spaces once. A long-lived tuning worker pays these
    once per process, not per tuning. Returns the seconds it took."""
    from tuning.backends.intrinsics import import_tensor_intrinsics, intrinsic_modules
    from tuning.pipeline import tune_contexts

    t0 = time.perf_counter()
    import_tensor_intrinsics(intrinsic_modules(extracted[selected[0]].target.export()))  # as the product does
    import xgboost  # noqa: F401

    contexts, _ = tune_contexts([extracted[i] for i in selected], work_dir, threads, seed)
    for ctx in contexts:
        ctx.space_generator.generate_design_space(ctx.mod)
    return time.perf_counter() - t0


def tune_once(runner_name: str, model_name: str, expected_hashes: list[str], threads: int, args,
              work_dir: Path) -> dict:
    """Tune ``model_name``'s ``--tasks`` heaviest tasks with runner ``runner_name`` through the
    product's pipeline (:func:`tuning.pipeline.run`, scheduler ``round-robin``, ``--trials`` per
    task, no whole-model measurement: the arms are timed together afterwards), reading the
    runner's own summary at the pipeline's ``on_end`` hook. Times (seconds, from the pipeline's
    energy meter, which starts just before the runner is made): ``total_s`` up to the end of
    ``tune_tasks``; the pipeline's per-round ``search``/``build``/``measure`` split (build =
    inside ``Builder.build``, measurement = inside ``Runner.run`` plus blocked on its futures,
    search = the rest of each round, :mod:`tuning.backends.callbacks`); ``setup_s`` = the rest
    (making the runner and scheduler: DOPpler's warm-up of its workers). Raises
    ``RuntimeError`` when the pipeline tuned other tasks than ``expected_hashes`` (the parent's
    selection)."""
    from tuning import pipeline
    from tuning.backends import database as dbmod
    from tuning.backends.options import validate_options
    from webapp.plug import Collect, no_report

    options: dict = {}
    if runner_name == "doppler":
        options["doppler"] = json.loads(args.doppler_options)
    validate_options(options, threads, scheduler="round-robin", runner=runner_name, target_kind="llvm")
    seen: dict = {}

    def on_end(start):
        seen["total_s"] = start.meter.read().seconds
        seen["engine"] = start.runner.engine.summary() if hasattr(start.runner, "engine") else None

    n_tasks = len(expected_hashes)  # the parent's selection (``--tasks all``: every task)
    params = {"model": model_name, "target": "llvm", "num_threads": threads, "trials": args.trials * n_tasks,
              "max_trials_per_task": args.trials, "trials_per_round": args.trials_per_round, "max_tasks": n_tasks,
              "runner": runner_name, "scheduler": "round-robin", "cost_model": "xgb", "seed": args.seed,
              "options": options, "work_dir": str(work_dir), "lock_dir": str(work_dir.parent / f"{work_dir.name}-locks")}
    rows = Collect()
    summary = pipeline.run(params, report=no_report, record=rows, hooks=pipeline.TuningHooks(on_end=on_end,
                                                                                              measure_model=False))
    tuned = sorted(str(t["workload_hash"]) for t in rows.rows["tasks"])
    if tuned != sorted(expected_hashes):
        raise RuntimeError(f"{model_name}/{runner_name}: the pipeline tuned tasks {tuned}, the parent selected "
                           f"{sorted(expected_hashes)}")
    rounds = rows.rows.get("rounds", [])
    names = {t["task_index"]: t["name"] for t in rows.rows["tasks"]}
    split = {k: float(summary[k]) for k in ("search_seconds", "build_seconds", "measure_seconds")}
    best: dict[str, float] = {}
    for r in rounds:
        if r["best_seconds"] is not None:
            name = names[r["task_index"]]
            best[name] = min(best.get(name, float("inf")), float(r["best_seconds"]))
    return {"total_s": seen["total_s"], **split, "setup_s": seen["total_s"] - sum(split.values()),
            "rounds": len(rounds), "trials": sum(len(r["candidates"]) for r in rounds),
            "errors": sum(r["num_errors"] for r in rounds), "best_task_seconds": best,
            "database": dbmod.open_database(work_dir), "engine": seen["engine"],
            "dop_per_round": ([(r["details"].get("doppler") or {}).get("dop") for r in rounds]
                              if runner_name == "doppler" else None)}


def build_best_kernels(database, extracted, selected, target, out_dir: Path) -> list[dict]:
    """For each selected task, the best schedule in ``database`` built into ``out_dir`` as a shared
    library (as MetaSchedule's builder does). Returns ``[{"task", "weight", "lib", "args_info"}]``;
    a task without a record is left out (raises nothing)."""
    import tvm
    from tvm.driver import build as tvm_build
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    out_dir.mkdir(parents=True, exist_ok=True)
    tvm_target = tvm.target.Target(target)
    kernels = []
    for i in selected:
        task = extracted[i]
        sch = database.query_schedule(task.dispatched[0], tvm_target, workload_name="main")
        if sch is None:
            continue
        mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(sch.mod)
        lib = out_dir / f"task{i}.so"
        tvm_build(mod, target=tvm_target).export_library(str(lib))
        kernels.append({"task": task.task_name, "weight": int(task.weight), "lib": str(lib),
                        # the kernel's own arguments, as MetaSchedule's runner takes them: with weight
                        # prepacking the weights come in the rewritten layout
                        "args_info": [a.as_json() for a in ArgInfo.from_entry_func(sch.mod, remove_preproc=True)]})
    return kernels


def _time_kernels_here(spec: list[list[dict]], repeats: int) -> list[list[float]]:
    """(Subprocess side.) ``spec``: one list of kernels per arm. Takes ``repeats`` samples of every
    kernel, each one timed repeat of >= 50 ms after a warm-up run, visiting the arms in
    alternating order (A B, B A, ...) so that load drift hits every arm alike. Returns the median
    seconds per kernel, one list per arm."""
    import statistics

    import tvm
    from tvm.s_tir.meta_schedule.runner.utils import alloc_argument_common

    dev = tvm.cpu(0)
    f_fill = tvm.get_global_func("tvm.contrib.random.random_fill_for_measure")
    evaluators = []
    for arm in spec:
        evs = []
        for k in arm:
            mod = tvm.runtime.load_module(k["lib"])
            args = alloc_argument_common(f_fill, dev, k["args_info"], 1)[0]
            evs.append((mod.time_evaluator(mod.entry_name, dev, number=1, repeat=1, min_repeat_ms=50), args))
        evaluators.append(evs)
    samples = [[[] for _ in arm] for arm in spec]
    for r in range(repeats):
        arms = list(range(len(spec)))
        for a in (arms if r % 2 == 0 else arms[::-1]):
            for j, (ev, args) in enumerate(evaluators[a]):
                samples[a][j].append(float(ev(*args).mean))
    return [[float(statistics.median(x)) for x in arm] for arm in samples]


def time_kernels(kernels: list[list[dict]], threads: int, repeats: int) -> list[list[float]]:
    """Median seconds of every kernel of :func:`build_best_kernels`, one list per arm, measured in
    ONE fresh subprocess with ``threads`` TVM threads, arms interleaved (see
    :func:`_time_kernels_here`). Raises ``RuntimeError`` with its stderr on failure."""
    env = dict(os.environ, TVM_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    proc = subprocess.run([sys.executable, __file__, "--time-kernels", json.dumps(kernels), "--repeats", str(repeats)],
                          env=env, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"kernel timing failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _check_args(ap: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse bad values before anything is tuned (``ap.error``: one line, exit 2)."""
    from _args import check_out_path, check_torchvision_models

    for name in ("trials", "trials_per_round", "repeats"):  # --tasks: checked by its type
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.threads is not None and args.threads < 1:
        ap.error("--threads must be >= 1")
    if args.seed < 0:
        ap.error("--seed must be >= 0")
    order = [x.strip() for x in args.order.split(",")]
    if sorted(order) != ["doppler", "local"]:
        ap.error(f"--order must name local and doppler once each, e.g. local,doppler; got {args.order!r}")
    try:
        opts = json.loads(args.doppler_options)
    except json.JSONDecodeError as err:
        ap.error(f"--doppler-options is not JSON: {err}")
    import django

    django.setup()
    from tuning.backends.doppler import engine_settings
    from tuning.backends.targets import available_cores

    try:
        engine_settings(opts, args.threads or available_cores())
    except ValueError as err:
        ap.error(f"--doppler-options: {err}")
    check_torchvision_models(ap, args.models)
    check_out_path(ap, args.out)


def main(argv: list[str] | None = None) -> None:
    from _args import ALL_TASKS, task_count

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="resnet18,mobilenet_v2")
    ap.add_argument("--tasks", type=task_count, default=1,
                    help="heaviest tasks per model (weight x FLOP), or 'all' for the whole model")
    ap.add_argument("--trials", type=int, default=64, help="trials per task")
    ap.add_argument("--trials-per-round", type=int, default=16)
    ap.add_argument("--threads", type=int, default=None, help="measurement threads (default: all cores)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=10, help="latency repeats per pass (two passes per arm)")
    ap.add_argument("--time-kernels", default=None, help=argparse.SUPPRESS)  # subprocess side of time_kernels
    ap.add_argument("--doppler-options", default="{}", help="JSON of DOPpler options, e.g. '{\"devices\": \"cpu\"}'")
    ap.add_argument("--order", default="local,doppler", help="which runner tunes first (alternate it to expose load drift)")
    ap.add_argument("--out", default=str(REPO / "bench" / "out" / "tuning_parallel.csv"))
    args = ap.parse_args(argv)
    if args.time_kernels is not None:
        print(json.dumps(_time_kernels_here(json.loads(args.time_kernels), args.repeats)))
        return
    _check_args(ap, args)

    import django

    django.setup()
    from tuning.backends.components import set_num_threads
    from tuning.backends.targets import available_cores, make_target

    threads = args.threads or available_cores()
    set_num_threads(threads)
    target = make_target("llvm", threads)
    load1 = os.getloadavg()[0]
    rows, summary = [], {"target": target, "threads": threads, "trials_per_task": args.trials,
                         "trials_per_round": args.trials_per_round, "seed": args.seed,
                         "tasks_per_model": "all" if args.tasks == ALL_TASKS else args.tasks,
                         "loadavg_1m_start": load1, "models": {}}
    root = Path(tempfile.mkdtemp(prefix="bench-doppler-"))
    try:
        _run_models(args, root, threads, target, rows, summary)
    finally:  # the arms' databases and libraries (tens of MB per model) are not results
        shutil.rmtree(root, ignore_errors=True)
    summary["loadavg_1m_end"] = os.getloadavg()[0]
    from _args import write_csv_rows

    write_csv_rows(args.out, rows)
    print(json.dumps(summary, default=str))


def _run_models(args, root: Path, threads: int, target, rows: list, summary: dict) -> None:
    """Tune and time every ``--models`` model (both arms), appending its CSV rows to ``rows``
    and its figures to ``summary["models"]``; work files under ``root``."""
    import tvm
    import tvm_ffi

    from tuning.backends.frontends import build_with_database, prepare_for_tuning
    from tuning.backends.latency import measure_in_subprocess
    from tuning.pipeline import extract_tasks, load_model, select_tasks, weight_prepack_for

    for name in [m.strip() for m in args.models.split(",") if m.strip()]:
        model = load_model({"model": name})  # the product's import (in a child process)
        prepack = weight_prepack_for({}, target)  # the product's default, the same tasks for both arms
        extracted = extract_tasks(model, target, prepack)  # the product's extraction and selection
        prepared = prepare_for_tuning(model.mod, prepack)  # the product's final-build pipeline
        tvm_target = tvm.target.Target(target)
        selected = select_tasks(extracted, args.tasks)
        res, libs, kernels = {}, {}, {}
        order = [r.strip() for r in args.order.split(",") if r.strip()]
        if sorted(order) != ["doppler", "local"]:
            raise SystemExit(f"--order must name local and doppler once each, not {args.order!r}")
        hashes = [str(int(tvm_ffi.structural_hash(extracted[i].dispatched[0])) & 0xFFFFFFFFFFFFFFFF) for i in selected]
        warm_s = warm_parent(extracted, selected, threads, args.seed, root / name / "warm")
        for runner_name in order:
            r = tune_once(runner_name, name, hashes, threads, args, root / name / runner_name)
            db = r.pop("database")
            ex = build_with_database(prepared, tvm_target, db, prepack)
            libs[runner_name] = root / name / f"{runner_name}.so"
            ex.export_library(str(libs[runner_name]))
            kernels[runner_name] = build_best_kernels(db, extracted, selected, target, root / name / f"{runner_name}-kernels")
            res[runner_name] = r
        # final latency: same procedure for both arms, alternating (A B B A) against load drift
        # and PyTorch eager (the same procedure, between the arms) as the bar the budget must reach
        e2e = {k: [] for k in order}
        eager = []
        subset = {k: [] for k in order}
        for pass_order in (order, order[::-1]):
            for j, runner_name in enumerate(pass_order):
                lat = measure_in_subprocess("tvm", str(libs[runner_name]), model.input_shapes, model.input_dtypes,
                                            threads=threads, repeats=args.repeats, device="cpu")
                e2e[runner_name].append(lat["median_s"])
                if j == 0:
                    eager.append(measure_in_subprocess("torch", name, model.input_shapes, model.input_dtypes,
                                                       threads=threads, repeats=args.repeats,
                                                       device="cpu")["median_s"])
            # tuned subset: both arms' kernels in one subprocess, interleaved
            meds = time_kernels([kernels[rn] for rn in pass_order], threads, args.repeats)
            for runner_name, med in zip(pass_order, meds):
                subset[runner_name].append(sum(k["weight"] * m for k, m in zip(kernels[runner_name], med)))
                for k, m in zip(kernels[runner_name], med):
                    k.setdefault("median_s", []).append(m)
        for runner_name in order:
            r = res[runner_name]
            r["latency_median_s"] = sum(e2e[runner_name]) / len(e2e[runner_name])
            r["latency_passes_s"] = e2e[runner_name]
            r["subset_weighted_s"] = sum(subset[runner_name]) / len(subset[runner_name])
            r["subset_passes_s"] = subset[runner_name]
            r["subset_kernels"] = [{k2: v for k2, v in k.items() if k2 not in ("lib", "args_info")}
                                   for k in kernels[runner_name]]
            rows.append({"model": name, "runner": runner_name, "tasks": ",".join(extracted[i].task_name for i in selected),
                         **{k: r[k] for k in ("total_s", "search_seconds", "build_seconds", "measure_seconds", "setup_s",
                                              "rounds", "trials", "errors")},
                         "latency_median_s": r["latency_median_s"], "subset_weighted_s": r["subset_weighted_s"],
                         "dop_per_round": json.dumps(r["dop_per_round"]) if r["dop_per_round"] else ""})
        loc, dop = res["local"], res["doppler"]
        keys = ("total_s", "search_seconds", "build_seconds", "measure_seconds", "setup_s", "rounds", "trials", "errors",
                "latency_median_s", "latency_passes_s", "subset_weighted_s", "subset_passes_s", "subset_kernels",
                "best_task_seconds")
        summary["models"][name] = {
            "tasks": [extracted[i].task_name for i in selected], "parent_warm_up_s": warm_s, "order": order,
            "weights": [int(extracted[i].weight) for i in selected],
            "total_ratio": dop["total_s"] / loc["total_s"],
            "measure_ratio": dop["measure_seconds"] / loc["measure_seconds"] if loc["measure_seconds"] else None,
            "build_ratio": dop["build_seconds"] / loc["build_seconds"] if loc["build_seconds"] else None,
            "search_ratio": dop["search_seconds"] / loc["search_seconds"] if loc["search_seconds"] else None,
            "latency_ratio_e2e": dop["latency_median_s"] / loc["latency_median_s"],
            "eager_median_s": sum(eager) / len(eager), "eager_passes_s": eager,
            "local_vs_eager": loc["latency_median_s"] / (sum(eager) / len(eager)),
            "doppler_vs_eager": dop["latency_median_s"] / (sum(eager) / len(eager)),
            "latency_ratio_subset": dop["subset_weighted_s"] / loc["subset_weighted_s"] if loc["subset_weighted_s"] else None,
            "local": {k: loc[k] for k in keys},
            "doppler": {k: dop[k] for k in keys} | {"dop_per_round": dop["dop_per_round"], "engine": dop["engine"]},
        }
        # partial result per model (stderr), so a long run that is stopped still reports
        print(json.dumps({"model": name, **summary["models"][name]}, default=str), file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
