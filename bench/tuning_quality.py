"""What a tuned model is worth: whole-model latency after a wall-clock tuning budget, against
the untuned build, PyTorch eager and onnxruntime, side by side in one run (issue 20).

For each model (torchvision, batch 1, 3x224x224, random weights: latency does not depend on
weight values) the benchmark runs the product's pipeline, :func:`tuning.pipeline.run`, exactly
as ``manage.py tune --model M --target llvm --threads T --trials-per-round B --runner R`` would:
the product's import, every task of the model (no ``max_tasks``), weight prepacking, the
``gradient`` scheduler (Ansor's allocation over every task, each task one round first), the
MetaSchedule JSON database round by round. The trial budget is large
(``--trials``, default 20,000 per model); what binds is **time**: ``--minutes`` of tuning, counted
from the start of ``tune_tasks`` (the pipeline's ``on_start`` hook). When a measured round ends
past the budget, the benchmark's ``report`` raises :class:`webapp.plug.Cancelled`, as an API
cancel does: the pipeline stops at that batch, keeping every record. A second call of the
pipeline on the same database with ``trials`` equal to the records it holds (what
``manage.py tune --resume`` does after a cancel) has nothing left to tune and measures the
model: the tuned build (database applied), the untuned build (same pipeline, empty database)
with and without ``mcpu``, PyTorch eager and onnxruntime (CPU execution provider,
``intra_op_num_threads`` = threads), each in a subprocess of its own with the same threads,
**interleaved** (:func:`tuning.pipeline.measure_result`; ``--repeats`` timings each, median and
quartiles). So every number in the table comes from one procedure on one machine in one run.

Figures per model: ``tuned_ms``, ``untuned_ms`` (``mcpu`` named), ``untuned_no_mcpu_ms``,
``eager_ms``, ``onnxruntime_ms`` (medians; ``*_p25_ms``/``*_p75_ms`` quartiles in the CSV),
``tuned_vs_eager`` = tuned / eager median (the issue's bar: at most 1.5, goal at most 1.0),
``tuned_vs_onnxruntime`` = tuned / onnxruntime median, ``tasks_tuned`` of ``tasks_in_model``,
``trials`` (records in the database), ``rounds``, ``tuning_minutes`` (wall, up to the stop).

Usage::

    flock /tmp/tandem-bench.lock nice -n 5 env PYTHONPATH=. .venv/bin/python bench/tuning_quality.py \\
        --models resnet18,mobilenet_v2 --minutes 60
    # later, on a quiet machine, if the tuning hour was not quiet:
    ... bench/tuning_quality.py --models resnet18,mobilenet_v2 --measure-only

Arguments are checked before anything is tuned (``ap.error``, exit 2). Output: one table on
stdout, progress on stderr, the CSV at ``--out`` (default ``bench/out/tuning_quality.csv``), the
databases under ``--work-dir`` (default ``bench/out/tuning_quality/``; an existing model folder
there is refused unless ``--resume``, which continues tuning it for another ``--minutes``).
Right after tuning, ``<work-dir>/<model>.tuning.json`` keeps the tuning's figures (wall time, why
it stopped, rounds, tasks). ``--measure-only`` skips tuning and measures the databases already in
``--work-dir`` with those figures: the measurement (a few minutes) can then be taken on a quiet
machine even when the hour of tuning could not be (load during tuning only costs trials, so
it makes the tuned figure conservative; load during the measurement distorts every peer
differently: one run here measured PyTorch eager at 306 ms beside 62 ms for onnxruntime).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

#: Peers of the table, in its column order (keys of :func:`tuning.pipeline.measure_result`).
PEERS = ("tuned", "untuned", "untuned_no_mcpu", "eager", "onnxruntime")


def log(msg: str) -> None:
    """A progress line on stderr, with the wall-clock time."""
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def tuning_params(model: str, args, work_dir: Path, trials: int) -> dict:
    """The pipeline parameters of one model's tuning (the product's defaults apart from the
    arguments named here); options are checked by the product's validator."""
    from tuning.backends.options import validate_options

    options: dict = {}
    if args.runner == "local":
        options["builder_workers"] = args.builder_workers
    validate_options(options, args.threads, scheduler="gradient", runner=args.runner, target_kind="llvm")
    return {"model": model, "target": "llvm", "num_threads": args.threads, "trials": trials,
            "trials_per_round": args.trials_per_round, "runner": args.runner, "scheduler": "gradient",
            "cost_model": "xgb", "seed": args.seed, "repeats": args.repeats, "measure_eager": True,
            "measure_onnxruntime": True, "options": options, "work_dir": str(work_dir),
            "lock_dir": str(work_dir.parent / f"{work_dir.name}-locks")}


