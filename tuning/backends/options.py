"""Validation of a tuning's ``options`` (``TuningSetup.options``) before anything is stored.

The tuning API and ``manage.py tune`` call :func:`validate_options` so that a bad DOPpler or
Trimmer setting is a 400 / a command error at submission, not a failed experiment minutes
later on a worker. The checks are the components' own parsers (no second copy of the rules):
:func:`tuning.backends.doppler.engine_settings` for ``options["doppler"]`` and
:func:`tuning.backends.trimmer.config_from_options` for Trimmer's keys.
"""
from __future__ import annotations

from typing import Any

# Top-level keys read by the built-in components (tuning.backends.components: runner "local",
# scheduler "gradient"); Trimmer's field names and the "doppler"/"trimmer" sub-objects are added
# in known_option_names().
_LOCAL_AND_GRADIENT = ("builder_workers", "build_timeout_s", "run_timeout_s", "number", "repeat",
                       "min_repeat_ms", "cpu_cache_flush", "alpha", "window_size")


def known_option_names() -> list[str]:
    """Every top-level option name some registered component reads (sorted)."""
    from tuning.core.trimmer import TrimmerConfig

    return sorted(set(_LOCAL_AND_GRADIENT) | set(TrimmerConfig.__dataclass_fields__) | {"doppler", "trimmer", "search", "search_threads"})


def trimmer_only_option_names() -> list[str]:
    """Top-level names only scheduler ``"trimmer"`` reads (sorted): Trimmer's fields that no
    built-in component shares (``alpha`` is the gradient scheduler's too), and ``"trimmer"``."""
    from tuning.core.trimmer import TrimmerConfig

    return sorted((set(TrimmerConfig.__dataclass_fields__) - set(_LOCAL_AND_GRADIENT)) | {"trimmer"})


def validate_options(options: Any, num_threads: int, scheduler: str | None = None, runner: str | None = None,
                     target_kind: str | None = None) -> None:
    """Check a tuning's ``options`` dict; ``num_threads`` is the tuning's thread count (DOPpler
    splits the cores into measurement slots of that size); ``scheduler`` / ``runner``: the
    tuning's task scheduler and runner names, or None to skip the checks that need them;
    ``target_kind`` (``"llvm"``, ``"cuda"``): DOPpler's devices must be able to measure it.

    Raises ``ValueError`` with a message naming the option on: a non-dict, a NaN or infinite
    number, an unknown top-level name (flat names belong to the local runner, the gradient
    scheduler or Trimmer; DOPpler's go under ``"doppler"``), a Trimmer-only option with another
    ``scheduler`` (it would be stored and silently ignored; likewise ``window_size`` with a
    scheduler other than ``"gradient"``, and DOPpler settings with a ``runner`` other than
    ``"doppler"``), a local-runner or gradient-scheduler value of the wrong
    type or range, or a value a component rejects."""
    from tuning.backends.doppler import engine_settings
    from tuning.backends.trimmer import config_from_options
    from webapp.jsonvalues import non_finite_path

    if not isinstance(options, dict):
        raise ValueError(f"options must be an object, got {type(options).__name__}")
    bad = non_finite_path(options, "options")
    if bad is not None:
        raise ValueError(f"{bad} is not a finite number")
    known = known_option_names()
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ValueError(f"unknown option(s) {unknown} (DOPpler settings go under 'doppler'); known: {known}")
    if scheduler is not None and scheduler != "trimmer":
        misplaced = sorted(set(options) & set(trimmer_only_option_names()))
        if misplaced:
            raise ValueError(f"option(s) {misplaced} apply to scheduler 'trimmer' only; this tuning uses "
                             f"{scheduler!r} (add --scheduler trimmer / \"scheduler\": \"trimmer\", or drop them)")
    if "doppler" in options and runner is not None and runner != "doppler":
        raise ValueError(f"option 'doppler' (DOPpler settings) applies to runner 'doppler' only; this tuning uses "
                         f"{runner!r} (add --runner doppler / \"runner\": \"doppler\", or drop it)")
    if "doppler" in options:  # (the environment's TANDEM_DOPPLER_DEVICES is checked when the engine starts)
        engine_settings(options["doppler"], num_threads, target_kind=target_kind)
    try:
        config_from_options(options)
    except (TypeError, OverflowError) as err:
        raise ValueError(f"Trimmer options: {err}") from None
    _check_local_and_gradient(options, scheduler)
    if "search" in options:
        search_settings(options["search"])
    if "search_threads" in options:
        v = options["search_threads"]
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 1024:
            raise ValueError(f"search_threads (threads of the evolutionary search and its cost model; default: "
                             f"the tuning's num_threads) must be an integer from 1 to 1024, got {v!r}")


