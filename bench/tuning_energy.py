"""Trimmer vs MetaSchedule's default (gradient) task scheduler: tuning energy, wall time and
final latency, side by side in one run (issue 6).

What is tuned
-------------
For each model (torchvision resnet18 and mobilenet_v2, batch 1, 3x224x224, random weights:
latency does not depend on weight values) each arm is one call of the product's pipeline,
:func:`tuning.pipeline.run` (:func:`run_one`), exactly as ``manage.py tune --model M
--max-tasks N --trials T --trials-per-round B --scheduler S --runner R`` would run it: the
product's import, task extraction with weight prepacking (every CPU tuning's default), task
selection, LLVM target, registry runner and scheduler, tune contexts and per-round records,
with options checked by the product's validator. The benchmark looks in through
:class:`tuning.pipeline.TuningHooks` (an observing energy ledger as an extra measure callback,
the meter read around ``tune_tasks``) and skips the pipeline's whole-model measurement (the
arms' kernels are re-measured together instead, below). A full model (resnet18 19 tasks, mobilenet_v2 33, each needing hundreds of trials to plateau; ``--tasks all``) does not
fit in an hour on this shared 2-core machine (one round of 16 candidates of a resnet18
convolution takes about 26 s here), so the benchmark tunes a **documented fixed subset**: the
``--tasks`` heaviest tasks by ``weight * FLOP`` (default 1: the model's heaviest task, so that
one task gets a budget of 32 rounds x 16 = 512 trials within the time available; at 16 rounds the
tasks had not plateaued: after the cost model's 100-candidate warm-up, about 7 rounds, too few
rounds were left for Trimmer's patience to save energy) (FLOP from
``tvm.s_tir.analysis.estimate_tir_flops``; ties by extraction order, as the product). Both arms get the same maximum
trial budget, ``trials = tasks * rounds * batch`` (``--rounds`` rounds of ``--batch``
candidates per task on average; the gradient scheduler spends all of it, Trimmer stops when its
rules say so), the same seed, the same cost model (XGBoost, fresh per arm) and the same
builder/runner pair from the registry (``--runner``, default ``"doppler"``: DOPpler's warm
persistent build workers instead of LocalBuilder's fresh processes, which pay about 15 s of
imports per batch here, and its
pinned serial measurement; on 2 cores it has one measurement slot, so DOP stays 1). A fresh
runner is made for each arm and closed after it.

Search variance
---------------
Two arms of the same seed search the same candidates until their measurements differ, no
longer: MetaSchedule's evolutionary search runs on ``--search-threads`` threads (the tuning
option ``search_threads``; default 1, with
which two baseline runs of one seed proposed the same first round here; with 2 its dynamic work
sharing hands random streams to threads in no fixed order, and earlier runs of the *same*
scheduler and seed found 0.904 and 1.806 ms in their first round), Trimmer's
wrapper keeps its inner strategy's random state as the unwrapped strategy's (checked by
``tests/unit/tuning/test_trimmer_search.py``), and XGBoost scores with numpy's global generator
during its warm-up, which the pipeline seeds with the tuning's seed before ``tune_tasks``. Measured here (mobilenet_v2, rounds of 4): round 1
identical in both arms, round 2 3 of 4 candidates identical, as between two baseline runs of
the same seed (the database's best records, which seed the next population, are ordered by noisy
latencies). After that the arms diverge, and with one task, two independent searches of a few
hundred trials land up to 20-30 % apart (see ``bench/tuning_parallel.py``), so one run's latency
ratio mixes Trimmer's decisions with search luck. Two things narrow it: several ``--seeds``
(the summary's ratios are geometric means over every model and seed), and the **replay**:
Trimmer's preemption and stopping rules run on the baseline's own recorded rounds
(:func:`tuning.core.trimmer.replay_rounds`, same configuration as the Trimmer arm). With one task
that is exact for those rules: had Trimmer searched the baseline's candidates, it would have
measured exactly the baseline's first ``replay_trials`` trials, so the baseline's best among
them (re-measured like the two arms, as a third arm) against the baseline's final best is the
latency those rules cost, free of search luck; the candidate filter plays no part in it.

Figures (per model, and the geometric mean over models for the ratios)
---------------------------------------------------------------------
energy_ratio   Trimmer joules / baseline joules over the whole ``tune_tasks`` call, from the
               energy meter: process-tree CPU time (this process plus its build and measurement
               workers) times an assumed power per busy core where no RAPL counter is readable -
               the case on this VM, labelled by ``energy_source``/``energy_measured``. An
               ESTIMATE, not a measurement of joules.
wall_ratio     Trimmer wall seconds / baseline wall seconds (same call).
latency_ratio  Trimmer / baseline of the tuned subset's latency, ``sum_i weight_i * t_i`` over
               the subset's tasks, where ``t_i`` is the run time of the best record of task i in
               that arm's tuning database, **re-measured after tuning**: both arms' best
               kernels are built again and timed in one fresh subprocess (``TVM_NUM_THREADS`` =
               ``--threads``), interleaved (one repeat of every kernel in a shuffled order, then
               the next repeat), ``--repeats`` repeats of at least ``--min-repeat-ms`` each; the
               per-kernel **lower quartile** of the repeats decides (``latency_ratio_median``: the
               same with medians). Why not the median: on this VM the repeats of a 0.1 ms kernel
               on 2 threads are bimodal (a repeat is either undisturbed or about 1.6x slower), and
               the median moves with the share of slow repeats; the same kernel timed twice,
               interleaved, gave medians 6.5 % apart and lower quartiles 0.1 % apart
               (mobilenet_v2, seed 0, 2026-12-01). The subset's share of the end-to-end latency, not a
               full-model compile. The in-tuning numbers are reported too (``*_tuning_latency_s``).
e2e_latency_ratio, baseline_vs_eager (``--tasks all`` only)
               the whole model compiled with each arm's database (the product's final build) and
               timed end to end with PyTorch eager, interleaved in one run (medians of 30 per
               peer): Trimmer / baseline (the "equal latency" check: within 3 % or not), and the
               baseline / eager (whether the budget reaches PyTorch). ``*_e2e_s`` are the medians.
baseline_non_contributing_share
               share of the baseline's attributed energy spent on candidates that never improved
               their task's best (each join interval split equally over its candidates; see
               ``tuning.backends.trimmer``), observed with Trimmer's ledger without acting on it.
per task       rounds each arm gave the task, and Trimmer's preemption round (1-based over all
               rounds of the run) or ``None``.
replay_energy_ratio, replay_latency_ratio, replay_trials
               the replay above: energy of the baseline's rounds up to where Trimmer's rules stop
               over all its rounds' energy (both from the baseline's observing ledger), and the
               re-measured best of the baseline's first ``replay_trials`` records over its final
               best. A task whose replayed best is the baseline's final best record itself counts
               at the baseline's timing (the same kernel; ``replay_same_kernels`` counts those
               tasks), so where every task keeps its kernel the ratio is 1.0, and the two timings
               of those kernels give the re-measurement's noise (``remeasure_noise_ratio``, and
               ``remeasure_noise_ratio_median`` with medians).
oracle_energy_ratio, oracle_rounds, oracle_trials
               the earliest stop of the whole run that keeps the baseline's in-tuning weighted
               latency within 3 % of its final one (:func:`tuning.core.trimmer.oracle_stop`), and
               the baseline's energy up to it (share of the observing ledger's round energy, like
               ``replay_energy_ratio``). With one task (the default) it bounds what any rule that
               only stops can save on that trajectory at the latency target: above 0.7, no such
               rule meets both targets on it, only a better search (the filter) can. With several
               tasks per-task preemption can save more than it.
replay_patience_sweep
               the replay again with ``--patience`` 2, 3, 4, 5, 6 and 8 (everything else the same,
               so the model-level window moves with it), as ``patience:energy/latency``: the
               replay's energy ratio and its in-tuning weighted latency over the baseline's final
               in-tuning one (not re-measured). The trade-off a patience setting buys on this
               trajectory, free of search luck; the JSON has rounds and stop reasons too.

Modes (``--mode``)
-----------------
compare   (default) the benchmark: the baseline, then Trimmer, then the re-measurement of both
          and of the replay arm; every figure above.
baseline  the baseline alone (about half the time): its replay, oracle and patience sweep, the
          figures that need only the baseline's trajectory, to gather many trajectories cheaply
          before choosing ``--patience`` / ``--preempt-warmup``.
aa        the baseline twice with the same seed (an A/A test), one after the other in one run and
          re-measured together, like ``compare``'s two arms:
          ``aa_energy_ratio``, ``aa_wall_ratio``, ``aa_latency_ratio`` (re-measured, second run
          over first), ``aa_tuning_latency_ratio`` and ``aa_first_round_same``: how far one
          scheduler's final latency moves between two runs of one seed, the floor under any
          single run's ``latency_ratio``. Both runs' trajectories are replayed and swept.
``compare`` and ``aa`` report ``*_first_round_same``: how many of the second arm's first
``--batch`` records have the baseline's first-round traces (instructions and sampling
decisions), so "the same first round" is checked on every run, not assumed, and
``*_first_round_time_ratio``: for those shared candidates, the second arm's in-tuning time over
the baseline's, as ``median [p10, p90] (n)``: the median is the two tunings' difference of scale,
the spread how well two tunings' measurements of the same kernel agree.

Trimmer runs with its defaults (model-level window patience x tasks, 1 %, exploration floor
0.1, oversample 2, filter warm-up 100) except three that come from flags: ``--patience``
(default 3, the reference implementation's), ``--preempt-warmup`` (default 100 candidates before
a non-improving round counts toward patience and before the model-level window starts; 0 gives
the paper's rule of judging every round) and ``--min-task-improvement`` (default 0.01: a round
must lower its task's best by more than 1 % to reset the patience count; the in-tuning numbers on
this shared machine differ from a quiet re-measurement by several per cent, so smaller
"improvements" are noise).

DOPpler's measurement settings, the same in both arms (defaults: DOPpler's own): ``--estimator`` (``mean`` of the timed repeats, or
``min``, the fastest alone) and ``--screen-repeats`` (repeats that must all be clearly worse
before the early-termination screen drops a candidate); see docs/engines/tuning.md "DOPpler".

Usage (long: 53-85 minutes per seed for both models at 32 rounds and 1 search thread, on this
machine's 2-vCPU AMD and Intel VMs in 2026-12; run it alone, or under the shared benchmark lock
``flock /tmp/tandem-bench.lock``, as other load changes the measurements):
  flock /tmp/tandem-bench.lock python bench/tuning_energy.py \
      --models resnet18,mobilenet_v2 --tasks 1 --rounds 32 --batch 16 --seeds 0,1
Prints one JSON line; writes bench/out/tuning_energy.csv (one row per model and seed, rewritten
after each, so a run stopped early keeps what it finished) and bench/out/tuning_energy.json
(everything, per task and round).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.chdir(REPO)  # builder/runner worker processes import tuning.backends.components from here

from _args import write_csv_rows  # noqa: E402


def host_target(num_threads: int) -> dict:
    """The product's LLVM target for this host (:func:`tuning.backends.targets.make_target`:
    ``mcpu`` of this CPU, ``num-cores`` = ``num_threads``), so the benchmark tunes for what the
    product tunes for."""
    from tuning.backends.targets import make_target

    return make_target("llvm", num_threads)


def workload_key(mod) -> str:
    """Structural hash of a task's TIR module (the key MetaSchedule's database uses), as text:
    the same string as the pipeline's ``workload_hash`` in its ``tasks`` rows."""
    import tvm_ffi

    return str(int(tvm_ffi.structural_hash(mod)) & 0xFFFFFFFFFFFFFFFF)


