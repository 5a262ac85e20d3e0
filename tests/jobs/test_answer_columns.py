"""Answer columns as users' schemas are written: Pydantic models without `extra="forbid"` are
structs, and an integer too wide for Int64 fails on its own instead of turning into null."""

from __future__ import annotations

import polars as pl
import pytest
from pydantic import BaseModel

from decide.jobs.columns import answer_field, answer_fields
from decide.jobs.decisions import Decision
from decide.jobs.failures import FailureKind
from decide.jobs.output import OutputDir
from decide.jobs.runner import fit_columns, typed_like_parts
from decide.jobs.spec import SpecError


class Address(BaseModel):
    city: str
    postcode: str | None = None


class Line(BaseModel):
    item: str
    qty: int


class Order(BaseModel):
    address: Address
    lines: list[Line]


def test_a_pydantic_model_without_extra_forbid_is_a_struct() -> None:
    """Pydantic writes no `additionalProperties: false`; keys beyond `properties` are never
    generated, so the columns were JSON text ('{"city":""}') for no reason."""
    schema = Order.model_json_schema()
    fields = {
        k: answer_field({**v, "$defs": schema["$defs"]}) for k, v in schema["properties"].items()
    }
    assert fields["address"].dtype == pl.Struct({"city": pl.String, "postcode": pl.String})
    assert fields["lines"].dtype == pl.List(pl.Struct({"item": pl.String, "qty": pl.Int64}))
    # a required key without a schema of its own is a field too (any value: JSON text)
    loose = answer_field({"type": "object", "properties": {"a": {"type": "integer"}},
                          "required": ["a", "b"]})  # fmt: skip
    assert loose.dtype == pl.Struct({"a": pl.Int64, "b": pl.String})
    assert answer_field({"type": "object"}).kind == "json"  # a free object stays JSON text


def test_a_pydantic_decimal_is_a_number_column() -> None:
    """Its string branch (a pattern with lookarounds) is never generated: the answers are always
    numbers, but the column was JSON text."""
    from decimal import Decimal

    from pydantic import Field as Constraint

    class Claim(BaseModel):
        amount: Decimal
        refund: Decimal | None = None
        fee: Decimal = Constraint(max_digits=8, decimal_places=2)

    schema = Claim.model_json_schema()
    for name in ("amount", "refund", "fee"):
        assert answer_field(schema["properties"][name]).dtype == pl.Float64, name


WIDE = 98765432109876543210


def decision() -> Decision:
    answers = {"account": WIDE, "nested": {"n": [1, WIDE]}, "city": "leeds"}
    return Decision(1, "ok", answers=answers, answers_json='{"account": 98765432109876543210}',
                    confidence={"account": 1.0, "nested": 0.9, "city": 0.6})  # fmt: skip


FIELDS = answer_fields({
    "account": [{"type": "integer"}],
    "nested": [{"type": "object", "properties": {"n": {"type": "array", "items": {"type": "integer"}}}}],
    "city": [{"type": "string"}],
})  # fmt: skip


def test_an_integer_wider_than_int64_fails_on_its_own() -> None:
    """polars wrote such a value as null with the row ok and its confidence kept."""
    d = decision()
    fit_columns(d, FIELDS, "keep")
    assert d.ok and d.partial
    assert "does not fit a 64-bit integer column" in d.errors["account"]
    assert "does not fit" in d.errors["nested"] and d.errors.get("city") is None
    assert d.answers == {"city": "leeds"} and d.confidence == {"city": 0.6}
    assert "98765432109876543210" in d.answers_json  # the value is kept where it fits
    fits = Decision(2, "ok", answers={"account": 2**63 - 1, "nested": None, "city": "york"})
    fit_columns(fits, FIELDS, "keep")
    assert not fits.partial and fits.errors is None


def test_with_partial_rows_error_the_row_fails() -> None:
    d = decision()
    fit_columns(d, FIELDS, "error")
    assert d.status == "error" and d.kind is FailureKind.answer_invalid
    assert d.error.startswith("question 'account': 98765432109876543210 does not fit")
    assert d.answers is None and d.answers_json is None and d.confidence is None


def test_a_resumed_job_keeps_the_types_its_parts_were_written_with(tmp_path) -> None:
    """A job an earlier version wrote with a Pydantic model as JSON text resumes with JSON text
    (parts of two types would not read together); other differences are refused."""
    (tmp_path / "answers").mkdir()
    written = pl.Struct({"address": pl.String, "n": pl.Int64})
    frame = pl.DataFrame({"answers": [{"address": '{"city":"x"}', "n": 1}]},
                         schema={"answers": written})  # fmt: skip
    frame.write_parquet(tmp_path / "answers" / "part-00000.parquet")
    out = OutputDir(tmp_path, resume=True)
    address = {"type": "object", "properties": {"city": {"type": "string"}}}
    fields = answer_fields({"address": [address], "n": [{"type": "integer"}]})
    assert fields["address"].kind == "struct"
    kept = typed_like_parts(fields, out, tmp_path)
    assert kept["address"].kind == "json" and kept["n"] == fields["n"]
    assert typed_like_parts(fields, OutputDir(tmp_path / "new", resume=False), tmp_path) == fields
    other = answer_fields({"address": [address], "n": [{"type": "boolean"}]})
    with pytest.raises(SpecError, match="'n' were written as Int64 and would now be Boolean"):
        typed_like_parts(other, out, tmp_path)
