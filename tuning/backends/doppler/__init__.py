"""DOPpler's parallel execution engine for TVM MetaSchedule: a persistent builder and a parallel
measurement runner with an automatic degree of parallelism (DOP), registered as runner
``"doppler"`` in :mod:`tuning.backends.registry`.

Source: Borowiec et al., "DOPpler: Parallel Measurement Infrastructure for Auto-Tuning Deep
Learning Tensor Programs", IEEE TPDS 34(7), 2023; Tandem SPEC section 3. The DOP rules are in
:mod:`tuning.core.doppler`; this module runs them against real devices.

Pieces (one module each)
------------------------
:mod:`.slots`
    :class:`SlotSpec` and :func:`parse_devices`: the measurement devices named by a device string.
:mod:`.worker`
    What runs inside the worker processes: pinning, loading and timing a candidate
    (:func:`tuning.backends.doppler.worker.measure_in_worker`), warm builds.
:mod:`.settings`
    :func:`engine_settings` (the options checked, before an experiment is stored),
    :func:`make_engine` and the registry factory.
:mod:`.engine` :class:`DopplerEngine`
    Owns the worker processes, shared by the builder and the runner of one tuning:

    * **measurement slots**, one long-lived TVM ``PopenWorker`` process per device, pinned in the
      worker itself: a CPU core set (``os.sched_setaffinity`` + ``TVM_NUM_THREADS`` = its size),
      a GPU (``CUDA_VISIBLE_DEVICES`` = its index; TVM's ``time_evaluator`` on a CUDA device times
      with CUDA events, ``CUDATimerNode`` in ``src/runtime/cuda/cuda_device_api.cc``, so time
      queued behind other processes is not counted), or a TVM RPC server granted by a tracker
      (the worker keeps its session, so one slot = one server, several measured at once).
      Timing happens inside the pinned worker (``time_evaluator``), with adaptive repeats
      (:func:`tuning.core.doppler.repeats_sufficient`);
    * **warm build workers**: a persistent ``PopenPoolExecutor`` whose processes import
      ``tvm.s_tir.tensor_intrin`` once, at start, instead of MetaSchedule's ``LocalBuilder``
      which starts fresh processes (about 15 s of imports each on the reference machine) for
      every batch. They export shared libraries (``.so``), so loading a candidate in a
      measurement slot needs no linking;
    * **overlap**: when the build workers' cores are disjoint from the measurement devices (GPU or
      remote RPC slots, or spare CPU cores), ``DopplerRunner.run`` returns at once and the
      batch is measured in the background while MetaSchedule searches and builds the next one;
      otherwise (this 2-core machine: measuring uses every core) measuring and building take
      turns so that building never disturbs a measurement.
:mod:`.metaschedule` ``DopplerBuilder``, ``DopplerRunner``
    The MetaSchedule ``PyBuilder`` / ``PyRunner`` faces of the engine. ``run`` returns all
    futures of a batch at once.

Per batch of a task (a task is recognised by its arguments' dtypes and element counts), the
runner measures the candidates on ``dop`` slots in parallel; at DOP > 1 it re-measures the
controller's sample (MAD outliers + random fill to ~20%, plus failures) and the candidates that
rank in the task's best 10% so far serially on one slot with the others idle, returns the serial
numbers for every candidate that has one (so the best candidates' serial numbers decide), and
lets the controller pick the next DOP. A batch at DOP 1 is already serial: nothing is
re-measured (decision ``check="serial-equivalent"``). The spec re-measures the best 10% "at the
end of each task"; MetaSchedule commits every batch to the database as it comes, so the runner
re-measures each candidate that enters the task's best 10% in the batch that found it, which
covers every candidate that is ever the task's best. Every candidate is timed as
:func:`tuning.backends.doppler.worker.measure_in_worker` says: one repeat first, no more if it
is clearly worse than the task's best so far (early termination), else adaptive repeats.

Each decision (DOP, relative error, induced failures, back-off, timeout, which device or server ran each parallel measurement (``measured_by``) and each serial one
(``serial_by``), time in parallel and serial measurement) is kept in :attr:`DopplerEngine.decisions`,
appended to ``doppler_decisions.jsonl`` in the work directory, and handed to a callback.

Options (``TuningSetup.options["doppler"]``, all optional): ``devices`` (default: environment
variable ``TANDEM_DOPPLER_DEVICES``, else ``"cpu"``; ``"cpu"``: core sets
of ``num_threads`` cores; ``"cpu:0-1|2-3"``: explicit core sets; ``"cuda"`` / ``"cuda:0,1"``;
``"rpc://HOST:PORT/KEY"``: every server of that key on the tracker), ``overlap``
(``"auto"``, true, false), ``build_workers``, ``build_timeout_s`` (30), ``min_repeat_ms`` (10, floor of
one timed repeat), ``max_process_uses`` (recycle a build worker after this many builds, 256), and any
:class:`tuning.core.doppler.DopplerConfig` field (``max_dop`` defaults to the number of slots).

Paired timing (every candidate timed between repeats of a per-task reference kernel) was built,
measured not to pay and removed; the option ``paired`` is refused with that reason. The finding
is in docs/engines/tuning.md, "Paired timing (removed)".
"""
from __future__ import annotations

from ..registry import register_runner
from .engine import Candidate, DopplerEngine
from .metaschedule import meta_classes
from .settings import ENGINE_OPTION_NAMES, doppler_components, engine_settings, make_engine
from .slots import SlotSpec, count_rpc_servers, parse_devices

__all__ = ["Candidate", "DopplerEngine", "ENGINE_OPTION_NAMES", "SlotSpec", "count_rpc_servers", "doppler_components",
           "engine_settings", "make_engine", "meta_classes", "parse_devices"]

register_runner("doppler", doppler_components)
