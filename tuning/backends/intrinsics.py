"""TVM's tensor intrinsics, registered only for the architecture being tuned.

MetaSchedule imports ``tvm.s_tir.tensor_intrin`` when a tune context is made and again in
every ``LocalBuilder`` worker, and ``LocalBuilder`` starts fresh workers for every batch
(TVM 0.27 ``builder/local_builder.py``: "we restart the PopenPool everytime"). That package
registers the intrinsics of every backend by parsing TVMScript: measured here with
``python -X importtime``, 22.6 s of which CUDA's is 13.8 s, ROCm 2.5 s, Arm 1.9 s, Hexagon
1.0 s and x86 0.16 s; on a loaded 2-core machine a single import took 46 s. A CPU tuning
needs only its own architecture's (the x86 schedule rules name only the VNNI / AVX-512
intrinsics of ``tensor_intrin/x86.py``).

:func:`import_tensor_intrinsics` puts the package in ``sys.modules`` without running its
``__init__`` and imports the submodules asked for, so TVM's later ``import
tvm.s_tir.tensor_intrin`` finds it and costs nothing; any other submodule still imports on
demand (``from tvm.s_tir.tensor_intrin.cuda import ...`` works), and asking for all of them
afterwards (a CUDA tuning in the same process) registers the rest.
"""
from __future__ import annotations

import importlib
import importlib.util
import platform
import sys
from typing import Any, Mapping

PACKAGE = "tvm.s_tir.tensor_intrin"
#: The package's own submodules, as its ``__init__`` imports them (TVM 0.27).
ALL_MODULES = ("cuda", "arm_cpu", "x86", "rocm", "hexagon", "riscv_cpu")


def intrinsic_modules(target: Mapping[str, Any]) -> tuple[str, ...]:
    """The ``tvm.s_tir.tensor_intrin`` submodules a tuning for ``target`` (a TVM target as a
    dict: ``{"kind": "llvm", "mcpu": ..., "mtriple": ...}``) needs: for ``llvm`` the one of its
    architecture (from ``mtriple``, else this host's), every module for any other kind or an
    architecture not listed. Raises nothing."""
    if target.get("kind") != "llvm":
        return ALL_MODULES
    arch = str(target.get("mtriple") or platform.machine()).split("-")[0].lower()
    if arch in ("x86_64", "amd64", "i386", "i686", "x86"):
        return ("x86",)
    if arch.startswith(("aarch64", "arm64", "arm")):
        return ("arm_cpu",)
    if arch.startswith("riscv"):
        return ("riscv_cpu",)
    return ALL_MODULES


def import_tensor_intrinsics(modules: tuple[str, ...] | list[str] = ALL_MODULES) -> list[str]:
    """Register the tensor intrinsics of ``modules`` (names from :data:`ALL_MODULES`) and make
    ``tvm.s_tir.tensor_intrin`` importable at no further cost. Safe to call again and after a
    full import. Returns the submodules now loaded. Raises ``ValueError`` on an unknown name
    and ``ImportError`` if TVM is missing."""
    unknown = sorted(set(modules) - set(ALL_MODULES))
    if unknown:
        raise ValueError(f"unknown tensor-intrinsic module(s) {unknown}; known: {list(ALL_MODULES)}")
    if PACKAGE not in sys.modules:
        import tvm.s_tir

        spec = importlib.util.find_spec(PACKAGE)
        if spec is None:
            raise ImportError(f"{PACKAGE} not found in this TVM")
        package = importlib.util.module_from_spec(spec)  # __path__ set, __init__ not run
        sys.modules[PACKAGE] = package
        tvm.s_tir.tensor_intrin = package
    for name in modules:
        importlib.import_module(f"{PACKAGE}.{name}")
    return sorted(m for m in ALL_MODULES if f"{PACKAGE}.{m}" in sys.modules)
