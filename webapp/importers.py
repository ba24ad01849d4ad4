"""Parsers of node inventories: Kubernetes ``v1/Node`` YAML and the Alibaba PAI machine-spec CSV.

Pure functions (no database): they turn a file into :class:`NodeSpec` rows or raise
:class:`NodeImportError` naming the file, the object or line, and the problem. Storing is
:func:`webapp.services.nodes_import` (one transaction).

Units: CPU in cores, memory in MiB (bytes / 2**20, rounded down), GPU memory in MiB.

Upper bounds (:data:`MAX_GPUS_PER_NODE`, :data:`MAX_CPU_CORES`, :data:`MAX_MEMORY_MIB`,
:data:`MAX_GPU_MEMORY_MIB`) reject absurd capacities before anything is allocated: one GPU row
is stored per GPU, so a count of 10**20 would otherwise exhaust memory. They are generous
(about 4-8x the largest single machines sold today) and apply to each node.
"""
from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path

import yaml


class NodeImportError(ValueError):
    """A node file that cannot be imported; the message names the place and the reason."""


#: Most GPUs one node may declare (largest machines today: 8-16 GPUs per node, up to 72 in an
#: NVL72 rack that Kubernetes still sees as 18 nodes of 4).
MAX_GPUS_PER_NODE = 64
#: Most CPU cores one node may declare.
MAX_CPU_CORES = 4096
#: Most host memory one node may declare: 64 TiB, in MiB.
MAX_MEMORY_MIB = 64 * 2**20
#: Most memory one GPU may declare: 1 TiB, in MiB.
MAX_GPU_MEMORY_MIB = 2**20


def check_capacity(*, cpu: float, memory_mib: int, gpu_count: int, gpu_memory_mib: int = 0) -> None:
    """Raise :class:`NodeImportError` naming the limit if a node's capacity exceeds
    :data:`MAX_CPU_CORES` cores, :data:`MAX_MEMORY_MIB` MiB, :data:`MAX_GPUS_PER_NODE` GPUs or
    :data:`MAX_GPU_MEMORY_MIB` MiB per GPU (the caller adds the place)."""
    if cpu > MAX_CPU_CORES:
        raise NodeImportError(f"{cpu:g} CPU cores exceeds the limit of {MAX_CPU_CORES} per node")
    if memory_mib > MAX_MEMORY_MIB:
        raise NodeImportError(f"{memory_mib} MiB of memory exceeds the limit of {MAX_MEMORY_MIB} MiB (64 TiB) per node")
    if gpu_count > MAX_GPUS_PER_NODE:
        raise NodeImportError(f"{gpu_count} GPUs exceeds the limit of {MAX_GPUS_PER_NODE} per node")
    if gpu_memory_mib > MAX_GPU_MEMORY_MIB:
        raise NodeImportError(f"{gpu_memory_mib} MiB per GPU exceeds the limit of {MAX_GPU_MEMORY_MIB} MiB (1 TiB)")


#: Nominal memory of a GPU type in MiB (vendor data sheets). ``V100`` is the 16 GB card; the
#: PAI trace names the 32 GB card ``V100M32``. ``MISC`` (PAI: assorted older GPUs) and any type
#: not listed here get 0, meaning "unknown". Source: NVIDIA Tesla P100/T4/V100/A100/H100 data
#: sheets; PAI GPU types from Weng et al., NSDI 2022, section 2 and the trace's README.
GPU_MEMORY_MIB: dict[str, int] = {
    "K80": 12 * 1024,      # per GPU die (the board holds two)
    "P4": 8 * 1024,
    "P40": 24 * 1024,
    "P100": 16 * 1024,     # the PCIe/SXM2 16 GB variant (a 12 GB PCIe variant also exists)
    "T4": 16 * 1024,
    "V100": 16 * 1024,
    "V100M32": 32 * 1024,
    "V100-32GB": 32 * 1024,
    "A10": 24 * 1024,
    "L4": 24 * 1024,
    "A100": 40 * 1024,
    "A100-80GB": 80 * 1024,
    "H100": 80 * 1024,
    "H200": 141 * 1024,
}


def gpu_memory_mib(model: str) -> int:
    """Nominal memory of GPU type ``model`` in MiB from :data:`GPU_MEMORY_MIB`, 0 if unknown."""
    return GPU_MEMORY_MIB.get(model, GPU_MEMORY_MIB.get(model.upper(), 0))


@dataclass
class NodeSpec:
    """One node to import. ``gpu_model``/``gpu_memory_mib`` apply to each of ``gpu_count`` GPUs."""

    name: str
    cpu_cores: float
    memory_mib: int
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)
    gpu_count: int = 0
    gpu_model: str = ""
    gpu_memory_mib: int = 0


