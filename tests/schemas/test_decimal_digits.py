"""Pydantic writes a `Decimal` with `max_digits` / `decimal_places` as `anyOf: [{type: number},
{type: string, pattern}]` with the limits only in the string branch's pattern (whose lookaheads
the compiler refuses, so that branch is left out); `Model.model_validate` holds numbers to them
too. The compiler reads them back from Pydantic's exact pattern and holds the number branch to
them, so no answer breaks them; a pattern that only looks like Pydantic's is reported."""

from __future__ import annotations

import itertools
import json
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field, TypeAdapter, ValidationError, condecimal
from tokenizers import Tokenizer

from decide.schemas import Vocabulary, check_questions, compile_language, compile_slot, render_table
from decide.schemas.numbers import fits_digits

WORDPIECE = Path(__file__).parents[2] / "decide" / "model" / "tokenizer.json"  # uncased

PREFIX = r"^(?!^[-+.]*$)[+-]?0*"
# What Pydantic 2.10 - 2.13 writes (validation mode): max_digits=8, decimal_places=2 …
BOTH = PREFIX + r"(?:\d{0,6}|(?=[\d.]{1,9}0*$)\d{0,6}\.\d{0,2}0*$)"
MAX_DIGITS_5 = PREFIX + r"(?:\d{0,5}|(?=[\d.]{1,6}0*$)\d*\.\d*0*$)"  # max_digits=5 alone
PLACES_2 = PREFIX + r"\d*\.?\d{0,2}0*$"  # decimal_places=2 alone
NO_LIMIT = PREFIX + r"\d*\.?\d*$"

POOL = ["0", "1", "-1", "9", "10", "100", "-100", "12345", "123456", "1234567", "99999999",
        "123456789", "0.1", "-0.1", "0.05", "0.001", "0.12", "0.123", "1.5", "12.34", "12.345",
        "-12.34", "1234567.5", "999999.99", "9999999.9", "123456.78", "0.00001", "1.2345",
        "12345678901234567890", "7.25"]  # fmt: skip


def decimal(pattern: str, **number: Any) -> dict[str, Any]:
    return {"anyOf": [{"type": "number", **number}, {"type": "string", "pattern": pattern}]}


def adapter(max_digits: int | None, decimal_places: int | None) -> TypeAdapter[Any]:
    return TypeAdapter(
        Annotated[Decimal, Field(max_digits=max_digits, decimal_places=decimal_places)]
    )


def pydantic_accepts(ta: TypeAdapter[Any], text: str) -> bool:
    try:
        ta.validate_python(json.loads(text))
    except ValidationError:
        return False
    return True


@pytest.mark.parametrize(
    "pattern,max_digits,decimal_places",
    [(BOTH, 8, 2), (MAX_DIGITS_5, 5, None), (PLACES_2, None, 2)],
)
def test_the_digit_limits_of_pydantics_pattern_hold_numbers(
    pattern: str, max_digits: int | None, decimal_places: int | None
) -> None:
    lang = compile_language(decimal(pattern))
    ta = adapter(max_digits, decimal_places)
    for text in POOL:
        # every answer passes Model.model_validate; every number it accepts is kept
        assert lang.accepts(text) == pydantic_accepts(ta, text), text
    assert not lang.accepts('"12.34"')  # the string branch is still left out
    assert any("numbers with more digits than Pydantic's Decimal allows" in c for c in lang.cuts)
    assert not lang.complete


