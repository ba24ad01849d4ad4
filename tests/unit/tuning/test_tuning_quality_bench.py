"""``bench/tuning_quality.py``: bad arguments are refused before anything is tuned, and the
table's ratios are computed from the pipeline's medians (milliseconds, ratios of medians)."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("bench_tuning_quality", REPO / "bench" / "tuning_quality.py")
quality = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(quality)


def _lat(median_ms: float) -> dict:
    return {"median_s": median_ms / 1e3, "p25_s": median_ms * 0.99 / 1e3, "p75_s": median_ms * 1.02 / 1e3}


def test_row_of_gives_milliseconds_and_ratios_of_medians():
    summary = {"tasks_in_model": 19, "budget": {"tasks_tuned": ["a"] * 17}, "trials_in_database": 2400,
               "runner": "doppler", "num_threads": 2, "host_cpu": "znver5",
               "tuned": _lat(20.0), "untuned": _lat(1600.0), "untuned_no_mcpu": _lat(850.0),
               "eager": _lat(16.0), "onnxruntime": {"error": "export failed"}}
    row = quality.row_of("resnet18", {"summary": summary, "tuning_seconds": 3612.0, "stopped_by": "time",
                                      "rounds": [{}] * 75})
    assert row["tuned_ms"] == 20.0 and row["eager_ms"] == 16.0 and row["tuned_p75_ms"] == 20.4
    assert row["tuned_vs_eager"] == 1.25          # 20 / 16
    assert row["tuned_vs_untuned"] == 0.0125      # 20 / 1600
    assert row["onnxruntime_ms"] is None and row["tuned_vs_onnxruntime"] is None
    assert row["onnxruntime_error"] == "export failed"
    assert row["tasks_tuned"] == 17 and row["rounds"] == 75 and row["tuning_minutes"] == 60.2
    assert "resnet18 | 17/19 | 2400 | 60.2 | 20.00 ms" in quality.table([row])
    assert row["load_tuning"] is None and quality.table([row]).endswith("| None/None")


@pytest.mark.parametrize("argv, message", [
    (["--minutes", "0"], "--minutes must be > 0"),
    (["--minutes", "nan"], "--minutes must be > 0"),
    (["--trials", "0"], "--trials must be >= 1"),
    (["--models", "resnet18,not_a_model"], "unknown torchvision models ['not_a_model']"),
    (["--runner", "rpc"], "invalid choice: 'rpc'"),
])
def test_bad_arguments_exit_2_and_write_nothing(tmp_path, argv, message):
    out, work = tmp_path / "q.csv", tmp_path / "work"
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "tuning_quality.py"), *argv, "--out", str(out),
                           "--work-dir", str(work)], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert not out.exists() and not work.exists()


def test_an_earlier_database_is_refused_without_resume(tmp_path):
    work = tmp_path / "work"
    (work / "resnet18").mkdir(parents=True)
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "tuning_quality.py"), "--models", "resnet18",
                           "--out", str(tmp_path / "q.csv"), "--work-dir", str(work)],
                          capture_output=True, text=True, timeout=120, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2
    assert "exists (an earlier run's database): pass --resume" in proc.stderr
    assert list((work / "resnet18").iterdir()) == []


def test_measure_only_needs_a_finished_tuning_and_refuses_resume_with_it(tmp_path):
    work = tmp_path / "work"
    (work / "resnet18").mkdir(parents=True)  # a database folder, but no resnet18.tuning.json beside it
    run = [sys.executable, str(REPO / "bench" / "tuning_quality.py"), "--models", "resnet18",
           "--out", str(tmp_path / "q.csv"), "--work-dir", str(work)]
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([*run, "--measure-only"], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2
    assert "resnet18.tuning.json is missing (no finished tuning of resnet18 there)" in proc.stderr
    proc = subprocess.run([*run, "--measure-only", "--resume"], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2 and "not allowed with argument" in proc.stderr
    assert not (tmp_path / "q.csv").exists()
