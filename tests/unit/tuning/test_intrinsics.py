"""Registering only the target's tensor intrinsics (tuning.backends.intrinsics) must not change
what MetaSchedule searches: the design spaces of an fp32 convolution and of an int8 matmul that
the x86 VNNI intrinsic tensorizes are identical with TVM's full import and with ours. Each
mode runs in its own interpreter (an import cannot be undone)."""
import json
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from tuning.backends.intrinsics import ALL_MODULES, intrinsic_modules

ROOT = Path(__file__).resolve().parents[3]

_SPACES = r"""
import hashlib, json, sys
if sys.argv[1] == "full":
    import tvm.s_tir.tensor_intrin
else:
    from tuning.backends.intrinsics import import_tensor_intrinsics
    import_tensor_intrinsics(("x86",))
import tvm
from tvm import te
from tvm.s_tir import meta_schedule as ms

target = tvm.target.Target({"kind": "llvm", "mcpu": "znver5", "num-cores": 2})
def conv():
    x = te.placeholder((1, 16, 14, 14), "float32", name="x"); w = te.placeholder((32, 16, 3, 3), "float32", name="w")
    c, r, s = te.reduce_axis((0, 16)), te.reduce_axis((0, 3)), te.reduce_axis((0, 3))
    y = te.compute((1, 32, 12, 12), lambda n, k, i, j: te.sum(x[n, c, i + r, j + s] * w[k, c, r, s], axis=[c, r, s]))
    return te.create_prim_func([x, w, y])
def int8_matmul():
    a = te.placeholder((128, 128), "uint8", name="a"); b = te.placeholder((128, 128), "int8", name="b")
    k = te.reduce_axis((0, 128), "k")
    c = te.compute((128, 128), lambda i, j: te.sum(a[i, k].astype("int32") * b[j, k].astype("int32"), axis=k))
    return te.create_prim_func([a, b, c])
out = {"loaded": sorted(m for m in sys.modules if m.startswith("tvm.s_tir.tensor_intrin."))}
for name, f in (("conv", conv()), ("int8", int8_matmul())):
    ctx = ms.TuneContext(mod=tvm.IRModule({"main": f}), target=target, space_generator="post-order-apply",
                         search_strategy="evolutionary", task_name=name, rand_state=7)
    traces = [str(s.trace) for s in ctx.generate_design_space()]
    out[name] = {"n": len(traces), "hash": hashlib.sha256(json.dumps(traces).encode()).hexdigest(),
                 "vnni": any("vnni" in t for t in traces)}
print(json.dumps(out))
"""


def _spaces(*modes):
    """The design spaces of each mode, each mode in its own interpreter, the interpreters run at once
    (each spends most of its time importing TVM and generating spaces, one core each)."""
    procs = [subprocess.Popen([sys.executable, "-c", _SPACES, mode], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for mode in modes]
    try:
        results = []
        for proc in procs:
            out, err = proc.communicate(timeout=600)
            assert proc.returncode == 0, err[-3000:]
            results.append(json.loads(out.strip().splitlines()[-1]))
        return results
    finally:
        for proc in procs:  # a failed or timed-out mode leaves no interpreter behind
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="the x86 intrinsics are this host's")
def test_design_spaces_are_the_same_with_only_the_x86_intrinsics():
    full, lean = _spaces("full", "lean")
    assert lean["loaded"] == ["tvm.s_tir.tensor_intrin.x86"]
    assert "tvm.s_tir.tensor_intrin.cuda" in full["loaded"]
    assert full["int8"]["vnni"] and lean["int8"]["vnni"]  # the VNNI rule did apply: the case is live
    for name in ("conv", "int8"):
        assert lean[name] == full[name], name


@pytest.mark.parametrize("target, expected", [
    ({"kind": "llvm", "mtriple": "x86_64-linux-gnu"}, ("x86",)),
    ({"kind": "llvm", "mtriple": "aarch64-linux-gnu"}, ("arm_cpu",)),
    ({"kind": "llvm", "mtriple": "riscv64-unknown-linux-gnu"}, ("riscv_cpu",)),
    ({"kind": "llvm", "mtriple": "hexagon"}, ALL_MODULES),
    ({"kind": "cuda", "arch": "sm_90"}, ALL_MODULES),
])
def test_modules_follow_the_target(target, expected):
    assert intrinsic_modules(target) == expected


def test_unknown_module_is_refused():
    from tuning.backends.intrinsics import import_tensor_intrinsics

    with pytest.raises(ValueError, match="unknown tensor-intrinsic"):
        import_tensor_intrinsics(("x86", "tpu"))
