"""Questions from a Pydantic model: one per field, its description as the question, its schema
as Pydantic writes it (Optional as anyOf with null, enums as `$defs` references), and the
decision validates back into the model."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from enum import Enum

import pytest
from pydantic import BaseModel, Field

from decide import Decider, questions_from_model
from decide.jobs.spec import SpecError


class Kind(str, Enum):
    auto = "auto"
    home = "home"


class Claim(BaseModel):
    claimant: str = Field(max_length=24, description="Who claims?",
                          json_schema_extra={"extract": True})  # fmt: skip
    amount: int | None = Field(None, ge=0, le=100_000, json_schema_extra={"extract": True})
    kind: Kind = Field(description="What kind of claim is it?")
    eligible: bool


def test_one_question_per_field_with_its_description_and_the_models_defs() -> None:
    questions = {q["id"]: q for q in questions_from_model(Claim)}
    assert list(questions) == ["claimant", "amount", "kind", "eligible"]
    assert questions["claimant"]["text"] == "Who claims?"
    assert questions["amount"]["text"] == "Amount"  # no description: the title
    assert questions["claimant"]["extract"] and questions["amount"]["extract"]
    assert "extract" not in questions["amount"]["schema"]  # moved to the question
    assert questions["kind"]["schema"]["$ref"] == "#/$defs/Kind"
    assert "Kind" in questions["kind"]["schema"]["$defs"]
    as_schema = questions_from_model(Claim.model_json_schema())  # the same from its schema
    assert as_schema == questions_from_model(Claim)
    with pytest.raises(SpecError, match="has no properties to ask"):
        questions_from_model({"type": "string"})


class Address(BaseModel):
    kind: Kind


class Policy(BaseModel):
    holder: str
    kind: Kind
    address: Address | None = None


def test_each_question_carries_only_the_definitions_it_refers_to() -> None:
    """A field's schema keeps the model's `$defs` it needs, through nested models too, and
    not the others; a reference the walk cannot follow keeps them all."""
    questions = {q["id"]: q["schema"] for q in questions_from_model(Policy)}
    assert "$defs" not in questions["holder"]
    assert set(questions["kind"]["$defs"]) == {"Kind"}
    assert set(questions["address"]["$defs"]) == {"Address", "Kind"}  # Address refers to Kind
    odd = Policy.model_json_schema()
    odd["properties"]["holder"] = {"$ref": "#/properties/kind"}
    assert set(questions_from_model(odd)[0]["schema"]["$defs"]) == {"Address", "Kind"}


def test_a_field_copied_without_the_models_defs_is_refused_saying_what_to_do(models) -> None:
    bare = dict(questions_from_model(Claim)[2])
    bare["schema"] = {"$ref": "#/$defs/Kind"}
    with pytest.raises(SpecError, match=r"#/\$defs/Kind points nowhere.*questions_from_model"):
        Decider(models["bert"]).decide("A claim.", [bare])


def test_a_model_class_is_decided_and_validates_back(models) -> None:
    decider = Decider(models["bert"], batch_size=4)
    texts = {
        f"c{i}": f"Claim {i} by Ann Lee: {1000 + 7 * i} dollars, car damage." for i in range(6)
    }
    decisions = decider.decide_many(texts, Claim)
    for d in decisions:
        assert d.ok, d.error
        claim = Claim.model_validate(d.answers)
        assert claim.claimant in texts[d.doc_id]
        assert claim.amount is None or str(claim.amount) in texts[d.doc_id].replace(",", "")
    one = decider.decide(texts["c0"], Claim)
    assert set(one.answers) == {"claimant", "amount", "kind", "eligible"}


class Rating(BaseModel):
    score: float = Field(ge=0, le=1, multiple_of=0.1, description="How risky is it?")
    stars: float = Field(ge=1, le=5, multiple_of=0.5)


def test_decimal_steps_are_every_step_and_validate_back(models) -> None:
    """Pydantic writes `multipleOf: 0.1`; every tenth is a value (jsonschema's float division
    alone would refuse 0.3, 0.6 and 0.7) and every answer validates back into the model."""
    decisions = Decider(models["bert"], batch_size=4).decide_many(
        {f"r{i}": f"Review {i}: fine, {i} complaints." for i in range(12)}, Rating
    )
    for d in decisions:
        assert d.ok, d.error
        rating = Rating.model_validate(d.answers)
        assert rating.score in {k / 10 for k in range(11)}, rating
        assert rating.stars in {1 + k / 2 for k in range(9)}, rating


class Leave(BaseModel):
    length: timedelta = Field(description="How long is the leave?")
    asked: timedelta | None = Field(None, description="How long a leave is asked for?",
                                    json_schema_extra={"extract": True})  # fmt: skip
    starts: datetime = Field(description="When does it start?")
    code: str = Field(pattern=r"^[A-Z]{2}-\d{4}$", description="Which case number?")


def test_durations_date_times_and_upper_case_codes_validate_back(models) -> None:
    """Pydantic writes `format: duration` for a `timedelta` (an annotation to jsonschema here,
    so any string passed, and Pydantic refused "negative"), `date-time` and upper-case patterns:
    every answer validates back into the model; an extracted length is the one the text states."""
    decider = Decider(models["bert"], batch_size=4)  # GPT-2's cased vocabulary; the bundled
    # model's uncased one: tests/decide/test_bundled.py
    texts = {
        f"l{i}": f"Case AB-{1000 + i}: I ask for {n} of leave from 2 June." for i, n in
        enumerate(["three weeks", "a fortnight", "six weeks and three days", "two months"])
    }  # fmt: skip
    for d in decider.decide_many(texts, Leave):
        assert d.ok, d.error
        leave = Leave.model_validate(d.answers)
        assert leave.asked in (None, *[timedelta(days=n) for n in (21, 14, 45, 42, 3, 60)])
        assert re.fullmatch(r"[A-Z]{2}-\d{4}", leave.code)
