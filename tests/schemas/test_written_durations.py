"""Lengths of time as documents write them (`written_durations`): what is read, in which unit,
with which offsets, and that the checks after decoding and the evidence accept them."""

from __future__ import annotations

import pytest

from decide.jobs.evidence import locate
from decide.jobs.extracted import copied
from decide.schemas.dates import DatePolicy, document_dates
from decide.schemas.language import compile_language
from decide.schemas.units import unit_in_document
from decide.schemas.validate import check_questions
from decide.schemas.written_durations import duration_places, iso_duration


def read(text: str, unit: str = "days") -> list[tuple[str, str]]:
    return [(text[p.start : p.end], p.value) for p in duration_places(text, unit)]


@pytest.mark.parametrize(
    ("text", "places"),
    [
        ("bought it two weeks ago", [("two weeks", "14")]),
        ("a fortnight back", [("a fortnight", "14")]),
        ("The purchase was six weeks and three days ago.",
         [("six weeks", "42"), ("six weeks and three days", "45"), ("three days", "3")]),
        ("two months ago — sixty days exactly", [("two months", "60"), ("sixty days", "60")]),
        ("I got it the day before yesterday", [("the day before yesterday", "2")]),
        ("ordered yesterday, upgraded earlier today", [("yesterday", "1"), ("today", "0")]),
        ("a 30-day window and 1 year", [("30-day", "30"), ("1 year", "365")]),
        # A comma lists, it does not add; a number without a unit is no duration.
        ("3 weeks, 2 days; order 44", [("3 weeks", "21"), ("2 days", "2")]),
        ("Weekday service, dayton office, 12 monthly payments", []),
    ],
)  # fmt: skip
def test_durations_are_read_in_days(text, places) -> None:
    assert read(text) == places


def test_other_units_convert_exactly_or_not_at_all() -> None:
    text = "18 months, 1 year and 6 months, ten days, a fortnight"
    assert read(text, "years") == [("18 months", "1.5"), ("1 year", "1"),
                                   ("1 year and 6 months", "1.5"), ("6 months", "0.5")]  # fmt: skip
    assert ("a fortnight", "2") in read(text, "weeks")
    assert all(value != "1.43" for _, value in read(text, "weeks"))  # ten days: not whole weeks
    assert ("18 months", "18") in read(text, "months")
    with pytest.raises(ValueError, match="unit must be one of"):
        duration_places(text, "hours")


def test_the_check_after_decoding_and_the_evidence_accept_durations() -> None:
    text = "Order 44-918273. Ordered two weeks ago, nobody came."
    schema = {"type": "integer"}
    assert unit_in_document(14, text, "days") and not unit_in_document(14.5, text, "days")
    assert copied(14, text, schema, DatePolicy(), "days")
    assert not copied(14, text, schema, DatePolicy())  # without a unit 14 is not stated
    assert copied(44, text, schema, DatePolicy(), "days")  # numbers as written still count
    start, end = locate(14, text, schema, unit="days")
    assert text[start:end] == "two weeks"


@pytest.mark.parametrize(
    ("text", "iso"),
    [
        ("three weeks", "P3W"),
        ("a fortnight", "P2W"),
        ("two weeks and a fortnight", "P4W"),
        ("two months", "P2M"),
        ("a year and two months", "P1Y2M"),
        ("six weeks and three days", "P45D"),  # ISO writes weeks alone: joined with days, 7 each
        ("twenty-one days", "P21D"),
        ("30-day", "P30D"),
        (" 2 years ", "P2Y"),
        ("1.5 days", None),  # ISO's designators take whole numbers
        ("yesterday", None),  # a day, not a length
        ("3 weeks ago", None),  # more than a length of time
        ("three weeks, two days", None),  # a comma lists
    ],
)
def test_a_written_length_of_time_reads_as_an_iso_duration(text: str, iso: str | None) -> None:
    assert iso_duration(text) == iso
    if iso is not None:
        assert compile_language({"type": "string", "format": "duration"}).accepts(f'"{iso}"')


def test_duration_extract_answers_are_checked_and_located_in_the_document() -> None:
    schema = {"type": "string", "format": "duration"}
    letter = (
        "I need six weeks and three days of leave from 2 June; my manager agreed to three weeks."
    )
    assert document_dates(letter, "duration") == ["P6W", "P45D", "P3D", "P3W"]
    assert copied("P3W", letter, schema, DatePolicy())
    assert not copied("P21D", letter, schema, DatePolicy())  # the document writes weeks
    start, end = locate("P45D", letter, schema)
    assert letter[start:end] == "six weeks and three days"


def test_decide_validate_names_what_a_duration_extract_copies() -> None:
    report = check_questions([("length", {"type": "string", "format": "duration"})],
                             extract=["length"])[0]  # fmt: skip
    assert report.supported and report.extract == "lengths of time"
