"""`anyOf: [X, {type: null}]` (Pydantic's `Optional[X]`) is read as X-or-null everywhere a
question's kind comes from its schema's `type`, as `type: [X, null]` always was; bare local
references (Pydantic's enums and nested models) are followed."""

from __future__ import annotations

import json
from datetime import date
from decimal import Decimal
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
import torch
from pydantic import BaseModel, ConfigDict
from tokenizers import Tokenizer

from decide.engine.constraints import bitmask_width
from decide.jobs.calibration import schema_kind, schema_options
from decide.jobs.columns import answer_field
from decide.jobs.derive import schema_type
from decide.schemas import UnsupportedSchema, Vocabulary, compile_slot
from decide.schemas.dates import date_format
from decide.schemas.nullable import only_null, without_null
from decide.schemas.span import extract_kind
from decide.schemas.validate import check_questions, render_table


class Claim(BaseModel):
    amount: int | None = None
    city: str | None = None
    when: date | None = None
    approved: bool | None = None


PYDANTIC = Claim.model_json_schema()["properties"]  # e.g. {"anyOf": [...], "default": None, ...}


def test_pydantic_optionals_are_their_one_branch_or_null() -> None:
    assert without_null(PYDANTIC["amount"]) == ({"type": "integer"}, True)
    assert without_null(PYDANTIC["when"]) == ({"type": "string", "format": "date"}, True)
    assert without_null({"oneOf": [{"const": None}, {"type": "number"}]}) == (
        {"type": "number"},
        True,
    )
    for null in ({"type": "null"}, {"type": ["null"]}, {"const": None}, {"enum": [None]}):
        assert only_null(null)
    for other in ({"type": ["integer", "null"]}, {"enum": [None, 1]}, {}, True, None):
        assert not only_null(other)


def test_other_unions_are_left_whole() -> None:
    for schema in (
        {"anyOf": [{"type": "integer"}, {"type": "string"}, {"type": "null"}]},  # two values
        {"anyOf": [{"type": "integer"}, {"type": "null"}], "minimum": 3},  # a constraint beside
        {"anyOf": [{"type": "integer"}, {"type": "null"}], "oneOf": [{"type": "integer"}]},
        {"anyOf": [{"type": "integer"}, {"type": "integer"}]},  # no null branch
        {"type": ["integer", "null"]},
        True,
    ):
        assert without_null(schema) == (schema, False)


