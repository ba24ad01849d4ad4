"""Where a parsed JSON value holds a non-finite number (webapp.jsonvalues.non_finite_path)."""
from __future__ import annotations

import json

import pytest

from webapp.jsonvalues import non_finite_path


@pytest.mark.parametrize("text,where", [
    ('{"a": 1, "b": [2, 3.5], "c": {"d": "x"}}', None),
    ("1e400", ""),
    ('{"options": {"energy_budget_j": 1e400}}', "options.energy_budget_j"),
    ('{"a": [1, 2, {"b": -1e999}]}', "a[2].b"),
    ('[0, NaN]', "[1]"),
    ('{"x": 1e308, "y": Infinity, "z": 1e400}', "y"),  # the first in document order; 1e308 is finite
])
def test_path_of_the_first_non_finite_number(text, where):
    assert non_finite_path(json.loads(text)) == where
