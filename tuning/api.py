"""REST API of the tuning engine, mounted under ``/api/v1/tuning/`` by webapp.urls.

- Experiments of kind ``"tuning"`` are created through the platform API
  (``POST /api/v1/experiments/`` with ``{"kind": "tuning", "parameters": {...}}``);
  :class:`TuningParameters` validates the parameters.
- ``POST /api/v1/tuning/onnx/`` (multipart ``file``): store an ONNX model after checking it
  imports; returns ``{"id": ...}`` to pass as parameter ``onnx``.
- ``GET /api/v1/tuning/experiments/<id>/``: tasks, rounds (curve) and result of a tuning.
"""
from __future__ import annotations

from django.shortcuts import get_object_or_404
from django.urls import path
from rest_framework import permissions, serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer

from webapp.models import Experiment

from . import selectors


def _runner_choices() -> list[str]:
    from .backends.registry import runner_names

    return runner_names()


def _scheduler_choices() -> list[str]:
    from .backends.registry import scheduler_names

    return scheduler_names()


class TuningParameters(serializers.Serializer):
    """Parameters of a tuning experiment. Give ``model`` (torchvision name, ``transformers:<Config>``
    or a built-in: mlp, matmul, convnet) or ``onnx`` (upload id or path under data/)."""

    model = serializers.CharField(required=False, allow_blank=False, max_length=128)
    onnx = serializers.CharField(required=False, allow_blank=False, max_length=256)
    input_shape = serializers.ListField(child=serializers.IntegerField(min_value=1, max_value=1 << 28), required=False,
                                        min_length=1, max_length=8)
    target = serializers.ChoiceField(choices=["llvm", "cuda"], default="llvm")
    trials = serializers.IntegerField(min_value=1, max_value=100000, default=64)
    trials_per_round = serializers.IntegerField(min_value=1, max_value=512, default=32)
    min_trials_per_task = serializers.IntegerField(min_value=1, max_value=100000, required=False, allow_null=True,
                                                   default=None)  # None: one round (trials_per_round)
    max_trials_per_task = serializers.IntegerField(min_value=1, max_value=100000, required=False, allow_null=True,
                                                   default=None)
    max_tasks = serializers.IntegerField(min_value=1, max_value=10000, required=False, allow_null=True, default=None)
    runner = serializers.CharField(default="local")
    scheduler = serializers.CharField(default="gradient")
    cost_model = serializers.ChoiceField(choices=["xgb", "random"], default="xgb")
    seed = serializers.IntegerField(min_value=0, max_value=2**31 - 1, default=0)  # as every engine's seed
    num_threads = serializers.IntegerField(min_value=1, max_value=1024, required=False, allow_null=True, default=None)
    repeats = serializers.IntegerField(min_value=3, max_value=1000, default=20)
    force_target = serializers.BooleanField(default=False)
    seed_database = serializers.CharField(required=False, allow_null=True, default=None, max_length=128)
    measure_eager = serializers.BooleanField(default=True)  # the peers: PyTorch eager and onnxruntime
    measure_onnxruntime = serializers.BooleanField(default=True)  # with measure_eager, on CPU targets
    # None: on for llvm (TVM's cpu_weight_prepack), off for cuda; see tuning.pipeline.weight_prepack_for
    weight_prepack = serializers.BooleanField(required=False, allow_null=True, default=None)
    options = serializers.DictField(required=False, default=dict)

    def validate_runner(self, value: str) -> str:
        if value not in _runner_choices():
            raise serializers.ValidationError(f"unknown runner {value!r}; available: {', '.join(_runner_choices())}")
        return value

    def validate_scheduler(self, value: str) -> str:
        if value not in _scheduler_choices():
            raise serializers.ValidationError(f"unknown scheduler {value!r}; available: {', '.join(_scheduler_choices())}")
        return value

    #: Largest input tensor a tuning accepts, elements (2**28: 1 GiB of float32). A bigger one
    #: would be refused by memory on a worker minutes later; it is refused at submission instead.
    MAX_INPUT_ELEMENTS = 1 << 28

    def validate(self, attrs):
        if bool(attrs.get("model")) == bool(attrs.get("onnx")):
            raise serializers.ValidationError("give exactly one of 'model' and 'onnx'")
        shape = attrs.get("input_shape")
        if shape:
            elements = 1
            for s in shape:
                elements *= int(s)
            if elements > self.MAX_INPUT_ELEMENTS:
                raise serializers.ValidationError({"input_shape": (
                    f"{list(shape)} is {elements:,} elements ({elements * 4 / 2**30:.1f} GiB as float32); "
                    f"the largest accepted input is {self.MAX_INPUT_ELEMENTS:,} elements (1 GiB)")})
        lo, hi = attrs.get("min_trials_per_task"), attrs.get("max_trials_per_task")
        if lo is not None and hi is not None and lo > hi:
            raise serializers.ValidationError({"min_trials_per_task": (
                f"{lo} is more than max_trials_per_task ({hi}): no task could reach its minimum")})
        if attrs.get("onnx"):
            from .services import resolve_onnx

            try:
                resolve_onnx(attrs["onnx"])
            except FileNotFoundError as err:
                raise serializers.ValidationError({"onnx": str(err)}) from None
        if attrs.get("model"):
            from .backends.frontends import BUILTIN_MODELS

            name = attrs["model"]
            if name not in BUILTIN_MODELS and not name.startswith("transformers:"):
                import torchvision

                if name not in torchvision.models.list_models():
                    raise serializers.ValidationError({"model": (
                        f"unknown model {name!r}; use a torchvision name (e.g. resnet18, mobilenet_v2; "
                        f"torchvision.models.list_models() lists them), transformers:<Config class>, or one of "
                        f"{', '.join(sorted(BUILTIN_MODELS))}")})
        if attrs.get("options"):
            from .backends.options import validate_options
            from .services import default_num_threads

            try:
                validate_options(attrs["options"], attrs.get("num_threads") or default_num_threads(),
                                 scheduler=attrs.get("scheduler", "gradient"), runner=attrs.get("runner", "local"),
                                 target_kind=attrs.get("target", "llvm"))
            except ValueError as err:
                raise serializers.ValidationError({"options": str(err)}) from None
        if attrs.get("seed_database"):
            from .backends.database import DatabaseImportError, check_database_name
            from .services import tuning_root

            try:
                check_database_name(attrs["seed_database"], tuning_root() / "databases")
            except DatabaseImportError as err:
                raise serializers.ValidationError({"seed_database": str(err)}) from None
            if not (tuning_root() / "databases" / attrs["seed_database"]).is_dir():
                raise serializers.ValidationError({"seed_database": f"no imported database {attrs['seed_database']!r}"})
        return attrs


