"""Checks on extract answers shared by the decision engine: whether an answer is its document's.

`copied` is the check every extract answer gets after decoding, independent of how its slot was
built: a span read in the document (ignoring case, accents and spaces), a number it states, or
the ISO value of a date it writes (under the job's `DatePolicy`); `null` always passes.
`as_written` gives a span answer back as the document writes it (case, accents, spaces), which an
uncased vocabulary cannot spell.
`MissingSpan` is raised while packing when one extract question of a document has no admissible
span: an answer-level failure (the row stays ok and partial) unless `partial_rows: error`.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from decide.schemas.dates import DatePolicy, date_format, date_in_document
from decide.schemas.span import NoSpan, WrittenSpans, in_document, number_in_document
from decide.schemas.units import unit_in_document

if TYPE_CHECKING:
    from decide.schemas.slot import CompiledSlot


class MissingSpan(NoSpan):
    """An extract question of one document has no admissible span (an answer-level error)."""

    def __init__(self, question_id: str, message: str) -> None:
        super().__init__(message)
        self.question_id = question_id


def copied(value: Any, text: str, schema: Any, dates: DatePolicy, unit: str | None = None) -> bool:
    """Whether an extract answer is a span, a number or a date of its document (or `null`);
    with a `unit`, a number may also be a length of time the document states."""
    if value is None:
        return True
    fmt = date_format(schema)
    if fmt is not None:
        return date_in_document(value, text, fmt, dates)
    if isinstance(value, str):
        return in_document(value, text)
    # Looser than a unit slot's candidates (`units.unit_values` drops the 2 of "2 weeks" in
    # days): a truncation may cut "2" from its "weeks", and the slot then offers it.
    return number_in_document(value, text) or (
        unit is not None and unit_in_document(value, text, unit)
    )


def as_written(value: Any, spans: WrittenSpans, schema: Any, slot: CompiledSlot) -> Any:
    """A span answer as its document writes it: the text of the first span that reads as it
    (ignoring case, accents and spaces), when that text is a value of the question's schema too
    ("São Paulo" for an uncased model's "sao paulo", "Tent 4P" for "tent4p"). Numbers, dates,
    `null` and answers without such a span stay as decoded."""
    if not isinstance(value, str) or date_format(schema) is not None:
        return value
    written = spans.written(value)
    if written is None or written == value:
        return value
    language = slot.language
    valid = next(language.validator.iter_errors(written), None) is None
    if valid and language.accepts(json.dumps(written, ensure_ascii=False)):
        return written
    return value
