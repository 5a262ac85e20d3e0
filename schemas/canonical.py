"""Canonical compact JSON: the one spelling of a value that slot languages contain.

No whitespace; object keys in one fixed order per schema (`key_rank`: first appearance of each
property name in the schema, keys the schema never names last and sorted); strings escaped exactly
as `json.dumps(ensure_ascii=False)` escapes them; integral numbers without fraction or exponent
(`1.0` → `1`, so an integral float keeps its exact value), other floats as the plain decimal of
their shortest `repr`. `canonical_json` is what enum/const literals are written as and what tests
compare against.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any


def canonical_json(value: Any, rank: dict[str, int]) -> str:
    """Compact JSON with keys in `rank` order (unknown keys last, sorted) and canonical numbers."""
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: (rank.get(k, len(rank)), k))
        inner = ",".join(
            json.dumps(k, ensure_ascii=False) + ":" + canonical_json(value[k], rank) for k in keys
        )
        return "{" + inner + "}"
    if isinstance(value, list):
        return "[" + ",".join(canonical_json(v, rank) for v in value) + "]"
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError("NaN and infinities are not JSON")
        if value.is_integer():
            return str(int(value))
        return format(Decimal(repr(value)), "f")
    return json.dumps(value, ensure_ascii=False)


def key_rank(schema: Any) -> dict[str, int]:
    """Property names of `schema` in order of first appearance."""
    out: dict[str, int] = {}
    _collect_keys(schema, out)
    return out


def _collect_keys(schema: Any, out: dict[str, int]) -> None:
    if isinstance(schema, dict):
        for kw, sub in schema.items():
            if kw == "properties" and isinstance(sub, dict):
                for k in sub:
                    out.setdefault(k, len(out))
            if kw == "required" and isinstance(sub, list):
                for k in sub:
                    if isinstance(k, str):
                        out.setdefault(k, len(out))
            if kw in ("enum", "const"):
                _collect_value_keys(sub, out)
            else:
                _collect_keys(sub, out)
    elif isinstance(schema, list):
        for sub in schema:
            _collect_keys(sub, out)


def _collect_value_keys(value: Any, out: dict[str, int]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            out.setdefault(k, len(out))
            _collect_value_keys(v, out)
    elif isinstance(value, list):
        for v in value:
            _collect_value_keys(v, out)
