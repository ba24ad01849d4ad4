"""``tuning.pipeline.run`` driven with no Django at all (as a notebook or benchmark would), in
child processes whose ``sys.modules`` never see Django; real MetaSchedule tunings of the built-in
``mlp`` (one task) on LLVM:

* every measured round is handed to ``record`` before the run returns, and a second call with
  ``resume`` spends no trial and continues the round numbering;
* a cancel from ``report`` keeps the measured round and leaves no worker process;
* the benchmarks' hooks observe a tuning and skip the whole-model measurement.

The three scenarios run in three child processes started together (:func:`plug_runs`), each in
a directory of its own (so their device locks are apart), as ``test_tune_command_signals.py``
does: most of each scenario is one busy core (imports, a builder process, a one-thread
measurement), so side by side they take about the longest one's time on two cores instead of
the sum. Each test asserts on its own scenario's output; a scenario that failed fails its test
with the child's stderr, not the others.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.integration.tuning import SMALL_SEARCH

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SCRIPT = r"""
import json, sys
import psutil
from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback
from webapp.plug import Cancelled, Collect, no_report
from tuning import pipeline
root, search, which = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]


def cancel():
    params = {"model": "mlp", "target": "llvm", "trials": 8, "trials_per_round": 4, "repeats": 3, "num_threads": 1,
              "measure_eager": False, "options": {"builder_workers": 1, "search": search}, "work_dir": root + "/work"}
    def report(pct, msg):  # the owner cancels as soon as the first round is reported
        if "round" in msg and "trials" in msg:
            raise Cancelled("cancelled by request")
    rows = Collect()
    try:
        pipeline.run(params, report=report, record=rows)
        outcome = "finished"
    except Cancelled:
        outcome = "cancelled"
    kids = [" ".join(p.cmdline()) for p in psutil.Process().children(recursive=True)]
    return {"outcome": outcome, "rounds": len(rows.rows.get("rounds", [])), "children": kids}


def resume():
    params = {"model": "mlp", "target": "llvm", "trials": 4, "trials_per_round": 4, "repeats": 3, "num_threads": 1,
              "measure_eager": False, "options": {"builder_workers": 1, "search": search}, "work_dir": root + "/work"}
    first = Collect()
    s1 = pipeline.run(params, report=no_report, record=first)
    second = Collect()
    s2 = pipeline.run(params, report=no_report, record=second, resume=first.rows)
    return {"first": first.rows, "s1": s1, "second": second.rows, "s2": s2}


def hooks():
    seen = {"starts": [], "candidates": 0, "ends": 0, "rounds_at_end": None}

    @derived_object
    class Count(PyMeasureCallback):
        def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results):
            seen["candidates"] += len(measure_candidates)

    def on_start(start):
        seen["starts"].append({"weights": start.task_weights, "indices": start.task_indices,
                               "search_threads": [int(c.num_threads) for c in start.contexts],
                               "meter": start.meter.source, "runner": type(start.runner).__name__})
        return [Count()]

    def on_end(start):
        seen["ends"] += 1
        seen["rounds_at_end"] = len(rows.rows.get("rounds", []))

    out = {}
    for name in ("a", "b"):  # the same seed twice: the same first round (search_threads 1, numpy seeded)
        rows = Collect()
        params = {"model": "mlp", "target": "llvm", "trials": 8, "trials_per_round": 4, "repeats": 3, "num_threads": 1,
                  "options": {"builder_workers": 1, "search": search, "search_threads": 1},
                  "work_dir": root + "/" + name}
        hks = pipeline.TuningHooks(on_start=on_start, on_end=on_end, measure_model=False)
        s = pipeline.run(params, report=no_report, record=rows, hooks=hks)
        out[name] = {"summary": s, "rounds": rows.rows["rounds"], "tasks": rows.rows["tasks"]}
    return {"seen": seen, "out": out}


