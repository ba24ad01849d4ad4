"""The simulator's ground truth for co-location interference (the *world*).

Policies never see this module's objects: they reason with predictions (:class:`JobSpec`'s
predicted utilisation and memory, and a predictor of pair slowdowns where they use one). Only
:func:`placement.core.simulator.simulate` holds a world, to decide how fast each co-located job
really progresses. ``tests/unit/placement/test_world.py`` checks that the policies module does
not import this one and that no object a policy receives reaches a world.

Source: Gavel's measured throughputs (Narayanan et al., "Heterogeneity-aware cluster scheduling
policies for deep learning workloads", OSDI 2020; ``simulation_throughputs.json`` of its
repository): for each GPU type (K80, P100, V100) and job type ``(name, scale factor)``,
``null`` = isolated throughput (steps/s) and, for each other job type, the pair
``[throughput of this job, throughput of the other]`` when the two space-share every GPU.
A pair entry of ``[0, 0]`` means Gavel has no measurement (the pair did not run together).

Slowdown of job ``a`` next to job ``b`` on GPU type ``g`` (``>= 1``, clipped)::

    s(a | b, g) = isolated throughput of a on g / throughput of a in the pair (a, b) on g

Lookup order, each labelled by the source it counts under:

1. ``measured``: the pair at both jobs' own scale factors (Gavel measured pairs of equal scale
   factors 1, 2, 4, 8).
2. ``measured_1gpu``: otherwise the pair of the two job types at scale factor 1, applied per
   GPU (a multi-GPU job's tasks share each GPU as a single-GPU job would; an assumption).
3. ``modelled``: otherwise (a job type Gavel did not measure, e.g. the Tiresias trace's
   torchvision models, or a ``[0, 0]`` entry) the median measured slowdown of all scale-1
   pairs on that GPU type: a constant, deliberately uninformed about the pair, so the world
   never borrows a policy's belief.

With more than one co-runner on a GPU the pairwise log slowdowns add (Gavel measured pairs
only), and that GPU's co-located time counts as ``modelled``. A job's source over an interval
is the source of its worst GPU's slowdown.

Heterogeneous clusters (:meth:`InterferenceWorld.speed`): a job's ``duration`` is isolated
seconds on the reference GPU type (V100: Gavel's traces are converted with its V100
throughputs). On another type it runs at ``isolated throughput on that type / isolated
throughput on V100`` of its job type (Gavel's ``null`` entries; its scale factor's row, else
scale factor 1's), or, for a job type Gavel did not measure, at the median of that ratio over
the measured job types (``modelled``; results count job-seconds by source, ``speed_*_s``). A
job spread over GPUs of several types runs at its slowest GPU's speed (synchronous data
parallelism). Some ratios exceed 1 (a K80 runs Gavel's Recommendation job 1.5x as fast as a
V100), so on a cluster without V100s a job can finish before its V100 duration.
"""
from __future__ import annotations

import math
from typing import Iterable, Sequence

import numpy as np

from .interference import _parse_key
from .types import JobSpec

SOURCES = ("measured", "measured_1gpu", "modelled")


def job_type(job: JobSpec) -> str:
    """Gavel's job-type name of ``job``: ``"ResNet-18 (batch size 16)"``; ``"A3C"`` and
    ``"CycleGAN"`` carry no batch size."""
    if job.model in ("A3C", "CycleGAN") or not job.batch_size:
        return job.model
    return f"{job.model} (batch size {job.batch_size})"


