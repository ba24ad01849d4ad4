"""Platform models: clusters, nodes, GPU devices, jobs and experiments.

Units: memory in MiB, CPU in cores, times as aware UTC datetimes, progress in percent.
"""
from __future__ import annotations

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.utils import timezone

from .states import TERMINAL_STATES, State, check_transition


class Cluster(models.Model):
    """A cluster an operator registered (or a member cluster of a federation)."""

    class Kind(models.TextChoices):
        KUBERNETES = "kubernetes", "Kubernetes"
        PAI = "pai", "Alibaba PAI"
        SLURM = "slurm", "Slurm"
        OTHER = "other", "Other"

    name = models.CharField(max_length=128, unique=True)
    region = models.CharField(max_length=64, blank=True, help_text="Cloud region or site, e.g. aws:eu-west-1")
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.KUBERNETES)
    labels = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Node(models.Model):
    """A machine in a cluster. ``taints`` is a list of ``{"key", "value", "effect"}`` dicts as
    in Kubernetes ``v1.Node.spec.taints``."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="nodes")
    name = models.CharField(max_length=253)
    cpu_cores = models.FloatField(help_text="Allocatable CPU, cores")
    memory_mib = models.PositiveBigIntegerField(help_text="Allocatable memory, MiB")
    labels = models.JSONField(default=dict, blank=True)
    taints = models.JSONField(default=list, blank=True)
    last_heartbeat = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["cluster__name", "name"]
        constraints = [models.UniqueConstraint(fields=["cluster", "name"], name="node_unique_in_cluster")]

    def __str__(self) -> str:
        return f"{self.cluster.name}/{self.name}"


class GPUDevice(models.Model):
    """One GPU of a node. ``utilisation_percent`` is the latest reading (NVML or simulated
    placement), ``None`` when unknown."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="gpus")
    index = models.PositiveIntegerField()
    model = models.CharField(max_length=64, help_text="GPU type, e.g. V100, T4, H200")
    memory_mib = models.PositiveIntegerField()
    uuid = models.CharField(max_length=64, blank=True)
    utilisation_percent = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["node__cluster__name", "node__name", "index"]
        constraints = [models.UniqueConstraint(fields=["node", "index"], name="gpu_unique_index_on_node")]
        verbose_name = "GPU device"

    def __str__(self) -> str:
        return f"{self.node}/gpu{self.index} ({self.model})"


class StatefulModel(models.Model):
    """Abstract base: a ``state`` field that only moves along :data:`webapp.states.TRANSITIONS`."""

    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED, db_index=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    def transition_to(self, target: str, *, error: str = "") -> None:
        """Move to ``target`` in memory (the caller saves). Sets ``started_at`` on entering
        ``running`` and ``finished_at`` on entering a terminal state.

        Raises :class:`webapp.states.IllegalTransition` for a transition the machine forbids.
        """
        check_transition(self, self.state, target)
        now = timezone.now()
        if target == State.RUNNING and self.started_at is None:
            self.started_at = now
        if target in TERMINAL_STATES:
            self.finished_at = now
        if error:
            self.error = error
        self.state = target


class Job(StatefulModel):
    """A deep-learning training job submitted for placement on GPUs.

    ``placement`` holds the chosen GPUs through :attr:`gpus`; the decision's explanation lives
    in the placement engine's models.
    """

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="jobs")
    name = models.CharField(max_length=128, blank=True)
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="jobs", null=True, blank=True)
    model_name = models.CharField(max_length=128, help_text="Model zoo name, e.g. resnet18")
    batch_size = models.PositiveIntegerField()
    num_gpus = models.PositiveIntegerField(default=1)
    steps = models.PositiveIntegerField(default=100, help_text="Training iterations to run")
    gpus = models.ManyToManyField(GPUDevice, blank=True, related_name="jobs")
    progress = models.PositiveSmallIntegerField(default=0, help_text="Percent")
    result = models.JSONField(default=dict, blank=True)
    attempts = models.PositiveIntegerField(default=0, help_text="Times a worker started it")
    dispatched_at = models.DateTimeField(
        null=True, blank=True, help_text="When it was sent to a worker (set once, so it is never sent twice)"
    )

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.name or f"job {self.pk} ({self.model_name} x{self.batch_size})"


class Experiment(StatefulModel):
    """A long piece of work run by a worker: a simulation, a tuning, a weight learning, a
    federation plan or benchmark. ``parameters`` are validated by the kind's registered
    serializer; ``result`` is the kind's summary (detailed rows live in engine models). ``kind``
    has no fixed choices: the engines' registry (:mod:`webapp.experiments`) is the one list, so a
    new kind needs no platform migration."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="experiments")
    name = models.CharField(max_length=128, blank=True)
    kind = models.CharField(
        max_length=32, db_index=True,
        help_text="A registered experiment kind (webapp.experiments.registered_kinds(); engines register theirs)")
    parameters = models.JSONField(default=dict, blank=True)
    progress = models.PositiveSmallIntegerField(default=0, help_text="Percent, 0-100")
    progress_message = models.CharField(max_length=255, blank=True)
    result = models.JSONField(default=dict, blank=True)
    cancel_requested = models.BooleanField(default=False)
    attempts = models.PositiveIntegerField(default=0, help_text="Times a worker started it")
    updated_at = models.DateTimeField(auto_now=True)
    lease_owner = models.CharField(max_length=160, blank=True, help_text="The run holding it (host:pid:nonce; webapp/leases.py)")
    lease_expires_at = models.DateTimeField(null=True, blank=True, help_text="When that run's lease ends unless renewed")

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.name or f"{self.kind} experiment {self.pk}"


class ExperimentRecord(models.Model):
    """One result row an engine's pipeline handed over through ``record(table, rows)`` (see
    :mod:`webapp.plug`): committed as soon as it exists, so nothing measured is lost when a worker
    dies, and given back to the pipeline as ``resume`` when the experiment runs again.

    ``table`` names the kind of row (``"policy_result"``, ``"tuning_round"``, ...); ``seq`` orders
    rows within an experiment (0, 1, 2, ...); ``row`` is the engine's JSON object."""

    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="records")
    table = models.CharField(max_length=64)
    seq = models.PositiveIntegerField()
    row = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["experiment", "seq"]
        constraints = [models.UniqueConstraint(fields=["experiment", "seq"], name="experiment_record_seq_unique")]

    def __str__(self) -> str:
        return f"{self.experiment_id}/{self.table}#{self.seq}"


class IdempotencyKey(models.Model):
    """A submission made with an ``Idempotency-Key`` header: a retry with the same key and body
    gets this stored response instead of creating a second job or experiment
    (:class:`webapp.api.IdempotentCreate`). ``body_sha256`` is over the parsed body with sorted
    keys; ``response`` is the first answer's body."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    path = models.CharField(max_length=255)
    body_sha256 = models.CharField(max_length=64)
    status = models.PositiveSmallIntegerField()
    response = models.JSONField(encoder=DjangoJSONEncoder)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["owner", "key"], name="idempotency_key_unique_per_owner")]
