"""Serverless workload: invocations of the Azure Functions 2021 sample, per-function profiles,
and longer synthetic workloads generated from the sample's per-function statistics.

Trace (``data/azure-functions-2021-sample/Azure2021_200.csv``, see its SOURCE.md): one row per
invocation ``app,func,end_timestamp,duration``: hashed ids, end time [s from trace start],
duration [s]. Arrival (start) time = ``end_timestamp - duration``. 199 invocations, 31 functions,
about 21 minutes. Cite Zhang et al., SOSP 2021 (Faa$T) and the AzurePublicDataset (CC BY 4.0).

Generator (:func:`generate_workload`), per function ``f`` of the sample:

- arrivals: a Poisson process of rate ``rate_scale * n_f / T`` (``n_f`` = invocations of ``f``,
  ``T`` = the sample's span in seconds);
- durations: log-normal with the mean ``mu_f`` and standard deviation ``sigma_f`` of
  ``ln(duration)`` of ``f`` (``sigma_f`` = the pooled within-function standard deviation when ``f``
  has fewer than 3 invocations); durations are floored at 1 ms (the trace's resolution).

Per-function profiles (:func:`assign_profiles`): the trace has no image size, CPU or memory, so
these are ASSUMPTIONS drawn with a seeded generator:

- image size: log-uniform in ``IMAGE_MIB_RANGE`` = 50..1500 MiB (assumption; typical compressed
  sizes of language-runtime and ML-inference images);
- CPU use of a busy invocation from ``CPU_USAGE_MILLI_CHOICES`` and a CPU request of a fraction
  ``CPU_REQUEST_FRACTIONS`` of it (assumption: operators often request less CPU than functions
  burst to, so the scheduler's view of load and the real contention differ);
- memory request: from ``MEMORY_MIB_CHOICES`` with probabilities skewed to small sizes
  (after Shahrad et al., ATC 2020, Sec. 3.4: about 90% of Azure apps never use more than 400 MB);
- memory-bandwidth demand of a busy invocation per CPU it uses, ``membw_gbs_per_cpu``:
  log-uniform in ``MEMBW_GBS_PER_CPU_RANGE`` = 0.25..4 GB/s (ASSUMPTION: from compute-bound
  handlers to memory-streaming functions; no source measured it for the Azure functions). It is
  drawn from a child generator (``rng.spawn``), which does not advance ``rng``, so every other
  profile value and every generated arrival stays what it was before this field existed;
- one soft zone-spread constraint (``maxSkew 1``, ``ScheduleAnyway``) on the function's pods
  and, for about half of the functions, a preferred node-affinity term (weight 1..100) for CPU
  machines or T4 machines (assumption: CPU functions and inference functions).
"""
from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .cluster import GPU_TYPE_LABEL
from .scheduler import ZONE_KEY, MatchExpression, Pod, SpreadConstraint

DEFAULT_AZURE_SAMPLE = Path(__file__).resolve().parents[2] / "data" / "azure-functions-2021-sample" / "Azure2021_200.csv"

MiB = 2**20
IMAGE_MIB_RANGE = (50.0, 1500.0)  # assumption
CPU_USAGE_MILLI_CHOICES = (1000, 2000, 4000, 8000)  # assumption: CPU a busy invocation uses
CPU_USAGE_MILLI_P = (0.3, 0.3, 0.25, 0.15)  # assumption
CPU_REQUEST_FRACTIONS = (0.25, 0.5, 1.0)  # assumption: requests set at or below use, as is common
MEMORY_MIB_CHOICES = (128, 256, 512, 1024, 2048)  # assumption after Shahrad et al. ATC'20
MEMORY_MIB_P = (0.3, 0.3, 0.25, 0.1, 0.05)
MEMBW_GBS_PER_CPU_RANGE = (0.25, 4.0)  # assumption


class WorkloadError(ValueError):
    """Malformed trace or generator parameters."""


