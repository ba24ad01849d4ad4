"""REST API of the rlweights engine, mounted under /api/v1/rlweights/ by webapp.urls.

Experiments of kind ``weight-learning`` are created through the platform's experiment API
(``POST /api/v1/experiments/``); :class:`rlweights.experiment.WeightLearningParams` validates
their ``parameters``.
``POST /api/v1/rlweights/export/`` turns a weight vector into KubeSchedulerConfiguration and
Volcano YAML.
"""
from __future__ import annotations

from django.urls import path
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from .core.export import kube_scheduler_config_yaml, volcano_nodeorder_arguments, volcano_scheduler_conf_yaml
from .core.scheduler import SCORE_PLUGIN_NAMES, SchedulingError


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


class ExportSerializer(serializers.Serializer):
    """What ``POST export/`` answers: the same weights in three scheduler formats."""

    kube_scheduler_configuration = serializers.CharField(
        help_text="KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) YAML with one profile, "
                  "schedulerName and the score plugins' weights")
    volcano_nodeorder_arguments = serializers.DictField(
        child=serializers.IntegerField(), help_text='Volcano nodeorder plugin arguments, e.g. {"leastrequested.weight": 3}')
    volcano_scheduler_conf = serializers.CharField(help_text="volcano-scheduler.conf YAML, nodeorder weighted")


class ExportView(APIView):
    """``POST {"weights": {"ImageLocality": 80, ...}}`` -> KubeSchedulerConfiguration YAML,
    Volcano ``nodeorder`` arguments and ``volcano-scheduler.conf`` YAML."""

    serializer_class = WeightsSerializer

    @extend_schema(request=WeightsSerializer, responses=ExportSerializer)
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