def tune_for(model: str, args, work_dir: Path) -> dict:
    """Tune ``model`` for ``args.minutes`` of wall time (or until ``--trials`` are spent), then
    measure it with its peers. Returns ``{"summary": <pipeline summary of the measuring call>,
    "tuning_seconds", "stopped_by": "time" | "trials", "rounds": [...], "tasks": [...]}``.
    Raises what the pipeline raises (import, target or build errors)."""
    from tuning import pipeline
    from webapp.plug import Cancelled, Collect

    budget_s = args.minutes * 60.0
    started: dict = {}
    rows = Collect()

    def on_start(start):
        started["t0"] = time.monotonic()
        log(f"{model}: tuning {len(start.task_indices)} tasks for at most {args.minutes:g} min")

    def report(pct: float, msg: str) -> None:
        if "t0" not in started:
            return
        elapsed = time.monotonic() - started["t0"]
        if msg.startswith(tuple("0123456789")) and "trials, round" in msg:
            log(f"{model}: {elapsed / 60:.1f} min, {msg}")
            if elapsed >= budget_s:
                raise Cancelled(f"tuning budget of {args.minutes:g} min spent")

    stopped_by = "trials"
    try:
        pipeline.run(tuning_params(model, args, work_dir, trials=args.trials), report=report, record=rows,
                     hooks=pipeline.TuningHooks(on_start=on_start, measure_model=False))
    except Cancelled as err:
        stopped_by = "time"
        log(f"{model}: stopped: {err}")
    tuning_seconds = time.monotonic() - started["t0"] if "t0" in started else 0.0
    tuned = {"tuning_seconds": tuning_seconds, "stopped_by": stopped_by,
             "rounds": rows.rows.get("rounds", []), "tasks": rows.rows.get("tasks", []),
             "loadavg_during": list(os.getloadavg())}
    if args.resume and tuning_file(work_dir).is_file():  # a continued tuning: its time and rounds add up
        before = json.loads(tuning_file(work_dir).read_text())
        tuned["tuning_seconds"] += before["tuning_seconds"]
        tuned["rounds"] = before["rounds"] + tuned["rounds"]
    tuning_file(work_dir).write_text(json.dumps(tuned, default=str))
    return measure(model, args, work_dir, tuned)


def tuning_file(work_dir: Path) -> Path:
    """Where :func:`tune_for` keeps a model's tuning figures: ``<work-dir>/<model>.tuning.json``."""
    return work_dir.parent / f"{work_dir.name}.tuning.json"


def measure(model: str, args, work_dir: Path, tuned: dict) -> dict:
    """Measure the model tuned in ``work_dir``: a pipeline call on that database with ``trials``
    equal to the records it holds (nothing left to tune; what ``manage.py tune --resume`` does
    after a cancel), which builds and times tuned / untuned (with and without ``mcpu``) / PyTorch
    eager / onnxruntime interleaved. Returns ``tuned`` plus ``"summary"`` (the pipeline's)."""
    from tuning import pipeline
    from tuning.backends import database as dbmod
    from webapp.plug import Collect

    held = sum(dbmod.count_records_by_workload(dbmod.open_database(work_dir)).values())
    log(f"{model}: {held} records in the database; measuring the model (tuned, untuned, eager, onnxruntime), "
        f"load average {os.getloadavg()[0]:.2f}")
    measured = pipeline.run(tuning_params(model, args, work_dir, trials=held),
                            report=lambda pct, msg: log(f"{model}: {msg}"),
                            record=Collect(), resume={"rounds": tuned["rounds"]})
    return {**tuned, "summary": measured, "loadavg_measuring": list(os.getloadavg())}


def row_of(model: str, res: dict) -> dict:
    """The CSV row of one model (milliseconds; ratios of medians)."""
    s = res["summary"]
    row = {"model": model, "tasks_in_model": s["tasks_in_model"], "tasks_tuned": len(s["budget"]["tasks_tuned"]),
           "trials": s["trials_in_database"], "rounds": len(res["rounds"]),
           "tuning_minutes": round(res["tuning_seconds"] / 60.0, 2), "stopped_by": res["stopped_by"],
           "runner": s["runner"], "threads": s["num_threads"], "host_cpu": s["host_cpu"],
           "load_tuning": _load(res.get("loadavg_during")), "load_measuring": _load(res.get("loadavg_measuring"))}
    for peer in PEERS:
        lat = s.get(peer) or {}
        for key, field in (("median_s", ""), ("p25_s", "_p25"), ("p75_s", "_p75")):
            v = lat.get(key)
            row[f"{peer}{field}_ms"] = round(v * 1e3, 3) if isinstance(v, (int, float)) else None
    row["onnxruntime_error"] = (s.get("onnxruntime") or {}).get("error")
    tuned = row["tuned_ms"]
    row["tuned_vs_eager"] = round(tuned / row["eager_ms"], 3) if tuned and row["eager_ms"] else None
    row["tuned_vs_onnxruntime"] = round(tuned / row["onnxruntime_ms"], 3) if tuned and row["onnxruntime_ms"] else None
    row["tuned_vs_untuned"] = round(tuned / row["untuned_ms"], 4) if tuned and row["untuned_ms"] else None
    return row


