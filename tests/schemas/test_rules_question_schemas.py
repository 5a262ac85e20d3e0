"""Rules over questions whose schemas use `$ref`/`$defs` (as Pydantic writes enums and nested
models), `#` references or an older draft's keywords split those questions into exactly the cases
the inline equivalent gives: each case is compiled from the question's own schema (normalised to
2020-12, its references kept resolving), and a refusal names the user's schema, not a wrapper."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from decide.schemas import SchemaError, UnsupportedSchema, Vocabulary, compile_slot
from decide.schemas import rules as rules_module
from decide.schemas.rules import ValueRule, compile_rules

GPT2 = Path(__file__).parents[1] / "data" / "gpt2" / "tokenizer.json"
DRAFT04 = "http://json-schema.org/draft-04/schema#"
DRAFT07 = "http://json-schema.org/draft-07/schema#"


@pytest.fixture(scope="module")
def vocab() -> Vocabulary:
    return Vocabulary.from_tokenizer(Tokenizer.from_file(str(GPT2)), excluded=[50256])


def _cases(vocab: Vocabulary, questions: dict, rules=None, value_rules=()) -> dict:
    """Per ruled question, the values of each of its cells (None: too many to list)."""
    compiled = {qid: compile_slot(schema, vocab) for qid, schema in questions.items()}
    ruleset = compile_rules(rules, questions, compiled, value_rules)
    return {qid: [c.slot.values for c in cells] for qid, cells in ruleset.cells.items()}


SEV_REF = {"$ref": "#/$defs/Sev", "$defs": {"Sev": {"enum": ["low", "high"]}}}
SEV_INLINE = {"enum": ["low", "high"]}
URGENT = {"type": "boolean"}
LOW_NOT_URGENT = {
    "if": {"properties": {"sev": {"const": "low"}}, "required": ["sev"]},
    "then": {"properties": {"urgent": {"const": False}}},
}


@pytest.mark.parametrize(
    "sev",
    [
        SEV_REF,
        {"anyOf": [{"$ref": "#/$defs/Sev"}, {"type": "null"}], "$defs": SEV_REF["$defs"]},
        {"$schema": DRAFT07, "$ref": "#/definitions/Sev", "definitions": SEV_REF["$defs"]},
        {
            "allOf": [{"$ref": "#/$defs/Sev"}],
            "description": "Pydantic 1",
            "$defs": SEV_REF["$defs"],
        },
    ],
    ids=["ref", "optional-ref", "draft07-definitions", "allOf-ref"],
)
def test_rules_over_a_referenced_enum_split_it_as_the_inline_enum(vocab, sev) -> None:
    inline = SEV_INLINE if "anyOf" not in sev else {"enum": ["low", "high", None]}
    expected = _cases(vocab, {"sev": inline, "urgent": URGENT}, LOW_NOT_URGENT)
    assert _cases(vocab, {"sev": sev, "urgent": URGENT}, LOW_NOT_URGENT) == expected
    assert sorted(v for values in expected["sev"] for v in values) == sorted(
        compile_slot(inline, vocab).values
    )


def test_cel_value_rules_over_a_referenced_enum(vocab) -> None:
    """The CEL form (`ValueRule`: one cell per value) over the Pydantic spelling of an enum."""
    rule = ValueRule("/rules/0", ("sev", "urgent"), lambda v: v["sev"] == "high" or not v["urgent"])
    inline = _cases(vocab, {"sev": SEV_INLINE, "urgent": URGENT}, value_rules=[rule])
    assert _cases(vocab, {"sev": SEV_REF, "urgent": URGENT}, value_rules=[rule]) == inline
    assert inline["sev"] == [['"high"'], ['"low"']]


@pytest.mark.parametrize(
    ("draft04", "inline"),
    [
        (
            {"type": "integer", "minimum": 0, "maximum": 5, "exclusiveMaximum": True},
            {"type": "integer", "minimum": 0, "maximum": 4},
        ),
        (
            {"type": "integer", "minimum": 0, "exclusiveMinimum": True, "maximum": 90000,
             "exclusiveMaximum": True},
            {"type": "integer", "minimum": 1, "maximum": 89999},
        ),  # an integer question too large to list: split into ranges
    ],
    ids=["finite", "ranges"],
)  # fmt: skip
def test_rules_over_a_draft04_boolean_exclusive_bound(vocab, draft04, inline) -> None:
    rules = {"if": {"properties": {"n": {"maximum": 1}}, "required": ["n"]},
             "then": {"properties": {"urgent": {"const": True}}}}  # fmt: skip
    old = _cases(vocab, {"n": {"$schema": DRAFT04, **draft04}, "urgent": URGENT}, rules)
    assert old == _cases(vocab, {"n": inline, "urgent": URGENT}, rules)
    rule = ValueRule("/rules/0", ("n", "urgent"), lambda v: v["n"] < 2 or v["urgent"])
    if "90000" not in json.dumps(draft04):  # value rules read finite questions only
        with_value = _cases(vocab, {"n": {"$schema": DRAFT04, **draft04}, "urgent": URGENT},
                            value_rules=[rule])  # fmt: skip
        assert with_value == _cases(vocab, {"n": inline, "urgent": URGENT}, value_rules=[rule])


def test_a_recursive_reference_keeps_pointing_at_the_question_not_at_one_case(vocab) -> None:
    """`$ref: "#"` is the question's schema: in a case it must not also carry that case's own
    constraint (nested values of another case would be lost)."""
    tree = {"anyOf": [{"enum": ["a", "b"]},
                      {"type": "array", "items": {"$ref": "#"}, "minItems": 1, "maxItems": 1}]}  # fmt: skip
    rules = {"if": {"properties": {"t": {"const": "a"}}, "required": ["t"]},
             "then": {"properties": {"urgent": {"const": True}}}}  # fmt: skip
    cases = _cases(vocab, {"t": tree, "urgent": URGENT}, rules)
    every = compile_slot(tree, vocab).values
    assert '["b"]' in every and '[["a"]]' in every
    assert sorted(v for values in cases["t"] for v in values) == sorted(every)
    assert ['"a"'] in cases["t"]


def test_a_refusal_names_the_users_schema_not_the_wrapper(vocab, monkeypatch) -> None:
    """A case the compiler refuses is reported at its location in the question's schema as
    written (a draft-07 array `items` is `prefixItems` in the 2020-12 form)."""
    schema = {"$schema": DRAFT07, "type": "array", "items": [{"enum": ["x", "y"]}],
              "additionalItems": False}  # fmt: skip
    questions = {"pair": schema, "urgent": URGENT}
    compiled = {qid: compile_slot(s, vocab) for qid, s in questions.items()}
    rules = {"if": {"properties": {"urgent": {"const": True}}, "required": ["urgent"]},
             "then": {"properties": {"pair": {"const": ["x"]}}}}  # fmt: skip

    def refuse(schema, *args, **kwargs):
        if "allOf" in schema:
            raise UnsupportedSchema("/allOf/0/prefixItems/0/enum", "enum", "refused here")
        return compile_slot(schema, *args, **kwargs)

    monkeypatch.setattr(rules_module, "compile_slot", refuse)
    with pytest.raises(SchemaError) as info:
        compile_rules(rules, questions, compiled)
    assert info.value.pointer == "/items/0/enum"
    assert str(info.value) == "question 'pair': /items/0/enum: enum: refused here"
