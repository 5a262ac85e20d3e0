"""Dates as documents write them, read into ISO for extract questions with `format: date`
(and lengths of time for `format: duration`, `written_durations.iso_duration`).

An extract question whose schema is a string with `format: date` (or `date-time`) answers with
a date the document states, normalised to ISO 8601 ("June 9, 2025", "9 June 2025", "Monday,
June 9, 2025", "9th of June 2025", "2025-06-09" → `"2025-06-09"`), the way numeric extract
answers read "$12,500.00" as 12500. Candidates are the document's spans (`span._span_places`)
made only of date words (numbers, dateutil's month and weekday names and its filler words such
as "of", "the", "at"); each is read by `dateutil.parser` and kept only when it states a day, a
month and a year (and, for `date-time`, an hour and a minute) and reads the same under every
permitted day/month order. A year is four digits, or two at the end of an all-numeric date
("9/6/25"): beside a month name a two-digit number is a day, never a year ("Apr 1 - Apr 30"
is no date of 2030). All-numeric dates whose day and month could swap ("09/06/2025") are read
by `DatePolicy.order`: `day_first`, `month_first`, or `refuse` (the default: such a span is not
a date). A year-first date ("2025-06-09", "2025/06/09") is always year-month-day. A stated
weekday that disagrees with the date refuses the span. A `date-time` without an offset takes
`DatePolicy.timezone` ("Z", "+02:00") when one is set, else the span is refused.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from dateutil import parser as dateutil_parser

from .nullable import value_schema
from .vocab import Vocabulary
from .written_durations import iso_duration

ORDERS = ("refuse", "day_first", "month_first")
MAX_DATE_WORDS = 8
_INFO = dateutil_parser.parserinfo()
_MONTHS = {n.lower() for pair in _INFO.MONTHS for n in pair} | {"sept"}
_WEEKDAYS = {n.lower(): i for i, pair in enumerate(_INFO.WEEKDAYS) for n in pair}
_FILLER = {w.strip().lower() for w in _INFO.JUMP if w.strip()} | {"the", "am", "pm", "a.m", "p.m"}
_NUMERIC = re.compile(
    r"^\d+(?:st|nd|rd|th)?$|^\d+(?:[./\-:]\d+)+(?:t\d+(?::\d+)*)?(?:z|[+-]\d{2}:?\d{2})?$", re.I
)
_YEAR_FIRST = re.compile(r"^\d{4}[./\-]")
_FOUR_DIGITS = re.compile(r"(?<!\d)\d{4}(?!\d)")
_NUMERIC_DATE = re.compile(r"\d{1,2}([./\-])\d{1,2}\1\d{2}")
_DEFAULTS = (datetime(1901, 1, 1, 1, 1, 1), datetime(1902, 2, 2, 2, 2, 2))
_OFFSET = re.compile(r"^(?:Z|[+-]\d{2}:\d{2})$")


@dataclass(frozen=True)
class DatePolicy:
    """How all-numeric day/month dates are read, and the offset of date-times stated without
    one (None: refuse them)."""

    order: str = "refuse"
    timezone: str | None = None

    def __post_init__(self) -> None:
        if self.order not in ORDERS:
            raise ValueError(f"dates.order must be one of {', '.join(ORDERS)}")
        if self.timezone is not None and not _OFFSET.match(self.timezone):
            raise ValueError('dates.timezone is "Z" or an offset such as "+02:00"')


def date_format(schema: Any) -> str | None:
    """`date`, `date-time` or `duration` when an extract question's schema asks for one, else
    None."""
    schema, _ = value_schema(schema)
    if isinstance(schema, dict) and schema.get("format") in ("date", "date-time", "duration"):
        kind = schema.get("type")
        if kind is None or kind == "string" or (isinstance(kind, list) and "string" in kind):
            return schema["format"]
    return None


def _words_fit(text: str) -> bool:
    """Whether a span is made of date words only, with at most one month, one weekday and one
    four-digit year (two dates side by side are not one)."""
    months = weekdays = years = 0
    digits = False
    for raw in re.split(r"[\s,;]+", text):
        word = raw.strip(".").lower()
        if not word:
            continue
        if word in _MONTHS:
            months += 1
        elif word in _WEEKDAYS:
            weekdays += 1
        elif _NUMERIC.match(word):
            digits = True
            years += bool(re.search(r"(?<!\d)\d{4}(?!\d)", word))
        elif word not in _FILLER:
            return False
    return digits and months <= 1 and weekdays <= 1 and years <= 1


def read_date(text: str, fmt: str = "date", policy: DatePolicy | None = None) -> str | None:
    """The ISO value of a written date (`date` or `date-time`), or None when `text` is not one
    complete date or is ambiguous under `policy`; for `duration`, of a written length of time
    (`written_durations.iso_duration`: "three weeks" → "P3W")."""
    if fmt == "duration":
        return iso_duration(text)
    policy = policy or DatePolicy()
    if not _words_fit(text) or not _year_written(text):
        return None
    if _YEAR_FIRST.match(text.strip()):
        orders = [(False, True)]  # (dayfirst, yearfirst): ISO and other year-first layouts
    else:
        orders = {"refuse": [(True, False), (False, False)], "day_first": [(True, False)],
                  "month_first": [(False, False)]}[policy.order]  # fmt: skip
    values = set()
    for dayfirst, yearfirst in orders:
        try:
            a, b = (
                dateutil_parser.parse(text, default=d, dayfirst=dayfirst, yearfirst=yearfirst)
                for d in _DEFAULTS
            )
        except (ValueError, OverflowError):
            continue
        if a.date() != b.date():
            return None  # day, month or year not stated
        if fmt == "date-time" and (a.hour, a.minute) != (b.hour, b.minute):
            return None  # no time of day
        if a.second != b.second:
            a = a.replace(second=0)  # a time of day stated to the minute
        if not _weekday_agrees(text, a):
            return None
        values.add(_iso(a, fmt, policy))
    if len(values) != 1:
        return None  # unreadable, or ambiguous between day-first and month-first
    return values.pop()


def _year_written(text: str) -> bool:
    """Whether `text` writes a year: four digits, or the last part of one all-numeric date
    ("9/6/25"). A lone one- or two-digit number beside a month name is a day ("Apr 1 - Apr 30"
    is no date of 2030, "Jun 1 - 15" none of 2015)."""
    if _FOUR_DIGITS.search(text):
        return True
    return any(_NUMERIC_DATE.fullmatch(w) for w in re.split(r"[\s,;]+", text.strip()))


def _weekday_agrees(text: str, when: datetime) -> bool:
    for raw in re.split(r"[\s,;.]+", text.lower()):
        if raw in _WEEKDAYS and _WEEKDAYS[raw] != when.weekday():
            return False
    return True


def _iso(when: datetime, fmt: str, policy: DatePolicy) -> str | None:
    if fmt == "date":
        return when.date().isoformat()
    if when.tzinfo is None:
        if policy.timezone is None:
            return None
        when = when.replace(tzinfo=_offset(policy.timezone))
    text = when.isoformat(timespec="seconds")
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def _offset(text: str) -> timezone:
    if text == "Z":
        return timezone.utc
    sign = -1 if text[0] == "-" else 1
    return timezone(sign * timedelta(hours=int(text[1:3]), minutes=int(text[4:6])))


def document_dates(
    document: str | Sequence[str], fmt: str = "date", policy: DatePolicy | None = None
) -> list[str]:
    """The distinct ISO values of the dates `document` states (`read_date` of its spans), in
    order of first appearance; ambiguous or incomplete dates are left out."""
    from .span import _span_places

    out: dict[str, None] = {}
    for _, _, _, text in _span_places(document, MAX_DATE_WORDS, None):
        value = read_date(text, fmt, policy)
        if value is not None:
            out.setdefault(value, None)
    return [v for v in out if v is not None]


def date_in_document(
    value: Any, document: str, fmt: str = "date", policy: DatePolicy | None = None
) -> bool:
    """Whether `value` is the ISO value of a date `document` states: the check every date
    extract answer gets after decoding, independent of how the slot was built."""
    return isinstance(value, str) and value in document_dates(document, fmt, policy)


class DocumentDates:
    """A document's dates (`document_dates`) as one vocabulary spells their JSON strings, plus
    `null`: the entries a date extract question's `SpanSlot` chooses from."""

    what = "date"

    def __init__(
        self,
        document: str | Sequence[str],
        vocab: Vocabulary,
        fmt: str = "date",
        policy: DatePolicy | None = None,
    ) -> None:
        from .span import _distinct, _encode_all

        self.vocab = vocab
        texts = [json.dumps(v) for v in document_dates(document, fmt, policy)]
        self.entries = _distinct(_encode_all(vocab, [*texts, "null"]))