got = {"cancel": cancel, "resume": resume, "hooks": hooks}[which]()
got["django"] = [m for m in sys.modules if m == "django" or m.startswith("django.")]
print(json.dumps(got, default=str))
"""


SCENARIOS = ("cancel", "resume", "hooks")


@pytest.fixture(scope="module")
def plug_runs(tmp_path_factory):
    """Each scenario's ``(returncode, stdout, stderr, directory)``, from three Django-free child
    processes run side by side (output to files, so none waits on a full pipe)."""
    procs = {}
    try:
        for name in SCENARIOS:
            root = tmp_path_factory.mktemp(f"plug-{name}")
            env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(root)}
            with open(root / "stdout.txt", "w") as out, open(root / "stderr.txt", "w") as err:
                procs[name] = (subprocess.Popen([sys.executable, "-c", SCRIPT, str(root), json.dumps(SMALL_SEARCH), name],
                                                cwd=REPO, env=env, stdout=out, stderr=err, text=True), root)
        results = {}
        for name, (proc, root) in procs.items():
            proc.wait(timeout=1500)
            results[name] = (proc.returncode, (root / "stdout.txt").read_text(), (root / "stderr.txt").read_text(), root)
        return results
    finally:
        for proc, _ in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _scenario(plug_runs, name):
    """The scenario's output (the JSON its child printed) and its directory, once the child
    exited 0 and never imported Django."""
    code, out, err, root = plug_runs[name]
    assert code == 0, err[-3000:]
    got = json.loads(out.strip().splitlines()[-1])
    assert got["django"] == []
    return got, root


def test_pipeline_runs_and_resumes_without_django(plug_runs):
    got, root = _scenario(plug_runs, "resume")
    rounds = got["first"]["rounds"]
    assert [r["round_index"] for r in rounds] == [0] and len(rounds[0]["candidates"]) == 4
    assert got["first"]["tasks"][0]["trials_done"] == 0
    db_lines = [x for x in (root / "work" / "database_tuning_record.json").read_text().splitlines() if x.strip()]
    assert got["s1"]["trials_in_database"] == len(db_lines) == 4
    assert got["s1"]["trials_mirrored"] == 4 and got["s1"]["rounds"] == 1
    assert got["s1"]["tuned"]["median_s"] > 0 and got["s1"]["untuned"]["median_s"] > 0
    # resumed: the database already holds the budget, so nothing is measured again
    assert got["second"].get("rounds") is None
    assert got["second"]["tasks"][0]["trials_done"] == 4
    assert got["s2"]["resumed_from_trials"] == 4 and got["s2"]["trials_this_attempt"] == 0
    assert got["s2"]["rounds"] == 1 and got["s2"]["tuning_wall_seconds"] == pytest.approx(rounds[0]["wall_seconds"])


def test_a_cancelled_tuning_leaves_no_worker_process(plug_runs):
    # MetaSchedule's LocalRunner keeps a worker pool for its life; after a cancel it outlived the
    # tuning until the Celery worker stopped (found by a new-user try)
    got, _ = _scenario(plug_runs, "cancel")
    assert got["outcome"] == "cancelled" and got["rounds"] == 1, got  # the measured round was kept
    assert [k for k in got["children"] if "popen_worker" in k] == [], got["children"]


def test_hooks_observe_a_tuning_and_skip_the_model_measurement(plug_runs):
    # the benchmarks' way in (bench/tuning_energy.py, bench/tuning_parallel.py): extra measure
    # callbacks see every candidate, on_end runs once per tuning, and no whole-model build is made
    got, root = _scenario(plug_runs, "hooks")
    seen, runs = got["seen"], got["out"]
    assert len(seen["starts"]) == 2 and seen["ends"] == 2
    start = seen["starts"][0]
    assert start["indices"] == [t["task_index"] for t in runs["a"]["tasks"]]
    assert start["weights"] == [t["weight"] for t in runs["a"]["tasks"]]
    assert start["search_threads"] == [1] * len(start["indices"])
    assert start["runner"] == "LocalRunner" and start["meter"]
    # the extra callback counted exactly the candidates the product mirrored and committed
    for name in ("a", "b"):
        db = [x for x in (root / name / "database_tuning_record.json").read_text().splitlines() if x.strip()]
        assert runs[name]["summary"]["trials_mirrored"] == len(db) == 8
    assert seen["candidates"] == 16
    assert seen["rounds_at_end"] == 2  # on_end ran after the last round was recorded
    # measure_model=False: no builds, no peers in the summary or the work dir
    for key in ("tuned", "untuned", "eager", "onnxruntime"):
        assert key not in runs["a"]["summary"]
    assert not (root / "a" / "tuned.so").exists()
    # one seed, one search thread: both tunings proposed the same first round
    first = [[c["trace_hash"] for c in runs[n]["rounds"][0]["candidates"]] for n in ("a", "b")]
    assert first[0] == first[1], first
