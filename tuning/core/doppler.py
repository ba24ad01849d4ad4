"""DOPpler's degree-of-parallelism (DOP) controller, in plain Python + numpy.

Source: Borowiec et al., "DOPpler: Parallel Measurement Infrastructure for Auto-Tuning Deep
Learning Tensor Programs", IEEE TPDS 34(7), 2023, as restated in Tandem's SPEC section 3:

* the DOP of each tuning task starts at 1 and is raised additively after every batch;
* after a batch measured at DOP > 1, a sample of its candidates is re-measured serially (DOP 1):
  the outliers of the batch by modified z-score on the median absolute deviation (Iglewicz and
  Hoaglin, "How to Detect and Handle Outliers", ASQC 1993, section 3.2:
  ``M_i = 0.6745 (x_i - median) / MAD``, outlier when ``|M_i| > 3.5``) plus a random fill up to
  about 20% of the batch;
* if the mean relative error of the parallel latencies against the serial ones exceeds 5%, or
  the failures caused by parallelism (candidates that failed in parallel but ran serially)
  exceed 5% of the DOP, the DOP is backed off multiplicatively (halved);
* the measurement timeout grows with the DOP;
* the best 10% of each task's candidates are measured serially and their serial numbers decide.

A batch measured at DOP 1 *is* a serial measurement: it gets no re-measurement at all and its
decision says so (``check="serial-equivalent"``).

Measurement cost (Tandem's additions, not in the paper's rules; they decide how long each
candidate is timed, never the DOP): repeats adapt to the observed spread within bounds
(:func:`repeats_sufficient`), and a candidate whose first timed repeat is already more than
``screen_ratio`` times the task's best latency so far is not repeated further
(:func:`clearly_worse`; with ``screen_repeats`` > 1, only when that many repeats all are): it
cannot become the task's best, its ranking among the good ones does not matter, and its
measured repeats still go to the cost model. ``estimator`` chooses what is recorded from the
repeats (:func:`estimate_run_secs`: all of them, MetaSchedule's mean, or the fastest alone).

Nothing here imports TVM: the runner in :mod:`tuning.backends.doppler` feeds latencies in
(seconds, ``nan`` for a failed candidate) and asks for the sample to re-measure and the next DOP.
Randomness comes from a ``numpy.random.Generator`` argument.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import numpy as np

#: Two-sided 95% Student-t quantiles t(0.975, df) for df = 1..30 (any statistics table, e.g.
#: NIST/SEMATECH e-Handbook of Statistical Methods, section 1.3.6.7.2); 1.96 (normal) above.
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)


#: latency estimators of :func:`estimate_run_secs` (``DopplerConfig.estimator``)
ESTIMATORS = ("mean", "min")


@dataclass(frozen=True)
class DopplerConfig:
    """DOPpler's thresholds; the defaults are the spec's (SPEC section 3, DOPpler).

    start_dop: DOP of a task's first batch (1).
    max_dop: most candidates measured at once (the number of device slots: core sets, GPUs or
        RPC servers).
    additive_step: DOP added after a batch that passed the checks (1).
    backoff_factor: DOP multiplied by this (then floored, at least 1) on a failed check (0.5).
    max_rel_error: mean relative error |parallel - serial| / serial of the sample above which
        the DOP backs off (0.05 = 5%).
    max_failure_fraction_of_dop: parallelism-induced failures above this times the DOP back off
        (0.05, i.e. 5% of the DOP).
    mad_z_threshold: modified z-score above which a latency is an outlier (3.5).
    sample_fraction: serial re-measurement sample, outliers plus random fill, as a fraction of
        the batch (0.20).
    top_fraction: fraction of a task's best candidates measured serially (0.10).
    base_timeout_s: measurement timeout in seconds at DOP 1 (10 s).
    timeout_growth: timeout at DOP d is ``base_timeout_s * (1 + timeout_growth * (d - 1))``
        (1.0: linear in the DOP).
    min_repeats, max_repeats: bounds on the adaptive number of timed repeats per candidate (3, 6).
    ci_rel_halfwidth: stop repeating once the 95% confidence interval of the mean latency has a
        half-width at most this fraction of the mean (0.03 = 3%: the accuracy the final-latency
        comparison asks for; 2% was rarely reached on a shared 2-core machine, so nearly every
        candidate ran to the maximum).
    screen_ratio: a candidate whose first ``screen_repeats`` timed repeats are all slower than
        this times the task's best latency so far stops there (1.5; 0 disables the screening).
    screen_repeats: timed repeats that must all be ``screen_ratio`` times slower than the task's
        best before a candidate is screened out (1: the first repeat decides; 2: a "two-strike"
        screen, so that one repeat slowed down by a burst of other load does not drop a good
        candidate). At most ``max_repeats``. Each extra strike is one more timed repeat of a
        candidate already seen to be slow, inside the measurement timeout.
    estimator: the latency a candidate is recorded with, from its timed repeats (see
        :func:`estimate_run_secs`): ``"mean"`` (MetaSchedule's: every repeat is recorded and the
        database ranks by their mean) or ``"min"`` (only the fastest repeat is recorded).

    Raises ``ValueError`` on out-of-range values.
    """

    start_dop: int = 1
    max_dop: int = 2
    additive_step: int = 1
    backoff_factor: float = 0.5
    max_rel_error: float = 0.05
    max_failure_fraction_of_dop: float = 0.05
    mad_z_threshold: float = 3.5
    sample_fraction: float = 0.20
    top_fraction: float = 0.10
    base_timeout_s: float = 10.0
    timeout_growth: float = 1.0
    min_repeats: int = 3
    max_repeats: int = 6
    ci_rel_halfwidth: float = 0.03
    screen_ratio: float = 1.5
    screen_repeats: int = 1
    estimator: str = "mean"

    def __post_init__(self) -> None:
        if self.max_dop < 1:
            raise ValueError(f"max_dop must be >= 1, not {self.max_dop}")
        if not 1 <= self.start_dop <= self.max_dop:
            raise ValueError(f"start_dop must be in [1, max_dop={self.max_dop}], not {self.start_dop}")
        if self.additive_step < 1:
            raise ValueError(f"additive_step must be >= 1, not {self.additive_step}")
        if not 0 < self.backoff_factor < 1:
            raise ValueError(f"backoff_factor must be in (0, 1), not {self.backoff_factor}")
        for name in ("max_rel_error", "max_failure_fraction_of_dop", "mad_z_threshold", "base_timeout_s",
                     "ci_rel_halfwidth"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, not {getattr(self, name)}")
        for name in ("sample_fraction", "top_fraction"):
            if not 0 < getattr(self, name) <= 1:
                raise ValueError(f"{name} must be in (0, 1], not {getattr(self, name)}")
        if self.timeout_growth < 0:
            raise ValueError(f"timeout_growth must be >= 0, not {self.timeout_growth}")
        if self.screen_ratio != 0 and not self.screen_ratio > 1:
            raise ValueError(f"screen_ratio must be > 1 (or 0 to disable), not {self.screen_ratio}")
        if not 1 <= self.min_repeats <= self.max_repeats:
            raise ValueError(f"need 1 <= min_repeats <= max_repeats, got {self.min_repeats}, {self.max_repeats}")
        if (isinstance(self.screen_repeats, bool) or not isinstance(self.screen_repeats, int)
                or not 1 <= self.screen_repeats <= self.max_repeats):
            raise ValueError(f"screen_repeats must be an integer in [1, max_repeats={self.max_repeats}], "
                             f"not {self.screen_repeats!r}")
        if self.estimator not in ESTIMATORS:
            raise ValueError(f"estimator must be one of {list(ESTIMATORS)}, not {self.estimator!r}")

    @classmethod
    def from_options(cls, options: dict[str, Any] | None, **defaults: Any) -> "DopplerConfig":
        """Build from a dict of overrides (e.g. ``TuningSetup.options["doppler"]``); unknown keys
        raise ``ValueError`` naming them."""
        options = dict(options or {})
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(options) - known)
        if unknown:
            raise ValueError(f"unknown DOPpler option(s) {unknown}; known: {sorted(known)}")
        return cls(**{**defaults, **options})


def modified_z_scores(values: Sequence[float]) -> np.ndarray:
    """Modified z-scores ``0.6745 (x - median) / MAD`` (Iglewicz and Hoaglin 1993, section 3.2).

    values: shape (n,), finite. Returns shape (n,). When the MAD is 0 (more than half the values
    equal) every score is 0: no value is called an outlier.
    """
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return x
    med = np.median(x)
    mad = np.median(np.abs(x - med))
    if mad == 0:
        return np.zeros_like(x)
    return 0.6745 * (x - med) / mad


def mad_outliers(values: Sequence[float], threshold: float = 3.5) -> list[int]:
    """Indices of the finite ``values`` whose |modified z-score| exceeds ``threshold``
    (``nan`` entries, failed candidates, are ignored and never returned)."""
    x = np.asarray(values, dtype=float)
    ok = np.flatnonzero(np.isfinite(x))
    if ok.size == 0:
        return []
    z = modified_z_scores(x[ok])
    return [int(i) for i in ok[np.abs(z) > threshold]]


def select_serial_sample(values: Sequence[float], rng: np.random.Generator, *, fraction: float = 0.20,
                         threshold: float = 3.5) -> list[int]:
    """Candidates of one batch to re-measure serially: the MAD outliers, then a random fill
    (without replacement, from the other finite entries) up to ``ceil(fraction * n)`` where n is
    the batch size. Returns sorted indices; more than the target when there are more outliers.
    """
    x = np.asarray(values, dtype=float)
    target = math.ceil(fraction * x.size - 1e-9)
    chosen = set(mad_outliers(x, threshold))
    rest = [i for i in np.flatnonzero(np.isfinite(x)) if int(i) not in chosen]
    need = max(0, target - len(chosen))
    if need and rest:
        fill = rng.choice(np.asarray(rest), size=min(need, len(rest)), replace=False)
        chosen.update(int(i) for i in fill)
    return sorted(chosen)


def mean_relative_error(parallel: Sequence[float], serial: Sequence[float]) -> float:
    """Mean of ``|parallel_i - serial_i| / serial_i`` over pairs where both are finite and the
    serial one is > 0 (a fraction, 0.05 = 5%). Returns 0.0 when there is no such pair."""
    p = np.asarray(parallel, dtype=float)
    s = np.asarray(serial, dtype=float)
    if p.shape != s.shape:
        raise ValueError(f"parallel and serial need the same shape, got {p.shape} and {s.shape}")
    ok = np.isfinite(p) & np.isfinite(s) & (s > 0)
    if not ok.any():
        return 0.0
    return float(np.mean(np.abs(p[ok] - s[ok]) / s[ok]))


def best_fraction_indices(task_history: Sequence[float], batch: Sequence[float], fraction: float = 0.10) -> list[int]:
    """Indices into ``batch`` of the candidates that rank within the best
    ``ceil(fraction * n_total)`` finite latencies of the task so far (``task_history`` = earlier
    batches' latencies, ``batch`` = this one's; lower is better; ties keep the earlier one)."""
    hist = [float(v) for v in task_history if np.isfinite(v)]
    cur = np.asarray(batch, dtype=float)
    finite = [(float(v), 1, i) for i, v in enumerate(cur) if np.isfinite(v)]
    n_total = len(hist) + len(finite)
    if n_total == 0:
        return []
    k = math.ceil(fraction * n_total - 1e-9)
    ranked = sorted([(v, 0, -1) for v in hist] + finite)[:k]
    return sorted(i for _, src, i in ranked if src == 1)


def t_quantile_975(df: int) -> float:
    """Two-sided 95% Student-t quantile for ``df`` >= 1 degrees of freedom (table above; 1.96 beyond 30)."""
    if df < 1:
        raise ValueError(f"df must be >= 1, not {df}")
    return _T975[df - 1] if df <= len(_T975) else 1.96


def repeats_sufficient(samples: Sequence[float], *, min_repeats: int = 3, max_repeats: int = 6,
                       ci_rel_halfwidth: float = 0.03) -> bool:
    """Adaptive repeats: True once ``max_repeats`` samples were taken, or at least
    ``min_repeats`` were and the 95% Student-t confidence interval of their mean has half-width
    ``t(0.975, n-1) * s / sqrt(n)`` at most ``ci_rel_halfwidth`` times the mean (samples in seconds)."""
    n = len(samples)
    if n >= max_repeats:
        return True
    if n < max(min_repeats, 2):
        return False
    x = np.asarray(samples, dtype=float)
    mean = float(x.mean())
    if mean <= 0:
        return True
    half = t_quantile_975(n - 1) * float(x.std(ddof=1)) / math.sqrt(n)
    return half <= ci_rel_halfwidth * mean


def clearly_worse(first_repeat_s: float, best_s: float | None, screen_ratio: float = 1.5) -> bool:
    """Early termination: True when a candidate's timed repeat (seconds) exceeds ``screen_ratio``
    times the task's best recorded latency so far (``best_s``, seconds; ``None`` or non-finite
    when the task has no successful candidate yet, then False). ``screen_ratio`` 0 disables it
    (always False). A candidate that is this much slower cannot become the task's best; it keeps
    its measured repeats (for the cost model) and is not repeated further (:func:`screen` decides
    after how many such repeats)."""
    if not screen_ratio or best_s is None or not math.isfinite(best_s) or best_s <= 0:
        return False
    if not math.isfinite(first_repeat_s):
        return False
    return first_repeat_s > screen_ratio * best_s


def screen(repeats_s: Sequence[float], best_s: float | None, screen_ratio: float = 1.5,
           screen_repeats: int = 1) -> str:
    """Early termination with ``screen_repeats`` strikes, after each timed repeat of a candidate.

    repeats_s: the candidate's timed repeats so far (seconds, shape (n,), n >= 1); best_s, screen_ratio:
    as :func:`clearly_worse`. Returns ``"pass"`` when some repeat is not clearly worse (time the
    candidate fully), ``"more"`` when all n are clearly worse but n < ``screen_repeats`` (time one
    more repeat and ask again), ``"stop"`` when all n >= ``screen_repeats`` are (screened out,
    ``early_stop``). With ``screen_repeats`` 1 this is :func:`clearly_worse` of the first repeat.
    Load on the machine only slows a repeat down, so one repeat that is not clearly worse clears
    the candidate. Raises ``ValueError`` on an empty ``repeats_s`` or ``screen_repeats`` < 1.
    """
    if screen_repeats < 1:
        raise ValueError(f"screen_repeats must be >= 1, not {screen_repeats}")
    if not len(repeats_s):
        raise ValueError("screen needs at least one timed repeat")
    if not clearly_worse(min(float(v) for v in repeats_s), best_s, screen_ratio):
        return "pass"
    return "stop" if len(repeats_s) >= screen_repeats else "more"


def estimate_run_secs(samples: Sequence[float], estimator: str = "mean") -> list[float]:
    """The run seconds a candidate is recorded with, from its timed repeats ``samples`` (shape
    (n,), n >= 1, seconds); MetaSchedule's database and cost model use the mean of what is
    recorded.

    ``"mean"``: every repeat, unchanged (MetaSchedule's own runner records all its repeats).
    ``"min"``: ``[min(samples)]``, the fastest repeat alone. Interference from other load only
    ever slows a repeat down, so the minimum is the estimator least moved by it (Chen and Revels,
    "Robust benchmarking in noisy environments", arXiv:1608.04295, 2016, section 4; Python's
    ``timeit`` documentation says the same). On this project's 2-vCPU VMs the repeats of one
    kernel are bimodal (undisturbed, or about 1.6x slower; docs/engines/tuning.md "Trimmer" benchmark), and the
    mean of 3-6 repeats moves with the share of slow ones.

    Raises ``ValueError`` on an empty ``samples`` or an unknown estimator.
    """
    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {list(ESTIMATORS)}, not {estimator!r}")
    x = [float(v) for v in samples]
    if not x:
        raise ValueError("estimate_run_secs needs at least one timed repeat")
    return x if estimator == "mean" else [min(x)]


@dataclass
class BatchDecision:
    """What the controller decided after one batch of a task.

    batch: 0-based batch number within the task; dop: the DOP the batch was measured at;
    n_candidates; sample: batch indices re-measured serially for the check; rel_error: mean
    relative error of the sample (fraction); induced_failures: candidates that failed in parallel
    but ran serially; action: "increase", "hold" (already at max_dop) or "backoff";
    next_dop: the DOP of the task's next batch; timeout_s: the timeout the batch ran under;
    check: ``"serial-sample"`` (a sample was re-measured serially), ``"serial-equivalent"``
    (measured at DOP 1: the batch is its own serial measurement, nothing re-measured) or
    ``"none"`` (DOP > 1 but an empty sample, e.g. an empty batch).
    """

    batch: int
    dop: int
    n_candidates: int
    sample: list[int]
    rel_error: float
    induced_failures: int
    action: str
    next_dop: int
    timeout_s: float
    check: str = "serial-sample"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class DopController:
    """The DOP of one tuning task, adjusted after every batch (AIMD, see module docstring).

    Use: ``dop`` and ``timeout_s()`` for the next batch; after measuring it in parallel call
    ``plan_sample(latencies, rng)`` for the indices to re-measure serially (empty at DOP 1, where
    parallel *is* serial), then ``observe(...)`` with the serial results to get the decision.
    """

    config: DopplerConfig = field(default_factory=DopplerConfig)
    dop: int = 0
    history: list[BatchDecision] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.dop == 0:
            self.dop = self.config.start_dop

    def timeout_s(self, dop: int | None = None) -> float:
        """Measurement timeout (seconds) at ``dop`` (default: the current DOP):
        ``base_timeout_s * (1 + timeout_growth * (dop - 1))``."""
        d = self.dop if dop is None else dop
        return self.config.base_timeout_s * (1 + self.config.timeout_growth * (d - 1))

    def plan_sample(self, parallel: Sequence[float], rng: np.random.Generator) -> list[int]:
        """Indices of the batch to re-measure serially for the accuracy check: outliers + random
        fill (:func:`select_serial_sample`), plus every failed candidate (to tell parallelism-induced
        failures from real ones). Empty when the batch ran at DOP 1."""
        if self.dop <= 1:
            return []
        x = np.asarray(parallel, dtype=float)
        sample = set(select_serial_sample(x, rng, fraction=self.config.sample_fraction,
                                          threshold=self.config.mad_z_threshold))
        sample.update(int(i) for i in np.flatnonzero(~np.isfinite(x)))
        return sorted(sample)

    def observe(self, parallel: Sequence[float], serial: dict[int, float]) -> BatchDecision:
        """Record a batch measured at the current DOP and set the next DOP.

        parallel: shape (n,), latency in seconds per candidate, ``nan`` when it failed in parallel.
        serial: batch index -> serial latency (``nan`` when it also failed serially) for the
        indices :meth:`plan_sample` returned.
        Back off (``max(1, floor(dop * backoff_factor))``) when the mean relative error of the
        finite pairs exceeds ``max_rel_error`` or the induced failures exceed
        ``max_failure_fraction_of_dop * dop``; otherwise ``min(max_dop, dop + additive_step)``.
        """
        cfg = self.config
        p = np.asarray(parallel, dtype=float)
        idx = sorted(serial)
        if any(i < 0 or i >= p.size for i in idx):
            raise ValueError(f"serial indices {idx} out of range for a batch of {p.size}")
        rel = mean_relative_error([p[i] for i in idx], [serial[i] for i in idx]) if idx else 0.0
        induced = sum(1 for i in idx if not np.isfinite(p[i]) and np.isfinite(serial[i]))
        dop = self.dop
        if dop > 1 and (rel > cfg.max_rel_error or induced > cfg.max_failure_fraction_of_dop * dop):
            action, nxt = "backoff", max(1, math.floor(dop * cfg.backoff_factor))
        elif dop >= cfg.max_dop:
            action, nxt = "hold", dop
        else:
            action, nxt = "increase", min(cfg.max_dop, dop + cfg.additive_step)
        check = "serial-equivalent" if dop <= 1 else ("serial-sample" if idx else "none")
        decision = BatchDecision(batch=len(self.history), dop=dop, n_candidates=int(p.size), sample=idx,
                                 rel_error=rel, induced_failures=induced, action=action, next_dop=nxt,
                                 timeout_s=self.timeout_s(dop), check=check)
        self.history.append(decision)
        self.dop = nxt
        return decision

    def trajectory(self) -> list[int]:
        """DOP of each batch so far, in order."""
        return [d.dop for d in self.history]
