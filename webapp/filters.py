"""Query-string filters that refuse what they cannot apply (a 400 naming the parameter), the
way django-filter already refuses ``?state=bogus``: an ordering or kind the API does not know
never silently returns an unordered or empty list."""
from __future__ import annotations

from rest_framework.exceptions import ValidationError
from rest_framework.filters import BaseFilterBackend, OrderingFilter


def refuse_repeated_query_params(request) -> None:
    """Raise ``ValidationError`` (400 ``{"state": ["given 2 times; give it once"]}``) when a
    query parameter appears more than once. Django would silently use the last value, so
    ``?state=queued&state=running`` would look like an answer for both while filtering by one."""
    repeated = {k: len(v) for k, v in request.query_params.lists() if len(v) > 1}
    if repeated:
        raise ValidationError({k[:64]: [f"given {n} times; give it once"] for k, n in sorted(repeated.items())[:20]})


class SingleValuedQueryParams(BaseFilterBackend):
    """Filter backend applying :func:`refuse_repeated_query_params` to every generic view
    (lists and ``{id}`` alike, after authentication, so an anonymous request is still a 401)."""

    def filter_queryset(self, request, queryset, view):
        refuse_repeated_query_params(request)
        return queryset


class StrictOrderingFilter(OrderingFilter):
    """DRF's ``OrderingFilter`` (``?ordering=-created_at,id``) with unknown fields refused:
    400 ``{"ordering": ["unknown field 'x'; one of: ..."]}`` instead of being ignored."""

    def get_ordering(self, request, queryset, view):
        params = request.query_params.get(self.ordering_param)
        if params:
            fields = [p.strip() for p in params.split(",") if p.strip()]
            valid = {name for name, _ in self.get_valid_fields(queryset, view, {"request": request})}
            bad = [f for f in fields if f.lstrip("-") not in valid]
            if bad:
                raise ValidationError({self.ordering_param: [
                    f"unknown field {bad[0][:64]!r}; one of: {', '.join(sorted(valid))} (prefix - to reverse)"]})
        return super().get_ordering(request, queryset, view)