def arm_options(kind: str, args) -> dict:
    """The ``options`` of one arm's tuning, as an operator would submit them, checked by the
    product's own :func:`tuning.backends.options.validate_options` (``ValueError`` on a bad one).
    The gradient arm gets no Trimmer-only option (the product refuses them there); the replay
    reads Trimmer's configuration from :func:`replay_options` instead."""
    from tuning.backends.options import trimmer_only_option_names, validate_options

    options = replay_options(args)
    if args.runner == "doppler":
        options["doppler"] = {"build_timeout_s": args.build_timeout, "estimator": args.estimator,
                              "screen_repeats": args.screen_repeats}
    else:
        options["builder_workers"] = args.builder_workers
    options["build_timeout_s"] = args.build_timeout
    options["search_threads"] = args.search_threads
    if kind != "trimmer":
        options = {k: v for k, v in options.items() if k not in trimmer_only_option_names()}
    validate_options(options, args.threads, scheduler=kind, runner=args.runner, target_kind="llvm")
    return options


def replay_options(args) -> dict:
    """Trimmer's settings of this run (``--patience``, ``--min-task-improvement``,
    ``--preempt-warmup``), for the Trimmer arm and for the replay of the baseline's rounds."""
    return {"patience": args.patience, "min_task_improvement": args.min_task_improvement,
            "preempt_warmup": args.preempt_warmup}


