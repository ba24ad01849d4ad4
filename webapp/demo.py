"""Registry of demo steps. Each engine adds the part of ``make demo`` that shows it, in its
``AppConfig.ready()``::

    register_demo_step("placement", run_placement_demo, order=20)

A step is ``fn(*, owner, stdout) -> None``: it runs the engine's main job on real data from
``data/`` with embedded defaults (no services) as experiments owned by ``owner``, at the smallest
size that still shows the engine's result (the whole demo's steps take about 100 s on a quiet
2-core machine), and prints where to see the result. The demo's closing summary comes from the experiments the
steps created, through each kind's ``headline`` (:class:`webapp.experiments.ExperimentKind`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True, order=True)
class DemoStep:
    order: int
    name: str
    run: Callable[..., Any]


_STEPS: dict[str, DemoStep] = {}


def register_demo_step(name: str, run: Callable[..., Any], *, order: int = 50) -> None:
    """Register (or replace) the demo step ``name``; steps run in ascending ``order``."""
    _STEPS[name] = DemoStep(order=order, name=name, run=run)


def demo_steps() -> list[DemoStep]:
    """The registered steps in the order they run."""
    return sorted(_STEPS.values())
