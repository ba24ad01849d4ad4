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
    (["--belief", "pair", "--max-pair-cost", "0"], "--max-pair-cost must be a finite number > 0 or 'none', got 0.0"),
    (["--belief", "pair", "--max-pair-cost", "inf"], "--max-pair-cost must be a finite number > 0 or 'none', got inf"),
    (["--belief", "none", "--max-pair-cost", "1"], "--max-pair-cost 1 needs --belief pair"),
    (["--max-pair-cost", "big"], "a number or 'none', got 'big'"),
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


def test_shapes_named_twice_are_simulated_once():
    assert bench.parse_args(["--shapes", "philly,gavel,philly"]).shapes == ["philly", "gavel"]


def test_simulated_horus_is_the_default_and_each_part_can_be_switched_off():
    from placement.core.pair_predictor import OutOfFamilyBelief

    h = bench.make("horus", bench.parse_args(["--quality-only"]))
    assert isinstance(h.pair_belief, OutOfFamilyBelief) and h.max_pair_cost == 1.0
    assert h.las is not None and tuple(h.las.thresholds) == (3600.0, 36000.0) and h.preemptive
    ctl = bench.make(bench.SAME_ORDER, bench.parse_args(["--quality-only"]))
    assert ctl.max_pair_cost == 1.0 and ctl.pair_belief is h.pair_belief and ctl.las is not None
    unbounded = bench.make("horus", bench.parse_args(["--quality-only", "--max-pair-cost", "none"]))
    assert unbounded.pair_belief is h.pair_belief and unbounded.max_pair_cost is None
    assert bench.make(bench.SAME_ORDER, bench.parse_args(["--quality-only", "--max-pair-cost", "none"])).pair_belief is None
    paper = bench.make("horus", bench.parse_args(["--quality-only", "--belief", "none", "--no-horus-las"]))
    assert paper.pair_belief is None and paper.max_pair_cost is None and paper.las is None and not paper.preemptive
    assert "pair_belief" not in bench.policy_kwargs("tiresias", bench.parse_args(["--quality-only"]))


def test_each_csv_row_names_the_settings_its_policy_ran_with(tmp_path, capsys):
    # one 9-job Gavel VC, the default policies: the horus rows carry LAS, belief and bound
    import csv
    import json

    out = tmp_path / "p.csv"
    bench.main(["--quality-only", "--shapes", "gavel", "--vcs", "23dbec", "--csv", str(out)])
    rows = list(csv.DictReader(out.open()))
    by = {r["policy"]: json.loads(r["settings"]) for r in rows}
    assert set(by) >= {"fifo", "horus", "horus+", bench.SAME_ORDER}
    assert by["fifo"] == {} and by["tiresias"] == {}
    assert by["horus"] == {"las_thresholds_gpu_s": [3600.0, 36000.0], "pair_belief": by["horus"]["pair_belief"],
                           "max_pair_cost": 1.0}
    assert by["horus"]["pair_belief"] and by["horus+"]["max_pair_cost"] is None
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["horus_max_pair_cost"] == 1.0
