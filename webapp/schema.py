"""OpenAPI schema generation: drf-spectacular's ``AutoSchema`` plus the error answers every
operation really gives (``REST_FRAMEWORK["DEFAULT_SCHEMA_CLASS"]``).

drf-spectacular documents only the success response of an operation. :class:`TandemAutoSchema`
adds, per operation, the 4xx answers the API gives, each as a reusable response component
(``#/components/responses/...``) with the body DRF actually sends:

======  ======================  ==============================================================
code    when                    added to
======  ======================  ==============================================================
400     validation failed       operations with a request body, query parameters, or a filtered
        (:data:`VALIDATION`)    queryset (``?ordering=`` and filters also apply to ``{id}``)
401     no, bad or expired      every operation (an ``Authorization`` header is checked even
        token                   where anonymous access is allowed)
403     not allowed             unsafe methods (staff-only writes; a session without CSRF token)
404     no such object          paths with a parameter; paginated lists (``?page=`` past the end)
413     body over the limit     operations that accept a JSON body (``TANDEM_MAX_JSON_KIB``)
415     unsupported body type   operations with a request body
429     throttled               operations whose view has a throttle (``Retry-After`` header)
======  ======================  ==============================================================

A code the view already documents (``extend_schema(responses=...)``) is left as it is. A 405
belongs to no operation: it answers the methods a path does not document.

Every query parameter is marked ``allowEmptyValue``: the API treats ``?state=`` as no filter
(django-filter, DRF's ``?page=``); a query parameter given twice is a 400
(:class:`webapp.filters.SingleValuedQueryParams`).
"""
from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import ResolvedComponent, build_object_type
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import serializers
from rest_framework.generics import GenericAPIView


class ErrorSerializer(serializers.Serializer):
    """Body of every error but a validation error: DRF's ``{"detail": "..."}``."""

    detail = serializers.CharField(help_text="what went wrong, in words")


#: Body of a 400: DRF's per-field errors (``serializer.errors``), or ``{"detail": ...}`` when the
#: body could not be parsed.
VALIDATION = build_object_type(
    additionalProperties={"oneOf": [
        {"type": "array", "items": {}},
        {"type": "object"},
        {"type": "string"},
    ]},
    description=(
        "Validation errors, one key per offending field (request body field, query parameter or "
        "header, e.g. `Idempotency-Key`; `non_field_errors` for the object as a whole; `detail` "
        "for a body that cannot be parsed), each a list of messages, or an object of the same "
        "shape for a nested field (an experiment's `parameters`). Nothing was stored."),
    example={"batch_size": ["Ensure this value is greater than or equal to 1."]},
)

#: ``code -> (component name, description, body schema component, headers)``.
ERROR_RESPONSES: dict[str, tuple[str, str, str, dict[str, Any]]] = {
    "400": ("ValidationFailed", "Invalid input; the body names each offending field. Nothing was changed.",
            "ValidationError", {}),
    "401": ("Unauthenticated", "No credentials, or a token that is unknown, revoked or expired.", "Error",
            {"WWW-Authenticate": {"schema": {"type": "string"}, "description": "`Token`"}}),
    "403": ("Forbidden", "Authenticated but not allowed: a write that needs staff, or a session request "
            "without its CSRF token.", "Error", {}),
    "404": ("NotFound", "No such object that you may see (someone else's object is a 404 too), or a page "
            "past the end of a list.", "Error", {}),
    "413": ("PayloadTooLarge", "The JSON body is over `TANDEM_MAX_JSON_KIB` KiB; it was not read.", "Error", {}),
    "415": ("UnsupportedMediaType", "The request body's Content-Type is not one this operation accepts.",
            "Error", {}),
    "429": ("Throttled", "Too many requests (sign-in attempts per address, submissions per user).", "Error",
            {"Retry-After": {"schema": {"type": "integer"}, "description": "seconds until a retry may succeed"}}),
}

