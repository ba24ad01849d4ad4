"""MetaSchedule JSON databases: open one in a work directory, count what it holds per workload,
check the target it was measured under, import one from elsewhere and export one.

Format (MetaSchedule ``JSONDatabase``): ``database_workload.json``, one JSON line
``[structural_hash, base64 TVM-JSON IRModule]`` per workload, and
``database_tuning_record.json``, one line ``[workload_index, [trace, run_secs, target, args_info]]``
per tuning record. Tandem adds ``tandem_meta.json`` (target dict and runner thread count the
records were measured with), because a MetaSchedule record stores its target but not the
threads.

Import validates every line before anything is written, then copies the files into the
destination atomically (temporary directory + rename). Refused with a
:class:`DatabaseImportError` naming the file (and line) and nothing imported:

- a log of another TVM tuner, given as a file or found in the directory (also under a
  MetaSchedule file name): AutoTVM (JSON lines with ``input``/``config``/``result``/``version``/
  ``tvm_version``, the version-0.1 JSON lines with ``i``/``r``/``v``, or the tab-separated text
  lines of its ``pickle`` protocol) or Ansor/``auto_scheduler`` (JSON lines ``{"i": [task, state],
  "r": [...], "v": "v0.x"}``); TVM 0.27 MetaSchedule reads neither;
- a path that is a single file, a directory without MetaSchedule files, records without a
  workload file, workloads without a record file, an empty database (no workload and no record
  lines), a database with no tuning records;
- a file that is not UTF-8 text, a line that is not JSON or not of the shape above, a record
  pointing past the workload table;
- a workload whose payload is not base64, is truncated (its 8-byte length header says more bytes
  than follow), is not a TVM JSON object graph, or does not decode to an ``IRModule``. Every
  workload is decoded, not only the first.

IRModules serialised by older TVM versions in their intact legacy JSON graph (``root``, nodes with
``type_key``; the web-llm database is from 2023, TVM 0.12.dev0) are kept as-is: TVM 0.27 no longer
loads that graph format, which the summary reports as ``decodable: false`` with the count in
``legacy_workloads``.
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


def records_in_commit_order(work_dir: str | os.PathLike[str]) -> dict[str, list[tuple[Any, list[float] | None]]]:
    """The tuning records of the JSON database in ``work_dir`` in the order they were committed,
    by workload: ``{structural hash: [(trace JSON, run seconds or None), ...]}``, the hash as the
    decimal string MetaSchedule writes first on each ``database_workload.json`` line (equal to
    ``tvm_ffi.structural_hash(mod) & (2**64 - 1)``). Read from the files, without TVM: TVM's
    ``get_all_tuning_records`` sorts by run time. A database that does not exist: ``{}``."""
    work_dir = Path(work_dir)
    hashes: list[str] = []
    if (work_dir / WORKLOAD_FILE).exists():
        hashes = [str(json.loads(line)[0]) for line in (work_dir / WORKLOAD_FILE).read_text().splitlines() if line.strip()]
    out: dict[str, list[tuple[Any, list[float] | None]]] = {}
    if (work_dir / RECORD_FILE).exists():
        for line in (work_dir / RECORD_FILE).read_text().splitlines():
            if not line.strip():
                continue
            index, (trace, run_secs, *_rest) = json.loads(line)
            secs = [float(x) for x in run_secs] if run_secs else None
            out.setdefault(hashes[int(index)], []).append((trace, secs))
    return out


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


_AUTOTVM_JSON_KEYS = frozenset({"input", "config", "result"})
_CANNOT_READ = ("TVM 0.27 MetaSchedule cannot read it (MetaSchedule reads only its own JSON database: "
                f"{WORKLOAD_FILE} + {RECORD_FILE}); nothing was imported")


def _is_b64(field: str) -> bool:
    try:
        base64.b64decode(field, validate=True)
    except ValueError:
        return False
    return bool(field)


def foreign_format(line: str) -> str | None:
    """Name the tuning-log format of one text ``line`` if it is a log of a TVM tuner other than
    MetaSchedule, else ``None``. Recognised (from the writers in TVM's
    ``python/tvm/autotvm/record.py`` ``encode`` and ``src/auto_scheduler/measure_record.cc``
    ``WriteMeasureRecords``):

    - AutoTVM JSON, log version 0.2: an object with keys ``input``, ``config``, ``result`` (and
      ``version``, ``tvm_version``);
    - AutoTVM JSON, log version 0.1: ``{"i": [target_str, task_name, args, kwargs, workload,
      config], "r": [...], "v": 0.1}``;
    - Ansor (``auto_scheduler``): ``{"i": [[workload_key, target_str, ...], [stages, steps]],
      "r": [costs, error_no, all_cost, timestamp], "v": "v0.6"}`` (a search task list, not a
      target string, first in ``i``; a string version);
    - AutoTVM's text (``pickle`` protocol) lines: tab-separated ``target``, then three base64
      pickles, then (log version 0.2) the log version and the TVM version: 4 or 6 fields.
      Nothing is unpickled.
    """
    text = line.strip()
    if text.startswith("{"):
        try:
            row = json.loads(text)
        except json.JSONDecodeError:
            return None
        if not isinstance(row, dict):
            return None
        if _AUTOTVM_JSON_KEYS <= row.keys():
            ver = row.get("version")
            tvm_ver = row.get("tvm_version")
            return (f"an AutoTVM log (JSON records, log version {ver}"
                    + (f", written by TVM {tvm_ver}" if tvm_ver else "") + ")")
        if {"i", "r"} <= row.keys() and isinstance(row["i"], list) and row["i"]:
            if isinstance(row["i"][0], list):
                return f"an Ansor (auto_scheduler) log (JSON records, log version {row.get('v')})"
            if isinstance(row["i"][0], str):
                return f"an AutoTVM log (JSON records, log version {row.get('v', 0.1)})"
        return None
    fields = text.split("\t")
    if len(fields) in (4, 6) and fields[0] and all(_is_b64(f) for f in fields[1:4]):
        return (f"an AutoTVM log (tab-separated text records of its pickle protocol, {len(fields)} fields"
                + (f", log version {fields[4]}, written by TVM {fields[5]}" if len(fields) == 6 else "") + ")")
    return None


def _read_text(path: Path, limit: int | None = None) -> str:
    """The UTF-8 text of ``path`` (at most ``limit`` bytes, cut at a line end); a file that is
    not UTF-8 gets a :class:`DatabaseImportError` naming it and the first bad byte."""
    with open(path, "rb") as f:
        data = f.read() if limit is None else f.read(limit)
    if limit is not None and len(data) == limit and b"\n" in data:
        data = data[: data.rindex(b"\n")]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise DatabaseImportError(
            f"{path.name}: not UTF-8 text (byte 0x{data[err.start]:02x} at offset {err.start}), so not a MetaSchedule "
            "JSON database file (binary or damaged); nothing was imported") from None


def _first_line(text: str) -> str | None:
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            return line
    return None


def _refuse_if_foreign(path: Path, text: str) -> None:
    line = _first_line(text)
    fmt = foreign_format(line) if line is not None else None
    if fmt:
        raise DatabaseImportError(f"{path.name} is {fmt}: {_CANNOT_READ}")


def _check_lines(text: str, path: Path, kind: str) -> list[Any]:
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fmt = foreign_format(line)
        if fmt:
            raise DatabaseImportError(f"{path.name} line {n} is a line of {fmt}: {_CANNOT_READ}")
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise DatabaseImportError(f"{path.name} line {n}: not JSON ({err.msg})") from None
        if kind == "workload":
            ok = isinstance(row, list) and len(row) == 2 and isinstance(row[0], str) and isinstance(row[1], str)
        else:
            ok = (isinstance(row, list) and len(row) == 2 and isinstance(row[0], int) and isinstance(row[1], list)
                  and len(row[1]) >= 3 and isinstance(row[1][2], dict) and "kind" in row[1][2])
        if not ok:
            expected = "[shash, base64 IRModule]" if kind == "workload" else "[workload_index, [trace, run_secs, target, args_info]]"
            raise DatabaseImportError(f"{path.name} line {n}: not a MetaSchedule {kind} line (expected {expected})")
        rows.append((n, row))
    return rows


def decode_workload(blob_b64: str) -> tuple[str, str | None]:
    """Classify one workload payload (the base64 field of a ``database_workload.json`` line).

    The payload is what MetaSchedule writes: base64 of an 8-byte little-endian length followed by
    that many bytes of TVM's JSON object graph of the ``IRModule`` (a payload that is the graph
    text itself, starting ``{``, is accepted too). Returns ``("ok", None)`` if TVM 0.27 loads it as
    an ``IRModule``, ``("legacy", tvm_version_or_None)`` for an intact pre-0.27 graph (``root``,
    nodes with ``type_key``, root node ``IRModule``) that TVM 0.27 no longer loads. Raises
    ``ValueError`` saying what is wrong (not base64, truncated, not a TVM JSON graph, not an
    IRModule) otherwise.
    """
    import tvm
    import tvm_ffi  # noqa: F401 - loads the FFI before decoding

    try:
        raw = base64.b64decode(blob_b64, validate=True)
    except ValueError as err:
        raise ValueError(f"IRModule payload is not base64 ({err}): truncated or damaged") from None
    if raw[:1] == b"{":
        body = raw
    else:
        if len(raw) < 8:
            raise ValueError(f"IRModule payload is {len(raw)} bytes, shorter than its 8-byte length header: truncated")
        declared = int.from_bytes(raw[:8], "little")
        body = raw[8:]
        if declared != len(body):
            raise ValueError(f"IRModule payload truncated or damaged: its length header says {declared} bytes of TVM JSON, "
                             f"{len(body)} follow")
    try:
        graph = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"IRModule payload is not TVM JSON ({err})") from None
    if not isinstance(graph, dict) or not isinstance(graph.get("nodes"), list):
        raise ValueError("IRModule payload is not a TVM JSON object graph (no 'nodes' list)")
    if "root" in graph and "root_index" not in graph:  # the pre-0.27 graph layout
        root = graph["root"]
        nodes = graph["nodes"]
        if not (isinstance(root, int) and 0 <= root < len(nodes) and isinstance(nodes[root], dict)
                and nodes[root].get("type_key") == "IRModule"):
            raise ValueError("IRModule payload (legacy TVM JSON graph) does not have an IRModule at its root")
        attrs = graph.get("attrs")
        return "legacy", attrs.get("tvm_version") if isinstance(attrs, dict) else None
    try:
        mod = tvm.ir.load_json(body.decode("utf-8"))
    except Exception as err:  # noqa: BLE001 - TVM raises several error types for a bad graph
        raise ValueError(f"IRModule payload does not load in TVM 0.27 ({type(err).__name__}: {str(err)[:200]})") from None
    if not isinstance(mod, tvm.IRModule):
        raise ValueError(f"payload decodes to a {type(mod).__name__}, not an IRModule")
    return "ok", None


def _refuse_not_a_directory(src: Path) -> None:
    if not src.exists():
        raise DatabaseImportError(f"{src} does not exist")
    if src.is_file():
        _refuse_if_foreign(src, _read_text(src, limit=1 << 16))
        hint = "; give the directory that holds it" if src.name in (WORKLOAD_FILE, RECORD_FILE) else ""
        raise DatabaseImportError(f"{src} is a file, not a MetaSchedule database directory (a directory with {WORKLOAD_FILE} "
                                  f"and {RECORD_FILE}){hint}; nothing was imported")
    raise DatabaseImportError(f"{src} is not a directory")


def _refuse_no_metaschedule_files(src: Path) -> None:
    files = sorted(p for p in src.iterdir() if p.is_file() and not p.name.startswith("."))
    for p in files[:64]:
        try:
            text = _read_text(p, limit=1 << 16)
        except DatabaseImportError:
            continue  # a binary file is not a log of any tuner; said below
        line = _first_line(text)
        fmt = foreign_format(line) if line is not None else None
        if fmt:
            raise DatabaseImportError(f"{src} holds no {WORKLOAD_FILE} or {RECORD_FILE}; its {p.name} is {fmt}: {_CANNOT_READ}")
    raise DatabaseImportError(f"{src} holds no {WORKLOAD_FILE} or {RECORD_FILE}: not a MetaSchedule JSON database, "
                              "nothing to import")


def inspect_database(src: str | os.PathLike[str], *, action: str = "import") -> dict[str, Any]:
    """Validate the MetaSchedule JSON database in directory ``src``; returns a summary
    ``{"workloads", "records", "records_per_workload", "targets", "decodable", "legacy_workloads"}``
    (``decodable``: every workload loads in this TVM as an IRModule; ``legacy_workloads``: how many
    are intact pre-0.27 graphs this TVM no longer loads).

    Raises :class:`DatabaseImportError` naming the file and line for anything listed in this
    module's docstring (foreign log formats, missing or empty files, non-UTF-8 bytes, malformed
    lines, out-of-range workload indices, damaged workload payloads). ``action`` ("import" or
    "export") only words the message for a database with nothing in it.
    """
    src = Path(src)
    wl, rec = src / WORKLOAD_FILE, src / RECORD_FILE
    if not src.is_dir():
        _refuse_not_a_directory(src)
    if not wl.exists() and not rec.exists():
        _refuse_no_metaschedule_files(src)
    rec_text = _read_text(rec) if rec.exists() else None
    if rec_text is not None and not wl.exists():
        _refuse_if_foreign(rec, rec_text)
        n = len([x for x in rec_text.splitlines() if x.strip()])
        raise DatabaseImportError(
            f"{src} has {n} tuning records but no {WORKLOAD_FILE}: the records' workload indices cannot be "
            "resolved to tensor programs, so nothing was imported")
    workloads = _check_lines(_read_text(wl), wl, "workload")
    records = _check_lines(rec_text, rec, "tuning record") if rec_text is not None else []
    if not workloads and not records:
        raise DatabaseImportError(f"{src} is an empty database: {WORKLOAD_FILE} holds no lines and there are no tuning "
                                  f"records, nothing to {action}")
    if rec_text is None:
        raise DatabaseImportError(f"{src} has {len(workloads)} workloads but no {RECORD_FILE}: no tuning records, "
                                  f"nothing to {action}")
    if not records:
        raise DatabaseImportError(f"{src}: {RECORD_FILE} holds no tuning records ({len(workloads)} workloads), "
                                  f"nothing to {action}")
    legacy = 0
    for n, w in workloads:
        try:
            kind, _ = decode_workload(w[1])
        except ValueError as err:
            raise DatabaseImportError(f"{WORKLOAD_FILE} line {n}: {err}; nothing was {action}ed") from None
        legacy += kind == "legacy"
    for n, r in records:
        if not 0 <= r[0] < len(workloads):
            span = f"0..{len(workloads) - 1}" if workloads else f"{WORKLOAD_FILE} holds no workloads"
            raise DatabaseImportError(f"{RECORD_FILE} line {n}: workload index {r[0]} out of range ({span})")
    targets = {json.dumps(r[1][2], sort_keys=True) for _, r in records}
    return {
        "workloads": len(workloads),
        "records": len(records),
        "records_per_workload": dict(Counter(r[0] for _, r in records)),
        "targets": [json.loads(t) for t in sorted(targets)],
        "decodable": legacy == 0,
        "legacy_workloads": legacy,
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
    summary = inspect_database(work_dir, action="export")
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    for name in (WORKLOAD_FILE, RECORD_FILE, META_FILE):
        if (Path(work_dir) / name).exists():
            shutil.copy2(Path(work_dir) / name, dest / name)
    return summary
