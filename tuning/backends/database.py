"""MetaSchedule JSON databases: open one in a work directory, count what it holds per workload,
check the target it was measured under, import one from elsewhere and export one.

Format (MetaSchedule ``JSONDatabase``): ``database_workload.json``, one JSON line
``[structural_hash, base64 TVM-JSON IRModule]`` per workload, and
``database_tuning_record.json``, one line ``[workload_index, [trace, run_secs, target, args_info]]``
per tuning record. Tandem adds ``tandem_meta.json`` (target dict and runner thread count the
records were measured with), because a MetaSchedule record stores its target but not the
threads.

Import validates every line before anything is written, then copies the files into the
destination atomically (temporary directory + rename): a database with records but no workload
file, a record pointing past the workload table, or a malformed line gets a
:class:`DatabaseImportError` and nothing is imported. IRModules serialised by older TVM versions
(the web-llm database is from 2023) are kept as-is: TVM 0.27 cannot decode their object graph,
which the import summary reports as ``decodable: false``.
"""
from __future__ import annotations

import base64
import json
import os
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

WORKLOAD_FILE = "database_workload.json"
RECORD_FILE = "database_tuning_record.json"
META_FILE = "tandem_meta.json"


_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def check_database_name(name: str, databases_dir: Path | None = None) -> str:
    """``name`` if it is a plain database NAME: 1-128 of ``[A-Za-z0-9._-]``, not starting with a
    dot, no path separator (so ``../exp-3`` or ``../../etc`` cannot name another experiment's or
    the system's directory); with ``databases_dir``, it must also resolve to a directory inside it
    (a symlink out is refused). Raises :class:`DatabaseImportError` (a ``ValueError``) naming the rule."""
    if not isinstance(name, str) or not 1 <= len(name) <= 128 or name.startswith(".") or not set(name) <= _NAME_CHARS:
        raise DatabaseImportError(f"{name!r} is not a database name: use 1-128 letters, digits, '.', '_' or '-', "
                                  "not starting with '.' and without '/' (see manage.py tuning_db list)")
    if databases_dir is not None:
        root = Path(databases_dir).resolve()
        p = (Path(databases_dir) / name).resolve()
        if not p.is_relative_to(root) or p == root:
            raise DatabaseImportError(f"database {name!r} resolves outside the databases directory")
    return name


class DatabaseImportError(ValueError):
    """A MetaSchedule database could not be imported; nothing was written."""


def open_database(work_dir: str | os.PathLike[str]):
    """The ``JSONDatabase`` of ``work_dir`` (created empty if missing)."""
    from tvm.s_tir import meta_schedule as ms

    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    return ms.database.JSONDatabase(str(work_dir / WORKLOAD_FILE), str(work_dir / RECORD_FILE), allow_missing=True)


