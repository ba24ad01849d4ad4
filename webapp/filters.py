"""Query-string filters that refuse what they cannot apply (a 400 naming the parameter), the
way django-filter already refuses ``?state=bogus``: an ordering or kind the API does not know
never silently returns an unordered or empty list."""
from __future__ import annotations

from rest_framework.exceptions import ValidationError
from rest_framework.filters import OrderingFilter


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
