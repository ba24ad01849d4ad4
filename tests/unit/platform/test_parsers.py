"""webapp.parsers: nesting depth counted outside strings; unstorable values found at any depth."""
import json

import pytest

from webapp.parsers import MAX_DEPTH, max_depth, unstorable


@pytest.mark.parametrize("text, depth", [
    ("{}", 1), ("[]", 1), ("1", 0), ('{"a": [1, {"b": []}]}', 4),
    ('{"a": "[[[[{{{{"}', 1),  # brackets inside a string do not count
    ('{"a": "\\"[[["}', 1),  # nor after an escaped quote
    ("[" * 70 + "]" * 70, 70),
])
def test_max_depth(text, depth):
    assert max_depth(text) == depth


def test_unstorable_paths():
    assert unstorable({"a": [1, {"b": "ok"}]}) == ""
    assert unstorable({"a": [1, {"b": "x\x00"}]}) == "a[1].b: contains a NUL character"
    assert unstorable({"k\x00": 1}).endswith("a key contains a NUL character or a lone surrogate")
    assert unstorable(json.loads('["\\udc00"]')) == "[0]: contains a lone UTF-16 surrogate"
    assert unstorable({"seed": 2**63}) == "seed: integer out of the 64-bit range"
    assert unstorable({"seed": -(2**63)}) == ""
    assert unstorable(True) == "" and unstorable(1.5) == ""
    # iterative: a structure deeper than Python's recursion limit is walked without RecursionError
    deep: list = []
    cur = deep
    for _ in range(5000):
        cur.append([])
        cur = cur[0]
    cur.append("\x00")
    assert "NUL" in unstorable(deep)
    assert MAX_DEPTH == 64
