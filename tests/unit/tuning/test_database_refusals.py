"""What the MetaSchedule database import refuses, on real files: a JSONDatabase written by TVM 0.27
itself (two workloads, one record each) and then damaged; AutoTVM and Ansor log lines written by
hand from the formats their writers produce (TVM's ``autotvm/record.py`` ``encode`` and
``auto_scheduler/measure_record.cc`` ``WriteMeasureRecords``). Every refusal must name the problem
and leave the destination absent."""
from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import pytest

from tuning.backends.database import DatabaseImportError, import_database

WL, REC = "database_workload.json", "database_tuning_record.json"
WEB_LLM = Path(__file__).resolve().parents[3] / "data" / "tvm-metaschedule-db" / "web-llm"

# AutoTVM, log version 0.2 (encode(..., protocol="json")): input = (target, task name, args, kwargs)
AUTOTVM_JSON = json.dumps({
    "input": ["llvm -keys=cpu", "dense_nopack.x86", [["TENSOR", [1, 16], "float32"], ["TENSOR", [8, 16], "float32"], None,
                                                      "float32"], {}],
    "config": {"index": 3, "code_hash": None, "entity": [["tile_y", "sp", [-1, 1]], ["tile_x", "sp", [-1, 2]]]},
    "result": [[1.2e-06], 0, 0.25, 1700000000.0], "version": 0.2, "tvm_version": "0.9.0"})
# AutoTVM, log version 0.1: "i" = (target, task name, args, kwargs, workload, config)
AUTOTVM_V01 = json.dumps({
    "i": ["llvm", "conv2d", [["TENSOR", [1, 3, 8, 8], "float32"]], {}, ["conv2d", [1, 3, 8, 8]],
          {"i": 0, "c": None, "e": [["tile_f", "sp", [1, 1]]], "t": ""}],
    "r": [[1e-3], 0, 0.5, 1500000000.0], "v": 0.1})
# AutoTVM text lines (protocol="pickle", version 0.2): target, 3 base64 pickles, log version, TVM version
AUTOTVM_TEXT = "\t".join(["llvm -keys=cpu", base64.b64encode(b"\x80\x04task").decode(), base64.b64encode(b"\x80\x04cfg").decode(),
                          base64.b64encode(b"\x80\x04res").decode(), "0.2", "0.9.0"])
# Ansor: "i" = [search task [workload_key, target, hardware params, target_host, layout rewrite], state]
ANSOR = json.dumps({
    "i": [["[\"matmul_add\", 128, 128, 128, \"float32\"]", "llvm -keys=cpu", [2, 64, 64, 0, 0, 0, 0, 0], "", 1],
          [[], [["SP", 2, 0, 128, [4, 8], 1], ["RE", 2, [0, 2, 4, 1, 3, 5]]]]],
    "r": [[3.1e-05], 0, 0.42, 1700000000], "v": "v0.6"})

FOREIGN = [
    (AUTOTVM_JSON, r"an AutoTVM log \(JSON records, log version 0.2, written by TVM 0.9.0\)"),
    (AUTOTVM_V01, r"an AutoTVM log \(JSON records, log version 0.1\)"),
    (AUTOTVM_TEXT, r"an AutoTVM log \(tab-separated text records .*log version 0.2, written by TVM 0.9.0\)"),
    (ANSOR, r"an Ansor \(auto_scheduler\) log \(JSON records, log version v0.6\)"),
]
CANNOT = "TVM 0.27 MetaSchedule cannot read it"


@pytest.fixture(scope="module")
def real_db(tmp_path_factory):
    """A JSONDatabase written by TVM 0.27: workloads ``B = 2A`` and ``C = A + 1`` (float32[8]), one
    tuning record each (the unscheduled trace), target llvm. Returns its directory and the modules."""
    import tvm
    from tvm import te
    from tvm.s_tir import Schedule
    from tvm.s_tir import meta_schedule as ms

    d = tmp_path_factory.mktemp("ms-db")
    db = ms.database.JSONDatabase(str(d / WL), str(d / REC), allow_missing=True)
    mods = []
    for name, fn in (("B", lambda a: a * 2.0), ("C", lambda a: a + 1.0)):
        A = te.placeholder((8,), name="A")
        out = te.compute((8,), lambda i: fn(A[i]), name=name)
        f = te.create_prim_func([A, out])
        mod = tvm.IRModule({"main": f})
        wl = db.commit_workload(mod)
        db.commit_tuning_record(ms.database.TuningRecord(Schedule(mod).trace, wl, [1e-6], tvm.target.Target("llvm"),
                                                         ms.arg_info.ArgInfo.from_prim_func(f)))
        mods.append(mod)
    return d, mods