class InterferenceWorld:
    """Ground-truth pair slowdowns from Gavel's measured table (module docstring).

    ``throughputs``: the parsed ``simulation_throughputs.json`` (GPU type lowercase ->
    ``"('type', sf)"`` -> row). ``default_gpu_type``: used for a GPU type the table lacks
    (``V100M32`` -> its prefix ``v100`` first). ``ValueError`` if the table has no measured
    pair on any GPU type.
    """

    def __init__(self, throughputs: dict, *, default_gpu_type: str = "v100") -> None:
        self._pairs: dict[str, dict[tuple[str, int, str, int], float]] = {}
        self.fallback: dict[str, float] = {}
        for gpu in ("k80", "p100", "v100"):
            table = throughputs.get(gpu) or {}
            pairs: dict[tuple[str, int, str, int], float] = {}
            for key, row in table.items():
                a, sa = _parse_key(key)
                alone = float(row.get("null") or 0.0)
                if alone <= 0:
                    continue
                for other, pair in row.items():
                    if other == "null" or not pair or float(pair[0]) <= 0:
                        continue
                    b, sb = _parse_key(other)
                    pairs[(a, sa, b, sb)] = max(alone / float(pair[0]), 1.0)
            if pairs:
                self._pairs[gpu] = pairs
                self.fallback[gpu] = float(np.median([v for (_, sa, _, sb), v in pairs.items()
                                                      if sa == sb == 1]))
        if not self._pairs:
            raise ValueError("no measured pair in the throughput table")
        self.default_gpu_type = default_gpu_type.lower()
        self.name = "gavel-measured-pairs"
        # isolated throughput (steps/s) per GPU type and (job type, scale factor)
        alone = {g: {_parse_key(k): float(row.get("null") or 0.0) for k, row in (throughputs.get(g) or {}).items()}
                 for g in ("k80", "p100", "v100")}
        self.reference = "v100"
        self._speed: dict[str, dict[tuple[str, int], float]] = {}
        self.speed_fallback: dict[str, float] = {}
        for g, rows in alone.items():
            ratios = {key: t / alone[self.reference][key] for key, t in rows.items()
                      if t > 0 and alone[self.reference].get(key, 0.0) > 0}
            if ratios:
                self._speed[g] = ratios
                self.speed_fallback[g] = float(np.median(list(ratios.values())))

    def _gpu(self, gpu_type: str) -> str:
        g = gpu_type.lower()
        if g in self._pairs:
            return g
        for known in self._pairs:
            if g.startswith(known):
                return known
        return self.default_gpu_type

    def pair(self, a: JobSpec, b: JobSpec, gpu_type: str) -> tuple[float, str]:
        """(slowdown of ``a`` next to ``b`` on ``gpu_type``, source in :data:`SOURCES`)."""
        g = self._gpu(gpu_type)
        pairs = self._pairs[g]
        ta, tb = job_type(a), job_type(b)
        s = pairs.get((ta, a.num_gpus, tb, b.num_gpus))
        if s is not None:
            return s, "measured"
        s = pairs.get((ta, 1, tb, 1))
        if s is not None:
            return s, "measured_1gpu"
        return self.fallback[g], "modelled"

    def slowdown(self, job: JobSpec, others: Sequence[JobSpec], gpu_type: str) -> tuple[float, str]:
        """(slowdown >= 1 of ``job`` sharing a GPU of ``gpu_type`` with ``others``, source).
        No co-runner: ``(1.0, "alone")``; several: pairwise log slowdowns add, ``"modelled"``."""
        if not others:
            return 1.0, "alone"
        if len(others) == 1:
            return self.pair(job, others[0], gpu_type)
        return math.exp(sum(math.log(self.pair(job, o, gpu_type)[0]) for o in others)), "modelled"

    def speed(self, job: JobSpec, gpu_type: str) -> tuple[float, str]:
        """(isolated speed of ``job`` on ``gpu_type`` relative to the reference type V100, > 0;
        source ``"reference"``, ``"measured"`` or ``"modelled"``), from Gavel's isolated
        throughputs (module docstring). ``(1.0, "reference")`` on V100; ``(1.0, "modelled")`` on
        a type Gavel did not measure."""
        if not any(gpu_type.lower().startswith(k) for k in ("k80", "p100", "v100")):
            return 1.0, "modelled"  # a type Gavel did not measure (A100, T4, ...): as fast as a V100, labelled
        g = self._gpu(gpu_type)
        if g == self.reference:
            return 1.0, "reference"
        table = self._speed.get(g)
        if not table:
            return 1.0, "modelled"
        t = job_type(job)
        r = table.get((t, job.num_gpus))
        if r is None:
            r = table.get((t, 1))
        if r is not None:
            return r, "measured"
        return self.speed_fallback[g], "modelled"

    def describe(self) -> dict:
        """JSON-ready: name, measured pairs per GPU type, the modelled fallback per type, and
        the median isolated speed per type relative to V100 (the fallback of :meth:`speed`)."""
        return {"name": self.name, "pairs": {g: len(p) for g, p in self._pairs.items()},
                "modelled_fallback_slowdown": {g: round(v, 4) for g, v in self.fallback.items()},
                "speed_vs_v100_median": {g: round(v, 4) for g, v in self.speed_fallback.items()}}


class ModelledWorld:
    """A world from an :class:`~placement.core.interference.InterferenceModel` over the jobs'
    utilisations: every co-located second counts as ``modelled``. For unit tests and for
    comparison with the old simulator (whose world was this, fed with the policies' own
    predicted utilisation); the bench and experiments use :class:`InterferenceWorld`."""

    def __init__(self, model) -> None:
        self.model = model
        self.name = "utilisation-model"

    def slowdown(self, job: JobSpec, others: Sequence[JobSpec], gpu_type: str) -> tuple[float, str]:
        if not others:
            return 1.0, "alone"
        return self.model.slowdown(job.util, [o.util for o in others]), "modelled"

    def speed(self, job: JobSpec, gpu_type: str) -> tuple[float, str]:
        """Every GPU type runs a job at the V100's isolated speed (no per-type data here): 1.0,
        ``"reference"`` on a V100, ``"modelled"`` on any other type."""
        return 1.0, "reference" if gpu_type.lower().startswith("v100") else "modelled"

    def describe(self) -> dict:
        return {"name": self.name, **self.model.as_dict()}


def source_shares(seconds: dict[str, float]) -> dict:
    """``{source: co-located job-seconds}`` -> the same plus ``*_share`` (fractions of all
    co-located seconds; NaN-free: 0 when nothing was co-located)."""
    total = float(sum(seconds.get(s, 0.0) for s in SOURCES))
    out = {f"{s}_s": round(float(seconds.get(s, 0.0)), 1) for s in SOURCES}
    out.update({f"{s}_share": round(seconds.get(s, 0.0) / total, 4) if total > 0 else 0.0 for s in SOURCES})
    out["colocated_s"] = round(total, 1)
    return out


def as_world(obj) -> "InterferenceWorld | ModelledWorld":
    """``obj`` if it is a world, a :class:`ModelledWorld` around an interference model."""
    if isinstance(obj, (InterferenceWorld, ModelledWorld)):
        return obj
    return ModelledWorld(obj)


__all__: Iterable[str] = ("InterferenceWorld", "ModelledWorld", "job_type", "source_shares", "as_world",
                          "SOURCES")
