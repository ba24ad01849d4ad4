"""Node tables and workloads an operator brings to a weight-learning experiment, parsed and
validated before anything runs (Django-free: the pipeline, the ``weight-learning`` serializer
and ``manage.py learn_weights`` share it).

- **Node table**: the PAI machine-spec CSV shape (headerless ``machine,gpu_type,cap_cpu,
  cap_mem,cap_gpu``; a header row naming exactly those columns is allowed) or Kubernetes
  ``v1`` Node YAML, parsed by the platform's node importer (:func:`webapp.importers.parse_text`,
  the parser behind ``import_nodes`` and the admin import), so an inline table means exactly
  what the same file means when registered as a cluster: its nodes as the importer reads them,
  no background load (as for a registered ``cluster_id``). At most :data:`MAX_NODE_ROWS` nodes.
- **Workload**: an arrival trace in the Azure Functions 2021 shape (``app,func,end_timestamp,
  duration`` with a header; :func:`rlweights.core.workload.parse_azure_trace`), replayed as
  recorded (:func:`rlweights.core.workload.replay_workload`). At most
  :data:`rlweights.core.workload.MAX_TRACE_ROWS` invocations.

Every input is described in the experiment's result by a *descriptor*: ``source`` (``"inline"``,
``"cluster"`` or ``"shipped"``), ``name``, ``rows`` (nodes or invocations) and ``sha256`` of the
content (UTF-8 bytes of the text as given; for a registered cluster, of its nodes as canonical
JSON; for the shipped data, of the file). Errors are :class:`InputError`, which names the
parameter (``node_table``, ``workload``, ``cluster_id``).
"""
from __future__ import annotations

import functools
import hashlib
import json
import re
from pathlib import Path

from rlweights.core.cluster import DEFAULT_PAI_SPEC, ClusterSetup, load_pai_machines
from rlweights.core.scheduler import Node, SchedulingError, Taint
from rlweights.core.workload import DEFAULT_AZURE_SAMPLE, MAX_TRACE_ROWS, TraceRows, WorkloadError, parse_azure_trace
from webapp.importers import MAX_NODE_FILE_BYTES, PAI_COLUMNS, NodeImportError, parse_text

#: Most nodes a node table may hold: above the 1,897 machines of the real PAI table; a
#: scheduling decision costs O(nodes) array work, so larger tables should be sampled first.
MAX_NODE_ROWS = 5_000
#: Largest node table or trace file the command reads (bytes); the REST API's JSON body limit
#: (``TANDEM_MAX_JSON_KIB``, 2 MiB by default) bounds inline content there.
MAX_INPUT_FILE_BYTES = MAX_NODE_FILE_BYTES
NODE_TABLE_FORMATS = ("auto", "pai", "k8s")
#: Names given to inline inputs (1-48 characters): they become scenario names
#: (``<node table>/<workload>``, stored in 128 characters).
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,47}$")

__all__ = ["MAX_NODE_ROWS", "MAX_TRACE_ROWS", "InputError", "cluster_descriptor", "detect_node_table_format",
           "parse_node_table", "parse_workload", "read_input_file", "setup_from_cluster", "sha256_text",
           "shipped_node_table_descriptor", "shipped_workload_descriptor"]


class InputError(ValueError):
    """A bad node table, workload or cluster; ``field`` names the parameter, ``message`` says
    what is wrong (with the line where there is one)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def sha256_text(text: str) -> str:
    """Hex SHA-256 of ``text`` encoded as UTF-8 (equal to ``sha256sum`` of a UTF-8 file holding it)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def detect_node_table_format(text: str) -> str:
    """``"k8s"`` when the first line that is neither blank nor a ``#`` comment starts a YAML
    mapping (``key:``) or a document (``---``), else ``"pai"`` (a CSV row)."""
    for line in text.splitlines():
        t = line.strip()
        if not t or t.startswith("#"):
            continue
        return "k8s" if t.startswith("---") or re.match(r"^[A-Za-z_][\w./-]*\s*:", t) else "pai"
    return "pai"