def run_one(kind: str, model: str, args, work_dir: str, seed: int) -> dict:
    """Tune ``model``'s ``--tasks`` heaviest tasks with scheduler ``kind`` ("gradient" or
    "trimmer") through the product's pipeline (:func:`tuning.pipeline.run`: the product's import,
    extraction with weight prepacking, task selection, target, registry runner and scheduler,
    tune contexts and per-round records) into the JSON database in ``work_dir`` with ``seed``,
    without the final whole-model measurement (``TuningHooks(measure_model=False)``: the arms'
    kernels are re-measured together afterwards). Energy and wall time are read at the
    pipeline's hooks, around MetaSchedule's ``tune_tasks`` call alone. For the baseline an
    observing Trimmer ledger rides along as an extra measure callback, and its recorded rounds
    are replayed through Trimmer's rules (``replay``: :func:`tuning.core.trimmer.replay_rounds`,
    with the Trimmer arm's configuration). Returns energy, wall time, trials, the ledger's
    report and the pipeline's ``tasks`` rows."""
    import numpy as np

    from tuning import pipeline
    from tuning.backends.trimmer import EnergyLedger, config_from_options, make_ledger_callback
    from tuning.core.trimmer import TrimmerConfig, TrimmerState, oracle_stop, replay_rounds
    from webapp.plug import Collect

    options = arm_options(kind, args)
    seen: dict = {}

    def on_start(start):
        seen["n"], seen["weights"] = len(start.task_weights), start.task_weights
        seen["scheduler"] = start.scheduler
        callbacks = []
        if kind != "trimmer":
            # observation only: the same attribution as Trimmer's, no decision taken from it
            obs = TrimmerState(seen["n"], seen["weights"], TrimmerConfig(patience=10**6, min_rel_improvement=0.0),
                               np.random.default_rng(0))
            seen["ledger"] = EnergyLedger(start.meter, obs)
            callbacks.append(make_ledger_callback(seen["ledger"]))
            seen["ledger"].start()
        seen["r0"], seen["t0"] = start.meter.read(), time.monotonic()
        return callbacks

    def on_end(start):
        seen["wall"], seen["r1"] = time.monotonic() - seen["t0"], start.meter.read()

    def report(pct: float, msg: str) -> None:
        if "round" in msg:
            print(f"#   {model} {kind}: {msg}", file=sys.stderr, flush=True)

    max_trials = args.tasks * args.rounds * args.batch  # main() resolves --tasks all to the model's count
    params = {"model": model, "target": "llvm", "num_threads": args.threads, "trials": max_trials,
              "trials_per_round": args.batch, "max_tasks": args.tasks, "runner": args.runner, "scheduler": kind,
              "cost_model": "xgb", "seed": seed, "options": options, "work_dir": work_dir,
              "lock_dir": str(Path(work_dir) / "locks")}
    rows = Collect()
    pipeline.run(params, report=report, record=rows,
                 hooks=pipeline.TuningHooks(on_start=on_start, on_end=on_end, measure_model=False))
    n, weights, r0, r1 = seen["n"], seen["weights"], seen["r0"], seen["r1"]
    rep = seen["scheduler"].report() if kind == "trimmer" else seen["ledger"].state.report()
    replay = oracle = None
    if kind != "trimmer":
        recorded = [(r["task_id"], r["latencies_s"], r["joules"], r["seconds"]) for r in rep["rounds"]]
        rp = replay_rounds(recorded, n, weights, config_from_options(replay_options(args)))
        replay = {"rounds": rp.rounds, "trials": rp.trials, "task_trials": rp.task_trials, "joules": rp.joules,
                  "ledger_joules": rep["joules"], "stop_reason": rp.stop_reason, "preempted_at": rp.preempted_at,
                  "skipped_rounds": rp.skipped_rounds}
        # what any stopping rule could save on this trajectory within the latency target
        orc = oracle_stop([r["weighted_total_s"] for r in rep["rounds"]], [r["joules"] for r in rep["rounds"]],
                          [r["n_candidates"] for r in rep["rounds"]], ORACLE_TOLERANCE)
        oracle = {"rounds": orc.rounds, "trials": orc.trials, "energy_ratio": orc.energy_share}
        # the same rules at other patiences, on the same trajectory: the energy/latency trade-off
        # an operator buys with --patience (in-tuning latencies; no re-measurement)
        sweep = []
        for p in PATIENCE_SWEEP:
            sp = replay_rounds(recorded, n, weights, config_from_options({**replay_options(args), "patience": p}))
            sweep.append({"patience": p, "rounds": sp.rounds, "trials": sp.trials, "stop_reason": sp.stop_reason,
                          "energy_ratio": sp.joules / rep["joules"] if rep["joules"] > 0 else None,
                          "tuning_latency_ratio": (sp.weighted_total_s / rep["weighted_total_s"]
                                                   if sp.weighted_total_s and rep["weighted_total_s"] else None)})
        replay["patience_sweep"] = sweep
    return {
        "scheduler": kind,
        "joules": r1.joules - r0.joules,
        "energy_source": r1.source,
        "energy_measured": r1.measured,
        "wall_s": seen["wall"],
        "trials": rep["n_candidates"],
        "rounds": rep["n_rounds"],
        "tuning_latency_s": rep["weighted_total_s"],
        "non_contributing_share": rep["non_contributing_share"],
        "task_rounds": [t["rounds"] for t in rep["tasks"]],
        "preempted_at_round": [t["preempted_at_round"] for t in rep["tasks"]],
        "filter_batches": [t.get("filter_batches") for t in rep["tasks"]],
        "stop_reason": rep["stop_reason"],
        "stop_round": rep["stop_round"],
        "max_trials": max_trials,
        # per round: task, best after it (s), strict improvement, progress beyond the noise threshold
        "round_log": [[r["task_id"], r["best_after_s"], r["improved"], r.get("progressed"), r["n_contributing"],
                       round(r["joules"], 1)] for r in rep["rounds"]],
        "replay": replay,
        "oracle": oracle,
        "tasks": rows.rows["tasks"],
    }


# ------------------------------------------------------------------ re-measurement (subprocess)
def whole_model_tasks(model: str) -> int:
    """How many tasks the product extracts from ``model`` for the LLVM target (with weight
    prepacking, every CPU tuning's default): what ``--tasks all`` tunes. Imports the model as
    the pipeline does (in a child process)."""
    from tuning.backends.targets import make_target
    from tuning.pipeline import extract_tasks, load_model, weight_prepack_for

    target = make_target("llvm", 1)
    return len(extract_tasks(load_model({"model": model}), target, weight_prepack_for({}, target)))


