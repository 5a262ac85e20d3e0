"""Every draft's semantics, annotations and unknown keywords, declared depth, honest refusals
(issue #34). jsonschema (the draft's own validator class) is the oracle throughout."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from decide.schemas import (
    MalformedSchema,
    UnsupportedSchema,
    Vocabulary,
    check_questions,
    compile_language,
    compile_slot,
    render_table,
)
from decide.schemas.drafts import VALIDATORS, edit_distance, misspelling

D4 = "http://json-schema.org/draft-04/schema#"
D6 = "http://json-schema.org/draft-06/schema#"
D7 = "http://json-schema.org/draft-07/schema#"
D2019 = "https://json-schema.org/draft/2019-09/schema"


def agrees(schema, texts: list[str]) -> None:
    """The language accepts exactly the texts the draft's validator accepts (canonical texts)."""
    lang = compile_language(schema)
    cls = VALIDATORS[lang.draft]
    validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
    for text in texts:
        assert lang.accepts(text) == validator.is_valid(json.loads(text)), (schema, text)


def test_draft04_boolean_exclusive_bounds_and_id() -> None:
    schema = {"$schema": D4, "id": "http://x/y#", "type": "number", "maximum": 5,
              "exclusiveMaximum": True, "minimum": 1, "exclusiveMinimum": False}  # fmt: skip
    agrees(schema, ["1", "4.5", "5", "0.5", "5.5", "4"])
    assert compile_language(schema).draft == "draft-04"


def test_draft04_ignores_later_keywords_and_unchecked_formats() -> None:
    lang = compile_language({"$schema": D4, "const": 3, "type": "integer", "maximum": 9})
    assert lang.accepts("7") and lang.warnings and lang.warnings[0].keyword == "const"
    date = compile_language({"$schema": D4, "type": "string", "format": "date", "maxLength": 3})
    assert date.accepts('"abc"')  # draft-04's format checker does not know `date`
    assert compile_language({"type": "string", "format": "date"}).accepts('"2024-02-29"')
    assert not compile_language({"type": "string", "format": "date"}).accepts('"abc"')


def test_array_items_additional_items_and_dependencies() -> None:
    tuple_ = {"$schema": D7, "items": [{"type": "integer"}, {"enum": ["a"]}],
              "additionalItems": False, "type": "array"}  # fmt: skip
    agrees(tuple_, ["[]", "[1]", '[1,"a"]', '[1,"a",2]', '["a"]'])
    single = {
        "$schema": D7,
        "type": "array",
        "items": {"type": "boolean"},
        "additionalItems": False,
    }
    agrees(single, ["[]", "[true,false,true]", "[1]"])
    deps = {"$schema": D7, "type": "object", "additionalProperties": False,
            "properties": {"a": {"type": "boolean"}, "b": {"type": "boolean"}, "c": {"const": 1}},
            "dependencies": {"a": ["b"], "c": {"required": ["a"]}}}  # fmt: skip
    lang = compile_language(deps)
    values = lang.values(1000)
    assert values and all(VALIDATORS["draft-07"](deps).is_valid(json.loads(v)) for v in values)
    assert '{"a":true,"b":false}' in values and '{"a":true}' not in values
    assert '{"a":true,"b":true,"c":1}' in values and '{"b":true,"c":1}' not in values


def test_ref_siblings_ignored_before_2019_and_refs_follow_moved_locations() -> None:
    old = {"$schema": D7, "definitions": {"s": {"enum": ["x", "y"]}},
           "$ref": "#/definitions/s", "maxLength": 0}  # fmt: skip
    assert compile_language(old).values(10) == ['"x"', '"y"']
    new = {"$defs": {"s": {"enum": ["x", "y"]}}, "$ref": "#/$defs/s", "const": "y"}
    assert compile_language(new).values(10) == ['"y"']
    moved = {"$schema": D7, "type": "array", "items": [{"enum": [1, 2]}, {"$ref": "#/items/0"}],
             "additionalItems": False, "minItems": 2}  # fmt: skip
    assert compile_language(moved).values(10) == ["[1,1]", "[1,2]", "[2,1]", "[2,2]"]