@dataclass(frozen=True)
class FunctionProfile:
    """What the simulator needs of a function: container image and its size [bytes], requests
    (CPU millicores, memory bytes), the pod template the scheduler sees, and the CPU a busy
    invocation really uses (millicores; defaults to the request) and the memory bandwidth it
    draws per CPU it uses (GB/s; 0 = none, used by :mod:`rlweights.core.serverless`)."""

    func_id: str
    image: str
    image_bytes: int
    cpu_milli: int
    memory_bytes: int
    pod: Pod
    cpu_usage_milli: int = 0
    membw_gbs_per_cpu: float = 0.0


@dataclass
class Workload:
    """Invocations sorted by arrival: ``arrival_s`` (s, shape ``(m,)``), ``duration_s`` (s, the
    uncontended execution time), ``func`` (index into ``functions``)."""

    name: str
    functions: list[FunctionProfile]
    arrival_s: np.ndarray
    duration_s: np.ndarray
    func: np.ndarray

    def __post_init__(self) -> None:
        order = np.argsort(self.arrival_s, kind="stable")
        self.arrival_s = np.asarray(self.arrival_s, float)[order]
        self.duration_s = np.asarray(self.duration_s, float)[order]
        self.func = np.asarray(self.func, np.int64)[order]
        if len(self.arrival_s) and (self.func.min() < 0 or self.func.max() >= len(self.functions)):
            raise WorkloadError("invocation refers to an unknown function")

    def __len__(self) -> int:
        return len(self.arrival_s)

    def window(self, start_s: float, length_s: float) -> "Workload":
        """The invocations arriving in ``[start_s, start_s + length_s)``, times shifted to 0."""
        m = (self.arrival_s >= start_s) & (self.arrival_s < start_s + length_s)
        return Workload(f"{self.name}[{start_s:g}+{length_s:g}]", self.functions, self.arrival_s[m] - start_s,
                        self.duration_s[m], self.func[m])


@dataclass(frozen=True)
class TraceRows:
    """The trace as read: per invocation function id, arrival [s], duration [s]."""

    func_ids: list[str]
    arrival_s: np.ndarray
    duration_s: np.ndarray


#: Columns of an Azure Functions 2021 invocation trace (header row required; other columns are ignored).
TRACE_COLUMNS = ("app", "func", "end_timestamp", "duration")
#: Most invocations a trace may hold. A simulated window costs 40-100 us of CPU per invocation
#: on this project's machine (12 ms for the 199-invocation sample replayed 10x on a PAI setup,
#: 165 ms for a generated window of 1,645; more contention, more events), and a comparison
#: measures each scenario some 60 times per seed (7 methods x budget 10, less shared vectors), so
#: 100,000 invocations keep one seed of one pair within about 4-10 CPU minutes.
MAX_TRACE_ROWS = 100_000


def parse_azure_trace(text: str, source: str = "<trace>", max_rows: int = MAX_TRACE_ROWS) -> TraceRows:
    """Parse an Azure Functions 2021 trace from CSV text: a header naming at least
    ``app,func,end_timestamp,duration`` (hashed ids, end time [s from trace start], duration
    [s]), then one row per invocation. Arrival = ``max(end_timestamp - duration, 0)``. Function
    id = the first 8 characters of ``app`` and of ``func``, ``"app/func"``.

    Raises :class:`WorkloadError` naming ``source`` and the line for: a NUL character, text that
    is not CSV, missing columns, an empty ``app`` or ``func``, a non-numeric, non-finite or
    negative ``end_timestamp`` or ``duration``, more than ``max_rows`` invocations, or none."""
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise WorkloadError(f"{source}, line {line}: contains a NUL character")
    funcs, arr, dur = [], [], []
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        fields = reader.fieldnames
        if not fields or not set(TRACE_COLUMNS) <= {f.strip().lstrip("\ufeff") for f in fields}:
            missing = sorted(set(TRACE_COLUMNS) - {f.strip().lstrip("\ufeff") for f in fields or []})
            raise WorkloadError(f"{source}, line 1: the header must name the columns {','.join(TRACE_COLUMNS)}; "
                                f"missing {', '.join(missing)}")
        reader.fieldnames = [f.strip().lstrip("\ufeff") for f in fields]
        for row in reader:
            line = reader.line_num
            if len(funcs) >= max_rows:
                raise WorkloadError(f"{source}: more than {max_rows} invocations (the limit)")
            if any(row.get(c) is None for c in TRACE_COLUMNS):
                raise WorkloadError(f"{source}, line {line}: expected at least {len(fields)} columns")
            app, func = row["app"].strip(), row["func"].strip()
            if not app or not func:
                raise WorkloadError(f"{source}, line {line}: empty app or func")
            try:
                end, d = float(row["end_timestamp"]), float(row["duration"])
            except ValueError:
                raise WorkloadError(f"{source}, line {line}: end_timestamp and duration must be numbers, got "
                                    f"{row['end_timestamp']!r}, {row['duration']!r}") from None
            if not (math.isfinite(end) and math.isfinite(d)):
                raise WorkloadError(f"{source}, line {line}: end_timestamp and duration must be finite")
            if end < 0 or d < 0:
                raise WorkloadError(f"{source}, line {line}: end_timestamp and duration must be >= 0")
            funcs.append(f"{app[:8]}/{func[:8]}")
            arr.append(max(end - d, 0.0))
            dur.append(d)
    except csv.Error as err:  # e.g. a field over csv's field size limit
        raise WorkloadError(f"{source}, line {reader.line_num}: not a valid CSV: {err}") from None
    if not funcs:
        raise WorkloadError(f"{source}: no invocations")
    return TraceRows(funcs, np.array(arr), np.array(dur))


