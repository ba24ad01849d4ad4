"""DOPpler's options (``TuningSetup.options["doppler"]``) parsed and checked, and the registry
factory that builds a warmed-up engine from them. See :mod:`tuning.backends.doppler`."""
from __future__ import annotations

import math
import os
from typing import Any, Callable

from tuning.core.doppler import DopplerConfig

from ..registry import TuningSetup
from .engine import DopplerEngine
from .metaschedule import meta_classes
from .slots import SlotSpec, parse_devices

#: why ``paired`` (other than false) is refused: the option was removed after it was measured not to pay
REMOVED_PAIRED = ("the DOPpler option 'paired' (paired timing against a reference kernel) was removed: measured "
                  "here it let noise make candidates look up to 2x faster than they are; see docs/engines/tuning.md, "
                  "'Paired timing (removed)'")

#: DOPpler options the engine reads itself (the others are :class:`DopplerConfig` fields)
ENGINE_OPTION_NAMES = ("devices", "overlap", "build_workers", "build_timeout_s", "min_repeat_ms", "max_process_uses")


def engine_settings(options: Any, num_threads: int) -> tuple[list[SlotSpec], DopplerConfig, dict[str, Any]]:
    """Parse DOPpler's options (``TuningSetup.options["doppler"]``, a dict or None) without
    starting anything: returns (measurement slots, :class:`DopplerConfig`, the remaining
    :class:`DopplerEngine` keyword arguments). Used by :func:`make_engine` and by the tuning
    API's validation, so a bad value is refused before an experiment is stored.

    Raises ``ValueError`` naming the option on a non-dict, an unknown key, a value of the wrong
    type or out of range, or a device string :func:`parse_devices` rejects."""
    if options is None:
        options = {}
    if not isinstance(options, dict):
        raise ValueError(f"options['doppler'] must be an object of DOPpler settings, got {type(options).__name__}")
    opts = dict(options)
    try:
        devices = str(opts.pop("devices", None) or os.environ.get("TANDEM_DOPPLER_DEVICES") or "cpu")
        overlap = opts.pop("overlap", "auto")
        if overlap not in (None, "auto", True, False):
            raise ValueError(f"overlap must be 'auto', true or false, got {overlap!r}")
        overlap = None if overlap in (None, "auto") else bool(overlap)
        build_workers = opts.pop("build_workers", None)
        if build_workers is not None and (not isinstance(build_workers, int) or build_workers < 1):
            raise ValueError(f"build_workers must be an integer >= 1, got {build_workers!r}")
        build_timeout_s = float(opts.pop("build_timeout_s", 30.0))
        min_repeat_ms = int(opts.pop("min_repeat_ms", 10))
        # false (the old default) is what every tuning does now, so experiments stored with it
        # still run; true asks for what no longer exists
        if opts.pop("paired", False) is not False:
            raise ValueError(REMOVED_PAIRED)
        max_process_uses = int(opts.pop("max_process_uses", 256))
        if not (build_timeout_s > 0 and math.isfinite(build_timeout_s)):
            raise ValueError(f"build_timeout_s must be a finite number > 0, got {build_timeout_s!r}")
        if min_repeat_ms < 1 or max_process_uses < 1:
            raise ValueError("min_repeat_ms and max_process_uses must be >= 1")
        unknown = sorted(set(opts) - set(DopplerConfig.__dataclass_fields__))
        if unknown:  # the engine's own keys were popped above; the rest must be DopplerConfig fields
            known = sorted(set(ENGINE_OPTION_NAMES) | set(DopplerConfig.__dataclass_fields__))
            raise ValueError(f"unknown DOPpler option(s) {unknown}; known: {known}")
        slots = parse_devices(devices, num_threads)
        max_dop = int(opts.pop("max_dop", len(slots)))
        config = DopplerConfig.from_options(opts, max_dop=max_dop)
    except (TypeError, OverflowError) as err:  # e.g. a string where a number belongs
        raise ValueError(f"DOPpler options: {err}") from None
    return slots, config, {"build_workers": build_workers, "build_timeout_s": build_timeout_s,
                           "min_repeat_ms": min_repeat_ms, "overlap": overlap,
                           "max_process_uses": max_process_uses}


def make_engine(setup: TuningSetup, on_decision: Callable[[dict], None] | None = None) -> DopplerEngine:
    """Build a :class:`DopplerEngine` from a :class:`TuningSetup` (options under ``"doppler"``) and
    warm it up (every worker started, imports paid, RPC sessions open) before tuning starts."""
    slots, config, kwargs = engine_settings((setup.options or {}).get("doppler"), setup.num_threads)
    from ..intrinsics import intrinsic_modules

    engine = DopplerEngine(slots, config=config, work_dir=setup.work_dir, seed=setup.seed,
                           intrinsics=intrinsic_modules(setup.target),
                           on_decision=on_decision, **kwargs)
    try:
        engine.warm_up()
    except BaseException:
        engine.close()
        raise
    return engine


def doppler_components(setup: TuningSetup):
    """Registry factory: (DopplerBuilder, DopplerRunner) sharing one engine (``runner.engine``)."""
    _, runner_cls, builder_cls = meta_classes()
    engine = make_engine(setup)
    return builder_cls(engine), runner_cls(engine)