def both(schema: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """`schema` spelt as a type list with null and as Pydantic's `anyOf` with a null branch."""
    listed = {**schema, "type": [schema["type"], "null"]}
    return listed, {"anyOf": [schema, {"type": "null"}], "title": "T", "default": None}


def test_both_spellings_are_read_alike() -> None:
    for schema in (
        {"type": "integer", "minimum": 0, "maximum": 100_000},
        {"type": "integer", "minimum": 1, "maximum": 5},
        {"type": "number"},
        {"type": "string", "maxLength": 24},
        {"type": "string", "format": "date"},
        {"type": "boolean"},
    ):
        listed, any_of = both(schema)
        if schema["type"] != "boolean":  # extract copies strings and numbers only
            assert extract_kind(any_of) == extract_kind(listed)
        assert date_format(any_of) == date_format(listed)
        assert answer_field(any_of) == answer_field(listed)
        assert schema_kind(any_of) == schema_kind(listed)
        assert schema_options(any_of) == schema_options(listed)
        assert schema_type(any_of) == schema_type(listed)
    # what went wrong before: an Optional[int] extract copied text spans (never an integer, so
    # always null), an Optional[str] answer was stored as JSON text ('"Dublin"')
    assert extract_kind(PYDANTIC["amount"]) == "numbers"
    assert date_format(PYDANTIC["when"]) == "date"
    assert answer_field(PYDANTIC["city"]).dtype == pl.String
    assert answer_field(PYDANTIC["city"]).cell("Dublin") == "Dublin"
    assert answer_field(PYDANTIC["amount"]).dtype == pl.Int64
    assert schema_kind(PYDANTIC["approved"]) == "boolean"
    assert schema_options(PYDANTIC["approved"]) == 3  # true, false, null
    assert schema_options({"anyOf": [{"enum": ["a", "b"]}, {"type": "null"}]}) == 3


class Severity(str, Enum):
    low = "low"
    medium = "medium"
    high = "high"


class Contact(BaseModel):
    model_config = ConfigDict(extra="forbid")  # additionalProperties: false, so a struct
    name: str | None = None
    phone: str | None = None


class Node(BaseModel):
    model_config = ConfigDict(extra="forbid")
    label: str
    children: list[Node] = []


class Ticket(BaseModel):
    severity: Severity
    maybe_severity: Severity | None = None
    contact: Contact | None = None
    tree: Node


def question_schemas(model: type[BaseModel]) -> dict[str, Any]:
    """Each property as a question schema of its own, with the model's `$defs` beside it (how a
    job spec built from a Pydantic model carries them)."""
    schema = model.model_json_schema()
    return {k: {**v, "$defs": schema["$defs"]} for k, v in schema["properties"].items()}


def test_local_references_are_followed() -> None:
    q = question_schemas(Ticket)
    assert "$ref" in str(q["severity"]) and "$ref" in str(q["maybe_severity"])
    for qid in ("severity", "maybe_severity"):
        assert answer_field(q[qid]).dtype == pl.String  # was JSON text: '"medium"'
        assert answer_field(q[qid]).cell("medium") == "medium"
        assert schema_kind(q[qid]) == "enum"
        assert extract_kind(q[qid]) == "spans"
    assert schema_options(q["severity"]) == 3 and schema_options(q["maybe_severity"]) == 4
    contact = answer_field(q["contact"])
    assert contact.dtype == pl.Struct({"name": pl.String, "phone": pl.String})
    assert contact.cell({"name": "Ana", "phone": None}) == {"name": "Ana", "phone": None}
    # a model that contains itself is expanded once, its inner copy kept as JSON text
    tree = answer_field(q["tree"])
    assert tree.dtype == pl.Struct({"label": pl.String, "children": pl.List(pl.String)})
    # Pydantic 1 gave a reference a description through an allOf of one
    v1 = {"allOf": [{"$ref": "#/definitions/Severity"}], "description": "How bad?",
          "definitions": {"Severity": {"enum": ["low", "high"], "type": "string"}}}  # fmt: skip
    assert answer_field(v1).dtype == pl.String and schema_kind(v1) == "enum"
    # a reference that points nowhere is left for the compiler to refuse with its pointer
    assert answer_field({"$ref": "#/$defs/Missing"}).kind == "json"


def test_an_all_of_takes_the_type_its_parts_agree_on() -> None:
    """`allOf: [{type: integer}, {minimum: 0}]` and a reference with keywords beside it were
    stored as JSON text ('12') though every value is an integer."""
    bounded = {"allOf": [{"type": "integer"}, {"minimum": 0, "maximum": 50}]}
    assert answer_field(bounded).dtype == pl.Int64 and answer_field(bounded).cell(12) == 12
    both = {"type": "number", "allOf": [{"type": "integer"}]}
    assert answer_field(both).dtype == pl.Int64  # a number that is an integer
    ref = {"$ref": "#/$defs/Amount", "minimum": 1, "$defs": {"Amount": {"type": "integer"}}}
    assert answer_field(ref).dtype == pl.Int64
    word = {"allOf": [{"$ref": "#/$defs/S"}, {"maxLength": 9}], "$defs": {"S": {"enum": ["a"]}}}
    assert answer_field(word).dtype == pl.String
    # parts that disagree, or an allOf of two objects, stay JSON text
    assert answer_field({"allOf": [{"type": "integer"}, {"type": "string"}]}).kind == "json"
    objects = [{"type": "object", "properties": {k: {"type": "string"}}} for k in "ab"]
    assert answer_field({"allOf": objects}).kind == "json"


WORDPIECE = Path(__file__).parents[2] / "decide" / "model" / "tokenizer.json"  # uncased


def test_a_question_that_could_only_answer_null_is_refused() -> None:
    """With an uncased vocabulary an Optional code of accented capitals has null as its only
    spellable value: refused, as the same schema without null always was, instead of answering
    null for every document (upper-case ASCII codes and date-times are spelled case-folded:
    tests/schemas/test_readings.py)."""
    tokenizer = Tokenizer.from_file(str(WORDPIECE))
    vocab = Vocabulary.from_tokenizer(tokenizer, excluded={tokenizer.get_vocab_size()})
    code = {"type": "string", "pattern": "^[À-Ö]{3}-[0-9]{4}$"}
    for schema in (code,):
        for nullable in (
            {"anyOf": [schema, {"type": "null"}]},
            {**schema, "type": ["string", "null"]},
        ):
            with pytest.raises(UnsupportedSchema, match="only null can be spelled"):
                compile_slot(nullable, vocab)
    # a finite upper-case value is spelled as the tokenizer reads it (tests/schemas/test_readings.py)
    assert sorted(compile_slot({"enum": [None, "ABC"]}, vocab).values) == ['"ABC"', "null"]
    for fine in (
        {"anyOf": [{"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"}, {"type": "null"}]},
        {"type": ["string", "null"], "format": "date-time"},
        {"type": "null"},  # null alone is what it asks for
        # null beside a branch no string satisfies (counted bounds): null alone too
        {"anyOf": [{"type": "null"}, {"type": "string", "maxLength": 0, "pattern": "^[a-z]+$"}]},
        {"enum": [None, "abc"]},
        {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 9999}, {"type": "null"}]},
        {"type": ["string", "null"], "maxLength": 2},
        {"anyOf": [{"type": "string", "format": "date"}, {"type": "null"}]},
    ):
        compile_slot(fine, vocab)
    # what the masks of a null-alone slot let through decodes as null
    null_alone = {"anyOf": [{"type": "null"}, {"type": "string", "maxLength": 0, "minLength": 1}]}
    slot = compile_slot(null_alone, vocab)
    filler = tokenizer.get_vocab_size()
    state = slot.new_constraint(filler, slot.length)
    rows = torch.zeros((slot.length, bitmask_width(filler + 1)), dtype=torch.int32)
    for p in range(slot.length):
        state.fill_bitmask(rows)
        bits = np.unpackbits(rows[p].numpy().view(np.uint8), bitorder="little")
        assert state.commit(p, int(np.nonzero(bits)[0][-1]))
    assert state.decode().value is None