# --- Kubernetes resource quantities ---------------------------------------------------------
# Grammar of k8s.io/apimachinery/pkg/api/resource.Quantity: <number><suffix>, suffix one of the
# binary SI (Ki Mi Gi Ti Pi Ei, powers of 1024), decimal SI (n u m "" k M G T P E) or a decimal
# exponent (e3, E-2). Examples: "64" cores, "500m" = 0.5 cores, "256000Mi", "32Gi", "1e3".
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1), "k": Decimal("1e3"),
            "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"), "P": Decimal("1e15"), "E": Decimal("1e18")}
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?\d+|[numkMGTPE])?$")


def parse_quantity(value: object) -> Decimal:
    """Value of a Kubernetes quantity (``"500m"`` -> 0.5, ``"32Gi"`` -> 34359738368, ``4`` -> 4).

    Raises :class:`NodeImportError` for anything that is not a quantity or is negative.
    """
    if isinstance(value, bool) or value is None:
        raise NodeImportError(f"not a Kubernetes quantity: {value!r}")
    text = str(value).strip()
    m = _QUANTITY.match(text)
    if not m:
        raise NodeImportError(f"not a Kubernetes quantity: {value!r}")
    try:
        number = Decimal(m.group(1))
    except InvalidOperation as err:  # pragma: no cover - the regex admits only decimals
        raise NodeImportError(f"not a Kubernetes quantity: {value!r}") from err
    suffix = m.group(2) or ""
    if suffix in _BINARY:
        out = number * _BINARY[suffix]
    elif suffix[:1] in ("e", "E"):
        out = number * (Decimal(10) ** int(suffix[1:]))
    else:
        out = number * _DECIMAL[suffix]
    if out < 0:
        raise NodeImportError(f"negative quantity: {value!r}")
    return out


def cpu_cores(value: object) -> float:
    """A CPU quantity in cores (``"3500m"`` -> 3.5)."""
    return float(parse_quantity(value))


