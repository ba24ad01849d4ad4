"""End-to-end latency of a compiled model (TVM Relax VM) and of PyTorch eager, each measured in
a fresh subprocess whose thread count is fixed before any runtime starts (``TVM_NUM_THREADS``,
``OMP_NUM_THREADS``, ``torch.set_num_threads``), so tuned, untuned and eager numbers use the same
threads and are not disturbed by the caller's state.

Statistic: ``repeats`` timings, each the mean of ``number`` back-to-back calls after a warm-up
call; reported as median with 25th/75th percentiles, min and max, in seconds
(:func:`summarise`).

Run as a module: ``python -m tuning.backends.latency tvm LIB.so --shape 1,3,224,224 --dtype
float32 --threads 2`` or ``... torch MODEL --shape ... --threads 2``; prints one JSON line.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np


def summarise(seconds: list[float]) -> dict[str, float]:
    """``{"median_s", "p25_s", "p75_s", "min_s", "max_s", "repeats"}`` of per-run seconds
    (percentiles by numpy's linear interpolation)."""
    arr = np.asarray(seconds, dtype=float)
    if arr.size == 0:
        raise ValueError("no timings to summarise")
    return {"median_s": float(statistics.median(arr)), "p25_s": float(np.percentile(arr, 25)),
            "p75_s": float(np.percentile(arr, 75)), "min_s": float(arr.min()), "max_s": float(arr.max()),
            "repeats": int(arr.size)}


def _number_for(seconds_per_call: float, budget_s: float = 0.05) -> int:
    return max(1, min(100, int(budget_s / max(seconds_per_call, 1e-6))))


def _inputs(shapes: list[tuple[int, ...]], dtypes: list[str]) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    out = []
    for shape, dtype in zip(shapes, dtypes):
        if dtype.startswith("int"):
            out.append(rng.integers(0, 100, size=shape).astype(dtype))
        else:
            out.append(rng.standard_normal(shape).astype(dtype))
    return out


def _time_tvm(lib: str, shapes, dtypes, repeats: int, device: str) -> list[float]:
    import time

    import tvm
    from tvm import relax

    dev = tvm.cuda(0) if device == "cuda" else tvm.cpu(0)
    vm = relax.VirtualMachine(tvm.runtime.load_module(lib), dev)
    args = [tvm.runtime.tensor(a, dev) for a in _inputs(shapes, dtypes)]
    t0 = time.perf_counter()
    vm["main"](*args)
    dev.sync()
    number = _number_for(time.perf_counter() - t0)
    res = vm.time_evaluator("main", dev, number=number, repeat=repeats)(*args)
    return [float(x) for x in res.results]


def _time_torch(model: str, shapes, dtypes, repeats: int) -> list[float]:
    import time

    import torch

    from tuning.backends.frontends import torch_model

    m = torch_model(model)
    args = [torch.from_numpy(a) for a in _inputs(shapes, dtypes)]
    out = []
    with torch.inference_mode():
        t0 = time.perf_counter()
        m(*args)
        number = _number_for(time.perf_counter() - t0)
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(number):
                m(*args)
            out.append((time.perf_counter() - t0) / number)
    return out


def measure_in_subprocess(kind: str, what: str, shapes: list[tuple[int, ...]], dtypes: list[str], *,
                          threads: int, repeats: int = 20, device: str = "cpu", timeout_s: float = 900) -> dict[str, Any]:
    """Measure ``kind`` (``"tvm"``: compiled library path ``what``; ``"torch"``: model name
    ``what``) in a subprocess with ``threads`` threads; returns :func:`summarise` plus
    ``threads``. Raises ``RuntimeError`` with the subprocess's error output on failure."""
    env = dict(os.environ, TVM_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    cmd = [sys.executable, "-m", "tuning.backends.latency", kind, str(what), "--threads", str(threads),
           "--repeats", str(repeats), "--device", device,
           "--shapes", json.dumps([list(s) for s in shapes]), "--dtypes", json.dumps(list(dtypes))]
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=timeout_s)
    if proc.returncode != 0:
        raise RuntimeError(f"latency measurement of {kind} {what} failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("kind", choices=["tvm", "torch"])
    p.add_argument("what")
    p.add_argument("--shapes", required=True)
    p.add_argument("--dtypes", required=True)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--device", default="cpu")
    a = p.parse_args(argv)
    shapes = [tuple(s) for s in json.loads(a.shapes)]
    dtypes = json.loads(a.dtypes)
    if a.kind == "torch":
        import torch

        torch.set_num_threads(a.threads)
        secs = _time_torch(a.what, shapes, dtypes, a.repeats)
    else:
        secs = _time_tvm(a.what, shapes, dtypes, a.repeats, a.device)
    print(json.dumps({**summarise(secs), "threads": a.threads}))


if __name__ == "__main__":
    main()
