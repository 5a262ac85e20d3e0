"""The "a value or null" idiom of JSON Schema, read alike in both its spellings.

`{"type": ["integer", "null"]}` and `{"anyOf": [{"type": "integer"}, {"type": "null"}]}` admit
the same values; the second is what Pydantic writes for `Optional[int]` (with a `title` and a
`default` beside it), so most schemas users bring spell it that way. The masks compile both
alike; the code that reads a question's kind from its schema's `type` (what an extract question
copies, its output column, its calibration kind, a derived answer's CEL type, rules over integer
questions) takes the one non-null branch of the second spelling with `without_null` first.
"""

from __future__ import annotations

from typing import Any

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
