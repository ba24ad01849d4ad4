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


#: the measurement-slot kinds each target kind can be measured on (RPC servers: any target)
SLOT_KINDS_FOR_TARGET = {"llvm": ("cpu", "rpc"), "cuda": ("cuda", "rpc")}


def check_slots_fit_target(slots: list[SlotSpec], target_kind: str) -> None:
    """Raise ``ValueError`` when a measurement slot cannot measure ``target_kind`` (``"llvm"``,
    ``"cuda"``): a CPU tuning's kernels measured on ``"cuda:7"`` slots would run on the CPU and be
    recorded as the GPU's (found by a new-user try, 2026-12-04). Other target kinds pass."""
    allowed = SLOT_KINDS_FOR_TARGET.get(target_kind)
    wrong = sorted({s.name for s in slots if allowed is not None and s.kind not in allowed})
    if wrong:
        raise ValueError(f"DOPpler devices {wrong} cannot measure a {target_kind!r} tuning; use "
                         + " or ".join(repr(k) for k in allowed) + " devices (e.g. 'cpu' for llvm, 'cuda' for cuda)")


def check_gpus_present(slots: list[SlotSpec]) -> None:
    """Raise ``ValueError`` naming a ``cuda`` slot whose GPU index this machine does not have
    (checked where the engine starts, not where the API validates: the web host may have none)."""
    import tvm

    missing = [s.name for s in slots if s.kind == "cuda" and not tvm.cuda(int(s.gpu or 0)).exist]
    if missing:
        raise ValueError(f"DOPpler devices {missing}: no such CUDA device on this machine")


def engine_settings(options: Any, num_threads: int,
                    target_kind: str | None = None) -> tuple[list[SlotSpec], DopplerConfig, dict[str, Any]]:
    """Parse DOPpler's options (``TuningSetup.options["doppler"]``, a dict or None) without
    starting anything: returns (measurement slots, :class:`DopplerConfig`, the remaining
    :class:`DopplerEngine` keyword arguments). Used by :func:`make_engine` and by the tuning
    API's validation, so a bad value is refused before an experiment is stored.

    Raises ``ValueError`` naming the option on a non-dict, an unknown key, a value of the wrong
    type or out of range, a device string :func:`parse_devices` rejects, or (with
    ``target_kind``) devices that cannot measure that target (:func:`check_slots_fit_target`)."""
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
        if target_kind is not None:
            check_slots_fit_target(slots, target_kind)
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
    slots, config, kwargs = engine_settings((setup.options or {}).get("doppler"), setup.num_threads,
                                            target_kind=str((setup.target or {}).get("kind") or "") or None)
    check_gpus_present(slots)
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