def test_recursive_ref_and_dynamic_ref_in_one_resource() -> None:
    tree = {"$schema": D2019, "$recursiveAnchor": True, "type": "object",
            "properties": {"k": {"type": "array", "items": {"$recursiveRef": "#"}, "maxItems": 1}},
            "additionalProperties": False}  # fmt: skip
    lang = compile_language(tree)
    assert lang.accepts('{"k":[{"k":[{}]}]}') and lang.cuts
    assert lang.accepts('{"k":[{"k":[{"k":[{"k":[]}]}]}]}')  # root + 3 expansions
    assert not lang.accepts('{"k":[{"k":[{"k":[{"k":[{}]}]}]}]}')  # below the cut


def test_base_changing_id_with_references_is_refused_at_its_pointer() -> None:
    schema = {"$schema": D7, "definitions": {"a": {"$id": "other.json", "type": "integer"}},
              "$ref": "#/definitions/a"}  # fmt: skip
    with pytest.raises(UnsupportedSchema) as exc:
        compile_language(schema)
    assert exc.value.pointer == "/definitions/a/$id"
    # Without references an $id changes nothing; fragment ids are anchors or nothing.
    assert compile_language({"properties": {"a": {"$id": "x.json", "type": "null"}}}).accepts(
        '{"a":null}'
    )
    generated = {"$schema": D7, "properties": {"n": {"$id": "#/properties/n", "const": 1}},
                 "$ref": "#/definitions/x", "definitions": {"x": {"type": "object"}}}  # fmt: skip
    compile_language(generated)


def test_unknown_draft_is_refused() -> None:
    with pytest.raises(UnsupportedSchema) as exc:
        compile_language({"$schema": "http://json-schema.org/draft-03/schema#"})
    assert exc.value.pointer == "/$schema" and "supported" in exc.value.message
    assert (
        compile_language({"$schema": "https://json-schema.org/draft-07/schema"}).draft == "draft-07"
    )
    with pytest.raises(MalformedSchema):
        compile_language({"$schema": D4, "type": "number", "exclusiveMaximum": 3})


@pytest.mark.parametrize(
    "keyword,suggestion",
    [("maximm", "maximum"), ("MaxLength", "maxLength"), ("requried", "required"),
     ("minimun", "minimum"), ("Type", "type"), ("additionalproperties", "additionalProperties")],
)  # fmt: skip
def test_misspellings_are_refused_with_the_suggestion(keyword, suggestion) -> None:
    with pytest.raises(UnsupportedSchema) as exc:
        compile_language({"properties": {"a": {keyword: 3}}})
    assert exc.value.pointer == f"/properties/a/{keyword}" and exc.value.keyword == keyword
    assert f"did you mean {suggestion!r}" in exc.value.message


def test_annotations_are_ignored_and_unknown_keywords_warned() -> None:
    schema = {"$schema": D7, "type": "object", "comment": "c", "additionalProperties": False,
              "properties": {"id": {"type": "string", "readonly": True, "_format": "oid",
                                    "x-order": 1, "title": "Id", "$comment": "k",
                                    "examples": ["a"], "deprecated": True, "self": {}}}}  # fmt: skip
    lang = compile_language(schema)
    assert lang.accepts('{"id":"x"}') and lang.accepts("{}")
    assert sorted(w.keyword for w in lang.warnings) == ["comment", "readonly", "self"]
    with pytest.raises(UnsupportedSchema) as exc:
        compile_language(schema, strict=True)
    assert exc.value.keyword == "comment" and "--strict" in exc.value.message
    assert misspelling("self", "2020-12") is None and misspelling("_format", "2020-12") is None
    assert edit_distance("requried", "required") == 1


