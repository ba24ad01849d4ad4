"""Named MetaSchedule components, so ``manage.py tune --runner NAME --scheduler NAME`` and tuning
experiments pick them by name and new ones (DOPpler, Trimmer) plug in without touching the
tuning service.

A *runner* entry builds the (Builder, Runner) pair measured together, e.g. ``"local"`` is
MetaSchedule's ``LocalBuilder`` + ``LocalRunner`` and ``"doppler"`` is DOPpler's persistent
builder + parallel runner. A *scheduler* entry builds the ``TaskScheduler``, e.g.
``"gradient"`` (MetaSchedule's default) or ``"trimmer"``.

Factories take one :class:`TuningSetup` and import TVM themselves (only this module's callers
need TVM installed).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable


@dataclass
class TuningSetup:
    """What a component factory may need to know about the tuning run.

    target: TVM target as a dict, e.g. ``{"kind": "llvm", "mcpu": "znver5", "num-cores": 2}``.
    num_threads: threads each measurement uses (``TVM_NUM_THREADS`` in runner workers).
    work_dir: the experiment's work directory (holds the JSON database and logs).
    seed: random seed of the search.
    max_trials_global: total trial budget.
    num_trials_per_iter: candidates per round (batch).
    energy_meter: a :class:`tuning.backends.energy.EnergyMeter` or ``None``.
    options: component-specific settings (e.g. DOPpler thresholds, Trimmer patience), by name.
    """

    target: dict[str, Any]
    num_threads: int
    work_dir: Path
    seed: int = 0
    max_trials_global: int = 64
    num_trials_per_iter: int = 16
    energy_meter: Any = None
    options: dict[str, Any] = field(default_factory=dict)


RunnerFactory = Callable[[TuningSetup], tuple[Any, Any]]  # -> (Builder, Runner)
SchedulerFactory = Callable[[TuningSetup], Any]  # -> TaskScheduler

_RUNNERS: dict[str, RunnerFactory] = {}
_SCHEDULERS: dict[str, SchedulerFactory] = {}


class UnknownComponent(KeyError):
    """Raised for a runner or scheduler name nobody registered; the message lists the known ones."""

    def __str__(self) -> str:
        return str(self.args[0])


def register_runner(name: str, factory: RunnerFactory) -> None:
    """Register the (Builder, Runner) factory called ``name``."""
    _RUNNERS[name] = factory


def register_scheduler(name: str, factory: SchedulerFactory) -> None:
    """Register the TaskScheduler factory called ``name``."""
    _SCHEDULERS[name] = factory


def _lookup(table: dict[str, Any], what: str, name: str) -> Any:
    _load_builtin_components()
    try:
        return table[name]
    except KeyError:
        raise UnknownComponent(f"unknown {what} {name!r}; available: {', '.join(sorted(table)) or 'none'}") from None


def make_runner(name: str, setup: TuningSetup) -> tuple[Any, Any]:
    """Build the (Builder, Runner) pair registered as ``name``; raises :class:`UnknownComponent`."""
    return _lookup(_RUNNERS, "runner", name)(setup)


def release_runner(runner: Any) -> None:
    """Stop the worker processes a runner holds, as soon as its tuning ends (normally, by a
    cancel or by an error): ``runner.close()`` where the runner has one (DOPpler), else the
    ``PopenPoolExecutor`` that MetaSchedule's ``LocalRunner`` keeps in ``runner.pool`` for its whole
    life. Left to garbage collection, that pool's worker outlived a cancelled tuning for as long
    as the Celery worker ran (a new-user try, 2026-12-04). Safe to call twice."""
    close = getattr(runner, "close", None)
    if callable(close):
        close()
        return
    pool = getattr(runner, "pool", None)
    if pool is not None and callable(getattr(pool, "shutdown", None)) and not getattr(pool, "_shutdown", False):
        pool.shutdown(wait=False)


def make_scheduler(name: str, setup: TuningSetup) -> Any:
    """Build the TaskScheduler registered as ``name``; raises :class:`UnknownComponent`."""
    return _lookup(_SCHEDULERS, "scheduler", name)(setup)


def runner_names() -> list[str]:
    _load_builtin_components()
    return sorted(_RUNNERS)


def scheduler_names() -> list[str]:
    _load_builtin_components()
    return sorted(_SCHEDULERS)


#: Modules whose import registers components (each calls register_runner / register_scheduler
#: at module level). Add yours here.

COMPONENT_MODULES: list[str] = ["tuning.backends.components", "tuning.backends.doppler", "tuning.backends.trimmer"]


def _load_builtin_components() -> None:
    import importlib

    for mod in COMPONENT_MODULES:
        importlib.import_module(mod)
