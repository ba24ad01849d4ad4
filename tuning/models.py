"""Django models of the tuning engine: the mirror of a MetaSchedule tuning for the dashboard.

The source of truth of a tuning is MetaSchedule's JSON database in the experiment's work
directory (``database_workload.json`` + ``database_tuning_record.json``); these rows mirror it
(written by :class:`tuning.backends.callbacks.DjangoMirrorCallback`) plus what the database does
not hold: wall time, energy, the round split into search / build / measurement, and the
final latencies. They are generic on purpose (``details`` JSON for runner- and scheduler-specific
data such as DOPpler's degree of parallelism or Trimmer's preemptions) so new components need no
migration.

Units: seconds, joules, FLOP (floating-point operations), percent.
"""
from __future__ import annotations

from django.db import models

from webapp.models import Experiment


class TuningTask(models.Model):
    """One tuning task (a TIR workload extracted from the model) of a tuning experiment.

    ``weight``: how often the workload occurs in the model (MetaSchedule task weight).
    ``flop_count``: FLOP of one call of the workload (``None`` when unknown).
    ``best_seconds``: best mean run time of a candidate so far, seconds.
    ``state``: ``pending``, ``tuning``, ``finished`` or ``preempted`` (stopped early by a scheduler).
    """

    class State(models.TextChoices):
        PENDING = "pending", "Pending"
        TUNING = "tuning", "Tuning"
        FINISHED = "finished", "Finished"
        PREEMPTED = "preempted", "Preempted"

    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="tuning_tasks")
    task_index = models.PositiveIntegerField(help_text="Index in the task list given to tune_tasks")
    name = models.CharField(max_length=255)
    workload_hash = models.CharField(max_length=64, blank=True, help_text="Structural hash of the workload IRModule")
    weight = models.FloatField(default=1.0)
    flop_count = models.FloatField(null=True, blank=True)
    best_seconds = models.FloatField(null=True, blank=True)
    trials_done = models.PositiveIntegerField(default=0)
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    preempted = models.BooleanField(default=False)
    details = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["experiment_id", "task_index"]
        constraints = [models.UniqueConstraint(fields=["experiment", "task_index"], name="tuning_task_unique_index")]

    def __str__(self) -> str:
        return f"{self.experiment_id}/{self.task_index} {self.name}"


class TuningRound(models.Model):
    """One round (batch of candidates of one task: search, build, measure) of a tuning.

    The ``*_seconds`` and ``*_joules`` triples split the round between the search (candidate
    generation by the search strategy and cost model), the build, and the measurement;
    ``energy_source`` is the meter's label (``nvml``, ``rapl``, ``estimate``) and
    ``energy_measured`` whether it was a hardware counter.
    """

    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="tuning_rounds")
    task = models.ForeignKey(TuningTask, on_delete=models.CASCADE, related_name="rounds")
    round_index = models.PositiveIntegerField(help_text="0-based, over the whole experiment")
    attempt = models.PositiveIntegerField(default=1, help_text="Experiment attempt that measured it")
    num_candidates = models.PositiveIntegerField(default=0)
    num_errors = models.PositiveIntegerField(default=0)
    search_seconds = models.FloatField(default=0.0)
    build_seconds = models.FloatField(default=0.0)
    measure_seconds = models.FloatField(default=0.0)
    search_joules = models.FloatField(default=0.0)
    build_joules = models.FloatField(default=0.0)
    measure_joules = models.FloatField(default=0.0)
    energy_source = models.CharField(max_length=16, blank=True)
    energy_measured = models.BooleanField(default=False)
    best_seconds_after = models.FloatField(null=True, blank=True, help_text="Task's best mean run time after the round")
    improved = models.BooleanField(default=False, help_text="Did this round improve the task's best?")
    wall_seconds = models.FloatField(default=0.0, help_text="Wall time since tuning started, at the end of the round")
    joules_total = models.FloatField(default=0.0, help_text="Energy since tuning started, at the end of the round")
    finished_at = models.DateTimeField(auto_now_add=True)
    details = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["experiment_id", "round_index"]
        constraints = [models.UniqueConstraint(fields=["experiment", "round_index"], name="tuning_round_unique_index")]

    @property
    def seconds(self) -> float:
        return self.search_seconds + self.build_seconds + self.measure_seconds

    @property
    def joules(self) -> float:
        return self.search_joules + self.build_joules + self.measure_joules


class TuningRecord(models.Model):
    """One tuning record: one measured candidate of a task.

    ``run_seconds``: the run times the runner recorded, seconds (empty on error): its timed
    repeats, or with DOPpler's ``estimator: "min"`` the fastest alone;
    ``mean_seconds``: their mean (``None`` on error); ``error``: builder or runner error text.
    ``energy_joules``: the round's measurement energy divided over its candidates.
    ``target``: the TVM target dict it was measured under; ``num_threads``: threads per run.
    """

    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="tuning_records")
    task = models.ForeignKey(TuningTask, on_delete=models.CASCADE, related_name="records")
    round = models.ForeignKey(TuningRound, on_delete=models.CASCADE, related_name="records", null=True, blank=True)
    candidate_index = models.PositiveIntegerField(help_text="Index in its round")
    trace_hash = models.CharField(max_length=64, blank=True, help_text="sha1 of the schedule trace JSON")
    trace = models.JSONField(default=dict, blank=True)
    run_seconds = models.JSONField(default=list, blank=True)
    mean_seconds = models.FloatField(null=True, blank=True)
    error = models.TextField(blank=True)
    build_seconds = models.FloatField(null=True, blank=True)
    wall_seconds = models.FloatField(default=0.0, help_text="Wall time since tuning started when measured")
    energy_joules = models.FloatField(default=0.0)
    energy_source = models.CharField(max_length=16, blank=True)
    target = models.JSONField(default=dict)
    num_threads = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["experiment_id", "id"]
        indexes = [models.Index(fields=["experiment", "task"])]


class TuningResult(models.Model):
    """End-to-end latency of the model: tuned build, untuned build, PyTorch eager.

    Each ``*_latency`` is a dict ``{"median_s", "p25_s", "p75_s", "min_s", "max_s", "repeats"}``
    (seconds) or empty when not measured (e.g. no PyTorch model for an ONNX upload). The
    onnxruntime peer is in ``details["onnxruntime"]`` (same dict plus ``session``, ``None`` when
    not measured, ``{"error": ...}`` when it failed) with ``details["speedup_vs_onnxruntime"]``.
    """

    experiment = models.OneToOneField(Experiment, on_delete=models.CASCADE, related_name="tuning_result")
    model_name = models.CharField(max_length=128)
    target = models.JSONField(default=dict)
    num_threads = models.PositiveIntegerField(default=1)
    tuned_latency = models.JSONField(default=dict, blank=True)
    untuned_latency = models.JSONField(default=dict, blank=True)
    eager_latency = models.JSONField(default=dict, blank=True)
    total_trials = models.PositiveIntegerField(default=0)
    wall_seconds = models.FloatField(default=0.0)
    joules = models.FloatField(default=0.0)
    energy_source = models.CharField(max_length=16, blank=True)
    details = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
