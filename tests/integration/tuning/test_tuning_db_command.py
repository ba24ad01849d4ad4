"""``manage.py tuning_db import`` run as a process on a refused database (an Ansor log): exit
code 1, the refusal on stderr, nothing under the databases directory; and on the real web-llm
database: exit code 0 and the database stored."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO, _worker_env

pytestmark = pytest.mark.integration

# one Ansor (auto_scheduler) record, the shape src/auto_scheduler/measure_record.cc writes
ANSOR = json.dumps({
    "i": [["[\"matmul_add\", 128, 128, 128, \"float32\"]", "llvm -keys=cpu", [2, 64, 64, 0, 0, 0, 0, 0], "", 1],
          [[], [["SP", 2, 0, 128, [4, 8], 1]]]],
    "r": [[3.1e-05], 0, 0.42, 1700000000], "v": "v0.6"})


def _run(tmp_path, *args):
    env = _worker_env()
    env["TANDEM_VAR_DIR"] = str(tmp_path / "var")
    return subprocess.run([sys.executable, "manage.py", "tuning_db", "import", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)


def test_import_command_refuses_an_ansor_log(tmp_path):
    log = tmp_path / "ansor.json"
    log.write_text(ANSOR + "\n")
    proc = _run(tmp_path, str(log), "--name", "ansor")
    assert proc.returncode == 1, proc.stderr
    assert ("CommandError: ansor.json is an Ansor (auto_scheduler) log (JSON records, log version v0.6): "
            "TVM 0.27 MetaSchedule cannot read it") in proc.stderr
    assert proc.stdout == ""
    dbs = tmp_path / "var" / "tuning" / "databases"
    assert not dbs.exists() or list(dbs.iterdir()) == []


def test_import_command_imports_web_llm(tmp_path):
    proc = _run(tmp_path, str(REPO / "data" / "tvm-metaschedule-db" / "web-llm"), "--name", "web-llm", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["workloads"], out["records"], out["legacy_workloads"]) == (19, 19, 19)
    assert (tmp_path / "var" / "tuning" / "databases" / "web-llm" / "database_workload.json").is_file()
