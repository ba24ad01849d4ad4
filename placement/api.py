"""REST API of the placement engine, mounted at /api/v1/placement/:

* ``decisions/``: live placement decisions (job, GPUs, policy, predicted utilisation and
  memory with provenance, cost terms of the top candidate GPUs); own jobs only (staff: all).
* ``outcomes/``: per-job outcomes of simulation experiments (``?experiment=&policy=``).
* ``profiles/``: the profile table (database rows plus the shipped Gavel-derived rows), filter
  ``?gpu_type=``.
* ``predict/`` (POST ``{model_name, batch_size, gpu_type}``): graph features and predicted
  utilisation with the profile data it came from; 400 naming the command that fills a GPU type
  with no profile rows.
"""
from pathlib import Path

from django.urls import path
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import permissions, serializers, viewsets
from rest_framework.response import Response
from rest_framework.routers import SimpleRouter
from rest_framework.views import APIView

from . import selectors
from .models import PlacementDecision, SimulationJobOutcome


class PlacementDecisionSerializer(serializers.ModelSerializer):
    job_name = serializers.CharField(source="job.__str__", read_only=True)

    class Meta:
        model = PlacementDecision
        fields = ["id", "job", "job_name", "policy", "gpu_ids", "predicted_util_pct", "predicted_memory_mib",
                  "explanation", "created_at"]


def _id_param(request, name: str, noun: str) -> int | None:
    """Query parameter ``name`` as an id (ASCII digits), ``None`` when absent or empty (as
    django-filter treats an empty filter); anything else is a 400 naming it (a filter the API
    cannot apply is never silently dropped)."""
    value = request.query_params.get(name)
    if not value:
        return None
    if not (value.isascii() and value.isdigit()):
        raise serializers.ValidationError({name: [f"must be {noun} (an integer), got {value[:64]!r}"]})
    return int(value)


@extend_schema_view(list=extend_schema(parameters=[
    OpenApiParameter("job", int, description="only the decisions of this job")]))
class PlacementDecisionViewSet(viewsets.ReadOnlyModelViewSet):
    """Live placement decisions of your jobs (staff: all); filter ``?job=`` (an id, else 400)."""

    serializer_class = PlacementDecisionSerializer
    permission_classes = [permissions.IsAuthenticated]
    queryset = PlacementDecision.objects.none()  # for the schema; real rows from get_queryset

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return PlacementDecision.objects.none()
        qs = selectors.decision_list(user=self.request.user)
        job = _id_param(self.request, "job", "a job id")
        return qs if job is None else qs.filter(job_id=job)


class SimulationJobOutcomeSerializer(serializers.ModelSerializer):
    class Meta:
        model = SimulationJobOutcome
        fields = ["experiment", "policy", "job_index", "model", "num_gpus", "arrival_s", "start_s", "finish_s",
                  "queueing_delay_s", "jct_s", "slowdown", "gpu_ids", "preemptions"]


@extend_schema_view(list=extend_schema(parameters=[
    OpenApiParameter("experiment", int, description="only the outcomes of this simulation experiment"),
    OpenApiParameter("policy", str, description="only the outcomes under this policy (e.g. horus)")]))
class SimulationJobOutcomeViewSet(viewsets.ReadOnlyModelViewSet):
    """Per-job outcomes of simulation experiments (own experiments; staff: all); filters
    ``?experiment=`` (an integer id, else 400) and ``?policy=``; paginated."""

    serializer_class = SimulationJobOutcomeSerializer
    permission_classes = [permissions.IsAuthenticated]
    queryset = SimulationJobOutcome.objects.none()

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return SimulationJobOutcome.objects.none()
        qs = SimulationJobOutcome.objects.filter(
            experiment__in=selectors.simulation_list(user=self.request.user)).order_by("experiment", "policy", "job_index")
        exp, pol = _id_param(self.request, "experiment", "an experiment id"), self.request.query_params.get("policy")
        if exp is not None:
            qs = qs.filter(experiment_id=exp)
        if pol:
            qs = qs.filter(policy=pol)
        return qs


