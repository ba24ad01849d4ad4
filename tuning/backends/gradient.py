"""Ansor's gradient task allocation with every round joined before the next one is built.

MetaSchedule's C++ ``GradientBased`` scheduler (``src/s_tir/meta_schedule/task_scheduler/
gradient_based.cc``, ``NextTaskId``) first hands out one round per task, round robin, and joins
(measures and reports) none of them until every task's first round has been built and sent to
the runner; the measure callbacks, which are where Tandem commits records, run only at a join.
On a 19-task resnet18 that meant 65 candidates built in 18 minutes with zero records kept, and a
SIGTERM could not stop the run before then. :func:`gradient_scheduler` is the same allocation as
a ``PyTaskScheduler`` whose ``next_task_id`` first joins the round still running, so each round
is measured and reported (committed) before the next is generated.

Allocation (Zheng et al., "Ansor", OSDI 2020, section 6; the C++ scheduler's formula): after one
round per task, pick the alive task with the largest ``w_i * (alpha * g1 + (1 - alpha) * g2)``
where ``w_i`` is the task weight, ``best`` the task's best mean run time (s) after its ``n``
rounds, ``g1 = (best_{n-1-window} - best) / window`` (backward difference; 0 with fewer than
``window + 1`` rounds) and ``g2 = best / n``. A task without a valid measurement scores -1e9;
ties between all alive tasks are broken at random (seeded). On a resume the task's history starts
from the database's best record (so ``best`` does not restart from infinity).
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

_CLASS: Optional[type] = None
_NO_TIME = 1e10  # the C++ scheduler's "no valid measurement yet"


def gradient_scores(histories: list[list[float]], weights: list[float], alive: list[int], *,
                    alpha: float, window: int) -> list[float]:
    """Gradient score of each task in ``alive`` (same order). ``histories[i]``: task i's best mean
    run time (s) after each of its rounds (``_NO_TIME`` while none is valid). Pure; see module doc."""
    out = []
    for t in alive:
        hist = histories[t]
        n = len(hist)
        best = hist[-1] if hist else _NO_TIME
        if n == 0 or best >= 1e9:
            out.append(-1e9)
            continue
        g1 = (hist[n - 1 - window] - best) / window if n >= 1 + window else 0.0
        g2 = best / n
        out.append((alpha * g1 + (1 - alpha) * g2) * float(weights[t]))
    return out


def _round_best(results: Any) -> Optional[float]:
    best = None
    for r in results or []:
        secs = [float(getattr(x, "value", x)) for x in (getattr(r, "run_secs", None) or [])]
        if getattr(r, "error_msg", None) or not secs:
            continue
        m = float(np.mean(secs))
        if np.isfinite(m) and 0 < m < 1e9:
            best = m if best is None else min(best, m)
    return best


def gradient_scheduler(*, alpha: float = 0.2, window_size: int = 3, seed: int = 0) -> Any:
    """A ``PyTaskScheduler`` doing Ansor's gradient allocation, joining each round before the
    next (see module doc). ``alpha`` in [0, 1], ``window_size`` >= 1; ``ValueError`` otherwise."""
    if not 0.0 <= float(alpha) <= 1.0:
        raise ValueError(f"gradient scheduler: alpha must be in [0, 1], got {alpha!r}")
    if int(window_size) < 1:
        raise ValueError(f"gradient scheduler: window_size must be >= 1, got {window_size!r}")
    global _CLASS
    if _CLASS is None:
        _CLASS = _make_class()
    return _CLASS(float(alpha), int(window_size), int(seed))


def _make_class() -> type:
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.task_scheduler import PyTaskScheduler

    from .trimmer import database_best_seconds

    @derived_object
    class JoinedGradient(PyTaskScheduler):
        def __init__(self, alpha: float, window: int, seed: int) -> None:
            super().__init__()
            self.alpha, self.window = alpha, window
            self.rng = np.random.default_rng(seed)
            self.running: Optional[int] = None
            self.histories: list[list[float]] = []
            self.weights: list[float] = []
            self.rr = 0
            self.started = False

        # no ``tune`` override: TVM 0.27's ``PyTaskScheduler.tune`` drops ``num_trials_per_iter``;
        # without one the C++ loop runs and calls ``next_task_id`` (state set up on its first call)
        def _start(self) -> None:
            sched = self._outer()
            self.weights = [float(rec.task_weight) for rec in sched.tasks_]
            self.histories = []
            for rec in sched.tasks_:
                b = database_best_seconds(sched.database_, rec.ctx.mod)
                self.histories.append([b] if b is not None else [])
            self.started = True

        def _join(self, t: int) -> None:
            sched = self._outer()
            rec = sched.tasks_[t]
            if rec.is_terminated or rec.measure_candidates is None:
                return
            best = _round_best(sched.join_running_task(t))
            hist = self.histories[t]
            prev = hist[-1] if hist else _NO_TIME
            hist.append(min(prev, best) if best is not None else prev)

        def next_task_id(self) -> int:
            sched = self._outer()
            tasks = sched.tasks_
            if not self.started:
                self._start()
            if self.running is not None:
                self._join(self.running)  # the measure callbacks commit this round now
                self.running = None
            alive = [t for t in range(len(tasks)) if not tasks[t].is_terminated]
            if not alive:
                return -1
            while self.rr < len(tasks):  # first pass: one round per task, in order
                t, self.rr = self.rr, self.rr + 1
                if not tasks[t].is_terminated:
                    self.running = t
                    return t
            g = gradient_scores(self.histories, self.weights, alive, alpha=self.alpha, window=self.window)
            if max(g) == min(g):
                t = alive[int(self.rng.integers(len(alive)))]
            else:
                t = alive[int(np.argmax(g))]
            self.running = t
            return t

    return JoinedGradient
