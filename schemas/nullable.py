"""What a question's non-null values are, however its schema spells them.

`{"type": ["integer", "null"]}` and `{"anyOf": [{"type": "integer"}, {"type": "null"}]}` admit
the same values; the second is what Pydantic writes for `Optional[int]` (with a `title` and a
`default` beside it), and Pydantic writes an enum or a nested model as a local reference,
`{"$ref": "#/$defs/Severity"}` (or `anyOf` of one and null), so most schemas users bring spell
things that way. The masks compile every spelling alike (`keywords.py`); the code that reads a
question's kind from its schema's `type` or `enum` (what an extract question copies, its output
column, its calibration kind, a derived answer's CEL type, rules over integer questions) reads
`value_schema` instead: the one non-null branch, references followed.
"""

from __future__ import annotations

from typing import Any

from .errors import pointed_at

MAX_HOPS = 16  # references followed in a row before giving up (a cycle of bare references)

# Keywords that do not constrain values: beside an `anyOf`/`oneOf` they leave it the whole schema.
ANNOTATIONS = frozenset(
    {"title", "description", "default", "examples", "$comment", "deprecated", "readOnly",
     "writeOnly", "$schema", "$id", "$anchor", "$defs", "definitions"}
)  # fmt: skip


def only_null(schema: Any) -> bool:
    """Whether `schema` admits null and nothing else, as written (`type: null`, `const: null`,
    `enum: [null]`)."""
    if not isinstance(schema, dict):
        return False
    if schema.get("type") in ("null", ["null"]):
        return True
    if "const" in schema and schema["const"] is None:
        return True
    values = schema.get("enum")
    return isinstance(values, list) and bool(values) and all(v is None for v in values)


def without_null(schema: Any) -> tuple[Any, bool]:
    """`(branch, True)` when `schema` is an `anyOf` or `oneOf` of exactly one branch besides
    branches that admit only null, with nothing beside it but annotations; else
    `(schema, False)`. The branch then says what the question's non-null answers are."""
    if not isinstance(schema, dict):
        return schema, False
    combinators = [key for key in ("anyOf", "oneOf") if key in schema]
    if len(combinators) != 1 or set(schema) - ANNOTATIONS - {combinators[0]}:
        return schema, False
    branches = schema[combinators[0]]
    if not isinstance(branches, list):
        return schema, False
    values = [branch for branch in branches if not only_null(branch)]
    if len(values) != 1 or len(values) == len(branches):
        return schema, False
    return values[0], True


def deref(schema: Any, root: Any) -> Any:
    """`schema`, or what it points to in `root` when it is a bare local reference (`$ref` to
    `#/…` with only annotations beside it) or an `allOf` of one schema (Pydantic 1's way of
    giving a reference a description), followed up to `MAX_HOPS` times; a reference that points
    nowhere is left as it is (the compiler refuses it with a pointer)."""
    for _ in range(MAX_HOPS):
        if not isinstance(schema, dict):
            return schema
        keys = set(schema) - ANNOTATIONS
        if keys == {"allOf"} and isinstance(schema["allOf"], list) and len(schema["allOf"]) == 1:
            schema = schema["allOf"][0]
            continue
        if keys != {"$ref"}:
            return schema
        ref = schema["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#/"):
            return schema
        try:
            schema = pointed_at(root, ref[1:])
        except LookupError:
            return schema
    return schema


def value_schema(schema: Any, root: Any = None) -> tuple[Any, bool]:
    """The schema of `schema`'s non-null values and whether a null branch was split off
    (`without_null`), bare local references followed in `root` (default: `schema`)."""
    root = schema if root is None else root
    branch, null = without_null(deref(schema, root))
    return deref(branch, root), null
