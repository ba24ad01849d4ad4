"""DRF serializers of the platform API (validation only; writes go through services)."""
from __future__ import annotations

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from rest_framework import serializers

from .importers import MAX_CPU_CORES, MAX_GPU_MEMORY_MIB, MAX_GPUS_PER_NODE, MAX_MEMORY_MIB
from .jsonvalues import non_finite_path
from .models import Cluster, Experiment, GPUDevice, Job, Node


class RejectUnknownFields:
    """Serializer mixin: a request body key that is not one of the serializer's fields is a 400
    naming it and the accepted fields, instead of being dropped without a word (DRF's default),
    so a misspelt ``batchsize`` or ``parameter`` is never silently replaced by a default.
    Read-only fields are accepted (and ignored) so a client may send back what it read.

    Text fields take JSON strings only: DRF's ``CharField`` and ``ChoiceField`` turn a number
    into its text (``"region": -439881`` stored as ``"-439881"``), which the schema, typing them
    ``string``, does not allow; such a value is a 400 naming the field."""

    def to_internal_value(self, data):
        if isinstance(data, dict):
            errors: dict = {}
            unknown = sorted(str(k) for k in data if k not in self.fields)
            if unknown:
                accepted = ", ".join(n for n, f in self.fields.items() if not f.read_only)
                errors.update({k[:64]: [f"unknown field; accepted: {accepted}"] for k in unknown[:20]})
            errors.update({name: ["must be a string."] for name, field in self.fields.items()
                           if name in data and not field.read_only and data[name] is not None
                           and isinstance(field, (serializers.CharField, serializers.ChoiceField))
                           and not isinstance(field, serializers.MultipleChoiceField)  # takes a list
                           and not isinstance(data[name], str)})
            if errors:  # name every wrong field: the other fields' own checks too
                try:
                    super().to_internal_value({k: v for k, v in data.items() if k in self.fields and k not in errors})
                except serializers.ValidationError as err:
                    if isinstance(err.detail, dict):
                        for k, v in err.detail.items():
                            if k not in errors:  # not "required" for a field refused above
                                errors[k] = v
                raise serializers.ValidationError(errors)
        return super().to_internal_value(data)


class BuiltOnce:
    """ModelSerializer mixin: build the fields from the model once per class and copy them for
    each instance. ``ModelSerializer.get_fields`` introspects the model on every instantiation,
    about a millisecond of a submission's time (bench/api_load.py). Only for serializers whose
    fields do not depend on the context.

    A plain field is copied shallowly: the built fields are never bound (binding happens on the
    copy, when the serializer's ``fields`` are read) and their validators and messages are only
    read. DRF's own deep copy re-instantiates every field from its arguments, which cost a
    tenth of a submission. A field holding other fields (``child``, ``child_relation``, a nested
    serializer) binds those to itself, so it is deep-copied as DRF does."""

    def get_fields(self):
        import copy

        cls = type(self)
        built = cls.__dict__.get("_built_fields")
        if built is None:
            built = super().get_fields()
            assert not any(getattr(f, "parent", None) for f in built.values()), "built fields must be unbound"
            cls._built_fields = built
        return {name: copy.deepcopy(f) if _holds_fields(f) else copy.copy(f) for name, f in built.items()}


def _holds_fields(field) -> bool:
    return isinstance(field, serializers.BaseSerializer) or hasattr(field, "child") or hasattr(field, "child_relation")


class GPUDeviceSerializer(RejectUnknownFields, serializers.ModelSerializer):
    class Meta:
        model = GPUDevice
        fields = ["id", "node", "index", "model", "memory_mib", "uuid", "utilisation_percent"]
        # same limits as the node importers (webapp/importers.py)
        extra_kwargs = {"index": {"max_value": MAX_GPUS_PER_NODE - 1}, "memory_mib": {"max_value": MAX_GPU_MEMORY_MIB},
                        "utilisation_percent": {"min_value": 0, "max_value": 100}}


class NodeSerializer(RejectUnknownFields, serializers.ModelSerializer):
    gpu_count = serializers.IntegerField(read_only=True, source="gpus.count")

    class Meta:
        model = Node
        fields = ["id", "cluster", "name", "cpu_cores", "memory_mib", "labels", "taints", "last_heartbeat", "gpu_count"]
        read_only_fields = ["last_heartbeat"]
        # same limits as the node importers (webapp/importers.py)
        extra_kwargs = {"cpu_cores": {"min_value": 0, "max_value": MAX_CPU_CORES}, "memory_mib": {"max_value": MAX_MEMORY_MIB}}

    def validate_taints(self, value):
        if not isinstance(value, list) or not all(isinstance(t, dict) and "key" in t and "effect" in t for t in value):
            raise serializers.ValidationError('a list of {"key", "value", "effect"} objects')
        return value

    def validate_labels(self, value):
        return check_labels(value)


def check_labels(value):
    """Kubernetes-style labels: an object of string names to string, number or boolean values
    (names at most 317 characters: prefix/name). Raises ``ValidationError`` otherwise."""
    if not isinstance(value, dict):
        raise serializers.ValidationError("an object of label names to values")
    for k, v in value.items():
        if len(k) > 317:
            raise serializers.ValidationError(f"label name {k[:40]!r}... is longer than 317 characters")
        if not isinstance(v, (str, int, float, bool)):
            raise serializers.ValidationError(f"label {k!r}: a string, number or boolean value, not {type(v).__name__}")
    return value


