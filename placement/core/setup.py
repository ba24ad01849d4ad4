"""Wiring shared by the simulate command, the experiment runner, the demo and the bench: load
the shipped tables, fit the interference model, read a trace by name. Pure Python + numpy."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from . import interference, profiles, traces, world
from .types import GPUSpec, JobSpec, homogeneous_cluster

GAVEL_VCS = ("0e4a51", "103959", "11cb48", "23dbec", "2869ce", "51b7ef", "6214e9", "6c71a0",
             "795a4c", "7f04ca", "925e2b", "b436b2", "e13805", "ed69ec", "ee9e8c")


@dataclass
class Tables:
    throughputs: dict
    profile_rows: list[dict]
    feature_rows: list[dict]
    interference: interference.InterferenceModel
    world: world.InterferenceWorld

    def lookup(self, gpu_type: str = "V100"):
        return profiles.gavel_profile_lookup(self.profile_rows, self.feature_rows, gpu_type=gpu_type)


def gavel_job_type(model: str, bs: int) -> str:
    return model if model in ("A3C", "CycleGAN") else f"{model} (batch size {bs})"


def load_tables(data_dir: Path) -> Tables:
    """Read data/gavel-traces and data/placement tables; fit the interference model on every
    Gavel pair whose two job types have a derived utilisation on that GPU type (a belief, for
    reports), and build the simulator's world from the measured pairs
    (:class:`placement.core.world.InterferenceWorld`)."""
    thr = traces.load_throughputs(data_dir / "gavel-traces" / "simulation_throughputs.json")
    prof = profiles.read_csv_rows(data_dir / "placement" / "gavel_profile.csv")
    feat = profiles.read_csv_rows(data_dir / "placement" / "zoo_features.csv")
    utils = {(r["gpu_type"].lower(), gavel_job_type(r["model"], r["batch_size"])): r["util_mean_pct"] for r in prof}
    model = interference.fit_interference(*interference.gavel_pairs(thr, utils))
    return Tables(thr, prof, feat, model, world.InterferenceWorld(thr))


@functools.lru_cache(maxsize=4)
def _pair_belief(data_dir: str):
    from . import pair_predictor as pp

    thr = traces.load_throughputs(Path(data_dir) / "gavel-traces" / "simulation_throughputs.json")
    feat = pp.features_by_type(profiles.read_csv_rows(Path(data_dir) / "placement" / "zoo_features.csv"))
    return pp.OutOfFamilyBelief(pp.measured_pairs(thr), feat, isolated=pp.isolated_throughputs(thr))


def pair_belief(data_dir: Path):
    """The pair belief simulated Horus decides with
    (:class:`placement.core.pair_predictor.OutOfFamilyBelief`: for each job type, the fit that
    held out its model family, so the policy never reads the world's measured pairs through
    it), built from ``data_dir``'s Gavel table and ``placement/zoo_features.csv``; built once
    per folder and process (about 3 s) and shared (it is read-only apart from its memo).
    ``FileNotFoundError`` for a folder without those files."""
    return _pair_belief(str(Path(data_dir).resolve()))


def load_trace(name: str, data_dir: Path, tables: Tables, *, seed: int = 0,
               limit: int | None = None, profile=None) -> list[JobSpec]:
    """Trace by name: ``gavel:<vc>`` (one of :data:`GAVEL_VCS`), ``philly`` (full job list,
    models assigned by seed), ``tiresias60`` (needs ``profile``: (model, batch) -> (util %,
    memory MiB), e.g. the predictor on graph features). ``ValueError`` for an unknown name or a trace with no jobs."""
    jobs = _load_trace(name, data_dir, tables, seed=seed, limit=limit, profile=profile)
    if not jobs:
        raise ValueError(f"trace {name!r} has no jobs (empty trace{'' if limit is None else f', limit={limit}'})")
    return jobs


def _load_trace(name, data_dir, tables, *, seed, limit, profile) -> list[JobSpec]:
    look = tables.lookup("V100")
    if name.startswith("gavel:"):
        vc = name[6:]
        if vc not in GAVEL_VCS:
            raise ValueError(f"unknown Gavel VC {vc!r}; known: {', '.join(GAVEL_VCS)}")
        return traces.read_gavel_trace(data_dir / "gavel-traces" / "msr_seed0" / f"{vc}.trace",
                                       tables.throughputs, look, limit=limit)
    if name == "philly":
        models = sorted(look.util_table)  # type: ignore[attr-defined]
        return traces.read_philly(data_dir / "philly-jobs-pollux" / "philly.csv", models, look, seed=seed, limit=limit)
    if name == "tiresias60":
        if profile is None:
            raise ValueError("tiresias60 needs a profile (model, batch) -> (util %, MiB): its models "
                             "(vgg19, inception4, ...) are not Gavel job types; see placement.experiment")
        return traces.read_tiresias_trace(data_dir / "tiresias-sim" / "60_job.csv", profile)
    raise ValueError(f"unknown trace {name!r}: use gavel:<vc>, philly or tiresias60")


#: Bounds on a requested "NxG" cluster shape. The simulator allocates O(GPUs) state per event,
#: so an unbounded shape (e.g. "100000000x100000000") exhausts the worker's memory. 100,000
#: GPUs is ~250x the largest shipped trace's cluster (Philly: 376 V100s); 16 GPUs per node is
#: the largest common server (DGX-2 / HGX-2).
MAX_NODES = 10_000
MAX_GPUS_PER_NODE = 16
MAX_TOTAL_GPUS = 100_000


def parse_cluster_shape(shape: str) -> tuple[int, int]:
    """``"NxG"`` -> ``(N nodes, G GPUs per node)``. ``ValueError`` (message fit for a user) if
    the text is malformed, N or G < 1, N > :data:`MAX_NODES`, G > :data:`MAX_GPUS_PER_NODE` or
    N*G > :data:`MAX_TOTAL_GPUS`."""
    try:
        n, g = (int(v) for v in shape.lower().split("x"))
    except ValueError:
        raise ValueError(f"cluster shape must look like 4x8 (nodes x GPUs per node), got {shape!r}") from None
    if n < 1 or g < 1:
        raise ValueError(f"cluster {shape!r}: needs at least 1 node and 1 GPU per node")
    if n > MAX_NODES:
        raise ValueError(f"cluster {shape!r}: at most {MAX_NODES} nodes")
    if g > MAX_GPUS_PER_NODE:
        raise ValueError(f"cluster {shape!r}: at most {MAX_GPUS_PER_NODE} GPUs per node")
    if n * g > MAX_TOTAL_GPUS:
        raise ValueError(f"cluster {shape!r}: {n * g} GPUs, at most {MAX_TOTAL_GPUS} in all")
    return n, g


def largest_job_error(jobs: list[JobSpec], n_gpus: int) -> str | None:
    """A message naming the first job with the most GPUs if it needs more than ``n_gpus``
    (it could never be placed), else ``None``."""
    if not jobs:
        return None
    big = max(jobs, key=lambda j: (j.num_gpus, -j.job_id))
    if big.num_gpus > n_gpus:
        return (f"job {big.job_id} ({big.model}) needs {big.num_gpus} GPUs but the cluster has {n_gpus}; "
                f"use at least {big.num_gpus} GPUs in all or leave cluster empty (shaped like the trace)")
    return None


def cluster(jobs: list[JobSpec], shape: str | None = None) -> list[GPUSpec]:
    """``shape`` "NxG" (N nodes of G V100 16 GiB, bounded as in :func:`parse_cluster_shape`,
    which raises ``ValueError``) or None: shaped like the trace."""
    if shape:
        n, g = parse_cluster_shape(shape)
        return homogeneous_cluster(n, g)
    return traces.cluster_for_trace(jobs)
