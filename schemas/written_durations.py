"""Lengths of time as documents write them, for numeric extract questions with a `unit`.

A question such as "How many days ago was the purchase?" is answered by a number the document
may never write in digits: "two weeks ago", "a fortnight back", "six weeks and three days ago",
"the day before yesterday". `duration_places(text, unit)` finds every length of time a text
states, with its character offsets and its value in `unit` (days, weeks, months or years) as a
canonical JSON number:

- a quantity and a unit: the quantity is any number `written_numbers` reads ("2", "two",
  "twenty-one") or "a"/"an"/"one"; the unit is day, week, fortnight, month or year, singular or
  plural, after one space or hyphen ("3 weeks", "a fortnight", "30-day"; not "ten-day", which
  text2num reads as one word);
- terms joined by "and" add up ("six weeks and three days" is 45 days; a comma alone lists),
  and each term is also a place of its own;
- today (also "earlier today", "this morning", "tonight") is 0 days, "yesterday" 1, "the day
  before yesterday" 2.

The conversion is by fixed lengths: a week is 7 days, a fortnight 14, a month 30, a year 365
(what the hand-written documents' writers took "two months" to mean, and what a claims or
returns desk counts), and a year is 12 months. A value that is not a whole number of `unit`, or
needs more than two decimals ("ten days" in weeks), is left out. No base date is needed: these
are lengths, not dates. `iso_duration(text)` reads a text that is one length of time into an
ISO 8601 duration, for extract questions with `format: duration`. Relative dates as calendar
arithmetic (dateparser's `search_dates`) were tried and not used: "two months ago" there is 61
days from 4 December, and its search returns spans that swallow neighbouring words ("S24 two
weeks ago and").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

from .written_numbers import NumberPlace, canonical, number_places

DAYS = {"day": 1, "week": 7, "fortnight": 14, "month": 30, "year": 365}
MONTHS = {"month": 1, "year": 12}
UNITS = ("days", "weeks", "months", "years")
# A unit word right after a quantity: one space, a no-break space or a hyphen between them.
_UNIT_AFTER = re.compile(r"[ \u00a0-](day|week|fortnight|month|year)s?(?![^\W_])", re.IGNORECASE)
_ARTICLE = re.compile(
    r"(?<![^\W_])(an?|one)[ \u00a0](day|week|fortnight|month|year)(?![^\W_])", re.IGNORECASE
)
_JOIN = re.compile(r",?\s+and\s+", re.IGNORECASE)  # a comma alone lists, it does not add
_RELATIVE = [
    (re.compile(r"(?<![^\W_])the day before yesterday(?![^\W_])", re.IGNORECASE), 2),
    # Not the "yesterday" of "the day before yesterday", which is 2.
    (re.compile(r"(?<![^\W_])(?<!day before )yesterday(?![^\W_])", re.IGNORECASE), 1),
    (re.compile(r"(?<![^\W_])(?:today|tonight|this morning|this afternoon)(?![^\W_])", re.I), 0),
]


@dataclass(frozen=True)
class _Term:
    start: int
    end: int
    qty: Fraction
    unit: str  # a key of DAYS


def _convert(qty: Fraction, unit: str, to: str) -> Fraction:
    """`qty` `unit`s in `to`s: months and years by 12 to a year, everything else by DAYS."""
    if unit in MONTHS and to in MONTHS:
        return qty * MONTHS[unit] / MONTHS[to]
    return qty * DAYS[unit] / DAYS[to]


def _terms(text: str, places: list[NumberPlace] | None) -> list[_Term]:
    """Every "<quantity> <unit>" of `text`, in order of their start (`places`: its numbers,
    when the caller has read them already)."""
    found: dict[int, _Term] = {}
    for place in number_places(text) if places is None else places:
        unit = _UNIT_AFTER.match(text, place.end)
        if unit:
            qty = Fraction(Decimal(place.value))
            found[place.start] = _Term(place.start, unit.end(), qty, unit.group(1).lower())
    for m in _ARTICLE.finditer(text):
        found.setdefault(m.start(), _Term(m.start(), m.end(), Fraction(1), m.group(2).lower()))
    return [found[k] for k in sorted(found)]


def duration_places(
    text: str, unit: str, places: list[NumberPlace] | None = None
) -> list[NumberPlace]:
    """Every length of time `text` states, valued in `unit` (see the module docstring), in
    order of where it starts; a sum of joined terms comes after its first term. `places` are
    `number_places(text)` if the caller has them (they are read again otherwise)."""
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {', '.join(UNITS)}, got {unit!r}")
    to = unit.removesuffix("s")
    spans: list[tuple[int, int, Fraction]] = []
    terms = _terms(text, places)
    for i, term in enumerate(terms):
        total, end = _convert(term.qty, term.unit, to), term.end
        spans.append((term.start, end, total))
        for nxt in terms[i + 1 :]:
            if not _JOIN.fullmatch(text, end, nxt.start):
                break
            total, end = total + _convert(nxt.qty, nxt.unit, to), nxt.end
            spans.append((term.start, end, total))
    for pattern, days in _RELATIVE:
        value = _convert(Fraction(days), "day", to)
        spans += [(m.start(), m.end(), value) for m in pattern.finditer(text)]
    out = []
    for start, end, value in sorted(spans, key=lambda s: (s[0], s[1])):
        if (value * 100).denominator == 1:
            exact = Decimal(value.numerator) / Decimal(value.denominator)
            out.append(NumberPlace(start, end, canonical(exact)))
    return out


# ISO 8601 designators of the units a written length of time states (`iso_duration`).
_DESIGNATOR = {"year": "Y", "month": "M", "day": "D"}


def iso_duration(text: str) -> str | None:
    """The ISO 8601 duration (`format: duration`) that `text`, and nothing else, states as a
    length of time: "three weeks" → "P3W", "a fortnight" → "P2W", "two months" → "P2M",
    "a year and two months" → "P1Y2M", "six weeks and three days" → "P45D" (weeks join days
    as 7 each: ISO writes weeks alone). Whole numbers only ("1.5 days" is not one: ISO's
    designators take digits); "yesterday" and "today" are not lengths; None otherwise."""
    stripped = text.strip()
    offset = len(text) - len(text.lstrip())
    terms = _terms(text, None)
    if not terms or terms[0].start != offset:
        return None
    chain = [terms[0]]
    for nxt in terms[1:]:
        if not _JOIN.fullmatch(text, chain[-1].end, nxt.start):
            break
        chain.append(nxt)
    if chain[-1].end != offset + len(stripped):
        return None
    if any(t.qty.denominator != 1 or t.qty < 0 for t in chain):
        return None
    weeks = {"week": 1, "fortnight": 2}
    if all(t.unit in weeks for t in chain):
        return f"P{sum(int(t.qty) * weeks[t.unit] for t in chain)}W"
    totals = {"year": 0, "month": 0, "day": 0}
    for t in chain:
        if t.unit in totals:
            totals[t.unit] += int(t.qty)
        else:
            totals["day"] += int(t.qty) * DAYS[t.unit]
    parts = "".join(f"{n}{_DESIGNATOR[u]}" for u, n in totals.items() if n)
    return f"P{parts or '0D'}"