def test_declared_nesting_of_any_depth_compiles() -> None:
    leaf: dict = {"type": "integer", "maximum": 3, "minimum": 0}
    for name in "edcba":
        leaf = {"type": "object", "properties": {name: {"type": "array", "items": leaf}},
                "additionalProperties": False}  # fmt: skip
    lang = compile_language(leaf)
    assert lang.accepts('{"a":[{"b":[{"c":[{"d":[{"e":[1,2]}]}]}]}]}')
    assert lang.accepts('{"a":[{"b":[]}]}') and not lang.cuts
    loose = compile_language({"type": "object", "properties": {"a": {}}})
    assert loose.accepts('{"a":[[[1]]]}') and not loose.accepts('{"a":[[[[1]]]]}')
    assert loose.cuts and "3 deep" in loose.cuts[0]


def test_no_value_satisfies_only_when_true() -> None:
    vocab = Vocabulary.from_bytes([bytes([b]) for b in range(256)] + [b"<pad>"], [256])
    hidden = {"type": "object", "patternProperties": {"^[a-z]+$": {"type": "integer"}},
              "minProperties": 1}  # fmt: skip
    assert VALIDATORS["2020-12"](hidden).is_valid({"a": 1})  # valid values exist
    with pytest.raises(UnsupportedSchema) as exc:
        compile_slot(hidden, vocab)
    assert "no value satisfies" not in exc.value.message
    assert exc.value.keyword == "additionalProperties" and "valid values exist" in exc.value.message
    with pytest.raises(UnsupportedSchema) as exc:
        compile_slot({"type": "integer", "minimum": 3, "maximum": 1}, vocab)
    assert "no value satisfies" in exc.value.message
    reports = check_questions([("h", hidden)])
    assert not reports[0].supported and "valid values exist" in reports[0].message


def test_validate_reports_draft_warnings_and_depth() -> None:
    questions = [
        ("d7", {"$schema": D7, "type": "string", "nullable": True, "maxLength": 3}),
        ("tree", {"type": "object", "properties": {"any": {}}, "additionalProperties": False}),
    ]
    reports = check_questions(questions)
    assert reports[0].draft == "draft-07" and reports[0].warnings
    table = render_table(reports)
    assert "draft draft-07" in table and "1 unknown keyword ignored" in table
    assert "warning: d7: /nullable nullable: unknown keyword" in table
    assert "left out: tree: arrays/objects inside an unconstrained value" in table
    strict = check_questions(questions, strict=True)
    assert not strict[0].supported and strict[0].keyword == "nullable"


def test_cli_validate_strict(tiny_checkpoint, tmp_path) -> None:
    from decide.cli import main

    spec = {"questions": [{"id": "q", "text": "Q?", "schema": {"$schema": D6, "enum": ["a"],
                                                               "nullable": True}}]}  # fmt: skip
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    args = ["validate", str(tmp_path / "spec.json"), "--model", str(tiny_checkpoint("sdar"))]
    ok = CliRunner().invoke(main, args)
    assert ok.exit_code == 0, ok.output
    assert "draft draft-06" in ok.output and "warning: q: /nullable nullable" in ok.output
    strict = CliRunner().invoke(main, [*args, "--strict"])
    assert strict.exit_code == 2 and "/nullable nullable" in strict.output


def test_decision_validator_keeps_each_questions_draft_and_references() -> None:
    from decide.jobs.questions import CompiledQuestion
    from decide.jobs.questionset import decision_validator

    vocab = Vocabulary.from_bytes([bytes([b]) for b in range(256)] + [b"<pad>"], [256])
    schemas = {
        "t": {"$schema": D4, "type": "number", "maximum": 5, "exclusiveMaximum": True},
        "p": {"$defs": {"k": {"enum": ["a", "b"]}}, "$ref": "#/$defs/k"},  # pydantic-style
    }
    questions = [CompiledQuestion(q, "?", s, compile_slot(s, vocab)) for q, s in schemas.items()]
    validator = decision_validator(questions)
    assert validator.is_valid({"t": 4.5, "p": "a"})
    assert not validator.is_valid({"t": 5, "p": "a"}) and not validator.is_valid({"t": 1, "p": "c"})
