"""Request-body limits applied before anything is parsed or stored.

``SafeJSONParser`` (the API's JSON parser) refuses, with HTTP 400/413 and before any view runs:

- a body over ``TANDEM_MAX_JSON_KIB`` KiB (default 2048), read with a bound so an oversized body
  is never held whole (413);
- nesting deeper than :data:`MAX_DEPTH` levels, counted by a scan of the raw text outside string
  literals (Python's ``json`` raises ``RecursionError`` near 1,000 levels: a 500 before);
- text PostgreSQL cannot store: a NUL character (``\\u0000``) or a lone UTF-16 surrogate in any
  key or string (PostgreSQL ``text``/``jsonb`` refuse both: ``DataError``, a 500 before);
- an integer beyond the signed 64-bit range, or ``NaN``/``Infinity`` (not JSON; every engine
  works in 64-bit integers and finite floats). Engines bound their own parameters more tightly.
"""
from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

#: Deepest nesting of arrays/objects accepted in a request body.
MAX_DEPTH = 64
INT64_MAX = 2**63 - 1


class PayloadTooLarge(ParseError):
    status_code = 413
    default_detail = "request body too large"
    default_code = "payload_too_large"


def max_depth(text: str) -> int:
    """Deepest ``[``/``{`` nesting of JSON ``text``, ignoring brackets inside string literals."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def unstorable(value: Any, path: str = "") -> str:
    """The path of the first key or string holding a NUL or a lone surrogate, or of an integer
    outside 64 bits ("" when none). Iterative, so it is safe on any depth :func:`max_depth` let through."""
    stack = [(value, path)]
    while stack:
        v, p = stack.pop()
        if isinstance(v, str):
            if "\x00" in v:
                return f"{p or 'body'}: contains a NUL character"
            if any("\ud800" <= c <= "\udfff" for c in v):
                return f"{p or 'body'}: contains a lone UTF-16 surrogate"
        elif isinstance(v, bool) or v is None or isinstance(v, float):
            continue
        elif isinstance(v, int):
            if not -INT64_MAX - 1 <= v <= INT64_MAX:
                return f"{p or 'body'}: integer out of the 64-bit range"
        elif isinstance(v, dict):
            for k, item in v.items():
                if "\x00" in k or any("\ud800" <= c <= "\udfff" for c in k):
                    return f"{p or 'body'}: a key contains a NUL character or a lone surrogate"
                stack.append((item, f"{p}.{k}" if p else k))
        elif isinstance(v, list):
            stack.extend((item, f"{p}[{i}]") for i, item in enumerate(v))
    return ""


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


class SafeJSONParser(JSONParser):
    """DRF's JSON parser with the limits in the module docstring. Raises ``ParseError`` (400) or
    :class:`PayloadTooLarge` (413)."""

    def parse(self, stream, media_type=None, parser_context=None):
        limit = int(getattr(settings, "MAX_JSON_BYTES", 2 * 1024 * 1024))
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise PayloadTooLarge(f"request body over {limit // 1024} KiB")
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            text = raw.decode(encoding)
        except UnicodeDecodeError as err:
            raise ParseError(f"JSON parse error - body is not {encoding}: {err.reason}") from None
        if max_depth(text) > MAX_DEPTH:
            raise ParseError(f"JSON nested deeper than {MAX_DEPTH} levels")
        try:
            data = json.loads(text, parse_constant=_no_constant) if text.strip() else {}
        except ValueError as err:
            raise ParseError(f"JSON parse error - {err}") from None
        problem = unstorable(data)
        if problem:
            raise ParseError(problem)
        return data
