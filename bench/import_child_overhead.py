"""Cost of importing a model in a child process (tuning.backends.import_child) against importing
it in the calling process, side by side in one run. Prints one JSON line (one entry per model)
and writes ``bench/out/import_child_overhead.csv``.

    nice -n 5 python bench/import_child_overhead.py [--models convnet,resnet18]

Figures: ``direct_s`` (import_torch_model here, TVM and torch already loaded), ``child_s``
(import_torch_model_isolated: a fresh interpreter loads torch and TVM, imports, writes
tvm.ir.save_json; this process loads it and rebuilds the PyTorch twin), ``json_mb`` (size of the
module's JSON), ``equal`` (structurally equal modules).
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="convnet,resnet18")
    args = ap.parse_args()
    import tvm

    from tuning.backends.frontends import import_torch_model
    from tuning.backends.import_child import import_torch_model_isolated

    import tvm_ffi

    import_torch_model("convnet")  # warm the caller: torch.export and the frontend loaded once
    rows = []
    for name in args.models.split(","):
        t0 = time.perf_counter()
        direct = import_torch_model(name)
        t1 = time.perf_counter()
        child = import_torch_model_isolated(name)
        t2 = time.perf_counter()
        rows.append({"model": name, "direct_s": round(t1 - t0, 2), "child_s": round(t2 - t1, 2),
                     "json_mb": round(len(tvm.ir.save_json(child.mod)) / 1e6, 1),
                     "equal": bool(tvm_ffi.structural_equal(direct.mod, child.mod))})
    out = Path(__file__).resolve().parent / "out"
    out.mkdir(exist_ok=True)
    with open(out / "import_child_overhead.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(json.dumps({"bench": "import_child_overhead", "models": rows}))

if __name__ == "__main__":
    main()
