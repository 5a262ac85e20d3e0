"""Amounts per period as documents write them, for numeric extract questions with a rate `unit`.

"What is the annual income in dollars?" is answered by a number the document may state per
month: "$1,400 a month", "twelve thousand a month", "a monthly salary of 4,000". With
`unit: per_year` (or `per_month`, `per_week`), `rate_places(text, unit)` finds every amount the
text states with a period, with its character offsets and its value per `unit` as a canonical
JSON number:

- after the amount (an optional currency word between): "a", "an", "per", "each" or "every"
  and year, annum, month or week ("$1,400 a month", "40,000 dollars per year", "per annum"),
  a slash ("4,000/month", "/yr", "/mo", "/wk"), or annually, yearly, monthly, weekly, "p.a.";
- before it: annual, yearly, monthly or weekly at most three words earlier, then an optional
  "of", "is", "was", ":" or "=" ("monthly income: $4,000", "an annual salary of $62,000").

The conversion is by fixed counts: a year is 12 months and 52 weeks. A value that is not a whole
number, or needs more than two decimals, in `unit` is left out ("$350 a week" per month). Hourly
amounts are not converted (hours per week differ). An amount written without a period is a plain
number of the document, read as every numeric extract question reads numbers.
"""

from __future__ import annotations

import re
from decimal import Decimal
from fractions import Fraction

from .written_numbers import NumberPlace, canonical, number_places

PER_YEAR = {"year": 1, "month": 12, "week": 52}
RATE_UNITS = ("per_year", "per_month", "per_week")
_PERIOD = {
    "year": "year", "yr": "year", "annum": "year", "annually": "year", "yearly": "year",
    "annual": "year", "p.a.": "year", "pa": "year", "month": "month", "mo": "month",
    "monthly": "month", "week": "week", "wk": "week", "weekly": "week",
}  # fmt: skip
_CURRENCY = r"(?:[ \u00a0]*(?:dollars?|usd|euros?|eur|pounds?|gbp|rupees?|inr|naira|pesos?))?"
_AFTER = re.compile(
    _CURRENCY + r"(?:[ \u00a0]*(?:an?|per|each|every)[ \u00a0]+(year|annum|month|week)s?"
    r"|[ \u00a0]*/[ \u00a0]*(year|yr|annum|month|mo|week|wk)"
    r"|[ \u00a0]+(annually|yearly|monthly|weekly|p\.a\.))(?![^\W_])",
    re.IGNORECASE,
)
_BEFORE = re.compile(
    r"(?<![^\W_])(annual|yearly|monthly|weekly)(?:[ \u00a0]+[^\W\d_][\w'-]*){0,3}"
    r"[ \u00a0]*(?:of|is|was|:|=)?[ \u00a0]*(?:US|CA|AU)?[$£€]?[ \u00a0]*$",
    re.IGNORECASE,
)


def _period(text: str, place: NumberPlace) -> tuple[str, int, int] | None:
    """(period, start, end) of an amount stated with a period; None for a plain number."""
    after = _AFTER.match(text, place.end)
    if after:
        word = next(g for g in after.groups() if g is not None).lower()
        return _PERIOD[word], place.start, after.end()
    before = _BEFORE.search(text, max(0, place.start - 60), place.start)
    if before:
        return _PERIOD[before.group(1).lower()], before.start(), place.end
    return None


def rate_places(text: str, unit: str, places: list[NumberPlace] | None = None) -> list[NumberPlace]:
    """Every amount `text` states with a period, valued per `unit` (see the module docstring),
    in order of where it starts. `places` are `number_places(text)` if the caller has them."""
    if unit not in RATE_UNITS:
        raise ValueError(f"unit must be one of {', '.join(RATE_UNITS)}, got {unit!r}")
    to = unit.removeprefix("per_")
    out = []
    for place in number_places(text) if places is None else places:
        found = _period(text, place)
        if found is None:
            continue
        period, start, end = found
        value = Fraction(Decimal(place.value)) * PER_YEAR[period] / PER_YEAR[to]
        if (value * 100).denominator == 1:
            exact = Decimal(value.numerator) / Decimal(value.denominator)
            out.append(NumberPlace(start, end, canonical(exact)))
    return sorted(out, key=lambda p: (p.start, p.end))
