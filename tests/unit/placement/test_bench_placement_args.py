"""``bench/placement.py``'s switches: bad values are refused (exit 2, the value named) before
any simulation, and ``--w-gang`` reaches Horus and Horus+ only."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "bench_placement", Path(__file__).resolve().parents[3] / "bench" / "placement.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


@pytest.mark.parametrize("argv, message", [
    (["--w-gang", "-1"], "--w-gang must be a finite number >= 0, got -1.0"),
    (["--w-gang", "nan"], "--w-gang must be a finite number >= 0, got nan"),
    (["--shapes", "gavel,nosuch"], "got ['nosuch']"),
    (["--shapes", ","], "got nothing"),
])
def test_bad_switches_exit_2_naming_the_value(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        bench.parse_args(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_w_gang_reaches_horus_and_horus_plus_only():
    args = bench.parse_args(["--quality-only", "--w-gang", "0.5"])
    assert bench.make("horus", args).w_gang == 0.5
    assert bench.make("horus+", args).w_gang == 0.5
    assert bench.make(bench.SAME_ORDER, args).w_gang == 0.5  # the random-partners control too
    assert "w_gang" not in bench.policy_kwargs("gandiva", args)
    assert bench.make("horus", bench.parse_args(["--quality-only"])).w_gang == 1.0  # Horus's default
