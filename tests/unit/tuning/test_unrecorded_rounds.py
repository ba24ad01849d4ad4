"""tuning.pipeline._unrecorded_rounds: trials an interrupted attempt committed to the JSON database
but never recorded come back as one recovered round per task. Expected rows written out by hand."""
from __future__ import annotations

from tuning.pipeline import _unrecorded_rounds

TASKS = {0: {"workload_hash": "111"}, 1: {"workload_hash": "222"}}


def _lines(*secs):
    return [({"trace": n}, s) for n, s in enumerate(secs)]


def test_first_attempt_recovers_nothing():
    assert _unrecorded_rounds({"111": _lines([1.0])}, TASKS, [0, 1], {}, [], 0, 0.0, 0.0) == []


def test_trials_after_the_seed_and_the_recorded_rounds_are_recovered():
    # task 0: 2 seed records, 2 recorded in round 0, then 2 more committed but never recorded
    # (one of them a failed run, stored by MetaSchedule as 1e10 s); task 1: all recorded
    by_hash = {"111": _lines([9.0], [8.0], [3.0], [2.0], [1.0, 3.0], [1e10]), "222": _lines([5.0])}
    resume = {"tasks": [{"task_index": 0, "trials_done": 2}, {"task_index": 1, "trials_done": 0},
                        {"task_index": 0, "trials_done": 6}, {"task_index": 1, "trials_done": 1}]}
    earlier = [{"round_index": 0, "task_index": 0, "candidates": [{}, {}], "energy_source": "rapl"},
               {"round_index": 1, "task_index": 1, "candidates": [{}], "energy_source": "rapl"}]
    (row,) = _unrecorded_rounds(by_hash, TASKS, [0, 1], resume, earlier, 2, 12.5, 40.0)
    assert (row["round_index"], row["task_index"], row["num_candidates"], row["num_errors"]) == (2, 0, 2, 1)
    assert [c["run_seconds"] for c in row["candidates"]] == [[1.0, 3.0], []]
    assert [c["mean_seconds"] for c in row["candidates"]] == [2.0, None]
    assert [c["trace"] for c in row["candidates"]] == [{"trace": 4}, {"trace": 5}]
    assert row["best_seconds"] == 2.0 and row["candidates"][1]["error"].startswith("failed")
    assert (row["wall_seconds"], row["joules_total"], row["build_seconds"], row["energy_source"]) == (12.5, 40.0, 0.0, "rapl")
    assert "recovered" in row["details"]


def test_nothing_missing_gives_no_row():
    by_hash = {"111": _lines([3.0], [2.0])}
    resume = {"tasks": [{"task_index": 0, "trials_done": 0}]}
    earlier = [{"round_index": 0, "task_index": 0, "candidates": [{}, {}], "energy_source": "estimate"}]
    assert _unrecorded_rounds(by_hash, TASKS, [0], resume, earlier, 1, 1.0, 1.0) == []


def test_records_are_read_in_commit_order_by_workload(tmp_path):
    import json

    from tuning.backends.database import RECORD_FILE, WORKLOAD_FILE, records_in_commit_order

    (tmp_path / WORKLOAD_FILE).write_text('["111", "AA=="]\n["222", "AA=="]\n')
    lines = [[1, [["t", 0], [0.5, 0.7], {"kind": "llvm"}, []]], [0, [["t", 1], None, {"kind": "llvm"}, []]],
             [1, [["t", 2], [0.25], {"kind": "llvm"}, []]]]
    (tmp_path / RECORD_FILE).write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert records_in_commit_order(tmp_path) == {"222": [(["t", 0], [0.5, 0.7]), (["t", 2], [0.25])], "111": [(["t", 1], None)]}
    assert records_in_commit_order(tmp_path / "missing") == {}