def end_to_end(model: str, arm_dirs: dict[str, str], threads: int, repeats: int) -> dict[str, dict]:
    """The whole model compiled with each arm's tuning database (the product's final build:
    :func:`tuning.backends.frontends.build_with_database` on the pipeline's prepared module, as
    ``manage.py tune`` builds the tuned model) and timed end to end beside PyTorch eager, all
    interleaved (:func:`tuning.backends.latency.measure_interleaved`: every peer loaded in its own
    subprocess with ``threads`` threads, rounds rotate the order). ``arm_dirs``: arm -> work dir
    holding its database. Returns arm (and ``"eager"``) -> ``{"median_s", "p25_s", "p75_s", ...}``
    (seconds per inference, batch 1). Raises ``RuntimeError`` when a peer failed to time."""
    import tvm

    from tuning.backends import database as dbmod
    from tuning.backends.frontends import build_with_database, prepare_for_tuning
    from tuning.backends.latency import measure_interleaved
    from tuning.backends.targets import make_target
    from tuning.pipeline import load_model, weight_prepack_for

    loaded = load_model({"model": model})
    target = make_target("llvm", threads)
    prepack = weight_prepack_for({}, target)
    prepared = prepare_for_tuning(loaded.mod, prepack)
    peers = {}
    for arm, d in arm_dirs.items():
        lib = Path(d) / "whole_model.so"
        build_with_database(prepared, tvm.target.Target(target), dbmod.open_database(d), prepack).export_library(str(lib))
        peers[arm] = ("tvm", str(lib))
    peers["eager"] = ("torch", model)
    res = measure_interleaved(peers, loaded.input_shapes, loaded.input_dtypes, threads=threads, repeats=repeats,
                              rounds=max(3, min(repeats, 6)))
    failed = {k: v["error"] for k, v in res.items() if "error" in v}
    if failed:
        raise RuntimeError(f"{model}: end-to-end timing failed: {failed}")
    return res


def records_in_commit_order(work_dir: str) -> list:
    """Every tuning record of a MetaSchedule JSON database in ``work_dir``, in the order they were
    committed (= measured: ``AddToDatabase`` commits one record per candidate, failures with
    1e10 s). ``JSONDatabase.get_all_tuning_records`` returns them sorted by run time, which
    loses the order the replay arm needs. Raises FileNotFoundError / ValueError on a missing or
    malformed file (IndexError on a record naming a workload the workload file lacks)."""
    from tvm.s_tir import meta_schedule as ms

    wd = Path(work_dir)
    workloads = [ms.database.Workload.from_json(json.loads(line))
                 for line in (wd / "database_workload.json").read_text().splitlines() if line.strip()]
    out = []
    for line in (wd / "database_tuning_record.json").read_text().splitlines():
        if line.strip():
            idx, rec = json.loads(line)
            out.append(ms.database.TuningRecord.from_json(rec, workloads[int(idx)]))
    return out


def _remeasure_child(spec_path: str) -> None:
    """Child process: build the best record of every (arm, task) from the arms' JSON databases
    and time them interleaved; prints one JSON line ``{arm: {task_key: {p25_s, median_s, ...}}}``
    (``record_index``: the best record's position in its database, in commit order)."""
    import random

    import numpy as np
    import tvm
    from tvm.driver import build as tvm_build
    from tvm.s_tir import Schedule
    from tvm.s_tir.meta_schedule.runner.utils import alloc_argument_common
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    spec = json.loads(Path(spec_path).read_text())
    target = tvm.target.Target(spec["target"])
    dev = tvm.cpu(0)
    f_fill = tvm.get_global_func("tvm.contrib.random.random_fill_for_measure")
    kernels = {}  # (arm, key) -> (evaluator, args, in-tuning seconds, record index) or None
    for arm, arm_spec in spec["arms"].items():
        limits = arm_spec.get("limits") or {}  # task key -> first N records (commit order) only
        seen: dict[str, int] = {}
        best: dict[str, tuple[float, object, int]] = {}
        for index, rec in enumerate(records_in_commit_order(arm_spec["work_dir"])):
            key = workload_key(rec.workload.mod)
            seen[key] = seen.get(key, 0) + 1
            if key in limits and seen[key] > limits[key]:
                continue
            secs = [float(x) for x in (rec.run_secs or [])]
            if not secs or not all(math.isfinite(s) and 0 < s < 1e9 for s in secs):
                continue
            m = float(np.mean(secs))
            if key not in best or m < best[key][0]:
                best[key] = (m, rec, index)
        for key in spec["tasks"]:
            if key not in best:
                if key in limits:  # the replay cut the task before any valid record: no figure, no failure
                    kernels[(arm, key)] = None
                    continue
                raise RuntimeError(f"arm {arm}: no valid tuning record for task {spec['tasks'][key]['name']}")
            m, rec, index = best[key]
            sch = Schedule(rec.workload.mod)
            rec.trace.apply_to_schedule(sch, remove_postproc=False)
            mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(sch.mod)
            rt = tvm_build(mod, target=target)
            args = alloc_argument_common(f_fill, dev, [a.as_json() for a in rec.args_info], 1)[0]
            ev = rt.time_evaluator(rt.entry_name, dev, number=1, repeat=1, min_repeat_ms=spec["min_repeat_ms"])
            ev(*args)  # warm-up
            kernels[(arm, key)] = (ev, args, m, index)
    order = [k for k, v in kernels.items() if v is not None]
    rng = random.Random(0)
    times: dict = {k: [] for k in order}
    out: dict = {}
    for (arm, key), v in kernels.items():
        if v is None:
            out.setdefault(arm, {})[key] = None
    for _ in range(spec["repeats"]):
        rng.shuffle(order)
        for k in order:
            ev, args = kernels[k][:2]
            times[k].append(float(ev(*args).results[0]))
    for (arm, key), ts in times.items():
        arr = np.asarray(ts)
        out.setdefault(arm, {})[key] = {"median_s": float(np.median(arr)), "p25_s": float(np.percentile(arr, 25)),
                                        "p75_s": float(np.percentile(arr, 75)), "min_s": float(arr.min()),
                                        "repeats": int(arr.size), "tuning_s": kernels[(arm, key)][2],
                                        "record_index": kernels[(arm, key)][3]}
    print(json.dumps(out))


