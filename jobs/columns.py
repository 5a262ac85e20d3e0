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

from decide.schemas.nullable import deref, only_null


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


JSON = Field("json", pl.String)


def _scalar(kinds: set[str]) -> Field | None:
    kinds = kinds - {"null"}
    if kinds == {"integer"}:
        return Field("scalar", pl.Int64)
    if kinds and kinds <= {"integer", "number"}:
        return Field("scalar", pl.Float64)
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

    if "const" in schema:
        return _scalar({_kind_of(schema["const"])}) or JSON
    if isinstance(schema.get("enum"), list):
        return _scalar({_kind_of(v) for v in schema["enum"]}) or JSON
    for key in ("anyOf", "oneOf"):
        if key in schema:
            # a null branch adds no type: every field is nullable (`anyOf: [X, {type: null}]`)
            fields = {field(b) for b in schema[key] if not only_null(b)}
            return fields.pop() if len(fields) == 1 else JSON
    kind = schema.get("type")
    kinds = set(kind) if isinstance(kind, list) else {kind} if isinstance(kind, str) else set()
    if kinds - {"null"} == {"object"}:
        props = schema.get("properties")
        if (
            not isinstance(props, dict)
            or not props
            or schema.get("additionalProperties") is not False
        ):
            return JSON
        children = tuple((name, field(sub)) for name, sub in props.items())
        return Field("struct", pl.Struct({n: f.dtype for n, f in children}), children)
    if kinds - {"null"} == {"array"}:
        items = schema.get("items")
        if "prefixItems" in schema or not isinstance(items, dict):
            return JSON
        item = field(items)
        return Field("list", pl.List(item.dtype), (("item", item),))
    return _scalar(kinds) or JSON


def _reference(schema: dict[str, Any]) -> str:
    """What a bare reference (or an `allOf` of one) names, to notice a model inside itself."""
    while isinstance(schema.get("allOf"), list) and len(schema["allOf"]) == 1:
        if not isinstance(schema["allOf"][0], dict):
            break
        schema = schema["allOf"][0]
    return str(schema.get("$ref", json.dumps(schema, sort_keys=True)))


FLOAT = Field("scalar", pl.Float64)


def answer_fields(schemas: Mapping[str, list[Any]]) -> dict[str, Field]:
    """One field per question id. Per-row questions can give one id several schemas; integer and
    number ones share Float64, and when they disagree on any other type the id is stored as JSON
    text."""
    out = {}
    for qid, variants in schemas.items():
        fields = {answer_field(s) for s in variants}
        if len(fields) > 1 and fields <= {FLOAT, Field("scalar", pl.Int64)}:
            fields = {FLOAT}
        out[qid] = fields.pop() if len(fields) == 1 else JSON
    return out


def answers_dtype(fields: Mapping[str, Field]) -> pl.Struct:
    return pl.Struct({qid: f.dtype for qid, f in fields.items()})