def setup_from_cluster(cluster: dict) -> ClusterSetup:
    """A :class:`ClusterSetup` (no background pods) from plain node data: ``{"name", "nodes":
    [{"name", "cpu_cores", "memory_mib", "labels", "taints"}]}`` (a registered cluster from
    :func:`rlweights.selectors.cluster_nodes`, or a parsed node table). CPU cores -> millicores
    (rounded), MiB -> bytes; taints as ``v1.Node`` taint dicts. Raises ``SchedulingError`` for a
    node without positive CPU and memory, a taint with an unknown effect, or repeated names."""
    from rlweights.core.scheduler import ClusterState

    nodes = [Node(name=n["name"], cpu_milli=int(round(float(n["cpu_cores"]) * 1000)),
                  memory_bytes=int(n["memory_mib"]) * 2**20, labels={k: str(v) for k, v in (n.get("labels") or {}).items()},
                  taints=tuple(Taint(t["key"], str(t.get("value", "")), t.get("effect", "NoSchedule")) for t in n.get("taints") or []))
             for n in cluster["nodes"]]
    ClusterState(nodes)  # unique names, at least one node
    return ClusterSetup(name=str(cluster.get("name", "cluster")), nodes=nodes)


def parse_node_table(text: str, *, fmt: str = "auto", name: str = "", field: str = "node_table") -> tuple[dict, dict]:
    """Parse an inline node table (module docstring). ``fmt``: ``"pai"``, ``"k8s"`` or
    ``"auto"`` (:func:`detect_node_table_format`); ``name`` (default ``"node-table"``) names
    the setup. Returns ``(cluster, descriptor)``: ``cluster`` as :func:`setup_from_cluster`
    takes it, ``descriptor`` ``{"source": "inline", "name", "format", "rows", "sha256"}``.

    Raises :class:`InputError` (``field``) for an empty table, anything the importer refuses
    (missing columns, non-numeric, non-finite or negative capacities, NUL characters, text over
    16 MiB, repeated names, ...), more than :data:`MAX_NODE_ROWS` nodes, or a node without
    positive CPU and memory."""
    name = name or "node-table"
    if fmt not in NODE_TABLE_FORMATS:
        raise InputError(f"{field}_format", f"unknown format {fmt!r}; use one of {', '.join(NODE_TABLE_FORMATS)}")
    if not text.strip():
        raise InputError(field, "the node table is empty")
    fmt = detect_node_table_format(text) if fmt == "auto" else fmt
    body = text
    if fmt == "pai":
        # an optional header naming the PAI columns becomes a blank line, which the importer
        # skips, so its line numbers stay those of the text as given
        lines = text.split("\n")
        first = next((i for i, ln in enumerate(lines) if ln.strip()), None)
        if first is not None and [c.strip() for c in lines[first].split(",")] == list(PAI_COLUMNS):
            lines[first] = ""
            body = "\n".join(lines)
    try:
        specs = parse_text(body, fmt=fmt, source=name)
    except NodeImportError as err:
        raise InputError(field, str(err)) from None
    if len(specs) > MAX_NODE_ROWS:
        raise InputError(field, f"{name}: {len(specs)} nodes; at most {MAX_NODE_ROWS} are accepted (sample the table first)")
    cluster = {"name": name, "nodes": [{"name": s.name, "cpu_cores": s.cpu_cores, "memory_mib": s.memory_mib,
                                        "labels": s.labels, "taints": s.taints} for s in specs]}
    try:
        setup_from_cluster(cluster)
    except SchedulingError as err:
        raise InputError(field, f"{name}: {err}") from None
    return cluster, {"source": "inline", "name": name, "format": fmt, "rows": len(specs), "sha256": sha256_text(text)}