class PredictRequest(serializers.Serializer):
    model_name = serializers.CharField()
    batch_size = serializers.IntegerField(min_value=1, max_value=65536)
    gpu_type = serializers.CharField(default="V100")


class PredictResponse(serializers.Serializer):
    features = serializers.DictField(help_text="graph features of the model at this batch size (FLOPs, parameters, "
                                               "layer counts, memory estimate)")
    util_mean_pct = serializers.FloatField(help_text="predicted mean GPU utilisation, percent")
    gpu_type = serializers.CharField(help_text="the GPU type whose profile rows made the prediction")
    sources = serializers.ListField(child=serializers.CharField(), help_text="profile data the predictor was trained on")
    training_rows = serializers.IntegerField(help_text="profile rows the predictor was trained on")
    memory_mib = serializers.FloatField(help_text="estimated GPU memory of a training step, MiB")
    memory_source = serializers.CharField(help_text='"graph-estimate": from the graph, not from a measurement')


class PredictView(APIView):
    """Graph features and predicted GPU utilisation of a model at a batch size on a GPU type. An
    unknown model name is a 400 before any tracing or predictor training; a GPU type with no
    profile rows is a 400 naming the command that fills it."""

    permission_classes = [permissions.IsAuthenticated]
    serializer_class = PredictRequest

    @extend_schema(request=PredictRequest, responses=PredictResponse)
    def post(self, request):
        from .backends.predictor import NoProfileData
        from .services import _predictor, _tables, job_features

        req = PredictRequest(data=request.data)
        req.is_valid(raise_exception=True)
        d = req.validated_data
        from django.conf import settings

        from .backends.features import check_model_name

        try:  # an unknown name is refused before any tracing or predictor training
            names = {r["model"] for r in _tables()[1]}
            check_model_name(d["model_name"], known=names | {n.removeprefix("gavel:") for n in names},
                             data_dir=Path(settings.DATA_DIR))
        except KeyError as err:
            return Response({"model_name": [str(err).strip("'\"")]}, status=400)
        try:
            feats = job_features(d["model_name"], d["batch_size"])
        except KeyError as err:
            return Response({"model_name": [str(err).strip("'\"")]}, status=400)
        try:
            p = _predictor().predict(feats, gpu_type=d["gpu_type"])
        except NoProfileData as err:
            return Response({"gpu_type": [str(err)]}, status=400)
        return Response({"features": feats, "util_mean_pct": p.value, "gpu_type": p.gpu_type,
                         "sources": p.sources, "training_rows": p.n_rows, "predictor_config": p.config,
                         "memory_mib": feats["memory_mib"], "memory_source": "graph-estimate"})


class ProfileRowOut(serializers.Serializer):
    model = serializers.CharField()
    batch_size = serializers.IntegerField()
    gpu_type = serializers.CharField()
    util_mean_pct = serializers.FloatField(allow_null=True)
    util_peak_pct = serializers.FloatField(allow_null=True)
    memory_mib = serializers.FloatField(allow_null=True)
    source = serializers.CharField()


class ProfileList(serializers.Serializer):
    count = serializers.IntegerField()
    results = ProfileRowOut(many=True)


class ProfileView(APIView):
    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(responses=ProfileList, parameters=[
        OpenApiParameter("gpu_type", str, description="only this GPU type (case-insensitive), e.g. V100")])
    def get(self, request):
        from webapp.filters import refuse_repeated_query_params

        from .services import profile_rows_all

        refuse_repeated_query_params(request)
        gpu = request.query_params.get("gpu_type")
        rows = [r for r in profile_rows_all() if not gpu or r["gpu_type"].upper() == gpu.upper()]
        return Response({"count": len(rows), "results": rows})


router = SimpleRouter()
router.register("decisions", PlacementDecisionViewSet, basename="placement-decision")
router.register("outcomes", SimulationJobOutcomeViewSet, basename="placement-outcome")
urlpatterns = router.urls + [
    path("predict/", PredictView.as_view(), name="placement-predict"),
    path("profiles/", ProfileView.as_view(), name="placement-profiles"),
]