def read_meta(work_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """Tandem's metadata (``{"target": {...}, "num_threads": n}``) of a database, or ``None``."""
    p = Path(work_dir) / META_FILE
    return json.loads(p.read_text()) if p.exists() else None


def write_meta(work_dir: str | os.PathLike[str], *, target: dict[str, Any], num_threads: int) -> None:
    """Record the target and thread count the database's records are measured with."""
    p = Path(work_dir) / META_FILE
    p.write_text(json.dumps({"target": target, "num_threads": int(num_threads)}, sort_keys=True))


def record_targets(work_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Distinct targets (as JSON dicts) of the tuning records in ``work_dir``."""
    path = Path(work_dir) / RECORD_FILE
    seen: dict[str, dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                tgt = json.loads(line)[1][2]
                seen.setdefault(json.dumps(tgt, sort_keys=True), tgt)
    return list(seen.values())


def count_records_by_workload(database: Any) -> Counter:
    """Number of tuning records per workload structural hash (``tvm_ffi.structural_hash``)."""
    import tvm  # noqa: F401 - registers the TVM FFI types decoded below
    import tvm_ffi

    return Counter(int(tvm_ffi.structural_hash(r.workload.mod)) for r in database.get_all_tuning_records())


def _check_lines(path: Path, kind: str) -> list[Any]:
    rows = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise DatabaseImportError(f"{path.name} line {n}: not JSON ({err.msg})") from None
        if kind == "workload":
            ok = isinstance(row, list) and len(row) == 2 and isinstance(row[0], str) and isinstance(row[1], str)
            if ok:
                try:
                    base64.b64decode(row[1], validate=True)
                except ValueError:
                    ok = False
        else:
            ok = (isinstance(row, list) and len(row) == 2 and isinstance(row[0], int) and isinstance(row[1], list)
                  and len(row[1]) >= 3 and isinstance(row[1][2], dict) and "kind" in row[1][2])
        if not ok:
            expected = "[shash, base64 IRModule]" if kind == "workload" else "[workload_index, [trace, run_secs, target, args_info]]"
            raise DatabaseImportError(f"{path.name} line {n}: not a MetaSchedule {kind} line (expected {expected})")
        rows.append(row)
    return rows


def _decodable(blob_b64: str) -> bool:
    import tvm
    import tvm_ffi  # noqa: F401 - loads the FFI before decoding

    try:
        raw = base64.b64decode(blob_b64)
        # TVM's binary JSON: 8-byte little-endian length then the JSON graph text
        text = raw[8:].decode() if raw[:1] != b"{" else raw.decode()
        tvm.ir.load_json(text)
        return True
    except Exception:  # noqa: BLE001 - any decode failure means "not decodable by this TVM"
        return False


def inspect_database(src: str | os.PathLike[str]) -> dict[str, Any]:
    """Validate the MetaSchedule JSON database in directory ``src``; returns a summary
    ``{"workloads", "records", "records_per_workload", "targets", "decodable"}``.

    Raises :class:`DatabaseImportError` for a missing or malformed file, records without a
    workload file, or a record whose workload index is out of range.
    """
    src = Path(src)
    wl, rec = src / WORKLOAD_FILE, src / RECORD_FILE
    if not src.is_dir():
        raise DatabaseImportError(f"{src} is not a directory")
    if rec.exists() and not wl.exists():
        n = len([x for x in rec.read_text().splitlines() if x.strip()])
        raise DatabaseImportError(
            f"{src} has {n} tuning records but no {WORKLOAD_FILE}: the records' workload indices cannot be "
            "resolved to tensor programs, so nothing was imported")
    if not wl.exists():
        raise DatabaseImportError(f"{src} holds no {WORKLOAD_FILE}: not a MetaSchedule JSON database")
    workloads = _check_lines(wl, "workload")
    records = _check_lines(rec, "tuning record") if rec.exists() else []
    for i, r in enumerate(records, 1):
        if not 0 <= r[0] < len(workloads):
            raise DatabaseImportError(f"{RECORD_FILE} line {i}: workload index {r[0]} out of range (0..{len(workloads) - 1})")
    targets = {json.dumps(r[1][2], sort_keys=True) for r in records}
    return {
        "workloads": len(workloads),
        "records": len(records),
        "records_per_workload": dict(Counter(r[0] for r in records)),
        "targets": [json.loads(t) for t in sorted(targets)],
        "decodable": _decodable(workloads[0][1]) if workloads else True,
    }


def import_database(src: str | os.PathLike[str], dest: str | os.PathLike[str], *, overwrite: bool = False) -> dict[str, Any]:
    """Validate the database in ``src`` (:func:`inspect_database`) and copy it to directory
    ``dest`` atomically. Raises :class:`DatabaseImportError` (nothing written) if invalid or if
    ``dest`` exists and not ``overwrite``."""
    summary = inspect_database(src)
    dest = Path(dest)
    if dest.exists() and not overwrite:
        raise DatabaseImportError(f"{dest} already exists")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".import-", dir=dest.parent))
    try:
        for name in (WORKLOAD_FILE, RECORD_FILE, META_FILE):
            if (Path(src) / name).exists():
                shutil.copy2(Path(src) / name, tmp / name)
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(tmp, dest)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return summary


def export_database(work_dir: str | os.PathLike[str], dest: str | os.PathLike[str]) -> dict[str, Any]:
    """Copy the database of ``work_dir`` (workload, records, Tandem meta) into directory ``dest``
    and return its :func:`inspect_database` summary. Raises :class:`DatabaseImportError` if
    ``work_dir`` holds no valid database."""
    summary = inspect_database(work_dir)
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    for name in (WORKLOAD_FILE, RECORD_FILE, META_FILE):
        if (Path(work_dir) / name).exists():
            shutil.copy2(Path(work_dir) / name, dest / name)
    return summary