def read_azure_trace(path: str | Path = DEFAULT_AZURE_SAMPLE) -> TraceRows:
    """Read an Azure 2021 trace file (see :func:`parse_azure_trace`, whose errors it raises,
    plus :class:`WorkloadError` for a file that cannot be read as UTF-8)."""
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise WorkloadError(f"{path}: cannot read: {err}") from None
    return parse_azure_trace(text, source=str(path))


@dataclass(frozen=True)
class FunctionStats:
    """Per-function statistics of a trace: ``rate_per_s`` (invocations/s over the trace
    span), ``log_mu`` / ``log_sigma`` (of ln duration [s])."""

    func_ids: list[str]
    rate_per_s: np.ndarray
    log_mu: np.ndarray
    log_sigma: np.ndarray
    span_s: float


def function_stats(rows: TraceRows) -> FunctionStats:
    """Arrival rate and log-normal duration parameters per function (see module docstring)."""
    ids = sorted(set(rows.func_ids))
    span = float(rows.arrival_s.max() - rows.arrival_s.min()) or 1.0
    logd = np.log(np.maximum(rows.duration_s, 1e-3))
    fa = np.array(rows.func_ids)
    mus, sigmas, rates, resid = [], [], [], []
    for f in ids:
        x = logd[fa == f]
        mus.append(x.mean())
        rates.append(len(x) / span)
        sigmas.append(x.std(ddof=1) if len(x) >= 3 else np.nan)
        if len(x) >= 2:
            resid.extend(x - x.mean())
    pooled = float(np.sqrt(np.sum(np.square(resid)) / max(len(resid) - 1, 1))) if resid else 1.0
    sig = np.array([pooled if np.isnan(s) else s for s in sigmas])
    return FunctionStats(ids, np.array(rates), np.array(mus), sig, span)


def assign_profiles(func_ids: list[str], rng: np.random.Generator) -> list[FunctionProfile]:
    """Seeded per-function image, requests and pod template (ASSUMPTIONS; module docstring)."""
    out = []
    lo, hi = np.log(IMAGE_MIB_RANGE[0]), np.log(IMAGE_MIB_RANGE[1])
    # a child generator: rng's own stream (and so every other draw) is left as it was
    membw = np.exp(rng.spawn(1)[0].uniform(*np.log(MEMBW_GBS_PER_CPU_RANGE), size=len(func_ids)))
    for k, f in enumerate(func_ids):
        image = f"registry.example/fn-{k}:v1"
        size = int(np.exp(rng.uniform(lo, hi)) * MiB)
        usage = int(rng.choice(CPU_USAGE_MILLI_CHOICES, p=CPU_USAGE_MILLI_P))
        cpu = int(usage * float(rng.choice(CPU_REQUEST_FRACTIONS)))
        mem = int(rng.choice(MEMORY_MIB_CHOICES, p=MEMORY_MIB_P)) * MiB
        preferred = ()
        if rng.random() < 0.5:
            kind = "CPU" if rng.random() < 0.5 else "T4"
            preferred = ((int(rng.integers(1, 101)), (MatchExpression(GPU_TYPE_LABEL, "In", (kind,)),)),)
        labels = {"app": f"fn-{k}"}
        pod = Pod(name=f"fn-{k}", cpu_milli=cpu, memory_bytes=mem, images=(image,), labels=labels,
                  preferred_terms=preferred,
                  spread_constraints=(SpreadConstraint(1, ZONE_KEY, "ScheduleAnyway", (("app", f"fn-{k}"),)),),
                  cache_key=f"fn-{k}")
        out.append(FunctionProfile(f, image, size, cpu, mem, pod, cpu_usage_milli=usage,
                                   membw_gbs_per_cpu=float(membw[k])))
    return out