def memory_mib(value: object) -> int:
    """A memory quantity in MiB, rounded down (``"256000Mi"`` -> 256000, ``"32Gi"`` -> 32768,
    ``"1G"`` -> 953)."""
    return int(parse_quantity(value) // (2**20))


_GPU_COUNT_KEYS = re.compile(r"^(nvidia\.com/gpu|amd\.com/gpu|alibabacloud\.com/gpu(-count)?|aliyun\.com/gpu(-count)?)$")
_GPU_MODEL_LABELS = ("nvidia.com/gpu.product", "alibabacloud.com/gpu-card-model", "aliyun.accelerator/nvidia_name",
                     "cloud.google.com/gke-accelerator", "accelerator")


def _k8s_node(obj: dict, where: str) -> NodeSpec:
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if not name:
        raise NodeImportError(f"{where}: missing metadata.name")
    where = f"{where} (node {name})"
    status = obj.get("status") or {}
    res = status.get("allocatable") or status.get("capacity")
    if not res:
        raise NodeImportError(f"{where}: missing status.allocatable and status.capacity")
    for key in ("cpu", "memory"):
        if key not in res:
            raise NodeImportError(f"{where}: missing status.allocatable.{key}")
    try:
        cores, mem = cpu_cores(res["cpu"]), memory_mib(res["memory"])
        gpu_count = 0
        for key, val in res.items():
            if _GPU_COUNT_KEYS.match(str(key)):
                q = parse_quantity(val)
                if q != int(q):
                    raise NodeImportError(f"GPU count {key}={val!r} is not a whole number")
                gpu_count = max(gpu_count, int(q))
        check_capacity(cpu=cores, memory_mib=mem, gpu_count=gpu_count)
    except NodeImportError as err:
        raise NodeImportError(f"{where}: {err}") from None
    raw_labels = meta.get("labels") or {}
    if not isinstance(raw_labels, dict):
        raise NodeImportError(f"{where}: metadata.labels must be a mapping of names to values, got {type(raw_labels).__name__}")
    if any(isinstance(v, (dict, list)) for v in raw_labels.values()):
        raise NodeImportError(f"{where}: metadata.labels values must be strings, numbers or booleans")
    labels = {str(k): "" if v is None else str(v) for k, v in raw_labels.items()}
    taints = []
    for t in (obj.get("spec") or {}).get("taints") or []:
        if not isinstance(t, dict) or "key" not in t or "effect" not in t:
            raise NodeImportError(f"{where}: a taint needs key and effect, got {t!r}")
        taints.append({"key": str(t["key"]), "value": str(t.get("value", "")), "effect": str(t["effect"])})
    model = next((labels[k] for k in _GPU_MODEL_LABELS if labels.get(k)), "") if gpu_count else ""
    gmem = 0
    if gpu_count:
        if labels.get("nvidia.com/gpu.memory", "").isdigit():  # GPU feature discovery: MiB
            gmem = int(labels["nvidia.com/gpu.memory"])
        else:
            gmem = gpu_memory_mib(model)
        try:
            check_capacity(cpu=cores, memory_mib=mem, gpu_count=gpu_count, gpu_memory_mib=gmem)
        except NodeImportError as err:
            raise NodeImportError(f"{where}: {err}") from None
    return NodeSpec(name=name, cpu_cores=cores, memory_mib=mem, labels=labels, taints=taints,
                    gpu_count=gpu_count, gpu_model=model or ("unknown" if gpu_count else ""), gpu_memory_mib=gmem)


def parse_k8s_nodes(text: str, *, source: str = "<yaml>") -> list[NodeSpec]:
    """Nodes from Kubernetes YAML: one or more documents, each a ``v1`` ``Node`` or a ``List``
    of them. CPU and memory from ``status.allocatable`` (else ``status.capacity``); GPU count
    from ``nvidia.com/gpu``, ``alibabacloud.com/gpu-count``-style resources; GPU model from
    labels (``nvidia.com/gpu.product``, ``alibabacloud.com/gpu-card-model``, ...).

    Raises :class:`NodeImportError` for invalid YAML, another kind, a missing field, a bad
    quantity, or a node name given twice.
    """
    try:
        aliases = sum(isinstance(e, yaml.AliasEvent) for e in yaml.parse(text, Loader=yaml.SafeLoader))
        if aliases > MAX_YAML_ALIASES:
            raise NodeImportError(f"{source}: {aliases} YAML aliases (*name); at most {MAX_YAML_ALIASES} are accepted "
                                  "(alias expansion can blow a small file up: 'billion laughs')")
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as err:
        raise NodeImportError(f"{source}: not valid YAML: {err}") from None
    if not docs:
        raise NodeImportError(f"{source}: no YAML documents")
    out: list[NodeSpec] = []
    for i, doc in enumerate(docs, 1):
        where = f"{source}, document {i}"
        if not isinstance(doc, dict):
            raise NodeImportError(f"{where}: expected a Kubernetes object, got {type(doc).__name__}")
        items = doc.get("items") if doc.get("kind") == "List" or doc.get("kind") == "NodeList" else [doc]
        for j, obj in enumerate(items or [], 1):
            w = where if len(items) == 1 and obj is doc else f"{where}, item {j}"
            if not isinstance(obj, dict) or obj.get("kind") != "Node" or obj.get("apiVersion", "v1") != "v1":
                kind = obj.get("kind") if isinstance(obj, dict) else type(obj).__name__
                raise NodeImportError(f"{w}: expected apiVersion v1, kind Node; got kind {kind!r}")
            out.append(_k8s_node(obj, w))
    _check_unique(out, source)
    return out


PAI_COLUMNS = ("machine", "gpu_type", "cap_cpu", "cap_mem", "cap_gpu")
#: Largest node file accepted (admin upload, API, ``import_nodes``), bytes.
MAX_NODE_FILE_BYTES = 16 * 2**20
#: Most YAML aliases (``*name``) a node file may use: node files need none, and 32 bound what
#: expansion can do (at most about 10^5 values: the "billion laughs" file has 81).
MAX_YAML_ALIASES = 32


def parse_pai_machine_spec(text: str, *, source: str = "pai_machine_spec.csv") -> list[NodeSpec]:
    """Nodes from the PAI 2020 trace's headerless ``pai_machine_spec.csv``
    (``machine,gpu_type,cap_cpu,cap_mem,cap_gpu``; Weng et al., NSDI 2022). ``cap_cpu`` is
    cores, ``cap_mem`` GB of host memory (read as GiB: x 1024 MiB), ``cap_gpu`` the GPU count;
    GPU memory per type from :data:`GPU_MEMORY_MIB`. Labels: ``gpu_type``.

    Raises :class:`NodeImportError` naming the line for a row with the wrong number of
    columns, a non-numeric, negative or non-finite capacity, a capacity over the limits of
    :func:`check_capacity`, an empty machine id, or a repeated machine. A GPU type not in
    :data:`GPU_MEMORY_MIB` is accepted with 0 MiB (see :func:`unknown_gpu_warnings`).
    """
    out: list[NodeSpec] = []
    try:
        rows = list(csv.reader(io.StringIO(text)))
    except csv.Error as err:  # e.g. a field over csv's field size limit
        raise NodeImportError(f"{source}: not a valid CSV: {err}") from None
    for lineno, row in enumerate(rows, 1):
        if not row:
            continue
        if len(row) != len(PAI_COLUMNS):
            raise NodeImportError(f"{source}, line {lineno}: expected {len(PAI_COLUMNS)} columns ({','.join(PAI_COLUMNS)}), got {len(row)}")
        machine, gpu_type, cap_cpu, cap_mem, cap_gpu = (c.strip() for c in row)
        if not machine:
            raise NodeImportError(f"{source}, line {lineno}: empty machine id")
        try:
            cpu, mem, ngpu = float(cap_cpu), float(cap_mem), int(cap_gpu)
        except ValueError:
            raise NodeImportError(f"{source}, line {lineno}: cap_cpu, cap_mem, cap_gpu must be numbers, got {cap_cpu!r}, {cap_mem!r}, {cap_gpu!r}") from None
        if cpu < 0 or mem < 0 or ngpu < 0:
            raise NodeImportError(f"{source}, line {lineno}: negative capacity")
        if not (math.isfinite(cpu) and math.isfinite(mem)):
            raise NodeImportError(f"{source}, line {lineno} (machine {machine}): cap_cpu and cap_mem must be finite")
        try:
            check_capacity(cpu=cpu, memory_mib=int(mem * 1024), gpu_count=ngpu)
        except NodeImportError as err:
            raise NodeImportError(f"{source}, line {lineno} (machine {machine}): {err}") from None
        model = gpu_type if ngpu else ""
        out.append(NodeSpec(name=machine, cpu_cores=cpu, memory_mib=int(mem * 1024), labels={"gpu_type": gpu_type},
                            gpu_count=ngpu, gpu_model=model, gpu_memory_mib=gpu_memory_mib(model) if ngpu else 0))
    if not out:
        raise NodeImportError(f"{source}: no rows")
    _check_unique(out, source)
    return out


def unknown_gpu_warnings(specs: list[NodeSpec]) -> list[str]:
    """Warnings, one per GPU type, for nodes whose GPUs have an unknown memory size (type not in
    :data:`GPU_MEMORY_MIB` and no ``nvidia.com/gpu.memory`` label): they are imported with
    0 MiB, which placement treats as "unknown". Example: ``["GPU type 'FOO' is unknown (0 MiB
    assumed) on 1 node(s): m1"]``."""
    by_model: dict[str, list[str]] = {}
    for s in specs:
        if s.gpu_count and not s.gpu_memory_mib:
            by_model.setdefault(s.gpu_model, []).append(s.name)
    return [
        f"GPU type {m!r} is unknown (0 MiB assumed) on {len(names)} node(s): {', '.join(names[:5])}{' ...' if len(names) > 5 else ''}"
        for m, names in sorted(by_model.items())
    ]


def _check_unique(specs: list[NodeSpec], source: str) -> None:
    seen: set[str] = set()
    for s in specs:
        if s.name in seen:
            raise NodeImportError(f"{source}: node {s.name!r} appears twice")
        seen.add(s.name)


def parse_node_file(path: str | Path, *, fmt: str = "auto") -> tuple[str, list[NodeSpec]]:
    """Parse a node file; ``fmt`` is ``"k8s"``, ``"pai"`` or ``"auto"`` (by extension: .yaml/.yml
    -> k8s, .csv -> pai). Returns ``(format, specs)``. Raises :class:`NodeImportError`."""
    p = Path(path)
    if not p.is_file():
        raise NodeImportError(f"{p}: no such file" if not p.exists() else f"{p}: not a file")
    if fmt == "auto":
        fmt = {".yaml": "k8s", ".yml": "k8s", ".csv": "pai"}.get(p.suffix.lower(), "")
        if not fmt:
            raise NodeImportError(f"{p.name}: cannot tell the format from the extension; use .yaml/.yml or .csv")
    try:
        if p.stat().st_size > MAX_NODE_FILE_BYTES:
            raise NodeImportError(f"{p.name}: {p.stat().st_size / 2**20:.1f} MiB; node files are limited to {MAX_NODE_FILE_BYTES // 2**20} MiB")
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise NodeImportError(f"{p}: cannot read: {err}") from None
    return fmt, parse_text(text, fmt=fmt, source=p.name)


def parse_text(text: str, *, fmt: str, source: str) -> list[NodeSpec]:
    """Parse node-file text of format ``"k8s"`` or ``"pai"``.

    Raises :class:`NodeImportError` for text over :data:`MAX_NODE_FILE_BYTES`, a NUL character
    (PostgreSQL cannot store it), or anything the format's parser refuses."""
    if len(text) > MAX_NODE_FILE_BYTES:
        raise NodeImportError(f"{source}: {len(text) / 2**20:.1f} MiB; node files are limited to "
                              f"{MAX_NODE_FILE_BYTES // 2**20} MiB (the real PAI table of 1,897 machines is 72 KiB)")
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise NodeImportError(f"{source}, line {line}: contains a NUL character")
    if fmt == "k8s":
        return parse_k8s_nodes(text, source=source)
    if fmt == "pai":
        return parse_pai_machine_spec(text, source=source)
    raise NodeImportError(f"unknown format {fmt!r}; use 'k8s' or 'pai'")
