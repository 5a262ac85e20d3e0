"""The `unit` of a numeric extract question: lengths of time (`written_durations`: days, weeks,
months, years) or amounts per period (`written_rates`: per_year, per_month, per_week). Either
way the document's numbers stated in other units count as numbers it states, converted, and
the bare quantity of such a statement is not one of them ("2 weeks" offers 14 days, not 2)."""

from __future__ import annotations

from decimal import Decimal

from .written_durations import UNITS as DURATION_UNITS
from .written_durations import duration_places
from .written_numbers import NumberPlace, number_places
from .written_rates import RATE_UNITS, rate_places

UNITS = DURATION_UNITS + RATE_UNITS


def unit_places(text: str, unit: str, places: list[NumberPlace] | None = None) -> list[NumberPlace]:
    """The numbers `text` states in `unit` beyond those written as such (`duration_places` or
    `rate_places`), in order of where they start."""
    if unit in RATE_UNITS:
        return rate_places(text, unit, places)
    return duration_places(text, unit, places)


def unit_values(text: str, unit: str, places: list[NumberPlace] | None = None) -> list[str]:
    """The numbers a question in `unit` may answer from `text`, as canonical JSON numbers: its
    plain numbers (`places`, `number_places(text)` when not given), except the quantity of a
    length of time or an amount per period it states in another unit, then those statements in
    `unit` (`unit_places`). In days, "2 weeks" offers 14, not 2, and "six weeks and three days"
    45 and 3 (each term is also read alone), not 6; per year, "$1,400 a month" offers 16800, not
    1400. A quantity whose conversion is not offered (not whole to two decimals) stays a plain
    number. Order: first appearance, plain numbers before converted ones."""
    places = number_places(text) if places is None else places
    in_unit = unit_places(text, unit, places)

    def other_unit(place: NumberPlace) -> bool:
        return any(
            u.start <= place.start and place.end <= u.end and u.value != place.value
            for u in in_unit
        )

    values = dict.fromkeys(p.value for p in places if not other_unit(p))
    values.update(dict.fromkeys(p.value for p in in_unit))
    return list(values)


def unit_in_document(value: object, text: str, unit: str) -> bool:
    """Whether the number `value` is one `text` states in `unit` (`unit_places`)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    wanted = Decimal(value) if isinstance(value, int) else Decimal(repr(value))
    return any(Decimal(p.value) == wanted for p in unit_places(text, unit))