class Priced(BaseModel):
    price: Decimal
    discount: Decimal | None = None


def test_an_anyof_branch_the_compiler_refuses_is_left_out() -> None:
    """Pydantic's Decimal is a number or a string whose pattern has a lookahead: the string
    branch is left out (said so by `decide validate`), numbers are answered, and an extract
    question copies the document's numbers; every branch refused refuses the question."""
    tokenizer = Tokenizer.from_file(str(WORDPIECE))
    vocab = Vocabulary.from_tokenizer(tokenizer, excluded={tokenizer.get_vocab_size()})
    schemas = Priced.model_json_schema()["properties"]
    assert "(?!" in json.dumps(schemas["price"])  # what made it refused before
    for qid, schema in schemas.items():
        slot = compile_slot(schema, vocab)
        assert any("anyOf/1: this anyOf branch's values" in c for c in slot.language.cuts)
        assert slot.language.dfa.accepts(b"19.99") and not slot.language.dfa.accepts(b'"19.99"')
        assert slot.language.dfa.accepts(b"null") == (qid == "discount")
        assert extract_kind(schema) == "spans" and extract_kind(schema, slot) == "numbers"
    (report,) = check_questions([("price", schemas["price"])], vocab)
    assert report.supported and "left out: price: /anyOf/1" in render_table([report])
    lookahead = {"type": "string", "pattern": "^(?!a)b+$"}
    with pytest.raises(UnsupportedSchema, match="lookaround"):
        compile_slot({"anyOf": [lookahead, {**lookahead, "minLength": 2}]}, vocab)