def remeasure(arms: dict[str, dict], tasks: dict[str, dict], target: dict, args) -> dict:
    """Run :func:`_remeasure_child` in a fresh subprocess (threads fixed before TVM starts).

    arms: arm name -> {"work_dir": tuning work dir, "limits": None or {task key: N}} (with limits,
    only each task's first N records count: the replay arm); tasks: workload key -> {"name", "weight"}.
    Returns per arm: per-task seconds (``p25_s``, the estimator :data:`ESTIMATOR`; ``median_s``,
    ``min_s``, ``p75_s``) and ``weighted_s`` = sum of weight * p25 (``weighted_median_s`` with the
    median; both None, and None for the task, where a limited arm had no valid record)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump({"arms": arms, "tasks": tasks, "target": target, "repeats": args.repeats,
                   "min_repeat_ms": args.min_repeat_ms}, fh)
        spec = fh.name
    env = dict(os.environ, TVM_NUM_THREADS=str(args.threads), OMP_NUM_THREADS=str(args.threads))
    try:
        out = subprocess.run([sys.executable, __file__, "--remeasure-child", spec], env=env, check=True,
                             capture_output=True, text=True, timeout=1800)
    except subprocess.CalledProcessError as err:
        raise RuntimeError(f"re-measurement failed:\n{err.stderr[-3000:]}") from None
    finally:
        os.unlink(spec)
    res = json.loads(out.stdout.strip().splitlines()[-1])
    for arm, per in res.items():
        missing = any(per.get(k) is None for k in tasks)
        per["weighted_s"] = None if missing else sum(tasks[k]["weight"] * per[k][ESTIMATOR] for k in tasks)
        per["weighted_median_s"] = None if missing else sum(tasks[k]["weight"] * per[k]["median_s"] for k in tasks)
    return res


# the re-measurement's estimator: the lower quartile of the repeats (see "latency_ratio" in the module doc)
ESTIMATOR = "p25_s"
ORACLE_TOLERANCE = 0.03  # the "final latency within 3 %", for oracle_* (see the module doc)
E2E_REPEATS = 30  # end-to-end timings per peer with --tasks all (interleaved over 6 rounds)
PATIENCE_SWEEP = (2, 3, 4, 5, 6, 8)  # patiences replayed on the baseline's rounds (replay_patience_sweep)
# the arms each --mode tunes, in order ("gradient" first: the replay, oracle and ratios refer to it)
ARMS = {"compare": ("gradient", "trimmer"), "baseline": ("gradient",), "aa": ("gradient", "gradient_aa")}
ARM_SCHEDULER = {"gradient": "gradient", "trimmer": "trimmer", "gradient_aa": "gradient"}
DETAIL_NAME = {"trimmer": "trimmer", "gradient_aa": "baseline_aa"}  # the JSON's name for an arm's raw result


def first_round_traces(work_dir: str, batch: int) -> list[str]:
    """The first ``batch`` tuning records of ``work_dir``'s database (commit order: the first
    round of a one-task run) as short digests of their traces (instructions and sampling
    decisions, postprocessing removed), to count how many candidates two arms shared."""
    import hashlib

    return [hashlib.sha1(json.dumps(rec.trace.as_json(remove_postproc=True), default=str).encode()).hexdigest()[:12]
            for rec in records_in_commit_order(work_dir)[:batch]]


def first_round_seconds(work_dir: str, batch: int) -> list[Optional[float]]:
    """Mean in-tuning run seconds of the first ``batch`` tuning records of ``work_dir``'s
    database (commit order, as :func:`first_round_traces`), None for a failed candidate."""
    out: list[Optional[float]] = []
    for rec in records_in_commit_order(work_dir)[:batch]:
        secs = [float(x) for x in (rec.run_secs or [])]
        out.append(sum(secs) / len(secs) if secs and all(0 < x < 1e9 for x in secs) else None)
    return out


def shared_time_ratios(traces_a: list[str], secs_a: list, traces_b: list[str], secs_b: list) -> list[float]:
    """For every candidate both first rounds measured (same trace digest; each of ``a``'s used
    once), ``b``'s in-tuning time over ``a``'s: how far two measurements of the same kernel in
    two tunings agree. Candidates without a time on either side are left out."""
    left = {}
    for t, x in zip(traces_a, secs_a):
        left.setdefault(t, []).append(x)
    out = []
    for t, y in zip(traces_b, secs_b):
        if left.get(t):
            x = left[t].pop(0)
            if x and y:
                out.append(y / x)
    return out


def ratio_spread(ratios: list[float]) -> Optional[str]:
    """``"median [p10, p90] (n)"`` of ratios, 3 decimals, or None for none."""
    if not ratios:
        return None
    import numpy as np

    p10, p50, p90 = np.percentile(ratios, [10, 50, 90])
    return f"{p50:.3f} [{p10:.3f}, {p90:.3f}] ({len(ratios)})"


def same_count(a: list[str], b: list[str]) -> int:
    """How many entries of ``b`` also occur in ``a`` (as multisets: a repeated trace counts as
    often as both lists hold it)."""
    left = list(a)
    n = 0
    for x in b:
        if x in left:
            left.remove(x)
            n += 1
    return n


def sweep_text(sweep: list[dict]) -> str:
    """A patience sweep as ``"2:0.228/1.249 3:..."`` (patience:energy ratio/in-tuning latency ratio)."""
    return " ".join(f"{q['patience']}:{_fmt(q['energy_ratio'])}/{_fmt(q['tuning_latency_ratio'])}" for q in sweep)


def _fmt(x: Optional[float]) -> str:
    """A ratio for the CSV's compact columns: 3 decimals, or "-" when there is none."""
    return "-" if x is None else f"{x:.3f}"


def replay_latency(lat: dict, tasks: dict[str, dict]) -> dict:
    """The replay arm's weighted latency from :func:`remeasure`'s result ``lat``, with each task
    whose replay kept the baseline's own best record (the same ``record_index`` in the same
    database: the replay arm reads the baseline's) counted at the baseline's timing: the same
    kernel is the same latency, and a second timing of it differs only by noise.

    tasks: workload key -> {"weight", ...}. Returns ``weighted_s`` (seconds, :data:`ESTIMATOR`;
    None where the replay cut a task before any valid record), ``task_s`` and ``same`` per task
    key, and ``noise_ratio`` / ``noise_ratio_median``: the weighted second timing over the
    baseline's of the tasks with the same kernel (lower quartiles / medians; None if none)."""
    g, r = lat["gradient"], lat["replay"]
    same = {k: r.get(k) is not None and r[k]["record_index"] == g[k]["record_index"] for k in tasks}
    task_s = {k: (g[k][ESTIMATOR] if same[k] else (r.get(k) or {}).get(ESTIMATOR)) for k in tasks}
    weighted = (None if any(v is None for v in task_s.values())
                else sum(tasks[k]["weight"] * task_s[k] for k in tasks))

    def noise(field: str) -> Optional[float]:
        keys = [k for k in tasks if same[k]]
        if not keys:
            return None
        return (sum(tasks[k]["weight"] * r[k][field] for k in keys)
                / sum(tasks[k]["weight"] * g[k][field] for k in keys))

    return {"weighted_s": weighted, "task_s": task_s, "same": same,
            "noise_ratio": noise(ESTIMATOR), "noise_ratio_median": noise("median_s")}