class ClusterSerializer(RejectUnknownFields, serializers.ModelSerializer):
    node_count = serializers.IntegerField(read_only=True, source="nodes.count")

    class Meta:
        model = Cluster
        fields = ["id", "name", "region", "kind", "labels", "created_at", "node_count"]
        extra_kwargs = {"labels": {"allow_null": False}}

    def validate_labels(self, value):
        return check_labels(value)


class JobSerializer(BuiltOnce, RejectUnknownFields, serializers.ModelSerializer):
    """A job as read back; the writable fields are those of a submission."""

    owner = serializers.CharField(source="owner.username", read_only=True)
    gpus = serializers.PrimaryKeyRelatedField(many=True, read_only=True)

    class Meta:
        model = Job
        fields = [
            "id", "owner", "name", "cluster", "model_name", "batch_size", "num_gpus", "steps",
            "state", "progress", "result", "error", "gpus", "attempts",
            "created_at", "started_at", "finished_at",
        ]
        read_only_fields = [
            "state", "progress", "result", "error", "gpus", "attempts", "created_at", "started_at", "finished_at",
        ]
        extra_kwargs = {"steps": {"min_value": 1, "max_value": 100000}, "batch_size": {"min_value": 1, "max_value": 4096}}


class FiniteJSONField(serializers.JSONField):
    """A JSON field that names where a non-finite number is. A request body's ``1e400`` parses
    to infinity, which DRF's JSONField refuses only as "Value must be valid JSON."; this says
    which key holds it. (``NaN`` and ``Infinity`` literals never get here: DRF's parser refuses
    the whole body.)"""

    def to_internal_value(self, data):
        where = non_finite_path(data)
        if where is not None:
            raise serializers.ValidationError(
                (f"{where}: " if where else "") + "not a finite number (a JSON number too large for a double, "
                "such as 1e400)")
        return super().to_internal_value(data)


class ExperimentParametersField(FiniteJSONField):
    """An experiment's ``parameters``: a JSON object validated by its kind's
    ``parameters_serializer`` (:class:`webapp.experiments.ExperimentKind`). In the OpenAPI schema
    it is ``anyOf`` those serializers' components (:class:`ExperimentParametersSchema`), so every
    kind's parameters, defaults and ranges are in ``/api/schema/``."""


class ExperimentParametersSchema(OpenApiSerializerFieldExtension):
    """drf-spectacular's schema of :class:`ExperimentParametersField`: ``anyOf`` every registered
    kind's parameters component. The kind is chosen by the sibling field ``kind``, so there is no
    discriminator inside ``parameters``; and not ``oneOf``, which demands that exactly one
    component match, while ``{}`` (all defaults) or a federation benchmark's stored parameters
    match several (every field of every kind is optional)."""

    target_class = "webapp.serializers.ExperimentParametersField"

    def map_serializer_field(self, auto_schema, direction):
        from .experiments import get_experiment_kind, registered_kinds

        refs, names = [], []
        for kind in registered_kinds():
            ser = get_experiment_kind(kind).parameters_serializer
            if ser is not None:
                component = auto_schema.resolve_serializer(ser, direction)
                refs.append(component.ref)
                names.append(f"{kind}: {component.name}")
        return {"type": "object", "anyOf": refs,
                "description": "The kind's parameters (by kind: " + "; ".join(names) + "). "
                               "Omitted fields take their defaults; an unknown field is refused."}


class ExperimentSerializer(RejectUnknownFields, serializers.ModelSerializer):
    owner = serializers.CharField(source="owner.username", read_only=True)
    kind = serializers.ChoiceField(choices=[], help_text="A registered experiment kind")
    parameters = ExperimentParametersField(required=False)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        from .experiments import registered_kinds

        self.fields["kind"].choices = registered_kinds()  # the engines' registry is the one list

    class Meta:
        model = Experiment
        fields = [
            "id", "owner", "name", "kind", "parameters", "state", "progress", "progress_message",
            "error", "attempts", "cancel_requested", "created_at", "started_at", "finished_at", "updated_at",
        ]
        read_only_fields = [f for f in fields if f not in ("name", "kind", "parameters")]


class ExperimentResultSerializer(serializers.ModelSerializer):
    class Meta:
        model = Experiment
        fields = ["id", "kind", "state", "result", "error"]


class TrainingProbeParameters(serializers.Serializer):
    """Parameters of the ``training-probe`` experiment kind (real training steps on CPU)."""

    model_name = serializers.CharField(max_length=128)
    batch_size = serializers.IntegerField(min_value=1, max_value=512)
    steps = serializers.IntegerField(min_value=1, max_value=10000)
    image_size = serializers.IntegerField(min_value=32, max_value=512, default=224)

    def validate_model_name(self, value: str) -> str:
        from .backends.training import torchvision_model_names

        if value not in torchvision_model_names():
            raise serializers.ValidationError(f"unknown torchvision model {value!r}")
        return value
