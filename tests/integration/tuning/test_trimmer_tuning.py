"""A real MetaSchedule tuning on LLVM with the Trimmer scheduler (issue 6).

Drives ``ms.tune_tasks`` with the registry's ``"trimmer"`` scheduler and ``"local"`` runner on two
small real workloads (a 64x64 matmul and a 64x64 elementwise add). The add's schedule space is
tiny, so its best latency stops improving within a few rounds; with ``patience=1`` Trimmer must
preempt it. Checked against the rule itself, not against recorded numbers:
* at least one task was preempted, the round that preempted it did not improve its best, and the
  task got no round after its preemption;
* the tuning used fewer trials than its global budget;
* every round has energy (> 0 J) and wall time attributed, with the meter's source label, and the
  per-round energies add up to the report's total;
* the JSON database holds the measured records.
"""
import json
import os
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.integration


def _workloads():
    from tvm import te

    n = 64
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    mm = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    add = te.compute((n, n), lambda i, j: A[i, j] + B[i, j], name="C")
    return [("matmul64", te.create_prim_func([A, B, mm])), ("add64", te.create_prim_func([A, B, add]))]


def test_trimmer_preempts_plateaued_task_and_attributes_energy(monkeypatch):
    import tvm
    from tvm.s_tir import meta_schedule as ms

    from tuning.backends.energy import make_energy_meter
    from tuning.backends.registry import TuningSetup, make_runner, make_scheduler

    monkeypatch.chdir(REPO)  # builder/runner workers import tuning.backends.components
    target = {"kind": "llvm", "num-cores": 2}
    max_trials = 64
    with tempfile.TemporaryDirectory(prefix="trimmer-it-") as wd:
        setup = TuningSetup(
            target=target, num_threads=2, work_dir=Path(wd), seed=0, max_trials_global=max_trials,
            num_trials_per_iter=4, energy_meter=make_energy_meter("cpu"),
            options={"patience": 1, "builder_workers": 1, "build_timeout_s": 240, "run_timeout_s": 60},
        )
        builder, runner = make_runner("local", setup)
        sched = make_scheduler("trimmer", setup)
        tasks = [
            ms.TuneContext(mod=f, target=tvm.target.Target(target), space_generator="post-order-apply",
                           search_strategy="evolutionary", task_name=name, num_threads=2, rand_state=i)
            for i, (name, f) in enumerate(_workloads())
        ]
        ms.tune_tasks(tasks=tasks, task_weights=[1.0, 1.0], work_dir=wd, max_trials_global=max_trials,
                      num_trials_per_iter=4, builder=builder, runner=runner, task_scheduler=sched)
        rep = sched.report()
        on_disk = json.loads((Path(wd) / "trimmer_report.json").read_text())
        records = (Path(wd) / "database_tuning_record.json").read_text().strip().splitlines()

    assert on_disk["n_rounds"] == rep["n_rounds"]
    rounds = rep["rounds"]
    assert rounds, "no round was recorded"
    # energy attributed to every round, labelled
    assert rep["energy_source"] in {"estimate", "rapl"}
    for r in rounds:
        assert r["joules"] > 0 and r["seconds"] > 0, r
    assert sum(r["joules"] for r in rounds) == pytest.approx(rep["joules"])
    assert 0.0 <= rep["non_contributing_share"] <= 1.0
    # a plateaued task was preempted, by the rule
    preempted = [t for t in rep["tasks"] if t["preempted_at_round"] is not None]
    assert preempted, json.dumps(rep["tasks"])
    for t in preempted:
        at = t["preempted_at_round"]
        r = rounds[at - 1]
        assert r["task_id"] == t["task_id"] and r["preempted_task"] and not r["improved"]
        assert all(x["task_id"] != t["task_id"] for x in rounds[at:]), "a preempted task got another round"
    assert rep["n_candidates"] < max_trials
    # every measured candidate of the run is in MetaSchedule's database
    assert len(records) >= sum(1 for r in rounds for x in r["latencies_s"] if x is not None) > 0