MAX_SEED = 2**31 - 1024  # task i is tuned with rand_state seed + i; TVM seeds are 31-bit


def parse_seeds(ap: argparse.ArgumentParser, text: str, flag: str = "--seeds") -> list[int]:
    """``"0,1,2"`` -> [0, 1, 2]; ``ap.error`` on an empty list or an empty item (``"1,"``,
    ``"1,,2"``: likely a seed left out), a non-integer, a negative, a repeated seed, or one at or
    above ``2**31 - 1024`` (TVM's ``rand_state`` is a 31-bit seed, and task ``i`` gets ``seed + i``)."""
    items = [x.strip() for x in text.split(",")]
    if not any(items):
        ap.error(f"{flag} is empty")
    if not all(items):
        ap.error(f"{flag} has an empty item (a seed left out?): {text!r}")
    try:
        seeds = [int(x) for x in items]
    except ValueError:
        ap.error(f"{flag} must be comma-separated integers, got {text!r}")
    if any(x < 0 for x in seeds):
        ap.error(f"{flag} must be >= 0")
    if any(x >= MAX_SEED for x in seeds):
        ap.error(f"{flag} must be below {MAX_SEED}")
    if len(set(seeds)) != len(seeds):
        ap.error(f"{flag} repeats a seed: {text!r}")
    return seeds