def cluster_descriptor(cluster: dict, *, field: str = "cluster_id") -> dict:
    """Descriptor of a registered cluster given as plain data (``{"name", "nodes", "id"?}``):
    ``{"source": "cluster", "name", "cluster_id", "rows", "sha256"}``, the hash over the node
    list as canonical JSON (sorted keys, no spaces). Raises :class:`InputError` (``field``) when
    its nodes cannot form a setup (see :func:`setup_from_cluster`)."""
    try:
        setup_from_cluster(cluster)
    except (SchedulingError, KeyError, TypeError, ValueError) as err:
        raise InputError(field, f"cluster {cluster.get('name')!r}: {err}") from None
    canon = json.dumps(cluster["nodes"], sort_keys=True, separators=(",", ":"), default=str)
    return {"source": "cluster", "name": str(cluster.get("name", "cluster")), "cluster_id": cluster.get("id"),
            "rows": len(cluster["nodes"]), "sha256": sha256_text(canon)}


def parse_workload(text: str, *, name: str = "", field: str = "workload") -> tuple[TraceRows, dict]:
    """Parse an inline Azure-2021-shaped trace (module docstring). Returns ``(rows, descriptor)``,
    descriptor ``{"source": "inline", "name", "rows", "functions", "sha256"}`` (``name`` default
    ``"workload"``). Raises :class:`InputError` (``field``) with the parser's message (line
    included) for an empty trace, missing columns, a non-numeric, non-finite or negative time,
    a NUL character, or more than :data:`MAX_TRACE_ROWS` invocations."""
    name = name or "workload"
    if not text.strip():
        raise InputError(field, "the workload is empty")
    try:
        rows = parse_azure_trace(text, source=name)
    except WorkloadError as err:
        raise InputError(field, str(err)) from None
    return rows, {"source": "inline", "name": name, "rows": len(rows.func_ids), "functions": len(set(rows.func_ids)),
                  "sha256": sha256_text(text)}


def read_input_file(path: str | Path, *, field: str) -> str:
    """The text of a node table or trace file for the command line: at most
    :data:`MAX_INPUT_FILE_BYTES`, UTF-8, read as bytes (no newline translation, so the result's
    ``sha256`` equals ``sha256sum`` of the file). Raises :class:`InputError` (``field``)."""
    p = Path(path)
    try:
        size = p.stat().st_size
        if not p.is_file():
            raise InputError(field, f"{p}: not a file")
        if size > MAX_INPUT_FILE_BYTES:
            raise InputError(field, f"{p}: {size / 2**20:.1f} MiB; at most {MAX_INPUT_FILE_BYTES // 2**20} MiB")
        return p.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise InputError(field, f"{p}: no such file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(field, f"{p}: cannot read: {err}") from None


@functools.lru_cache(maxsize=None)
def _file_facts(path: str) -> tuple[str, int]:
    data = Path(path).read_bytes()
    return hashlib.sha256(data).hexdigest(), len(data)


def shipped_node_table_descriptor(setups: list[ClusterSetup]) -> dict:
    """Descriptor of the shipped PAI machine table the ``setups`` were sampled from (``rows``:
    its 1,897 machines; ``setups``: name and node count of each sampled setup)."""
    sha, _ = _file_facts(str(DEFAULT_PAI_SPEC))
    return {"source": "shipped", "name": f"{DEFAULT_PAI_SPEC.parent.name}/{DEFAULT_PAI_SPEC.name}", "format": "pai",
            "rows": len(load_pai_machines()), "sha256": sha,
            "setups": [{"name": s.name, "nodes": len(s.nodes)} for s in setups]}


def shipped_workload_descriptor(*, use: str, workloads: list, speedup: float | None = None) -> dict:
    """Descriptor of the shipped Azure 2021 sample (199 invocations); ``use``: ``"generated"``
    (workloads generated from its per-function rates and durations) or ``"replayed"`` (the
    sample itself, ``speedup`` times faster); ``workloads``: the names of the workloads made."""
    from rlweights.core.workload import read_azure_trace

    sha, _ = _file_facts(str(DEFAULT_AZURE_SAMPLE))
    out = {"source": "shipped", "name": f"{DEFAULT_AZURE_SAMPLE.parent.name}/{DEFAULT_AZURE_SAMPLE.name}",
           "rows": len(read_azure_trace().func_ids), "sha256": sha, "use": use, "workloads": list(workloads)}
    if speedup is not None:
        out["speedup"] = speedup
    return out
