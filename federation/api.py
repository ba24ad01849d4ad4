"""REST API of the federation engine, mounted under /api/v1/federation/ by webapp.urls.

Experiments themselves are created through ``/api/v1/experiments/`` (kinds ``federation-plan``
and ``federation-benchmark``); this adds read-only helpers:

* ``GET applications/``: the application types and their derived call graphs;
* ``POST applications/derive/`` ``{manifests, entry, name}``: the call graph derived from your
  docker-compose / Kubernetes YAML, each edge with how it was derived and whether it was
  inferred, for confirmation before planning (plan it with ``federation-plan`` and the same
  ``manifests`` / ``entry``);
* ``GET plans/<experiment id>/karmada/``: a plan's PropagationPolicy YAML.
"""
from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from django.urls import path
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import NotFound
from rest_framework.permissions import IsAuthenticated
from rest_framework import serializers
from rest_framework.response import Response

from federation.core.applications import get_application, known_applications
from webapp.models import Experiment
from webapp.states import State


_Edge = inline_serializer("FederationEdge", {"caller": serializers.CharField(), "callee": serializers.CharField(),
                                             "calls": serializers.FloatField(), "payload_bytes": serializers.IntegerField()}, many=True)
_App = inline_serializer("FederationApplication", {
    "name": serializers.CharField(), "kind": serializers.CharField(), "entry": serializers.CharField(),
    "source": serializers.CharField(), "notes": serializers.ListField(child=serializers.CharField()),
    "services": serializers.ListField(child=serializers.CharField()), "edges": _Edge}, many=True)


@extend_schema(responses=_App)
@api_view(["GET"])
@permission_classes([IsAuthenticated])
def applications(request):
    """Every application type with its services, edges and derivation notes."""
    out = []
    for name in known_applications():
        a = get_application(name)
        out.append({"name": a.name, "kind": a.kind, "entry": a.entry, "source": a.source, "notes": a.notes,
                    "services": [s.name for s in a.services],
                    "edges": [{"caller": e.caller, "callee": e.callee, "calls": e.calls, "payload_bytes": e.payload_bytes} for e in a.edges]})
    return Response(out)


class DeriveRequest(serializers.Serializer):
    manifests = serializers.CharField(max_length=2_000_000, trim_whitespace=False,
                                      help_text="docker-compose and/or Kubernetes YAML, multi-document")
    entry = serializers.CharField(max_length=128, help_text="the service user requests hit")
    name = serializers.CharField(max_length=128, required=False, allow_blank=True, default="")


@extend_schema(request=DeriveRequest, responses={200: OpenApiTypes.OBJECT})
@api_view(["POST"])
@permission_classes([IsAuthenticated])
def derive_application(request):
    """The derived call graph of the given manifests (400 with the reason when they cannot be
    read). Stores nothing."""
    from federation.core.applications import application_from_text, derived_graph
    from federation.core.model import FederationError

    ser = DeriveRequest(data=request.data)
    ser.is_valid(raise_exception=True)
    d = ser.validated_data
    try:
        app = application_from_text(d["manifests"], d["entry"], name=d["name"])
    except FederationError as err:
        return Response({"manifests": [str(err)]}, status=400)
    return Response(derived_graph(app))


#: A YAML stream (several documents), described as the list of its documents.
_KARMADA_STREAM = {"type": "array", "items": {"type": "object"}, "description": (
    "Multi-document YAML: the ServiceExport templates (multicluster.x-k8s.io) of the services called "
    "across clusters, then the PropagationPolicies (policy.karmada.io/v1alpha1); each item is one document.")}


@extend_schema(responses={(200, "application/yaml"): _KARMADA_STREAM},
               parameters=[OpenApiParameter("id", int, OpenApiParameter.PATH, description="the plan experiment's id")])
@api_view(["GET"])
@permission_classes([IsAuthenticated])
def karmada_yaml(request, pk: str):
    """The PropagationPolicy YAML of a succeeded federation-plan experiment (owner or staff).
    A malformed or unknown id is a JSON 404 (DRF ``NotFound``), not Django's HTML page."""
    if not (pk.isascii() and pk.isdigit()):
        raise NotFound(f"no federation plan with id {pk!r}")
    qs = Experiment.objects.filter(kind="federation-plan", state=State.SUCCEEDED)
    if not request.user.is_staff:
        qs = qs.filter(owner=request.user)
    exp = qs.filter(pk=int(pk)).first()
    if exp is None:
        raise NotFound(f"no succeeded federation plan with id {pk} that you may see")
    return HttpResponse(exp.result["karmada_yaml"], content_type="application/yaml")


urlpatterns = [
    path("applications/", applications, name="federation-applications"),
    path("applications/derive/", derive_application, name="federation-derive"),
    path("plans/<str:pk>/karmada/", karmada_yaml, name="federation-karmada"),
]
