"""MetaSchedule JSON database import: the real web-llm database, the partial one, bad lines."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tuning.backends.database import DatabaseImportError, export_database, import_database

DB = Path(__file__).resolve().parents[3] / "data" / "tvm-metaschedule-db"


def test_web_llm_database_imports(tmp_path):
    dest = tmp_path / "web-llm"
    summary = import_database(DB / "web-llm", dest)
    # counted by hand from data/tvm-metaschedule-db/SOURCE.md: 19 workloads, 19 records, target metal
    assert (summary["workloads"], summary["records"]) == (19, 19)
    assert [t["kind"] for t in summary["targets"]] == ["metal"]
    assert summary["records_per_workload"] == {i: 1 for i in range(19)}
    assert summary["decodable"] is False  # 2023 TVM object graph; TVM 0.27 cannot decode it
    for name in ("database_workload.json", "database_tuning_record.json"):
        assert (dest / name).read_bytes() == (DB / "web-llm" / name).read_bytes()


def test_partial_database_is_refused_and_nothing_imported(tmp_path):
    dest = tmp_path / "sd"
    with pytest.raises(DatabaseImportError, match=r"292 tuning records but no database_workload.json"):
        import_database(DB / "web-stable-diffusion", dest)
    assert not dest.exists()
    assert list(tmp_path.iterdir()) == []  # no temporary directory left behind


def _copy(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(DB / "web-llm", src)
    return src


@pytest.mark.parametrize(
    "mutate,message",
    [
        (lambda s: (s / "database_tuning_record.json").write_text('[99,[[],[1e-5],{"kind":"llvm"},[]]]\n'), "out of range"),
        (lambda s: (s / "database_tuning_record.json").write_text("not json\n"), "not JSON"),
        (lambda s: (s / "database_workload.json").write_text('["1", "***not base64***"]\n'), "line 1: IRModule payload is not base64"),
        (lambda s: (s / "database_workload.json").unlink() or (s / "database_tuning_record.json").unlink(), "no database_workload.json"),
    ],
)
def test_bad_database_changes_nothing(tmp_path, mutate, message):
    src = _copy(tmp_path)
    mutate(src)
    dest = tmp_path / "dest"
    with pytest.raises(DatabaseImportError, match=message):
        import_database(src, dest)
    assert not dest.exists()


def test_existing_destination_not_overwritten(tmp_path):
    dest = tmp_path / "d"
    import_database(DB / "web-llm", dest)
    with pytest.raises(DatabaseImportError, match="already exists"):
        import_database(DB / "web-llm", dest)
    import_database(DB / "web-llm", dest, overwrite=True)


def test_export_roundtrip(tmp_path):
    import_database(DB / "web-llm", tmp_path / "a")
    (tmp_path / "a" / "tandem_meta.json").write_text(json.dumps({"target": {"kind": "metal"}, "num_threads": 1}))
    summary = export_database(tmp_path / "a", tmp_path / "b")
    assert summary["records"] == 19
    assert json.loads((tmp_path / "b" / "tandem_meta.json").read_text())["num_threads"] == 1


@pytest.mark.parametrize("name", ["../../staticfiles", "../../../../etc", "../exp-3", "..", ".hidden", "a/b", "", "x" * 129])
def test_database_name_is_a_name_never_a_path(name, tmp_path):
    from tuning.backends.database import DatabaseImportError, check_database_name

    with pytest.raises(DatabaseImportError, match="not a database name"):
        check_database_name(name, tmp_path)


def test_database_name_symlink_out_is_refused(tmp_path):
    from tuning.backends.database import DatabaseImportError, check_database_name

    (tmp_path / "dbs").mkdir()
    (tmp_path / "dbs" / "web-llm").mkdir()
    (tmp_path / "dbs" / "escape").symlink_to(tmp_path)
    assert check_database_name("web-llm", tmp_path / "dbs") == "web-llm"
    with pytest.raises(DatabaseImportError, match="outside"):
        check_database_name("escape", tmp_path / "dbs")
