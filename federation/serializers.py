"""Parameter validation of the federation experiment kinds (DRF serializers)."""
from __future__ import annotations

from rest_framework import serializers

from federation.core.applications import known_applications

MAX_CLUSTERS = 200


class MemberClusterSerializer(serializers.Serializer):
    """A member cluster entered by hand: name, Skyplane region (optional), cores, contention."""

    name = serializers.CharField(max_length=128)
    region = serializers.CharField(max_length=64, required=False, allow_blank=True, default="")
    capacity_cores = serializers.FloatField(min_value=0.001, max_value=1e6)
    contention = serializers.FloatField(min_value=0.0, max_value=0.99, default=0.0)


class FederationParamsMixin(serializers.Serializer):
    """Member clusters (entered, or registered clusters by id) and optional entered matrices;
    without matrices the links come from the Skyplane measurements by region."""

    clusters = MemberClusterSerializer(many=True, required=False)
    cluster_ids = serializers.ListField(child=serializers.IntegerField(min_value=1), required=False, max_length=MAX_CLUSTERS)
    rtt_ms = serializers.ListField(child=serializers.ListField(child=serializers.FloatField(min_value=0)), required=False)
    bandwidth_mbps = serializers.ListField(child=serializers.ListField(child=serializers.FloatField(min_value=1e-6)), required=False)
    client = serializers.CharField(max_length=128, required=False, allow_blank=True, default="")

    def validate(self, attrs):
        from federation.core.model import FederationError
        from federation.services import federation_from_parameters

        if not attrs.get("clusters") and not attrs.get("cluster_ids"):
            raise serializers.ValidationError({"clusters": "give member clusters (clusters) or registered cluster ids (cluster_ids)"})
        if len(attrs.get("clusters") or []) > MAX_CLUSTERS:
            raise serializers.ValidationError({"clusters": f"at most {MAX_CLUSTERS} member clusters"})
        attrs["clusters"] = [dict(c) for c in attrs.get("clusters") or []]
        try:
            fed = federation_from_parameters(attrs)
            if attrs.get("client"):
                fed.index(attrs["client"])
        except FederationError as err:
            raise serializers.ValidationError({"non_field_errors": [str(err)]}) from None
        return attrs


class FederationPlanParameters(FederationParamsMixin):
    """Parameters of a ``federation-plan`` experiment."""

    application = serializers.ChoiceField(choices=known_applications())
    method = serializers.ChoiceField(choices=["auto", "milp", "greedy"], default="auto")
    contention_weight = serializers.FloatField(min_value=0.0, max_value=100.0, default=1.0)
    pinned = serializers.DictField(child=serializers.CharField(max_length=128), required=False, default=dict)

    def validate(self, attrs):
        attrs = super().validate(attrs)
        from federation.core.applications import get_application

        app = get_application(attrs["application"])
        bad = [s for s in attrs.get("pinned", {}) if s not in app.names]
        if bad:
            raise serializers.ValidationError({"pinned": f"unknown services {bad} in {app.name}"})
        return attrs


class FederationBenchmarkParameters(serializers.Serializer):
    """Parameters of a ``federation-benchmark`` experiment (harness runs on the worker's CPUs)."""

    applications = serializers.ListField(child=serializers.ChoiceField(choices=known_applications()), min_length=1, max_length=5,
                                         default=lambda: ["hotelReservation", "inference"])
    latencies_ms = serializers.ListField(child=serializers.FloatField(min_value=0.0, max_value=500.0), min_length=1, max_length=8,
                                         default=lambda: [0.0, 20.0, 50.0])
    contentions = serializers.ListField(child=serializers.FloatField(min_value=0.0, max_value=0.95), min_length=1, max_length=6,
                                        default=lambda: [0.0, 0.5, 0.8])
    rate_rps = serializers.FloatField(min_value=0.5, max_value=50.0, default=4.0)
    duration_s = serializers.FloatField(min_value=0.5, max_value=30.0, default=2.0)
    compare = serializers.BooleanField(default=True, help_text="also run the orchestrator's plan against every baseline")
