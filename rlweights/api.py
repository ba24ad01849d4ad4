"""REST API of the rlweights engine, mounted under /api/v1/rlweights/ by webapp.urls.

Experiments of kind ``weight-learning`` are created through the platform's experiment API
(``POST /api/v1/experiments/``); :class:`WeightLearningParams` validates their ``parameters``.
``POST /api/v1/rlweights/export/`` turns a weight vector into KubeSchedulerConfiguration and
Volcano YAML.
"""
from __future__ import annotations

from django.urls import path
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from .core.export import kube_scheduler_config_yaml, volcano_nodeorder_arguments, volcano_scheduler_conf_yaml
from .core.scheduler import SCORE_PLUGIN_NAMES, SchedulingError

class WeightLearningParams(serializers.Serializer):
    """Parameters of a ``weight-learning`` experiment (see
    :class:`rlweights.backends.pipeline.LearnParams`; every field is optional)."""

    mode = serializers.ChoiceField(choices=["train", "evaluate"], default="train")
    train_setups = serializers.IntegerField(min_value=1, max_value=64, default=8)
    train_workloads = serializers.IntegerField(min_value=1, max_value=64, default=8)
    test_setups = serializers.IntegerField(min_value=1, max_value=64, default=3)
    test_workloads = serializers.IntegerField(min_value=1, max_value=64, default=3)
    window_s = serializers.FloatField(min_value=10, max_value=3600, default=120.0)
    metric = serializers.ChoiceField(choices=["mean", "p95"], default="mean")
    budget = serializers.IntegerField(min_value=2, max_value=100, default=10)
    timesteps = serializers.IntegerField(min_value=64, max_value=1_000_000, default=30_000)
    seed = serializers.IntegerField(min_value=0, max_value=2**31 - 1, default=0)
    eval_seeds = serializers.ListField(child=serializers.IntegerField(min_value=0), min_length=1, max_length=10, default=[0, 1])
    w_min = serializers.IntegerField(min_value=0, max_value=999, default=1)
    w_max = serializers.IntegerField(min_value=1, max_value=1000, default=100)
    n_stack = serializers.IntegerField(min_value=1, max_value=16, default=4)
    keep_alive_s = serializers.FloatField(min_value=0, max_value=86400, default=60.0)
    policy = serializers.ChoiceField(choices=[""], default="", help_text="'' = the shipped policy (evaluate mode)")
    azure_sample = serializers.BooleanField(default=False)
    azure_speedup = serializers.FloatField(min_value=1, max_value=1000, default=10.0)
    reward = serializers.ChoiceField(choices=["step", "best"], default="step")
    cluster_id = serializers.IntegerField(required=False, min_value=1,
                                          help_text="evaluate on this registered cluster's nodes (evaluate mode)")

    def validate_cluster_id(self, value):
        from webapp.models import Cluster

        c = Cluster.objects.filter(pk=value).first()
        if c is None:
            raise serializers.ValidationError(f"no cluster {value}")
        if not c.nodes.exists():
            raise serializers.ValidationError(f"cluster {c.name} has no nodes")
        return value

    def validate(self, attrs):
        from .backends.pipeline import LearnParams

        try:
            LearnParams(**{k: v for k, v in attrs.items() if k != "cluster_id"}).validate()
        except ValueError as err:
            raise serializers.ValidationError(str(err)) from None
        return attrs


class WeightsSerializer(serializers.Serializer):
    """A weight per score plugin (integers >= 0), by Kubernetes plugin name."""

    weights = serializers.DictField(child=serializers.IntegerField(min_value=0, max_value=1000))
    scheduler_name = serializers.RegexField(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=63, default="tandem-learned")

    def validate_weights(self, value):
        unknown = set(value) - set(SCORE_PLUGIN_NAMES)
        if unknown:
            raise serializers.ValidationError(f"unknown score plugins {sorted(unknown)}; known: {list(SCORE_PLUGIN_NAMES)}")
        if not any(v > 0 for v in value.values()):
            # an empty or all-zero vector exported a configuration that disables every score plugin
            raise serializers.ValidationError(
                f"give at least one score plugin a weight above 0 (known: {list(SCORE_PLUGIN_NAMES)}); with none, "
                "the exported scheduler scores nothing and every feasible node ties")
        return value


class ExportView(APIView):
    """``POST {"weights": {"ImageLocality": 80, ...}}`` -> KubeSchedulerConfiguration YAML,
    Volcano ``nodeorder`` arguments and ``volcano-scheduler.conf`` YAML."""

    serializer_class = WeightsSerializer

    def post(self, request):
        ser = WeightsSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        w = ser.validated_data["weights"]
        try:
            return Response({
                "kube_scheduler_configuration": kube_scheduler_config_yaml(w, ser.validated_data["scheduler_name"]),
                "volcano_nodeorder_arguments": volcano_nodeorder_arguments(w),
                "volcano_scheduler_conf": volcano_scheduler_conf_yaml(w),
            })
        except SchedulingError as err:
            raise serializers.ValidationError({"weights": str(err)}) from None


urlpatterns = [path("export/", ExportView.as_view(), name="rlweights-export")]
