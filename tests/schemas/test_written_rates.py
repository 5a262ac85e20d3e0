"""Amounts per period as documents write them (`written_rates`, through `units`): what is read,
in which unit, with which offsets, and that the checks after decoding and the evidence accept
them."""

from __future__ import annotations

import pytest

from decide.jobs.evidence import locate
from decide.jobs.extracted import copied
from decide.schemas.dates import DatePolicy
from decide.schemas.units import unit_in_document, unit_places
from decide.schemas.written_rates import rate_places


def read(text: str, unit: str = "per_year") -> list[tuple[str, str]]:
    return [(text[p.start : p.end], p.value) for p in rate_places(text, unit)]


@pytest.mark.parametrize(
    ("text", "unit", "places"),
    [
        ("the unemployment benefit, $1,400 a month", "per_year", [("1,400 a month", "16800")]),
        ("About twelve thousand a month before tax.", "per_year",
         [("twelve thousand a month", "144000")]),
        ("full time, $52k a year.", "per_year", [("52k a year", "52000")]),
        ("I make 350 dollars per week", "per_year", [("350 dollars per week", "18200")]),
        ("Annual income: $85,000\nDefaults: none", "per_year",
         [("Annual income: $85,000", "85000")]),
        ("with an annual salary of $62,000.", "per_month", []),  # 5,166.67: not whole
        ("with an annual salary of $60,000.", "per_month", [("annual salary of $60,000", "5000")]),
        ("rent is 1,800/month, bills 30/wk, food 40/wk", "per_month",
         [("1,800/month", "1800"), ("30/wk", "130")]),  # 40/wk: 173.33…, left out
        ("a monthly salary of 4,000 and a bonus of 500 each month", "per_week", []),
        ("$31,000 annually, 2,000 per annum", "per_year",
         [("31,000 annually", "31000"), ("2,000 per annum", "2000")]),
        # No period: plain numbers, not rates; hours are not converted.
        ("I need $15,000 for 3 years; paid $20 an hour", "per_year", []),
    ],
)  # fmt: skip
def test_rates_are_read_with_their_offsets(text: str, unit: str, places: list) -> None:
    assert read(text, unit) == places


def test_units_dispatch_and_refuse_unknown_units() -> None:
    assert [p.value for p in unit_places("a fortnight ago", "days")] == ["14"]
    assert [p.value for p in unit_places("$1,400 a month", "per_year")] == ["16800"]
    with pytest.raises(ValueError, match="per_year, per_month, per_week"):
        rate_places("100 a month", "per_day")


def test_checks_after_decoding_and_evidence_accept_rates() -> None:
    text = "I'm asking for $15,000. My benefit is $1,400 a month."
    assert unit_in_document(16800, text, "per_year")
    assert not unit_in_document(16800, text, "per_month")
    assert copied(16800, text, {"type": "integer"}, DatePolicy(), "per_year")
    assert not copied(16800, text, {"type": "integer"}, DatePolicy())  # no unit: not stated
    start, end = locate(16800, text, {"type": "integer"}, unit="per_year")
    assert text[start:end] == "1,400 a month"
    start, end = locate(15000, text, {"type": "integer"}, unit="per_year")  # a plain number
    assert text[start:end] == "15,000"


def test_the_spec_accepts_exactly_the_units_that_are_read() -> None:
    import typing

    from decide.jobs.spec import Unit
    from decide.schemas.units import UNITS

    assert set(typing.get_args(Unit)) == set(UNITS)