def test_the_pattern_pydantic_writes_is_the_one_recognised() -> None:
    """Every combination as this Pydantic writes it (Optional, bounds beside): nothing the
    language holds is refused by Pydantic, nothing Pydantic and the schema accept is lost."""
    for max_digits, decimal_places in itertools.product([None, 0, 1, 2, 5, 8], [None, 0, 1, 3]):
        for optional in (False, True):
            kind: Any = Annotated[
                Decimal, Field(max_digits=max_digits, decimal_places=decimal_places, le=10**9)
            ]
            ta = TypeAdapter(kind | None if optional else kind)
            schema = ta.json_schema()
            if "pattern" not in json.dumps(schema):
                pytest.skip("this Pydantic writes no Decimal pattern")
            lang = compile_language(schema)
            for text in POOL:
                valid = pydantic_accepts(ta, text) and lang.validator.is_valid(json.loads(text))
                assert lang.accepts(text) == valid, (max_digits, decimal_places, optional, text)
            assert lang.accepts("null") == optional


class Invoice(BaseModel):
    price: condecimal(max_digits=8, decimal_places=2)  # type: ignore[valid-type]
    total: Annotated[Decimal, Field(max_digits=1, decimal_places=1)] | None = None


def test_every_answer_a_slot_can_give_passes_model_validate() -> None:
    schemas = Invoice.model_json_schema()["properties"]
    if "pattern" not in json.dumps(schemas):
        pytest.skip("this Pydantic writes no Decimal pattern")
    tokenizer = Tokenizer.from_file(str(WORDPIECE))
    vocab = Vocabulary.from_tokenizer(tokenizer, excluded={tokenizer.get_vocab_size()})
    slot = compile_slot(schemas["total"], vocab)
    # one digit, after the point: Pydantic counts the 0 of `0` as a digit before it
    tenths = [f"{sign}0.{d}" for sign in ("", "-") for d in range(1, 10)]
    assert slot.values is not None and sorted(slot.values) == sorted([*tenths, "null"])
    for text in slot.values:
        Invoice.model_validate({"price": 1, "total": json.loads(text)})
    price = compile_slot(schemas["price"], vocab).language
    assert price.accepts("123456.78") and not price.accepts("12.345")
    assert not price.accepts("1234567") and not price.accepts("0.001")
    (report,) = check_questions([("price", schemas["price"])], vocab)
    assert report.supported
    assert "max_digits=8, decimal_places=2" in render_table([report])


def test_no_limits_and_other_patterns_are_not_read() -> None:
    lang = compile_language(decimal(NO_LIMIT))
    assert lang.accepts("123456789.123") and not any("Pydantic" in c for c in lang.cuts)
    # a pattern that only looks like Pydantic's: numbers are not held to it, which is said
    odd = PREFIX + r"(?:\d{0,6}|(?=[\d.]{1,10}0*$)\d{0,6}\.\d{0,2}0*$)"
    lang = compile_language(decimal(odd))
    assert lang.accepts("12.345")
    assert any("/anyOf/1/pattern: the digit limits of this pattern" in c for c in lang.cuts)
    # another anyOf of a number and a string with a pattern is left as it was
    plain = compile_language(decimal("^[0-9]+$"))
    assert plain.accepts("12.345") and plain.accepts('"12"')
    # the limits hold the number branch only: an integer branch beside it keeps every integer
    mixed = {"anyOf": [{"type": "number"}, {"type": "string", "pattern": BOTH},
                       {"type": "integer"}]}  # fmt: skip
    assert compile_language(mixed).accepts("123456789")


def test_bounds_and_steps_of_the_number_branch_still_hold() -> None:
    lang = compile_language(decimal(BOTH, minimum=0, maximum=100, multipleOf=0.25))
    assert lang.accepts("99.75") and lang.accepts("0") and lang.accepts("100")
    assert not lang.accepts("-1") and not lang.accepts("100.25") and not lang.accepts("1.1")


def test_fits_digits_is_pydantics_count() -> None:
    for max_digits, decimal_places in itertools.product([None, 0, 1, 2, 3, 6], [None, 0, 1, 2]):
        if max_digits is None and decimal_places is None:
            continue
        ta = adapter(max_digits, decimal_places)
        for text in POOL:
            got = fits_digits(text, max_digits, decimal_places)
            assert got == pydantic_accepts(ta, text), (max_digits, decimal_places, text)
