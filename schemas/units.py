"""The `unit` of a numeric extract question: lengths of time (`written_durations`: days, weeks,
months, years) or amounts per period (`written_rates`: per_year, per_month, per_week). Either
way the document's numbers stated in other units count as numbers it states, converted."""

from __future__ import annotations

from decimal import Decimal

from .written_durations import UNITS as DURATION_UNITS
from .written_durations import duration_places
from .written_numbers import NumberPlace
from .written_rates import RATE_UNITS, rate_places

UNITS = DURATION_UNITS + RATE_UNITS


def unit_places(text: str, unit: str, places: list[NumberPlace] | None = None) -> list[NumberPlace]:
    """The numbers `text` states in `unit` beyond those written as such (`duration_places` or
    `rate_places`), in order of where they start."""
    if unit in RATE_UNITS:
        return rate_places(text, unit, places)
    return duration_places(text, unit, places)


def unit_in_document(value: object, text: str, unit: str) -> bool:
    """Whether the number `value` is one `text` states in `unit` (`unit_places`)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    wanted = Decimal(value) if isinstance(value, int) else Decimal(repr(value))
    return any(Decimal(p.value) == wanted for p in unit_places(text, unit))
