"""Parquet types for answers: one typed struct field per question, derived from its JSON Schema.

`integer` → Int64, `number` → Float64, `boolean` → Boolean, `string` → String; `enum`/`const`
take the type their values share; objects with `properties` become structs, arrays with one
`items` schema become lists; a type list with `null`, or a `null` branch beside one other,
stays nullable; bare local `$ref`s (how Pydantic writes enums and nested models) are followed.
Anything whose values do not share one parquet type (mixed unions, tuples, models that contain
themselves, free objects) is stored as its compact JSON text in a String field; `answers_json`
always holds every value exactly.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from decide.schemas.nullable import ANNOTATIONS, deref, only_null
from decide.schemas.shapes import looks_like_pydantic_decimal


@dataclass(frozen=True)
class Field:
    """How one value is stored: a scalar dtype, JSON text, a struct or a list of fields."""

    kind: str  # "scalar" | "json" | "struct" | "list"
    dtype: pl.DataType
    children: tuple[tuple[str, Field], ...] = ()  # struct fields, or the one list item

    def cell(self, value: Any) -> Any:
        """A decoded JSON value shaped for this field."""
        if value is None:
            return None
        if self.kind == "json":
            return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        if self.kind == "struct":
            return {name: child.cell(value.get(name)) for name, child in self.children}
        if self.kind == "list":
            item = self.children[0][1]
            return [item.cell(v) for v in value]
        if self.dtype == pl.Float64:
            return float(value)
        return value

    def overflow(self, value: Any) -> str | None:
        """Why `value` cannot be stored in this field (an integer beyond 64 bits, which polars
        would turn into null silently), or None when it can."""
        if value is None or self.kind == "json":
            return None
        if self.kind == "struct" and isinstance(value, dict):
            inner = (c.overflow(value.get(n)) for n, c in self.children)
            return next((why for why in inner if why), None)
        if self.kind == "list" and isinstance(value, list):
            inner = (self.children[0][1].overflow(v) for v in value)
            return next((why for why in inner if why), None)
        wide = isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX
        if self.dtype == pl.Int64 and wide:
            return f"{value} does not fit a 64-bit integer column (a string schema keeps it)"
        return None


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


JSON = Field("json", pl.String)
FLOAT = Field("scalar", pl.Float64)
INT = Field("scalar", pl.Int64)


def _scalar(kinds: set[str]) -> Field | None:
    kinds = kinds - {"null"}
    if kinds == {"integer"}:
        return INT
    if kinds and kinds <= {"integer", "number"}:
        return FLOAT
    if kinds == {"boolean"}:
        return Field("scalar", pl.Boolean)
    if kinds == {"string"}:
        return Field("scalar", pl.String)
    return None


def _kind_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "composite"


def answer_field(schema: Any, root: Any = None, expanding: frozenset[str] = frozenset()) -> Field:
    """How values of `schema` are stored (JSON text when they share no parquet type). Bare local
    references (`{"$ref": "#/$defs/Severity"}`, Pydantic's enums and models) are followed in
    `root` (default: `schema`); a model that contains itself is JSON text."""
    root = schema if root is None else root
    followed = deref(schema, root)
    if followed is not schema:
        ref = _reference(schema)
        if ref in expanding:
            return JSON
        expanding, schema = expanding | {ref}, followed
    if not isinstance(schema, dict):
        return JSON

    def field(sub: Any) -> Field:
        return answer_field(sub, root, expanding)

    parts = _conjuncts(schema)
    if parts is not None:
        # `allOf: [{type: integer}, {minimum: 0}]`, or a reference with keywords beside it: a
        # value satisfies every part, so its type is what the parts that constrain it agree on
        fields = {field(p) for p in parts if _constrains_type(p)}
        if len(fields) > 1 and fields <= {FLOAT, INT}:
            return INT  # an integer is a number; a number that is an integer is an integer
        return fields.pop() if len(fields) == 1 else JSON

    if "const" in schema:
        return _scalar({_kind_of(schema["const"])}) or JSON
    if isinstance(schema.get("enum"), list):
        return _scalar({_kind_of(v) for v in schema["enum"]}) or JSON
    for key in ("anyOf", "oneOf"):
        if key in schema:
            # A null branch adds no type: every field is nullable (`anyOf: [X, {type: null}]`).
            # Pydantic's `Decimal` string branch is never generated (its pattern's lookarounds
            # are refused, the branch left out), so a Decimal is a number.
            fields = {field(b) for b in schema[key] if not only_null(b) and not _decimal_string(b)}
            return fields.pop() if len(fields) == 1 else JSON
    kind = schema.get("type")
    kinds = set(kind) if isinstance(kind, list) else {kind} if isinstance(kind, str) else set()
    if kinds - {"null"} == {"object"}:
        # Keys beyond `properties` and `required` are never generated (schemas/shapes.py), so
        # declared properties make a struct whether or not `additionalProperties: false` says so
        # (Pydantic does not write it).
        props = schema.get("properties")
        if not isinstance(props, dict) or not props:
            return JSON
        named = dict(props)
        for key in schema.get("required", ()) if isinstance(schema.get("required"), list) else ():
            named.setdefault(key, {})
        children = tuple((name, field(sub)) for name, sub in named.items())
        return Field("struct", pl.Struct({n: f.dtype for n, f in children}), children)
    if kinds - {"null"} == {"array"}:
        items = schema.get("items")
        if "prefixItems" in schema or not isinstance(items, dict):
            return JSON
        item = field(items)
        return Field("list", pl.List(item.dtype), (("item", item),))
    return _scalar(kinds) or JSON


def _decimal_string(schema: Any) -> bool:
    return (
        isinstance(schema, dict)
        and schema.get("type") == "string"
        and (looks_like_pydantic_decimal(schema))
    )


TYPE_KEYWORDS = ("type", "const", "enum", "anyOf", "oneOf", "allOf", "$ref", "properties", "items")


def _constrains_type(schema: Any) -> bool:
    return not isinstance(schema, dict) or any(k in schema for k in TYPE_KEYWORDS)


def _conjuncts(schema: dict[str, Any]) -> list[Any] | None:
    """The schemas a value of `schema` must all satisfy, when it has an `allOf` or a `$ref` with
    other keywords beside it (what `deref` does not follow); None otherwise."""
    all_of = schema.get("allOf")
    has_ref = isinstance(schema.get("$ref"), str)
    if not isinstance(all_of, list) and (not has_ref or set(schema) - ANNOTATIONS == {"$ref"}):
        return None  # nothing to combine (a bare reference `deref` could not follow stays)
    rest = {k: v for k, v in schema.items() if k not in ("allOf", "$ref")}
    parts: list[Any] = [rest] + (list(all_of) if isinstance(all_of, list) else [])
    if has_ref:
        parts.append({"$ref": schema["$ref"]})
    return parts


def _reference(schema: dict[str, Any]) -> str:
    """What a bare reference (or an `allOf` of one) names, to notice a model inside itself."""
    while isinstance(schema.get("allOf"), list) and len(schema["allOf"]) == 1:
        if not isinstance(schema["allOf"][0], dict):
            break
        schema = schema["allOf"][0]
    return str(schema.get("$ref", json.dumps(schema, sort_keys=True)))


def answer_fields(schemas: Mapping[str, list[Any]]) -> dict[str, Field]:
    """One field per question id. Per-row questions can give one id several schemas; integer and
    number ones share Float64, and when they disagree on any other type the id is stored as JSON
    text."""
    out = {}
    for qid, variants in schemas.items():
        fields = {answer_field(s) for s in variants}
        if len(fields) > 1 and fields <= {FLOAT, INT}:
            fields = {FLOAT}
        out[qid] = fields.pop() if len(fields) == 1 else JSON
    return out


def answers_dtype(fields: Mapping[str, Field]) -> pl.Struct:
    return pl.Struct({qid: f.dtype for qid, f in fields.items()})