def _copy(real_db, tmp_path) -> Path:
    src = tmp_path / "src"
    shutil.copytree(real_db[0], src)
    return src


def _refused(src, tmp_path, match):
    dest = tmp_path / "dest"
    with pytest.raises(DatabaseImportError, match=match) as info:
        import_database(src, dest)
    assert not dest.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".import-")] == []
    return str(info.value)


def _set_payload(src: Path, line_no: int, payload: str) -> None:
    lines = (src / WL).read_text().splitlines()
    row = json.loads(lines[line_no - 1])
    lines[line_no - 1] = json.dumps([row[0], payload])
    (src / WL).write_text("\n".join(lines) + "\n")


def _payload(src: Path, line_no: int) -> str:
    return json.loads((src / WL).read_text().splitlines()[line_no - 1])[1]


def test_real_database_imports_and_reads_back(real_db, tmp_path):
    import tvm_ffi

    from tuning.backends.database import count_records_by_workload, open_database

    summary = import_database(real_db[0], tmp_path / "d")
    assert (summary["workloads"], summary["records"], summary["decodable"], summary["legacy_workloads"]) == (2, 2, True, 0)
    assert [t["kind"] for t in summary["targets"]] == ["llvm"]
    # TVM itself reads the copy: one record per workload, keyed by the modules' structural hashes
    got = count_records_by_workload(open_database(tmp_path / "d"))
    assert got == {int(tvm_ffi.structural_hash(m)): 1 for m in real_db[1]}