_UNSAFE = {"POST", "PUT", "PATCH", "DELETE"}


class TandemAutoSchema(AutoSchema):
    """``AutoSchema`` that adds the error responses of the module docstring's table."""

    def get_operation(self, path, path_regex, path_prefix, method, registry):
        operation = super().get_operation(path, path_regex, path_prefix, method, registry)
        if operation is None:
            return None
        for param in operation.get("parameters") or []:
            if param.get("in") == "query":
                # every query parameter of this API treats an empty value as absent (django-filter,
                # DRF's ?page= and ?ordering=, the engines' own filters)
                param["allowEmptyValue"] = True
        responses = operation.setdefault("responses", {})
        for code in self._error_codes(operation):
            if code not in responses:
                responses[code] = self._error_response(code)
        operation["responses"] = dict(sorted(responses.items()))
        return operation

    def _error_codes(self, operation: dict[str, Any]) -> list[str]:
        body = operation.get("requestBody")
        params = operation.get("parameters") or []
        filtered = isinstance(self.view, GenericAPIView) and bool(getattr(self.view, "filter_backends", None))
        codes = ["401"]
        if body or filtered or any(p.get("in") == "query" for p in params):
            codes.append("400")
        if self.method in _UNSAFE:
            codes.append("403")
        if any(p.get("in") == "path" for p in params) or self._is_paginated_list():
            codes.append("404")
        if body:
            codes.append("415")
            if "application/json" in body.get("content", {}):
                codes.append("413")
        if self.view.get_throttles():
            codes.append("429")
        return codes

    def _is_paginated_list(self) -> bool:
        return self.method == "GET" and self._is_list_view() and self._get_paginator() is not None

    def _error_response(self, code: str) -> dict[str, Any]:
        name, description, body, headers = ERROR_RESPONSES[code]
        if body == "Error":
            ref = self.resolve_serializer(ErrorSerializer, "response").ref
        else:
            schema = ResolvedComponent(name=body, type=ResolvedComponent.SCHEMA, object=body, schema=VALIDATION)
            self.registry.register_on_missing(schema)
            ref = schema.ref
        response: dict[str, Any] = {"description": description, "content": {"application/json": {"schema": ref}}}
        if headers:
            response["headers"] = headers
        component = ResolvedComponent(name=name, type=ResolvedComponent.RESPONSE, object=name, schema=response)
        self.registry.register_on_missing(component)
        return component.ref


#: For ``extend_schema(parameters=...)`` of submissions (jobs, experiments): :class:`webapp.api.IdempotentCreate`.
IDEMPOTENCY_KEY = OpenApiParameter(
    "Idempotency-Key", {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[\\x20-\\x7e]+$"},
    OpenApiParameter.HEADER, required=False,
    description="1 to 255 printable ASCII characters. A retry with the same key and body gets the first "
                "answer again (header `Idempotent-Replayed: true`) and stores nothing; the same key with "
                "another body is a 422.")


def submission_responses(created) -> dict[int, Any]:
    """``extend_schema(responses=...)`` of a submission whose 201 body is ``created``: the 422 of
    a reused ``Idempotency-Key`` and the 503 of a write past ``TANDEM_WRITE_DEADLINE_S``."""
    return {
        201: created,
        422: OpenApiResponse(ErrorSerializer, description="This Idempotency-Key was used for a different request."),
        503: OpenApiResponse(ErrorSerializer, description="The submission would have committed later than "
                             "`TANDEM_WRITE_DEADLINE_S` seconds after it arrived; nothing was stored: retry it "
                             "with the same Idempotency-Key."),
    }


def conflict_response(ok) -> dict[int, Any]:
    """``extend_schema(responses=...)`` of a cancellation: ``ok`` or 409 when already finished."""
    return {200: ok, 409: OpenApiResponse(ErrorSerializer, description="It already finished; nothing was changed.")}