_OnnxUpload = inline_serializer("OnnxUpload", fields={"file": serializers.FileField()})


@extend_schema(request={"multipart/form-data": _OnnxUpload}, responses={201: OpenApiTypes.OBJECT, 400: OpenApiTypes.OBJECT})
class OnnxUploadView(APIView):
    """Upload an ONNX model (multipart field ``file``); it is parsed (never unpickled) and
    imported into Relax before being stored; a failing import returns 400 naming the cause."""

    parser_classes = [MultiPartParser]
    permission_classes = [permissions.IsAuthenticated]

    def post(self, request):
        from .backends.frontends import ModelImportError
        from .services import onnx_upload_store

        f = request.FILES.get("file")
        if f is None:
            return Response({"file": ["required"]}, status=status.HTTP_400_BAD_REQUEST)
        from django.conf import settings

        if f.size > settings.MAX_UPLOAD_MIB * 1024 * 1024:
            return Response({"file": [f"{f.size / 2**20:.1f} MiB is over the upload limit of "
                                      f"{settings.MAX_UPLOAD_MIB} MiB (TANDEM_MAX_UPLOAD_MIB)"]},
                            status=status.HTTP_400_BAD_REQUEST)
        try:
            info = onnx_upload_store(data=f.read())
        except (ModelImportError, ValueError) as err:
            return Response({"file": [str(err)]}, status=status.HTTP_400_BAD_REQUEST)
        return Response(info, status=status.HTTP_201_CREATED)


@extend_schema(responses={200: OpenApiTypes.OBJECT},
               parameters=[OpenApiParameter("id", int, OpenApiParameter.PATH, description="the experiment's id")])
class TuningExperimentView(APIView):
    """Tasks, rounds and result of a tuning experiment (owner or staff). Any id that is not one
    of those (malformed, negative, someone else's) is a JSON 404 after authentication, so an
    anonymous request is a 401 whatever the id."""

    permission_classes = [permissions.IsAuthenticated]

    def get(self, request, pk: str):
        if not (pk.isascii() and pk.isdigit()):
            raise NotFound(f"no tuning experiment with id {pk[:64]!r}")
        qs = Experiment.objects.filter(kind="tuning")
        if not request.user.is_staff:
            qs = qs.filter(owner=request.user)
        exp = get_object_or_404(qs, pk=int(pk))
        return Response(selectors.tuning_overview(experiment=exp))


urlpatterns = [
    path("onnx/", OnnxUploadView.as_view(), name="tuning-onnx-upload"),
    path("experiments/<str:pk>/", TuningExperimentView.as_view(), name="tuning-experiment"),
]
