"""Platform REST API, mounted at ``/api/v1/`` by :mod:`webapp.urls`.

Permissions:

* clusters, nodes, GPUs: any authenticated user reads; only staff create, change, delete;
* jobs and experiments: a user sees and changes only their own, staff see and change all;
  jobs and experiments are never edited in place: they are submitted, then cancelled;
* anonymous requests are refused (401 with a ``WWW-Authenticate: Token`` challenge).

Authentication: ``Authorization: Token <key>`` (get a key with ``POST /api/v1/auth/token/``
and a username + password, or ``manage.py drf_create_token <username>``), or the browser
session. Tokens expire, rotate and are revoked by their owner (:mod:`webapp.auth`).
"""
from __future__ import annotations

import hashlib
import json
import time

from django.urls import path
from django_filters import rest_framework as filters
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, permissions, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.response import Response
from rest_framework.routers import DefaultRouter

from . import selectors, services
from .auth import SubmitThrottle, TokenRotateView, TokenView
from .experiments import UnknownExperimentKind
from .jobs import JobRejected
from .models import Cluster, Experiment, GPUDevice, Job, Node
from .schema import IDEMPOTENCY_KEY, conflict_response, submission_responses
from .serializers import (
    ClusterSerializer,
    ExperimentResultSerializer,
    ExperimentSerializer,
    GPUDeviceSerializer,
    JobSerializer,
    NodeSerializer,
)
from .states import IllegalTransition


class IsStaffOrReadOnly(permissions.BasePermission):
    """Authenticated users read; staff write."""

    def has_permission(self, request, view) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        return request.method in permissions.SAFE_METHODS or request.user.is_staff


class ClusterViewSet(viewsets.ModelViewSet):
    """Registered clusters. Read: any user; write: staff."""

    queryset = Cluster.objects.all()
    serializer_class = ClusterSerializer
    permission_classes = [IsStaffOrReadOnly]
    filterset_fields = ["kind", "region"]


class NodeViewSet(viewsets.ModelViewSet):
    """Nodes of clusters (CPU cores, memory MiB, labels, taints). Read: any user; write: staff."""

    queryset = Node.objects.select_related("cluster")
    serializer_class = NodeSerializer
    permission_classes = [IsStaffOrReadOnly]
    filterset_fields = ["cluster"]


class GPUDeviceViewSet(viewsets.ModelViewSet):
    """GPU devices of nodes (model, memory MiB, index, UUID). Read: any user; write: staff."""

    queryset = GPUDevice.objects.select_related("node")
    serializer_class = GPUDeviceSerializer
    permission_classes = [IsStaffOrReadOnly]
    filterset_fields = ["node", "model", "node__cluster"]


class JobFilter(filters.FilterSet):
    model = filters.CharFilter(field_name="model_name")

    class Meta:
        model = Job
        fields = ["state", "model_name", "cluster"]


def _kind_choices() -> list[tuple[str, str]]:
    from .experiments import registered_kinds

    return [(k, k) for k in registered_kinds()]


class ExperimentFilter(filters.FilterSet):
    """``?state=`` and ``?kind=``; a kind that no engine registered is a 400, like a bad state."""

    kind = filters.ChoiceFilter(choices=_kind_choices)

    class Meta:
        model = Experiment
        fields = ["state", "kind"]


def _rejected_as_400(err: Exception, field: str) -> ValidationError:
    return ValidationError({field: [str(err)]})


class SubmitThrottled:
    """Viewset mixin: ``create`` is throttled per user (scope ``submit``, :mod:`webapp.auth`)."""

    def get_throttles(self):
        return [SubmitThrottle()] if getattr(self, "action", None) == "create" else super().get_throttles()


class SubmissionTooSlow(APIException):
    status_code = 503
    default_detail = "the submission took too long and was not stored; retry it (with the same Idempotency-Key)"
    default_code = "write_deadline"


class IdempotentCreate:
    """Viewset mixin for submissions (``create``):

    - with an ``Idempotency-Key`` header (1-255 printable ASCII characters), the first request's
      response is stored with the new row in one transaction; a retry with the same key and the
      same body gets that response again (header ``Idempotent-Replayed: true``) and creates
      nothing; the same key with another body or path is a 422. Two concurrent requests with one
      key: the unique constraint makes the second roll back and replay the first.
    - whatever the header, the transaction is rolled back with a 503 when it would commit more
      than ``WRITE_DEADLINE_S`` seconds after the request arrived, so a client that gave up
      never finds its submission committed later (and retries with the same key safely).
    """

    def create(self, request, *args, **kwargs):
        from django.conf import settings
        from django.db import IntegrityError, transaction

        from .models import IdempotencyKey

        started = time.monotonic()
        key = request.headers.get("Idempotency-Key")
        if key is not None and not (0 < len(key) <= 255 and key.isascii() and key.isprintable()):
            raise ValidationError({"Idempotency-Key": "1 to 255 printable ASCII characters"})
        digest = hashlib.sha256(json.dumps(request.data, sort_keys=True, default=str).encode()).hexdigest()

        def replay():
            done = IdempotencyKey.objects.filter(owner=request.user, key=key).first()
            if done is None:
                return None
            if done.path != request.path or done.body_sha256 != digest:
                return Response({"detail": "this Idempotency-Key was used for a different request"},
                                status=status.HTTP_422_UNPROCESSABLE_ENTITY)
            return Response(done.response, status=done.status, headers={"Idempotent-Replayed": "true"})

        if key is not None and (earlier := replay()) is not None:
            return earlier
        try:
            with transaction.atomic():
                response = super().create(request, *args, **kwargs)
                if key is not None:
                    IdempotencyKey.objects.create(owner=request.user, key=key, path=request.path, body_sha256=digest,
                                                  status=response.status_code, response=response.data)
                if time.monotonic() - started > settings.WRITE_DEADLINE_S:
                    raise SubmissionTooSlow()
        except IntegrityError:
            if key is not None and (earlier := replay()) is not None:  # a concurrent twin won
                return earlier
            raise
        return response


