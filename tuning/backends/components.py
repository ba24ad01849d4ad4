"""Tandem's built-in MetaSchedule components, registered by name in
:mod:`tuning.backends.registry`:

runner ``"local"``
    MetaSchedule's ``LocalBuilder`` + ``LocalRunner``. The runner's worker process sets
    ``TVM_NUM_THREADS`` to ``setup.num_threads`` before it loads any kernel: with it unset the
    TVM runtime uses half the cores here, so candidates would be measured single-threaded on a
    2-core machine (measured here: with TVM_NUM_THREADS unset the runtime uses half the cores). Options (``setup.options``):
    ``builder_workers`` (default ``setup.num_threads``), ``build_timeout_s`` (300: a fresh
    builder worker imports TVM before its first build, a few seconds, much more on a loaded
    machine; its initializer registers only the target's tensor intrinsics, which saves about
    22 s per batch here, :mod:`tuning.backends.intrinsics`),
    ``run_timeout_s`` (60), ``number`` (3), ``repeat`` (1), ``min_repeat_ms`` (100),
    ``cpu_cache_flush`` (False).
    TVM's start-up checks of both (a worker importing TVM each, ~5 s) run beside the tuning's own
    start instead of before it (:func:`_local_classes`).
scheduler ``"gradient"``
    Ansor's gradient allocation (Zheng et al., OSDI 2020, section 6) with ``alpha`` (0.2) and
    ``window_size`` (3) from ``setup.options``, as :func:`tuning.backends.gradient.gradient_scheduler`:
    every round is measured and committed before the next is built.
scheduler ``"gradient-tvm"``
    MetaSchedule's C++ ``GradientBased`` (same options): builds every task's first round before
    it measures any, so nothing is recorded until then (kept for comparison).
scheduler ``"round-robin"``
    MetaSchedule's ``RoundRobin``.
"""
from __future__ import annotations

import functools
import os

from .registry import TuningSetup, register_runner, register_scheduler


def set_num_threads(num_threads: int) -> None:
    """Runner-worker initializer: pin the TVM runtime thread pool to ``num_threads`` threads.

    TVM reads ``TVM_NUM_THREADS`` when its thread pool first starts (first parallel kernel), so
    setting it in the worker before any measurement is enough.
    """
    os.environ["TVM_NUM_THREADS"] = str(int(num_threads))
    os.environ["OMP_NUM_THREADS"] = str(int(num_threads))


@functools.lru_cache(maxsize=None)
def _local_classes():
    """MetaSchedule's ``LocalBuilder`` and ``LocalRunner`` with their start-up checks moved off the
    caller's path: ``(builder class, runner class)``.

    TVM checks at construction that a worker process can start and find the build / run
    functions (``_sanity_check``), and waits for it: the builder in a pool of its own that it
    throws away, the runner in its persistent pool. Each check is a fresh interpreter importing
    TVM (about 5 s each on this 2-core machine, run one after the other), so every tuning start
    waited about 10 s for them. Here the same checks start at construction and the caller goes
    on (extracting design spaces, starting the task scheduler) while they run; the first
    ``build`` / ``run`` waits for its check and raises what it raised, so a worker that cannot
    start still fails before any candidate is built or measured. Subclassing ``LocalBuilder._cls``
    is how TVM's ``derived_object`` asks to be extended."""
    import threading

    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule import builder as tvm_builder
    from tvm.s_tir.meta_schedule import runner as tvm_runner

    class _Background:
        """``fn()`` in a daemon thread; :meth:`wait` joins it and raises what it raised."""

        def __init__(self, fn):
            self._error: BaseException | None = None
            self._thread = threading.Thread(target=self._call, args=(fn,), daemon=True, name="tvm-start-up-check")
            self._thread.start()

        def _call(self, fn) -> None:
            try:
                fn()
            except BaseException as err:  # noqa: BLE001 - handed to the first build/run
                self._error = err

        def wait(self) -> None:
            self._thread.join()
            if self._error is not None:
                raise self._error

    @derived_object
    class LocalBuilder(tvm_builder.LocalBuilder._cls):  # TVM's, named as TVM names it (logs, hooks)
        def _sanity_check(self) -> None:
            self._check = _Background(super()._sanity_check)

        def build(self, build_inputs):
            self._check.wait()
            return super().build(build_inputs)

    @derived_object
    class LocalRunner(tvm_runner.LocalRunner._cls):
        def _sanity_check(self) -> None:
            self._check = _Background(super()._sanity_check)

        def run(self, runner_inputs):
            self._check.wait()
            return super().run(runner_inputs)

    return LocalBuilder, LocalRunner


def _local(setup: TuningSetup):
    from tvm.s_tir.meta_schedule.runner import EvaluatorConfig

    from .intrinsics import import_tensor_intrinsics, intrinsic_modules

    LocalBuilder, LocalRunner = _local_classes()
    opts = setup.options
    init = functools.partial(set_num_threads, setup.num_threads)
    builder = LocalBuilder(
        max_workers=int(opts.get("builder_workers", setup.num_threads)),
        timeout_sec=float(opts.get("build_timeout_s", 300.0)),
        # each batch's fresh workers register only the target's intrinsics (tuning.backends.intrinsics)
        initializer=functools.partial(import_tensor_intrinsics, intrinsic_modules(setup.target)),
    )
    runner = LocalRunner(
        timeout_sec=float(opts.get("run_timeout_s", 60.0)),
        evaluator_config=EvaluatorConfig(
            number=int(opts.get("number", 3)),
            repeat=int(opts.get("repeat", 1)),
            min_repeat_ms=int(opts.get("min_repeat_ms", 100)),
            enable_cpu_cache_flush=bool(opts.get("cpu_cache_flush", False)),
        ),
        initializer=init,
    )
    return builder, runner


def _gradient(setup: TuningSetup):
    from .gradient import gradient_scheduler

    return gradient_scheduler(alpha=float(setup.options.get("alpha", 0.2)),
                              window_size=int(setup.options.get("window_size", 3)), seed=setup.seed)


def _gradient_tvm(setup: TuningSetup):
    from tvm.s_tir.meta_schedule.task_scheduler import GradientBased

    return GradientBased(alpha=float(setup.options.get("alpha", 0.2)),
                         window_size=int(setup.options.get("window_size", 3)), seed=setup.seed)


def _round_robin(setup: TuningSetup):
    from tvm.s_tir.meta_schedule.task_scheduler import RoundRobin

    return RoundRobin()


register_runner("local", _local)
register_scheduler("gradient", _gradient)
register_scheduler("gradient-tvm", _gradient_tvm)
register_scheduler("round-robin", _round_robin)