def _load(avg) -> float | None:
    """The 15-minute load average of an ``os.getloadavg()`` triple (None when not recorded)."""
    return round(float(avg[2]), 2) if avg else None


def table(rows: list[dict]) -> str:
    """The stdout table: one line per model."""
    head = ("model", "tasks", "trials", "min", "tuned", "untuned", "untuned -mcpu", "eager", "onnxruntime",
            "tuned/eager", "tuned/ort", "load tuning/measuring")
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for r in rows:
        def ms(k):
            return "-" if r[k] is None else f"{r[k]:.2f} ms"
        lines.append(" | ".join([r["model"], f"{r['tasks_tuned']}/{r['tasks_in_model']}", str(r["trials"]),
                                 f"{r['tuning_minutes']:.1f}", ms("tuned_ms"), ms("untuned_ms"),
                                 ms("untuned_no_mcpu_ms"), ms("eager_ms"), ms("onnxruntime_ms"),
                                 "-" if r["tuned_vs_eager"] is None else f"{r['tuned_vs_eager']:.3f}",
                                 "-" if r["tuned_vs_onnxruntime"] is None else f"{r['tuned_vs_onnxruntime']:.3f}",
                                 f"{r.get('load_tuning')}/{r.get('load_measuring')}"]))
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="resnet18,mobilenet_v2", help="comma-separated torchvision models")
    ap.add_argument("--minutes", type=float, default=60.0, help="tuning wall-clock budget per model (minutes)")
    ap.add_argument("--trials", type=int, default=20000,
                    help="total trial budget per model (an upper bound: the time usually binds)")
    ap.add_argument("--trials-per-round", type=int, default=64,
                    help="candidates per round (TVM's tune_relax default, 64; the product's default is 32): the "
                         "evolutionary search costs about as much per round whatever the batch, and here it "
                         "took 80 of a round's 93 s at 32")
    ap.add_argument("--runner", choices=("doppler", "local"), default="doppler",
                    help="registry runner: doppler keeps its build workers warm (LocalBuilder pays ~15 s of "
                         "imports per round here)")
    ap.add_argument("--builder-workers", type=int, default=1, help="runner 'local' only")
    ap.add_argument("--threads", type=int, default=2, help="threads of every build and peer")
    ap.add_argument("--repeats", type=int, default=30, help="timings per peer in the final measurement")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work-dir", default=str(REPO / "bench" / "out" / "tuning_quality"))
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--resume", action="store_true", help="continue the databases already in --work-dir")
    mode.add_argument("--measure-only", action="store_true",
                      help="tune nothing: measure the databases already in --work-dir (on a quiet machine)")
    ap.add_argument("--out", default=str(REPO / "bench" / "out" / "tuning_quality.csv"))
    args = ap.parse_args()
    if not (math.isfinite(args.minutes) and args.minutes > 0):
        ap.error("--minutes must be > 0")
    for name in ("trials", "trials_per_round", "builder_workers", "threads", "repeats"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.seed < 0:
        ap.error("--seed must be >= 0")
    from _args import check_out_path, check_torchvision_models, write_csv_rows

    models = check_torchvision_models(ap, args.models)
    out = check_out_path(ap, args.out)
    work_root = Path(args.work_dir)
    for m in models:
        if args.measure_only:
            if not tuning_file(work_root / m).is_file():
                ap.error(f"--measure-only: {tuning_file(work_root / m)} is missing (no finished tuning of {m} there)")
            continue
        if (work_root / m).exists() and not args.resume:
            ap.error(f"{work_root / m} exists (an earlier run's database): pass --resume to continue it, "
                     f"or remove it")
    try:
        tuning_params(models[0], args, work_root / models[0], trials=1)
    except ValueError as err:
        ap.error(str(err))

    rows = []
    for m in models:
        work_dir = work_root / m
        if args.measure_only:
            res = measure(m, args, work_dir, json.loads(tuning_file(work_dir).read_text()))
        else:
            res = tune_for(m, args, work_dir)
        rows.append(row_of(m, res))
        write_csv_rows(out, rows)  # after every model: a run stopped later keeps the models it finished
        (work_root / f"{m}.summary.json").write_text(json.dumps(res["summary"], indent=1, default=str))
        shutil.rmtree(work_dir.parent / f"{work_dir.name}-locks", ignore_errors=True)
        log(f"{m}: tuned {rows[-1]['tuned_ms']} ms, eager {rows[-1]['eager_ms']} ms, "
            f"onnxruntime {rows[-1]['onnxruntime_ms']} ms")
    print(table(rows))
    print(f"\nCSV: {out}")


if __name__ == "__main__":
    main()
