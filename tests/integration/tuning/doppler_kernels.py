"""Real kernels for DOPpler's measurement tests (LLVM CPU target, no mocks).

Two kernels with the same signature (A: 128x128 float32, B: 128x128, C: 128x128 out):
``single`` computes C = A @ B once, a ``times``-kernel computes it ``times`` times (separate
reductions, then their sum), so by construction it does about ``times`` times the work.
"""
from __future__ import annotations

N = 128


def _export(tmp_path, name: str, times: int):
    """Build the kernel computing A @ B ``times`` times (summed) with the plain LLVM target and
    export it as a shared library, like DOPpler's build workers. Returns (path, args_info JSON)."""
    import tvm
    from tvm import te
    from tvm.driver import build as tvm_build
    from tvm.s_tir import meta_schedule as ms

    a = te.placeholder((N, N), name="A")
    b = te.placeholder((N, N), name="B")
    def product(t: int):
        k = te.reduce_axis((0, N), name=f"k{t}")
        return te.compute((N, N), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name=f"P{t}")

    parts = [product(t) for t in range(times)]
    c = parts[0] if times == 1 else te.compute((N, N), lambda i, j: sum(p[i, j] for p in parts), name="C")
    func = te.create_prim_func([a, b, c])
    mod = tvm.IRModule({"main": func})
    path = str(tmp_path / f"{name}.so")
    tvm_build(mod, target=tvm.target.Target({"kind": "llvm", "num-cores": 1})).export_library(path)
    args_info = [x.as_json() for x in ms.arg_info.ArgInfo.from_prim_func(func)]
    return path, args_info


def kernel_pair(tmp_path, times: int):
    """``single`` (A @ B once) and a kernel doing it ``times`` times, with the same task signature.
    Returns (single path, other path, args_info)."""
    single, info = _export(tmp_path, "single", 1)
    other, info2 = _export(tmp_path, f"times{times}", times)
    assert info == info2  # the same task signature
    return single, other, info