@extend_schema_view(create=extend_schema(parameters=[IDEMPOTENCY_KEY], responses=submission_responses(JobSerializer)))
class JobViewSet(IdempotentCreate, SubmitThrottled, mixins.CreateModelMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Training jobs: submit (``POST``), list (filters ``state``, ``model``/``model_name``,
    ``cluster``; ``?page=``), retrieve, and ``POST {id}/cancel/``. Own jobs only (staff: all)."""

    serializer_class = JobSerializer
    filterset_class = JobFilter
    ordering_fields = ["created_at", "id", "state"]

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation
            return Job.objects.none()
        return selectors.job_list(user=self.request.user)

    def perform_create(self, serializer):
        data = serializer.validated_data
        try:
            serializer.instance = services.job_submit(
                owner=self.request.user, model_name=data["model_name"], batch_size=data["batch_size"],
                num_gpus=data.get("num_gpus", 1), steps=data.get("steps", 100), name=data.get("name", ""),
                cluster=data.get("cluster"),
            )
        except JobRejected as err:
            raise _rejected_as_400(err, err.field) from err
        # placement runs later, in a control worker (services.job_schedule_soon): the new job holds
        # no GPU, and the 201 need not ask the database so
        # (a queryset already evaluated, as prefetch_related leaves it: iterating even ``.none()``
        # compiles its SQL, a seventh of a submission's time)
        held = serializer.instance.gpus.none()
        held._result_cache, held._prefetch_done = [], True
        serializer.instance._prefetched_objects_cache = {"gpus": held}

    @extend_schema(request=None, responses=conflict_response(JobSerializer))
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        """Cancel the job (409 if it already finished)."""
        job = self.get_object()
        try:
            job = services.job_cancel(job=job)
        except IllegalTransition as err:
            return Response({"detail": str(err)}, status=status.HTTP_409_CONFLICT)
        return Response(JobSerializer(job).data)


@extend_schema_view(create=extend_schema(parameters=[IDEMPOTENCY_KEY], responses=submission_responses(ExperimentSerializer)))
class ExperimentViewSet(
    IdempotentCreate,
    SubmitThrottled,
    mixins.CreateModelMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    """Experiments of any registered kind: create (``kind`` + ``parameters`` validated by the
    kind's serializer), list (filters ``state``, ``kind``), retrieve with progress,
    ``POST {id}/cancel/`` and ``GET {id}/result/``. Own experiments only (staff: all)."""

    serializer_class = ExperimentSerializer
    filterset_class = ExperimentFilter
    ordering_fields = ["created_at", "id", "state"]

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation
            return Experiment.objects.none()
        return selectors.experiment_list(user=self.request.user)

    def perform_create(self, serializer):
        data = serializer.validated_data
        try:
            serializer.instance = services.experiment_create(
                owner=self.request.user, kind=data["kind"], parameters=data.get("parameters") or {},
                name=data.get("name", ""),
            )
        except UnknownExperimentKind as err:
            raise _rejected_as_400(err, "kind") from err
        except serializers.ValidationError as err:
            raise ValidationError({"parameters": err.detail}) from err

    @extend_schema(request=None, responses=conflict_response(ExperimentSerializer))
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        """Cancel at once if queued, at the next progress report if running (409 if finished)."""
        exp = self.get_object()
        try:
            exp = services.experiment_cancel(experiment=exp)
        except IllegalTransition as err:
            return Response({"detail": str(err)}, status=status.HTTP_409_CONFLICT)
        return Response(ExperimentSerializer(exp).data)

    @extend_schema(responses=ExperimentResultSerializer)
    @action(detail=True, methods=["get"])
    def result(self, request, pk=None):
        """The result summary (empty until it succeeded) and the error, if any."""
        return Response(ExperimentResultSerializer(self.get_object()).data)


router = DefaultRouter()
router.register("clusters", ClusterViewSet, basename="cluster")
router.register("nodes", NodeViewSet, basename="node")
router.register("gpus", GPUDeviceViewSet, basename="gpu")
router.register("jobs", JobViewSet, basename="job")
router.register("experiments", ExperimentViewSet, basename="experiment")

urlpatterns = [
    path("auth/token/", TokenView.as_view(), name="api-token"),
    path("auth/token/rotate/", TokenRotateView.as_view(), name="api-token-rotate"),
    *router.urls,
]
