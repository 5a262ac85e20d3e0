"""A cycle of `$ref`s that comes back to a schema for the same value (through `$ref`, `allOf`,
`anyOf`, `not`, … but never into a property or an item) never reaches a value to constrain, and
`jsonschema` recurses on it forever when it checks an answer: the compiler refuses it, naming the
`$ref` that closes it. A cycle through `properties` / `items` (a tree) stays supported."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from decide.schemas import UnsupportedSchema, check_questions, compile_language

DRAFT07 = "http://json-schema.org/draft-07/schema#"

LOOPS: list[tuple[str, dict[str, Any], str]] = [
    ("root", {"$ref": "#"}, "/$ref"),
    ("allof", {"allOf": [{"$ref": "#"}]}, "/allOf/0/$ref"),
    ("typed", {"type": "string", "maxLength": 5, "allOf": [{"$ref": "#"}]}, "/allOf/0/$ref"),
    (
        "defs",
        {"$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}}, "$ref": "#/$defs/A"},
        "/$defs/B/$ref",
    ),
    ("not", {"anyOf": [{"type": "string"}, {"not": {"$ref": "#"}}]}, "/anyOf/1/not/$ref"),
    ("anchor", {"$anchor": "me", "oneOf": [{"$ref": "#me"}, {"type": "null"}]}, "/oneOf/0/$ref"),
    (
        "under a property",
        {
            "properties": {"x": {"$ref": "#/$defs/A"}},
            "$defs": {"A": {"allOf": [{"$ref": "#/$defs/A"}]}},
        },
        "/$defs/A/allOf/0/$ref",
    ),
    (
        "draft-07",
        {
            "$schema": DRAFT07,
            "definitions": {"A": {"allOf": [{"$ref": "#/definitions/A"}]}},
            "properties": {"x": {"$ref": "#/definitions/A"}},
        },
        "/definitions/A/allOf/0/$ref",
    ),
]


@pytest.mark.parametrize("name,schema,pointer", LOOPS, ids=[n for n, _, _ in LOOPS])
def test_a_reference_cycle_in_place_is_refused(name: str, schema: Any, pointer: str) -> None:
    with pytest.raises(UnsupportedSchema) as exc:
        compile_language(schema)
    assert exc.value.pointer == pointer and exc.value.keyword == "$ref"
    assert "cycle of references" in exc.value.message
    (report,) = check_questions([("q", schema)])
    assert not report.supported and report.pointer == pointer and report.keyword == "$ref"


def test_what_the_refused_schemas_do_to_a_validator() -> None:
    """Why they are refused: checking any answer against them never ends."""
    for _, schema, _ in LOOPS[:4]:
        with pytest.raises(RecursionError):
            jsonschema.Draft202012Validator(schema).is_valid("x")


TREES: list[dict[str, Any]] = [
    {
        "type": "object",
        "properties": {"kids": {"type": "array", "maxItems": 1, "items": {"$ref": "#"}}},
        "additionalProperties": False,
    },
    {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {"next": {"$ref": "#/$defs/node"}},
                "additionalProperties": False,
            }
        },
        "$ref": "#/$defs/node",
    },
    {"anyOf": [{"type": "null"}, {"type": "array", "maxItems": 2, "prefixItems": [{"$ref": "#"}]}]},
    # a cycle no validation reaches (only under $defs) is harmless
    {"$defs": {"A": {"$ref": "#/$defs/A"}}, "type": "string", "maxLength": 3},
    # one schema reached twice by references, without a cycle
    {
        "$defs": {"s": {"type": "string", "maxLength": 2}},
        "allOf": [{"$ref": "#/$defs/s"}, {"$ref": "#/$defs/s"}],
    },
]


@pytest.mark.parametrize("schema", TREES)
def test_a_cycle_into_properties_or_items_stays_supported(schema: Any) -> None:
    lang = compile_language(schema)
    assert not lang.is_empty()
    for text in lang.values(50) or []:
        assert lang.validator.is_valid(json.loads(text)), text
    (report,) = check_questions([("q", schema)])
    assert report.supported
