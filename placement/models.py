"""Django models of the placement engine: profile rows and live placement decisions."""
from django.db import models

from webapp.models import Job


class ProfileRow(models.Model):
    """One measured (or measurement-derived) profile of a model at a batch size on a GPU type.
    Utilisation in percent, memory in MiB; ``None`` where the source has no such measurement.
    ``source``: e.g. ``gavel-throughput-derived`` or ``nvml:<GPU name>``."""

    model = models.CharField(max_length=128)
    batch_size = models.PositiveIntegerField()
    gpu_type = models.CharField(max_length=64)
    util_mean_pct = models.FloatField(null=True, blank=True)
    util_peak_pct = models.FloatField(null=True, blank=True)
    memory_mib = models.FloatField(null=True, blank=True)
    source = models.CharField(max_length=128)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["model", "batch_size", "gpu_type", "source"],
                                               name="profile_row_unique")]
        ordering = ["gpu_type", "model", "batch_size"]

    def __str__(self) -> str:
        return f"{self.model} x{self.batch_size} on {self.gpu_type} ({self.source})"


class PlacementDecision(models.Model):
    """Where and why live placement put a job: ``gpu_ids`` (GPUDevice pks), the policy, the
    job's predicted utilisation (%) and memory (MiB) with their provenance, and the cost terms
    of the top candidate GPUs (``explanation``)."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="placement_decisions")
    policy = models.CharField(max_length=32)
    gpu_ids = models.JSONField(default=list)
    predicted_util_pct = models.FloatField()
    predicted_memory_mib = models.FloatField()
    explanation = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]


class SimulationJobOutcome(models.Model):
    """One job's outcome in one policy's run of a simulation experiment. Times in seconds
    from the trace start; ``gpu_ids`` are simulated GPU indices."""

    experiment = models.ForeignKey("webapp.Experiment", on_delete=models.CASCADE, related_name="simulation_outcomes")
    policy = models.CharField(max_length=32)
    job_index = models.PositiveIntegerField()
    model = models.CharField(max_length=128)
    num_gpus = models.PositiveIntegerField()
    arrival_s = models.FloatField()
    start_s = models.FloatField()
    finish_s = models.FloatField()
    queueing_delay_s = models.FloatField()
    jct_s = models.FloatField()
    slowdown = models.FloatField()
    gpu_ids = models.JSONField(default=list)
    preemptions = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["experiment", "policy", "job_index"], name="sim_outcome_unique")]
        indexes = [models.Index(fields=["experiment", "policy"])]
