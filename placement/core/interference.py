"""Co-location interference model fitted to Gavel's measured pair throughputs.

Data: ``simulation_throughputs.json`` (Narayanan et al., Gavel, OSDI 2020): for each GPU type
and job type, the isolated throughput and the throughput of each job of a co-located pair.
Slowdown of job a next to b = isolated throughput of a / throughput of a in the pair (>= 1).

Model (least squares on log slowdown, fitted by :func:`fit_interference`)::

    log s(a | b) = b0 + b1*ua + b2*ub + b3*ua*ub + b4*max(0, ua + ub - 100)     (u in [0, 1] * 100)

with ua, ub the two jobs' utilisations (percent, alone). For more than two jobs on a GPU the
pairwise log slowdowns add (an extrapolation: Gavel measured pairs only).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


def _design(ua: np.ndarray, ub: np.ndarray) -> np.ndarray:
    ua, ub = np.asarray(ua, float) / 100.0, np.asarray(ub, float) / 100.0
    return np.stack([np.ones_like(ua), ua, ub, ua * ub, np.maximum(0.0, ua + ub - 1.0)], axis=-1)


@dataclass(frozen=True)
class InterferenceModel:
    """Fitted coefficients (5,), and the fit's quality on its data: ``n`` pairs, ``r2`` and
    ``mae`` of the slowdown (not of its log)."""

    coef: tuple[float, ...]
    n: int = 0
    r2: float = float("nan")
    mae: float = float("nan")

    def pair_log_slowdown(self, ua, ub) -> np.ndarray:
        """log slowdown of a job at utilisation ``ua`` next to one at ``ub`` (>= 0)."""
        return np.maximum(_design(ua, ub) @ np.asarray(self.coef), 0.0)

    def slowdown(self, u_self: float, u_others) -> float:
        """Slowdown factor (>= 1) of a job at ``u_self`` % sharing a GPU with jobs at
        ``u_others`` % (pairwise log slowdowns add)."""
        # scalar fast path (the simulator calls this once per job per GPU change)
        b0, b1, b2, b3, b4 = self.coef
        a = u_self / 100.0
        total = 0.0
        for ub in u_others:
            b = ub / 100.0
            total += max(b0 + b1 * a + b2 * b + b3 * a * b + b4 * max(0.0, a + b - 1.0), 0.0)
        return math.exp(total)

    def as_dict(self) -> dict:
        return {"coef": list(self.coef), "n": self.n, "r2": self.r2, "mae": self.mae}


def fit_interference(ua, ub, slowdown) -> InterferenceModel:
    """Fit the model to arrays of (ua %, ub %, measured slowdown >= 1) of equal length (>= 5).
    Raises ``ValueError`` on too few points or non-positive slowdowns."""
    ua, ub, s = (np.asarray(v, float) for v in (ua, ub, slowdown))
    if len(s) < 5 or not (len(ua) == len(ub) == len(s)):
        raise ValueError("need >= 5 (ua, ub, slowdown) triples of equal length")
    if np.any(s <= 0):
        raise ValueError("slowdowns must be > 0")
    X = _design(ua, ub)
    coef, *_ = np.linalg.lstsq(X, np.log(np.maximum(s, 1.0)), rcond=None)
    m = InterferenceModel(tuple(float(c) for c in coef), n=len(s))
    pred = np.exp(m.pair_log_slowdown(ua, ub))
    ss_res = float(((pred - s) ** 2).sum())
    ss_tot = float(((s - s.mean()) ** 2).sum()) or 1.0
    return InterferenceModel(m.coef, n=len(s), r2=1 - ss_res / ss_tot, mae=float(np.abs(pred - s).mean()))


def gavel_pairs(throughputs: dict, utils: dict[tuple[str, str], float]):
    """Extract (ua, ub, slowdown) from Gavel's table for single-GPU job types whose
    utilisation is known. ``utils``: (gpu_type lowercase, job_type) -> util %.
    Returns three numpy arrays."""
    ua, ub, sd = [], [], []
    for gpu in ("k80", "p100", "v100"):
        table = throughputs.get(gpu, {})
        for key, row in table.items():
            a_type, a_sf = _parse_key(key)
            if a_sf != 1 or (gpu, a_type) not in utils or not row.get("null"):
                continue
            alone = float(row["null"])
            for other, pair in row.items():
                if other == "null":
                    continue
                b_type, b_sf = _parse_key(other)
                if b_sf != 1 or (gpu, b_type) not in utils or not pair or pair[0] <= 0:
                    continue
                ua.append(utils[(gpu, a_type)])
                ub.append(utils[(gpu, b_type)])
                sd.append(alone / float(pair[0]))
    return np.array(ua), np.array(ub), np.array(sd)


def _parse_key(key: str) -> tuple[str, int]:
    """"('ResNet-18 (batch size 16)', 1)" -> ("ResNet-18 (batch size 16)", 1)."""
    inner = key.strip()[1:-1]
    name, sf = inner.rsplit(",", 1)
    return name.strip().strip("'\""), int(sf)