def replay_workload(rows: TraceRows, rng: np.random.Generator, speedup: float = 1.0, name: str = "trace") -> Workload:
    """A trace replayed as it was recorded: every invocation with its real duration, arrivals
    shifted so the first is at 0 and divided by ``speedup`` (> 1 replays the same sequence at a
    higher rate), functions (sorted by id) with seeded profiles (:func:`assign_profiles`). The
    name gets ``-x<speedup>`` when ``speedup != 1``. Raises :class:`WorkloadError` for
    ``speedup <= 0``."""
    if not speedup > 0:
        raise WorkloadError("speedup must be positive")
    ids = sorted(set(rows.func_ids))
    index = {f: i for i, f in enumerate(ids)}
    return Workload(name if speedup == 1 else f"{name}-x{speedup:g}", assign_profiles(ids, rng),
                    (rows.arrival_s - rows.arrival_s.min()) / speedup, rows.duration_s,
                    np.array([index[f] for f in rows.func_ids]))


def azure_sample_workload(rng: np.random.Generator, path: str | Path = DEFAULT_AZURE_SAMPLE, speedup: float = 1.0) -> Workload:
    """The sample itself (199 real invocations, real durations) with seeded profiles; arrival
    times divided by ``speedup`` (>= 1 replays the same sequence at a higher rate), see
    :func:`replay_workload`. Raises :class:`WorkloadError` for ``speedup <= 0``."""
    if not speedup > 0:
        raise WorkloadError("speedup must be positive")
    return replay_workload(read_azure_trace(path), rng, speedup, name="azure2021-sample")


def generate_workload(stats: FunctionStats, rng: np.random.Generator, length_s: float, rate_scale: float = 1.0,
                      name: str = "generated", profiles: list[FunctionProfile] | None = None) -> Workload:
    """A synthetic workload of ``length_s`` seconds: per function Poisson arrivals at
    ``rate_scale`` times its sample rate, log-normal durations (module docstring).

    Raises :class:`WorkloadError` for non-positive ``length_s`` or ``rate_scale``."""
    if length_s <= 0 or rate_scale <= 0:
        raise WorkloadError("length_s and rate_scale must be positive")
    profiles = profiles if profiles is not None else assign_profiles(stats.func_ids, rng)
    arr, dur, fn = [], [], []
    for k in range(len(stats.func_ids)):
        n = rng.poisson(stats.rate_per_s[k] * rate_scale * length_s)
        arr.append(rng.uniform(0, length_s, n))  # Poisson process: n uniform points
        dur.append(np.maximum(np.exp(rng.normal(stats.log_mu[k], stats.log_sigma[k], n)), 1e-3))
        fn.append(np.full(n, k))
    return Workload(name, profiles, np.concatenate(arr), np.concatenate(dur), np.concatenate(fn))


def workloads(seed: int, count: int, length_s: float = 120.0, rate_scale: tuple[float, float] = (6.0, 16.0),
              prefix: str = "wl") -> list[Workload]:
    """``count`` generated workloads (each its own profiles, rate scale uniform in
    ``rate_scale``) from ``numpy.random.default_rng(seed)``."""
    rng = np.random.default_rng(seed)
    stats = function_stats(read_azure_trace())
    return [generate_workload(stats, rng, length_s, float(rng.uniform(*rate_scale)), name=f"{prefix}{seed}-{i}")
            for i in range(count)]