#: MetaSchedule's ``EvolutionarySearch`` settings an operator may change (TVM 0.27 defaults):
#: name -> (kind, lowest, highest, default).
SEARCH_FIELDS: dict[str, tuple[str, float, float, float]] = {
    "population_size": ("int", 2, 1 << 20, 512),
    "init_measured_ratio": ("float", 0.0, 1.0, 0.2),
    "init_min_unmeasured": ("int", 1, 1 << 20, 50),
    "max_fail_count": ("int", 1, 1 << 20, 5),
    "genetic_num_iters": ("int", 0, 1 << 20, 4),
    "genetic_mutate_prob": ("float", 0.0, 1.0, 0.85),
    "genetic_max_fail_count": ("int", 1, 1 << 20, 10),
    "eps_greedy": ("float", 0.0, 1.0, 0.05),
}


def search_settings(search: Any) -> dict[str, Any]:
    """Check option ``"search"`` (settings of MetaSchedule's evolutionary search, the
    ``tvm.s_tir.meta_schedule.search_strategy.EvolutionarySearch`` arguments; TVM's defaults
    for those not given) and return the complete settings. The search's cost grows with
    ``population_size`` x (``genetic_num_iters`` + 1) cost-model predictions per round: on
    this 2-core machine TVM's defaults spend about 36 s of search per round of a small
    convolution with one thread. Raises ``ValueError`` naming the field on a non-object, an
    unknown name, a wrong type or a value out of range (``population_size`` at least
    ``init_min_unmeasured``)."""
    if not isinstance(search, dict):
        raise ValueError(f"option 'search' must be an object of evolutionary-search settings, got {type(search).__name__}")
    unknown = sorted(set(search) - set(SEARCH_FIELDS))
    if unknown:
        raise ValueError(f"unknown search setting(s) {unknown}; known: {sorted(SEARCH_FIELDS)}")
    out: dict[str, Any] = {}
    for name, (kind, lo, hi, default) in SEARCH_FIELDS.items():
        v = search.get(name, default)
        if kind == "int":
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise ValueError(f"search.{name} must be an integer from {int(lo)} to {int(hi)}, got {v!r}")
        elif isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
            raise ValueError(f"search.{name} must be a number from {lo} to {hi}, got {v!r}")
        out[name] = int(v) if kind == "int" else float(v)
    if out["init_min_unmeasured"] > out["population_size"]:
        raise ValueError(f"search.init_min_unmeasured ({out['init_min_unmeasured']}) must not exceed "
                         f"search.population_size ({out['population_size']})")
    return out


# what the local runner and the gradient scheduler accept (tuning.backends.components reads them
# with int()/float()/bool(), which would take "3" or fail on "abc" only on the worker):
# name -> (kind, lowest allowed value)
_LOCAL_AND_GRADIENT_RULES: dict[str, tuple[str, float]] = {
    "builder_workers": ("int", 1), "number": ("int", 1), "repeat": ("int", 1), "min_repeat_ms": ("int", 0),
    "window_size": ("int", 1), "build_timeout_s": ("seconds", 0), "run_timeout_s": ("seconds", 0),
    "cpu_cache_flush": ("bool", 0),
}
def _check_local_and_gradient(options: dict, scheduler: str | None) -> None:
    """The local runner's and gradient scheduler's options (``alpha`` is checked with Trimmer's):
    counts are integers in [lowest, 2**31 - 1], timeouts numbers > 0 seconds, ``cpu_cache_flush``
    a boolean; ``window_size`` only with scheduler ``"gradient"`` (Trimmer's windows are
    ``window`` and ``grad_window``). Raises ValueError naming the option."""
    from tuning.core.trimmer import MAX_COUNT  # MetaSchedule's 32-bit ints, Trimmer's limit too

    for name, (kind, lowest) in _LOCAL_AND_GRADIENT_RULES.items():
        if name not in options:
            continue
        v = options[name]
        if kind == "bool":
            if not isinstance(v, bool):
                raise ValueError(f"{name} must be true or false, got {v!r}")
        elif kind == "int":
            if isinstance(v, bool) or not isinstance(v, int) or not lowest <= v <= MAX_COUNT:
                raise ValueError(f"{name} must be an integer from {int(lowest)} to {MAX_COUNT}, got {v!r}")
        elif isinstance(v, bool) or not isinstance(v, (int, float)) or not v > lowest:
            raise ValueError(f"{name} must be a number of seconds > 0, got {v!r}")
    if "window_size" in options and scheduler is not None and scheduler not in ("gradient", "gradient-tvm"):
        raise ValueError(f"option 'window_size' applies to scheduler 'gradient' only; this tuning uses {scheduler!r}"
                         + (" (Trimmer's windows are 'window' and 'grad_window')" if scheduler == "trimmer" else ""))
