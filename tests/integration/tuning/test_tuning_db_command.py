"""``manage.py tuning_db import`` run as a process on a refused database (an Ansor log): exit
code 1, the refusal on stderr, nothing under the databases directory; on the real web-llm
database: exit code 0 and the database stored; and on AutoTVM and Ansor logs, an empty
database, a workload whose payload is truncated and a database without a record file, each
imported with ``--overwrite`` over an existing database of the same name: exit code 1, the
cause named, and every file under the databases directory byte for byte as before."""
from __future__ import annotations

import hashlib
import json
import shutil
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


# AutoTVM, log version 0.2 (autotvm/record.py encode(..., protocol="json"))
AUTOTVM = json.dumps({
    "input": ["llvm -keys=cpu", "dense_nopack.x86", [["TENSOR", [1, 16], "float32"], ["TENSOR", [8, 16], "float32"], None,
                                                      "float32"], {}],
    "config": {"index": 3, "code_hash": None, "entity": [["tile_y", "sp", [-1, 1]], ["tile_x", "sp", [-1, 2]]]},
    "result": [[1.2e-06], 0, 0.25, 1700000000.0], "version": 0.2, "tvm_version": "0.9.0"})
WEB_LLM = REPO / "data" / "tvm-metaschedule-db" / "web-llm"
WL, REC = "database_workload.json", "database_tuning_record.json"


def _autotvm(d):
    (d / "tuning.log").write_text(AUTOTVM + "\n" + AUTOTVM + "\n")


def _ansor(d):
    (d / REC).write_text(ANSOR + "\n")  # under MetaSchedule's record file name
    shutil.copy(WEB_LLM / WL, d / WL)


def _empty(d):
    (d / WL).write_text("")
    (d / REC).write_text("")


def _truncated(d):
    # web-llm's second workload: 42268 base64 characters = an 8-byte length header (31691) and 31691 bytes;
    # keep the first 20000 characters (15000 bytes: the header and 14992 bytes)
    shutil.copy(WEB_LLM / REC, d / REC)
    lines = (WEB_LLM / WL).read_text().splitlines()
    row = json.loads(lines[1])
    assert len(row[1]) == 42268
    lines[1] = json.dumps([row[0], row[1][:20000]])
    (d / WL).write_text("\n".join(lines) + "\n")


def _no_record_file(d):
    shutil.copy(WEB_LLM / WL, d / WL)


REFUSED = [
    (_autotvm, "holds no database_workload.json or database_tuning_record.json; its tuning.log is an AutoTVM log "
               "(JSON records, log version 0.2, written by TVM 0.9.0): TVM 0.27 MetaSchedule cannot read it"),
    (_ansor, "database_tuning_record.json line 1 is a line of an Ansor (auto_scheduler) log (JSON records, log "
             "version v0.6): TVM 0.27 MetaSchedule cannot read it"),
    (_empty, "is an empty database: database_workload.json holds no lines and there are no tuning records, "
             "nothing to import"),
    (_truncated, "database_workload.json line 2: IRModule payload truncated or damaged: its length header says "
                 "31691 bytes of TVM JSON, 14992 follow; nothing was imported"),
    (_no_record_file, "has 19 workloads but no database_tuning_record.json: no tuning records, nothing to import"),
]


def _snapshot(root):
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize("make, cause", REFUSED, ids=[m.__name__.strip("_") for m, _ in REFUSED])
def test_refused_import_names_the_cause_and_changes_nothing(tmp_path, make, cause):
    dbs = tmp_path / "var" / "tuning" / "databases"
    shutil.copytree(WEB_LLM, dbs / "kept")  # an imported database of the same name, which --overwrite would replace
    before = _snapshot(dbs)
    src = tmp_path / "src"
    src.mkdir()
    make(src)
    proc = _run(tmp_path, str(src), "--name", "kept", "--overwrite")
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith("CommandError: ") and cause in proc.stderr, proc.stderr
    assert proc.stdout == ""
    assert _snapshot(dbs) == before


def test_list_says_so_when_there_is_no_database(tmp_path):
    env = _worker_env()
    env["TANDEM_VAR_DIR"] = str(tmp_path / "var")
    proc = subprocess.run([sys.executable, "manage.py", "tuning_db", "list"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("no tuning databases in ") and "tuning_db import" in proc.stdout
