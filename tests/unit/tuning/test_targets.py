"""Target detection and the database-target check."""
from __future__ import annotations

import pytest

from tuning.backends.targets import TargetMismatch, check_same_target, codegen_signature, llvm_target, make_target


def test_llvm_target_names_the_host_cpu():
    import tvm

    t = llvm_target(2)
    # detected through LLVM, not hard-coded: compare with LLVM's own answer
    assert t == {"kind": "llvm", "mcpu": tvm.target.codegen.llvm_get_system_cpu(), "num-cores": 2}
    assert t["mcpu"] not in ("", "generic")
    assert tvm.target.Target(t).attrs["mcpu"] == t["mcpu"]


@pytest.mark.parametrize(
    "recorded,requested,ok",
    [
        ({"kind": "llvm", "mcpu": "znver5", "num-cores": 2}, {"kind": "llvm", "mcpu": "znver5", "num-cores": 8}, True),
        ({"kind": "llvm"}, {"kind": "llvm", "mcpu": "znver5"}, False),  # SSE2 records vs AVX-512 code
        ({"kind": "llvm", "mcpu": "skylake"}, {"kind": "llvm", "mcpu": "znver5"}, False),
        ({"kind": "metal", "host": {"kind": "llvm"}}, {"kind": "llvm", "mcpu": "znver5"}, False),
        ({"kind": "cuda", "arch": "sm_80"}, {"kind": "cuda", "arch": "sm_90"}, False),
    ],
)
def test_check_same_target(recorded, requested, ok):
    if ok:
        check_same_target(recorded, requested)
    else:
        with pytest.raises(TargetMismatch, match="measured under another target"):
            check_same_target(recorded, requested)
        check_same_target(recorded, requested, force=True)  # forced: allowed


def test_signature_of_tvm_target_matches_dict():
    import tvm

    d = {"kind": "llvm", "mcpu": "znver5", "num-cores": 2}
    assert codegen_signature(tvm.target.Target(d)) == codegen_signature(d) == {"kind": "llvm", "mcpu": "znver5"}


def test_unknown_target_kind():
    with pytest.raises(ValueError, match="unknown target"):
        make_target("rocm")


def _has_gpu() -> bool:
    import tvm

    return bool(tvm.cuda(0).exist)


@pytest.mark.gpu
@pytest.mark.skipif(not _has_gpu(), reason="needs an NVIDIA GPU (none on this machine)")
def test_cuda_target_has_arch():
    t = make_target("cuda")
    assert t["kind"] == "cuda" and t["arch"].startswith("sm_") and t["host"]["kind"] == "llvm"
