"""Profile rows derived from Gavel's measured throughputs, and the shipped tables' readers.

Derivation (source label ``gavel-throughput-derived``): for a Gavel job type (family, batch
size) alone on GPU type g, with measured throughput T (steps/s, Gavel's
``simulation_throughputs.json``) and our counted training FLOPs per step F (forward + backward,
2 x MACs, :mod:`placement.backends.features` on a PyTorch stand-in of the workload)::

    achieved FLOP/s = T x F;   utilisation % = 100 x T x F / peak_fp32(g)

Limits: this is *compute* utilisation against the FP32 peak, not NVML's "GPU busy" (which
counts any kernel running and reads much higher); the stand-ins approximate Gavel's workloads
(see docs/engines/placement.md); data loading, optimiser steps and mixed precision are not counted; K80 is one
GK210 die. There is no peak-utilisation or memory measurement in this source, so those stay
empty (``None``) rather than invented.

Peak FP32 TFLOP/s, from NVIDIA datasheets: K80 8.73 per board with boost = 4.37 per GK210 GPU
(Tesla K80 datasheet, 2014); P100 PCIe 9.3 (Tesla P100 datasheet); V100 SXM2 15.7 (Tesla V100
datasheet). Gavel does not state which variant its throughputs come from.
"""
from __future__ import annotations

import csv
from pathlib import Path

PEAK_FP32_TFLOPS = {"k80": 4.37, "p100": 9.3, "v100": 15.7}
SOURCE_GAVEL = "gavel-throughput-derived"


def derive_gavel_rows(throughputs: dict, train_flops: dict[tuple[str, int], float]) -> list[dict]:
    """Profile rows from Gavel's isolated single-GPU throughputs.

    ``train_flops``: (family, batch size) -> FLOPs of one training step. Returns dicts with
    model, batch_size, gpu_type (upper case), util_mean_pct, util_peak_pct (None),
    memory_mib (None), throughput_steps_s, achieved_tflops, source.
    """
    from .interference import _parse_key
    from .traces import parse_gavel_job_type

    rows = []
    for gpu, peak in PEAK_FP32_TFLOPS.items():
        for key, entry in throughputs.get(gpu, {}).items():
            job_type, sf = _parse_key(key)
            if sf != 1:
                continue
            fam, bs = parse_gavel_job_type(job_type)
            if (fam, bs) not in train_flops or not entry.get("null"):
                continue
            tput = float(entry["null"])
            achieved = tput * train_flops[(fam, bs)]
            rows.append({"model": fam, "batch_size": bs, "gpu_type": gpu.upper(),
                         "util_mean_pct": round(100.0 * achieved / (peak * 1e12), 3), "util_peak_pct": None,
                         "memory_mib": None, "throughput_steps_s": tput,
                         "achieved_tflops": round(achieved / 1e12, 4), "source": SOURCE_GAVEL})
    return rows


def read_csv_rows(path: Path) -> list[dict]:
    """Rows of a shipped CSV table, numbers converted, empty cells as ``None``."""
    out = []
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            conv = {}
            for k, v in row.items():
                if v == "" or v is None:
                    conv[k] = None
                else:
                    try:
                        conv[k] = int(v) if v.lstrip("-").isdigit() else float(v)
                    except ValueError:
                        conv[k] = v
            out.append(conv)
    return out


def gavel_profile_lookup(profile_rows: list[dict], feature_rows: list[dict], *, gpu_type: str = "V100"):
    """``(family, batch_size) -> (util %, memory MiB)`` for the simulator: utilisation from the
    Gavel-derived rows of ``gpu_type``, memory from the graph estimate of the features table.
    Raises ``KeyError`` naming the missing (model, batch) and table."""
    util = {(r["model"], int(r["batch_size"])): float(r["util_mean_pct"])
            for r in profile_rows if r["gpu_type"] == gpu_type.upper()}
    mem = {(r["model"].removeprefix("gavel:"), int(r["batch_size"])): float(r["memory_mib"]) for r in feature_rows}

    def lookup(family: str, bs: int) -> tuple[float, float]:
        if (family, bs) not in util:
            raise KeyError(f"no {gpu_type} profile row for {family} batch {bs} in the Gavel-derived table")
        if (family, bs) not in mem:
            raise KeyError(f"no graph features for {family} batch {bs}; run manage.py zoo_features")
        return util[(family, bs)], mem[(family, bs)]

    lookup.util_table = util  # type: ignore[attr-defined]
    return lookup