def test_truncated_payload_of_second_workload_is_refused(real_db, tmp_path):
    src = _copy(real_db, tmp_path)
    full = _payload(src, 2)
    declared = int.from_bytes(base64.b64decode(full)[:8], "little")
    cut = (len(full) // 2) // 4 * 4  # still valid base64, half the bytes
    _set_payload(src, 2, full[:cut])
    msg = _refused(src, tmp_path, r"database_workload.json line 2: IRModule payload truncated")
    assert f"says {declared} bytes of TVM JSON, {cut // 4 * 3 - 8} follow" in msg


def test_payload_cut_mid_base64_quantum_is_refused(real_db, tmp_path):
    src = _copy(real_db, tmp_path)
    full = _payload(src, 2)
    _set_payload(src, 2, full[: (len(full) // 2) // 4 * 4 + 1])
    _refused(src, tmp_path, r"database_workload.json line 2: IRModule payload is not base64")


def test_payload_that_is_not_an_irmodule_is_refused(real_db, tmp_path):
    import tvm

    src = _copy(real_db, tmp_path)
    text = tvm.ir.save_json(real_db[1][0]["main"]).encode()  # a PrimFunc, not an IRModule
    _set_payload(src, 1, base64.b64encode(len(text).to_bytes(8, "little") + text).decode())
    _refused(src, tmp_path, r"database_workload.json line 1: payload decodes to a PrimFunc, not an IRModule")


def test_payload_graph_tvm_cannot_load_is_refused(real_db, tmp_path):
    src = _copy(real_db, tmp_path)
    text = json.dumps({"root_index": 0, "nodes": [{"type": "no.SuchType"}], "metadata": {}}).encode()
    _set_payload(src, 2, base64.b64encode(len(text).to_bytes(8, "little") + text).decode())
    _refused(src, tmp_path, r"database_workload.json line 2: IRModule payload does not load in TVM 0.27")


def test_payload_that_is_not_json_is_refused(real_db, tmp_path):
    src = _copy(real_db, tmp_path)
    text = b"not a graph at all"
    _set_payload(src, 2, base64.b64encode(len(text).to_bytes(8, "little") + text).decode())
    _refused(src, tmp_path, r"database_workload.json line 2: IRModule payload is not TVM JSON")


def test_damaged_legacy_workload_is_refused_not_reported_undecodable(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(WEB_LLM, src)
    full = _payload(src, 3)
    _set_payload(src, 3, full[: len(full) // 4 * 2])
    _refused(src, tmp_path, r"database_workload.json line 3: IRModule payload truncated")


def test_intact_legacy_database_still_imports_as_not_decodable(tmp_path):
    summary = import_database(WEB_LLM, tmp_path / "w")
    # all 19 web-llm workloads are TVM 0.12.dev0 graphs (data/tvm-metaschedule-db/SOURCE.md)
    assert (summary["decodable"], summary["legacy_workloads"]) == (False, 19)


@pytest.mark.parametrize("records", [None, ""], ids=["no-record-file", "empty-record-file"])
def test_empty_database_is_refused(real_db, tmp_path, records):
    src = _copy(real_db, tmp_path)
    (src / WL).write_text("")
    (src / REC).unlink() if records is None else (src / REC).write_text(records)
    _refused(src, tmp_path, r"is an empty database: database_workload.json holds no lines.*nothing to import")


def test_database_without_record_file_is_refused(real_db, tmp_path):
    src = _copy(real_db, tmp_path)
    (src / REC).unlink()
    _refused(src, tmp_path, r"has 2 workloads but no database_tuning_record.json: no tuning records, nothing to import")


def test_database_with_empty_record_file_is_refused(real_db, tmp_path):
    src = _copy(real_db, tmp_path)
    (src / REC).write_text("\n")
    _refused(src, tmp_path, r"database_tuning_record.json holds no tuning records \(2 workloads\), nothing to import")


def test_directory_without_database_files_is_refused(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "notes.txt").write_text("hello\n")
    _refused(src, tmp_path, r"holds no database_workload.json or database_tuning_record.json: .*nothing to import")


@pytest.mark.parametrize("name", [WL, REC])
def test_binary_garbage_is_refused_naming_the_file(real_db, tmp_path, name):
    src = _copy(real_db, tmp_path)
    (src / name).write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe")
    _refused(src, tmp_path, rf"{name}: not UTF-8 text \(byte 0x89 at offset 0\)")


@pytest.mark.parametrize("line,fmt", FOREIGN, ids=["autotvm-json", "autotvm-v0.1", "autotvm-text", "ansor"])
def test_foreign_log_given_as_a_file_is_named(tmp_path, line, fmt):
    log = tmp_path / "tune.log"
    log.write_text(f"{line}\n{line}\n")
    _refused(log, tmp_path, rf"tune.log is {fmt}: {CANNOT}")


@pytest.mark.parametrize("line,fmt", FOREIGN, ids=["autotvm-json", "autotvm-v0.1", "autotvm-text", "ansor"])
def test_foreign_log_in_a_directory_is_named(tmp_path, line, fmt):
    src = tmp_path / "src"
    src.mkdir()
    (src / "resnet18.log").write_text(f"# comment\n{line}\n")
    _refused(src, tmp_path, rf"its resnet18.log is {fmt}: {CANNOT}")


@pytest.mark.parametrize("line,fmt", FOREIGN, ids=["autotvm-json", "autotvm-v0.1", "autotvm-text", "ansor"])
def test_foreign_log_under_the_record_file_name_is_named(real_db, tmp_path, line, fmt):
    src = _copy(real_db, tmp_path)
    (src / REC).write_text(f"{line}\n")
    _refused(src, tmp_path, rf"database_tuning_record.json line 1 is a line of {fmt}: {CANNOT}")
    (src / WL).unlink()  # alone, without a workload file
    _refused(src, tmp_path, rf"database_tuning_record.json is {fmt}: {CANNOT}")


def test_foreign_log_under_the_workload_file_name_is_named(real_db, tmp_path):
    src = _copy(real_db, tmp_path)
    lines = (src / WL).read_text().splitlines()
    (src / WL).write_text(f"{lines[0]}\n{ANSOR}\n")
    _refused(src, tmp_path, rf"database_workload.json line 2 is a line of an Ansor \(auto_scheduler\) log.*{CANNOT}")


def test_a_metaschedule_file_path_asks_for_its_directory(real_db, tmp_path):
    _refused(real_db[0] / WL, tmp_path, r"database_workload.json is a file, not a MetaSchedule database directory.*"
                                        r"give the directory that holds it")


def test_missing_path_is_refused(tmp_path):
    _refused(tmp_path / "nope", tmp_path, r"nope does not exist")