def gmean(vals) -> Optional[float]:
    """Geometric mean of the positive values in ``vals`` (None entries ignored); None if none."""
    vals = [v for v in vals if v is not None and v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def main() -> None:
    from _args import ALL_TASKS, task_count

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="resnet18,mobilenet_v2")
    ap.add_argument("--tasks", type=task_count, default=1,
                    help="heaviest tasks per model (fixed subset), or 'all': the whole model, whose tuned "
                         "builds are then also timed end to end beside PyTorch eager")
    ap.add_argument("--rounds", type=int, default=32, help="per-task round budget on average (same for both)")
    ap.add_argument("--batch", type=int, default=16, help="candidates per round")
    ap.add_argument("--patience", type=int, default=3, help="Trimmer's patience (SPEC default 3)")
    ap.add_argument("--min-task-improvement", type=float, default=0.01,
                    help="Trimmer: relative drop of a task's best that counts as progress (noise threshold)")
    ap.add_argument("--preempt-warmup", type=int, default=100,
                    help="Trimmer: candidates measured before a non-improving round counts toward patience "
                         "and before the model-level window starts (default 100 = XGBoost's warm-up; "
                         "0 = the paper's rule)")
    ap.add_argument("--runner", default="doppler", help="registry runner used by BOTH arms")
    ap.add_argument("--estimator", choices=("mean", "min"), default=None,
                    help="DOPpler's in-tuning latency estimator, in BOTH arms: mean of the repeats (MetaSchedule's, "
                         "default) or the fastest repeat (see docs/engines/tuning.md DOPpler)")
    ap.add_argument("--screen-repeats", type=int, default=None,
                    help="DOPpler's early-termination screen, in BOTH arms: repeats that must all be clearly "
                         "worse than the task's best before a candidate is dropped (default 1)")
    ap.add_argument("--mode", choices=sorted(ARMS), default="compare",
                    help="compare: baseline against Trimmer (the benchmark); baseline: the baseline alone, for "
                         "its replay, oracle and patience sweep (half the time); aa: the baseline twice with the "
                         "same seed, one after the other: the run-to-run spread of one scheduler (see 'Modes')")
    seed_group = ap.add_mutually_exclusive_group()
    seed_group.add_argument("--seeds", default=None, help="comma-separated seeds; every model is run once per "
                                                          "seed (default: --seed)")
    seed_group.add_argument("--seed", type=int, default=0, help="one seed (same as --seeds N)")
    ap.add_argument("--threads", type=int, default=2, help="TVM runtime threads of the measured kernels")
    ap.add_argument("--search-threads", type=int, default=1,
                    help="threads of MetaSchedule's evolutionary search and of XGBoost's training (tune_tasks "
                         "takes the cost model's threads from the tasks); 1: reproducible search, so the same "
                         "seed gives both arms the same first round (see 'Search variance')")
    ap.add_argument("--builder-workers", type=int, default=1, help="runner 'local' only")
    ap.add_argument("--build-timeout", type=float, default=150.0)
    ap.add_argument("--repeats", type=int, default=31, help="re-measurement repeats per kernel (lower quartile decides)")
    ap.add_argument("--min-repeat-ms", type=int, default=50, help="re-measurement: minimum ms per repeat")
    ap.add_argument("--out", default=str(REPO / "bench" / "out" / "tuning_energy.csv"))
    ap.add_argument("--remeasure-child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.remeasure_child:
        _remeasure_child(args.remeasure_child)
        return
    for name in ("rounds", "batch", "patience", "threads", "search_threads", "repeats", "builder_workers",
                 "min_repeat_ms"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1")
    if not 0.0 <= args.min_task_improvement < 1.0:
        ap.error("--min-task-improvement must be in [0, 1)")
    if args.preempt_warmup < 0:
        ap.error("--preempt-warmup must be >= 0")
    if not (math.isfinite(args.build_timeout) and args.build_timeout > 0):
        ap.error("--build-timeout must be > 0 seconds")
    seeds = (parse_seeds(ap, args.seeds) if args.seeds is not None else parse_seeds(ap, str(args.seed), "--seed"))
    from _args import check_out_path, check_torchvision_models
    from tuning.backends.registry import runner_names

    if args.runner not in runner_names():
        ap.error(f"unknown --runner {args.runner!r}; available: {', '.join(runner_names())}")
    if (args.estimator is not None or args.screen_repeats is not None) and args.runner != "doppler":
        ap.error(f"--estimator and --screen-repeats are DOPpler's settings: they need --runner doppler, "
                 f"not {args.runner!r}")
    args.estimator = args.estimator or "mean"
    args.screen_repeats = 1 if args.screen_repeats is None else args.screen_repeats
    from tuning.core.doppler import DopplerConfig

    if not 1 <= args.screen_repeats <= DopplerConfig().max_repeats:
        ap.error(f"--screen-repeats must be in [1, {DopplerConfig().max_repeats}] (DOPpler's max_repeats)")
    models = check_torchvision_models(ap, args.models)
    if len(set(models)) != len(models):
        ap.error(f"--models names a model twice: {args.models!r}")
    check_out_path(ap, args.out)

    try:  # the arms' options, checked by the product before anything is tuned
        for arm in ARMS[args.mode]:
            arm_options(ARM_SCHEDULER[arm], args)
    except ValueError as err:
        ap.error(str(err))
    target = host_target(args.threads)
    rows, details = [], []
    load0 = os.getloadavg()
    ratio = lambda a, c: (a / c) if (a is not None and c) else None  # noqa: E731
    # seeds outside, models inside: a run stopped early has every model at the seeds it finished
    whole = args.tasks == ALL_TASKS
    model_tasks = {m: whole_model_tasks(m) for m in models} if whole else {m: args.tasks for m in models}
    for seed in seeds:
        for model in models:
            res, dirs, first, first_s = {}, {}, {}, {}
            e2e = None
            try:
                margs = argparse.Namespace(**{**vars(args), "tasks": model_tasks[model]})
                for arm in ARMS[args.mode]:
                    kind = ARM_SCHEDULER[arm]
                    dirs[arm] = tempfile.mkdtemp(prefix=f"bench-{model}-{arm}-")
                    res[arm] = run_one(kind, model, margs, dirs[arm], seed)
                    if arm == "gradient":  # the tasks the pipeline tuned (heaviest first by weight x FLOP)
                        tasks = {str(t["workload_hash"]): {"name": str(t["name"]), "weight": float(t["weight"]),
                                                           "mflop": float(t["flop_count"]) / 1e6}
                                 for t in sorted(res[arm]["tasks"], key=lambda t: -t["weight"] * t["flop_count"])}
                        keys = list(tasks)
                    elif sorted(str(t["workload_hash"]) for t in res[arm]["tasks"]) != sorted(keys):
                        raise RuntimeError(f"{model}: arm {arm} tuned other tasks than the baseline")
                    first[arm] = first_round_traces(dirs[arm], args.batch)
                    first_s[arm] = first_round_seconds(dirs[arm], args.batch)
                    print(f"# {model} seed {seed} {arm}: {json.dumps(res[arm])}", file=sys.stderr, flush=True)
                rp = res["gradient"]["replay"]
                # the replay arm: the baseline's own records, each task cut where Trimmer's rules
                # would have stopped it on the baseline's trajectory
                limits = {k: rp["task_trials"][i] for i, k in enumerate(keys)}
                arms = {arm: {"work_dir": d} for arm, d in dirs.items()}
                # the replay reads the baseline's database: replay_latency compares record indices
                arms["replay"] = {"work_dir": dirs["gradient"], "limits": limits}
                lat = remeasure(arms, tasks, target, args)
                if whole:  # the model a user gets, per arm, beside PyTorch eager
                    try:
                        e2e = end_to_end(model, dirs, args.threads, E2E_REPEATS)
                    except Exception as err:  # keep the tuned arms' figures; say why e2e is missing
                        print(f"# {model} seed {seed} end to end FAILED: {err}", file=sys.stderr, flush=True)
                    else:
                        print(f"# {model} seed {seed} end to end: {json.dumps(e2e)}", file=sys.stderr, flush=True)
            finally:
                for d in dirs.values():
                    shutil.rmtree(d, ignore_errors=True)
            print(f"# {model} seed {seed} re-measured: {json.dumps(lat)}", file=sys.stderr, flush=True)
            b = res["gradient"]
            rpl = replay_latency(lat, tasks)
            per_task = [{
                "task": tasks[k]["name"], "weight": tasks[k]["weight"], "mflop": tasks[k]["mflop"],
                "baseline_rounds": b["task_rounds"][i],
                "replay_trials": rp["task_trials"][i], "replay_preempted_at_round": rp["preempted_at"][i],
                "baseline_best_s": lat["gradient"][k][ESTIMATOR],
                "replay_best_s": rpl["task_s"][k], "replay_same_kernel": rpl["same"][k],
                "baseline_best_median_s": lat["gradient"][k]["median_s"],
                "baseline_best_tuning_s": lat["gradient"][k]["tuning_s"],
                "replay_best_tuning_s": (lat["replay"].get(k) or {}).get("tuning_s"),
            } for i, k in enumerate(keys)]
            row = {
                "model": model, "seed": seed, "mode": args.mode,
                "subset": "; ".join(f"{tasks[k]['name']} (w={tasks[k]['weight']:g}, "
                                    f"{tasks[k]['mflop']:.0f} MFLOP)" for k in keys),
                "baseline_joules": b["joules"], "baseline_wall_s": b["wall_s"],
                "baseline_latency_s": lat["gradient"]["weighted_s"],
                "baseline_tuning_latency_s": b["tuning_latency_s"],
                "baseline_trials": b["trials"], "max_trials": b["max_trials"], "baseline_rounds": b["rounds"],
                "baseline_non_contributing_share": b["non_contributing_share"],
                # Trimmer's rules replayed on the baseline's trajectory (no search variance)
                "replay_rounds": rp["rounds"], "replay_trials": rp["trials"], "replay_stop_reason": rp["stop_reason"],
                "replay_energy_ratio": ratio(rp["joules"], rp["ledger_joules"]),
                # tasks where the replay kept the baseline's own kernel count with the baseline's
                # timing; the two timings of those kernels give the re-measurement's noise
                "replay_latency_s": rpl["weighted_s"],
                "replay_latency_ratio": ratio(rpl["weighted_s"], lat["gradient"]["weighted_s"]),
                "replay_same_kernels": sum(rpl["same"].values()),
                "remeasure_noise_ratio": rpl["noise_ratio"], "remeasure_noise_ratio_median": rpl["noise_ratio_median"],
                "oracle_rounds": b["oracle"]["rounds"], "oracle_trials": b["oracle"]["trials"],
                "oracle_energy_ratio": b["oracle"]["energy_ratio"],
                # patience: replay energy ratio / in-tuning latency ratio, on the baseline's rounds
                "replay_patience_sweep": sweep_text(rp["patience_sweep"]),
                "energy_source": b["energy_source"], "energy_measured": b["energy_measured"],
            }
            if e2e is not None:
                row["eager_e2e_s"] = e2e["eager"]["median_s"]
                row["baseline_e2e_s"] = e2e["gradient"]["median_s"]
                row["baseline_vs_eager"] = ratio(e2e["gradient"]["median_s"], e2e["eager"]["median_s"])
            for arm, prefix in (("trimmer", "trimmer"), ("gradient_aa", "aa")):
                if e2e is not None and arm in e2e:
                    row[f"{prefix}_e2e_s"] = e2e[arm]["median_s"]
                    row["e2e_latency_ratio" if arm == "trimmer" else "aa_e2e_latency_ratio"] = ratio(
                        e2e[arm]["median_s"], e2e["gradient"]["median_s"])
                if arm not in res:
                    continue
                o = res[arm]
                for i, k in enumerate(keys):
                    per_task[i].update({
                        f"{prefix}_rounds": o["task_rounds"][i], f"{prefix}_best_s": lat[arm][k][ESTIMATOR],
                        f"{prefix}_best_median_s": lat[arm][k]["median_s"],
                        f"{prefix}_best_tuning_s": lat[arm][k]["tuning_s"]})
                    if arm == "trimmer":
                        per_task[i].update({"trimmer_preempted_at_round": o["preempted_at_round"][i],
                                            "trimmer_filter_batches": o["filter_batches"][i]})
                row.update({
                    f"{prefix}_joules": o["joules"], f"{prefix}_wall_s": o["wall_s"],
                    f"{prefix}_latency_s": lat[arm]["weighted_s"], f"{prefix}_tuning_latency_s": o["tuning_latency_s"],
                    f"{prefix}_trials": o["trials"], f"{prefix}_rounds": o["rounds"],
                    f"{prefix}_non_contributing_share": o["non_contributing_share"],
                    # ratios over the baseline: energy_ratio etc. for Trimmer, aa_energy_ratio etc. for
                    # the baseline's second run
                    ("energy_ratio" if arm == "trimmer" else "aa_energy_ratio"): ratio(o["joules"], b["joules"]),
                    ("wall_ratio" if arm == "trimmer" else "aa_wall_ratio"): ratio(o["wall_s"], b["wall_s"]),
                    ("latency_ratio" if arm == "trimmer" else "aa_latency_ratio"):
                        ratio(lat[arm]["weighted_s"], lat["gradient"]["weighted_s"]),
                    ("latency_ratio_median" if arm == "trimmer" else "aa_latency_ratio_median"):
                        ratio(lat[arm]["weighted_median_s"], lat["gradient"]["weighted_median_s"]),
                    ("tuning_latency_ratio" if arm == "trimmer" else "aa_tuning_latency_ratio"):
                        ratio(o["tuning_latency_s"], b["tuning_latency_s"]),
                    # how many of the first round's candidates are the baseline's (same trace)
                    f"{prefix}_first_round_same": same_count(first["gradient"], first[arm]),
                    # the shared first-round candidates' in-tuning times, this arm over the
                    # baseline: median (the two tunings' scales) and spread (per-kernel agreement)
                    f"{prefix}_first_round_time_ratio": ratio_spread(shared_time_ratios(
                        first["gradient"], first_s["gradient"], first[arm], first_s[arm])),
                })
                if arm == "trimmer":
                    row.update({
                        # per task, space-separated; "-" for a task that was not preempted
                        "trimmer_preempted_at_round": " ".join("-" if p is None else str(p)
                                                               for p in o["preempted_at_round"]),
                        "trimmer_stop_reason": o["stop_reason"], "trimmer_stop_round": o["stop_round"]})
                else:
                    # the second baseline run's own trajectory, replayed: more trajectories per run
                    row["aa_replay_patience_sweep"] = sweep_text(o["replay"]["patience_sweep"])
                    row["aa_oracle_rounds"] = o["oracle"]["rounds"]
                    row["aa_oracle_energy_ratio"] = o["oracle"]["energy_ratio"]
            rows.append(row)
            details.append({"model": model, "seed": seed, "per_task": per_task, "remeasured": lat,
                            "first_round_traces": first, "first_round_s": first_s, "baseline": b,
                            **{DETAIL_NAME[arm]: res[arm] for arm in res if arm != "gradient"}})
            # write what is done so far: a long multi-seed run keeps its finished rows if stopped
            out = write_csv_rows(args.out, rows)

    per_run_keys = (
        "energy_ratio", "wall_ratio", "latency_ratio", "baseline_joules", "trimmer_joules", "baseline_wall_s",
        "trimmer_wall_s", "baseline_latency_s", "trimmer_latency_s", "baseline_trials", "trimmer_trials",
        "baseline_non_contributing_share", "trimmer_non_contributing_share", "trimmer_preempted_at_round",
        "trimmer_stop_reason", "trimmer_stop_round", "replay_trials", "replay_stop_reason", "replay_energy_ratio",
        "replay_latency_ratio", "replay_same_kernels", "oracle_rounds", "oracle_trials", "oracle_energy_ratio",
        "latency_ratio_median", "tuning_latency_ratio", "trimmer_first_round_same", "trimmer_first_round_time_ratio",
        "replay_patience_sweep",
        "remeasure_noise_ratio", "remeasure_noise_ratio_median",
        "aa_energy_ratio", "aa_latency_ratio", "aa_latency_ratio_median", "aa_tuning_latency_ratio",
        "aa_first_round_same", "aa_first_round_time_ratio", "aa_replay_patience_sweep", "aa_oracle_rounds", "aa_oracle_energy_ratio",
        "eager_e2e_s", "baseline_e2e_s", "trimmer_e2e_s", "aa_e2e_s", "baseline_vs_eager", "e2e_latency_ratio",
        "aa_e2e_latency_ratio")
    # geometric means over every (model, seed) row, of the ratios this --mode produced
    means = {k: gmean(r.get(k) for r in rows) for k in (
        "energy_ratio", "wall_ratio", "latency_ratio", "latency_ratio_median", "replay_energy_ratio",
        "replay_latency_ratio", "oracle_energy_ratio", "remeasure_noise_ratio", "remeasure_noise_ratio_median",
        "aa_energy_ratio", "aa_wall_ratio", "aa_latency_ratio", "aa_latency_ratio_median", "aa_tuning_latency_ratio",
        "e2e_latency_ratio", "aa_e2e_latency_ratio", "baseline_vs_eager")
        if any(k in r for r in rows)}
    summary = {
        "bench": "tuning_energy", "mode": args.mode, "target": target, "runner": args.runner,
        "tasks_per_model": model_tasks, "rounds": args.rounds, "batch": args.batch, "seeds": seeds,
        "patience": args.patience, "min_task_improvement": args.min_task_improvement,
        "preempt_warmup": args.preempt_warmup, "search_threads": args.search_threads, "repeats": args.repeats,
        "doppler_estimator": args.estimator, "screen_repeats": args.screen_repeats,
        **means,
        "estimator": ESTIMATOR,
        "per_run": {f"{r['model']}/seed{r['seed']}": {k: r[k] for k in per_run_keys if k in r} for r in rows},
        "per_task": {f"{d['model']}/seed{d['seed']}": d["per_task"] for d in details},
        "energy_source": rows[0]["energy_source"], "energy_measured": rows[0]["energy_measured"],
        "load_avg_start": load0, "load_avg_end": os.getloadavg(), "csv": str(out),
        "target_energy_ratio_max": 0.7, "target_latency_within": ORACLE_TOLERANCE,
    }
    out.with_suffix(".json").write_text(json.dumps({"summary": summary, "details": details}, indent=1, default=str))
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
