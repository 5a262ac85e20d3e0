"""Evidence of an answer: where in the original document it was read.

Contract: every answer of a windowed document (`jobs.longdocs`) carries an `Evidence`: the
character offsets `start:end` of the window whose answer was kept (`window` is its index among
the document's windows), and for an extract answer the offsets `span_start:span_end` of the
span, number or date it copied, found by `locate` in that window the way `decide.schemas.span`
and `decide.schemas.dates` define spans (the first place it appears), its end grown over the
combining marks that follow (`whole`: a span never ends inside a character). A document read whole
(`jobs.decisions`) has evidence for its extract answers only: `window` None, `start:end` the
whole document, and the span located the same way. All offsets index the original document
string (Python characters). `EVIDENCE_FIELDS` is the struct the output parquet holds per question
(null for an answer without evidence: a non-extract answer of a document read whole, `null`, or
a value not found as written).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import polars as pl

from decide.schemas.dates import MAX_DATE_WORDS, DatePolicy, date_format, read_date
from decide.schemas.span import WrittenSpans, _span_places, past_marks
from decide.schemas.units import unit_places
from decide.schemas.written_numbers import number_places

EVIDENCE_FIELDS: dict[str, pl.DataType] = {
    "window": pl.Int32,
    "start": pl.Int64,
    "end": pl.Int64,
    "span_start": pl.Int64,
    "span_end": pl.Int64,
}


@dataclass(frozen=True)
class Evidence:
    window: int | None  # None: the document was read whole (start, end: all of it)
    start: int
    end: int
    span_start: int | None = None
    span_end: int | None = None

    def as_dict(self) -> dict[str, int | None]:
        return {k: getattr(self, k) for k in EVIDENCE_FIELDS}


def evidence_dtype(question_ids: list[str]) -> pl.Struct:
    """The output's `evidence` column: one struct of `EVIDENCE_FIELDS` per question id."""
    return pl.Struct({qid: pl.Struct(EVIDENCE_FIELDS) for qid in question_ids})


def locate(
    value: Any,
    text: str,
    schema: Any,
    dates: DatePolicy | None = None,
    unit: str | None = None,
    spans: WrittenSpans | None = None,
) -> tuple[int, int] | None:
    """Offsets in `text` of the first span, number or date that `value` (an extract answer) was
    copied from; None for `null` or when it is not there. With a `unit`, a length of time or an
    amount per period the text states ("two weeks", "$1,400 a month") is looked for before a
    number written as such. `spans`: `text`'s `WrittenSpans`, when the caller has them."""
    found = _locate(value, text, schema, dates, unit, spans)
    return None if found is None else (found[0], past_marks(text, found[1]))


def _locate(
    value: Any,
    text: str,
    schema: Any,
    dates: DatePolicy | None,
    unit: str | None,
    spans: WrittenSpans | None,
) -> tuple[int, int] | None:
    if value is None or isinstance(value, bool):
        return None
    fmt = date_format(schema)
    if fmt is not None:
        # Filler words ("on", "the") also read as the date: keep the tightest of the first.
        places = [
            (end, -start)
            for _, start, end, span in _span_places(text, MAX_DATE_WORDS, None)
            if read_date(span, fmt, dates) == value
        ]
        if not places:
            return None
        end, start = min(places)
        return -start, end
    if isinstance(value, str):
        return (spans or WrittenSpans(text)).find(value)
    number = Decimal(value) if isinstance(value, int) else Decimal(repr(value))
    in_unit = unit_places(text, unit) if unit is not None else []
    for place in [*in_unit, *number_places(text)]:
        if Decimal(place.value) == number:
            return place.start, place.end
    return None
