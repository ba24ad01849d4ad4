"""``bench/_args.check_out_path``: a bad output path is refused (exit 2) before a long run, and
checking a good one writes no file, so a run refused later leaves nothing behind."""
from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("bench_args", Path(__file__).resolve().parents[2] / "bench" / "_args.py")
bench_args = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_args)


def test_a_folder_is_refused_with_exit_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        bench_args.check_out_path(argparse.ArgumentParser(prog="b"), tmp_path, "--csv")
    assert exc.value.code == 2
    assert f"--csv {tmp_path} is a folder; give a file name" in capsys.readouterr().err


def test_a_good_path_gets_its_folder_and_no_file(tmp_path):
    out = tmp_path / "new" / "deeper" / "r.csv"
    assert bench_args.check_out_path(argparse.ArgumentParser(prog="b"), out) == out
    assert out.parent.is_dir() and not out.exists()


def test_an_existing_file_is_left_as_it_was(tmp_path):
    out = tmp_path / "r.csv"
    out.write_text("a,b\n1,2\n")
    bench_args.check_out_path(argparse.ArgumentParser(prog="b"), out)
    assert out.read_text() == "a,b\n1,2\n"


def test_a_folder_that_cannot_be_made_is_refused(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(SystemExit) as exc:
        bench_args.check_out_path(argparse.ArgumentParser(prog="b"), blocker / "r.csv", "--out")
    assert exc.value.code == 2 and "cannot create its folder" in capsys.readouterr().err
