"""TVM targets for tuning, detected from the host, and the check that a tuning database was
measured under the target it is about to be applied to.

Why ``mcpu`` matters: an LLVM target without it compiles for the baseline ISA (SSE2 on x86-64),
so a tuned kernel never uses AVX2/AVX-512; on this machine's Zen 5 a resnet18 3x3 convolution
tuned to 2.48 ms without it and to 1.05 ms with ``mcpu=znver5`` (measured on the 2-vCPU Zen 5 development machine).
The CPU name comes from LLVM's host detection (``llvm::sys::getHostCPUName`` through
``tvm.target.codegen.llvm_get_system_cpu``), never a constant.
"""
from __future__ import annotations

import os
from typing import Any

#: Target attributes that change generated code; records measured under targets that differ in
#: any of them are not comparable.
CODEGEN_KEYS = ("kind", "mcpu", "mtriple", "mattr", "arch")


class TargetMismatch(ValueError):
    """A tuning database was measured under another target than the one requested."""


def host_cpu_name() -> str:
    """LLVM's name of the host CPU (e.g. ``znver5``), as used for ``-mcpu``."""
    import tvm

    return str(tvm.target.codegen.llvm_get_system_cpu())


def available_cores() -> int:
    """CPU cores this process may run on (scheduler affinity, falls back to ``os.cpu_count``)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        return os.cpu_count() or 1


def llvm_target(num_cores: int | None = None, mcpu: str | None = None) -> dict[str, Any]:
    """LLVM CPU target dict ``{"kind": "llvm", "mcpu": <host>, "num-cores": n}``."""
    return {"kind": "llvm", "mcpu": mcpu or host_cpu_name(), "num-cores": int(num_cores or available_cores())}


def cuda_target(index: int = 0) -> dict[str, Any]:
    """CUDA target of GPU ``index`` with its compute capability as ``arch`` (from
    ``tvm.cuda(index)``) and the LLVM host target. Raises ``RuntimeError`` without a GPU."""
    import tvm

    dev = tvm.cuda(index)
    if not dev.exist:
        raise RuntimeError("no CUDA GPU present; use target llvm")
    arch = "sm_" + str(dev.compute_version).replace(".", "")
    return {"kind": "cuda", "arch": arch, "max_threads_per_block": int(dev.max_threads_per_block),
            "max_shared_memory_per_block": int(dev.max_shared_memory_per_block), "thread_warp_size": int(dev.warp_size),
            "host": llvm_target()}


def make_target(kind: str, num_threads: int | None = None) -> dict[str, Any]:
    """``"llvm"`` -> :func:`llvm_target` (``num-cores`` = ``num_threads``); ``"cuda"`` ->
    :func:`cuda_target`. Raises ``ValueError`` for another kind."""
    if kind == "llvm":
        return llvm_target(num_threads)
    if kind == "cuda":
        return cuda_target()
    raise ValueError(f"unknown target {kind!r}; use 'llvm' or 'cuda'")


def device_of(target: dict[str, Any]) -> str:
    """Energy-meter / queue device of a target: ``"cuda"`` or ``"cpu"``."""
    return "cuda" if target.get("kind") == "cuda" else "cpu"


def codegen_signature(target: Any) -> dict[str, str]:
    """The code-generation attributes (:data:`CODEGEN_KEYS`) of a target given as a dict, a
    ``tvm.target.Target`` or a target's JSON export; empty values dropped; ``mattr`` joined."""
    if not isinstance(target, dict):
        target = dict(target.export())
    out = {}
    for key in CODEGEN_KEYS:
        val = target.get(key)
        if val in (None, "", [], ()):
            continue
        out[key] = ",".join(sorted(str(v) for v in val)) if isinstance(val, (list, tuple)) else str(val)
    return out


def check_same_target(recorded: Any, requested: Any, *, force: bool = False, what: str = "database") -> None:
    """Raise :class:`TargetMismatch` when ``recorded`` and ``requested`` differ in a code-generation
    attribute, unless ``force``."""
    a, b = codegen_signature(recorded), codegen_signature(requested)
    if a != b and not force:
        diff = {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}
        raise TargetMismatch(
            f"{what} was measured under another target ({', '.join(f'{k}: {v[0]!r} vs requested {v[1]!r}' for k, v in diff.items())}); "
            "its records would be applied to code they were not measured for. Pass force=True (--force) to use it anyway.")
