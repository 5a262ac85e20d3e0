"""Numbers as documents write them, for numeric extract questions (`decide.schemas.span`).

`number_places(text)` finds every number a text states, with its character offsets and its value
as a canonical JSON number:

- digits, with commas between groups of three and an optional decimal part ("$12,500.00" is
  12500, "2.50" is 2.5, "-3" is -3); not digits inside a word ("A320"), a dotted run ("1.2.3",
  "v2.0") or a minus joining two numbers ("2019-2020" is 2019 and 2020);
- digits with a scale: a word after them ("1.2 million", "12 thousand", "3 billion"), `k`/`K`
  joined to them ("$52k", "12K"), or `m`/`mn`/`bn` joined to an amount that a currency sign
  opens ("$3.5m", "€2bn"; "5m" alone is a length);
- numbers in words, read by text2num ("eighteen thousand four hundred" is 18400, "twenty-five"
  25, "forty two point five" 42.5, "zero" 0, "one" 1); ordinals ("third") are not numbers here.

A place's offsets cover what was read ("$52k" gives the offsets of "52k"), so the evidence of an
answer points at the words it came from. text2num (MIT, a maintained Rust reader with
Python bindings) reads the words; writing a number-word grammar by hand is what it saves.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from decimal import Decimal

import text_to_num

# A number in digits: commas between groups of three ("12,500"), an optional decimal part after a
# full stop, an optional minus sign directly before the digits. Not a number: digits inside a word
# ("A320"), a part of a dotted run ("1.2.3", "v2.0.1"), or a minus that joins two numbers
# ("2019-2020", "10-12" read 2019, 2020, 10 and 12).
NUMBER = re.compile(
    r"(?:(?<![\w.])([-−]))?(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?(?!\d)(?!\.\d)"
)
# What may follow digits and scale them: a word after one space, or a letter joined to them.
SCALE = re.compile(
    r"(?:[ \u00a0](thousand|million|billion)|(k)|(mn|bn|m))(?![^\W_])", re.IGNORECASE
)
SCALES = {"thousand": 3, "k": 3, "million": 6, "mn": 6, "m": 6, "billion": 9, "bn": 9}
CURRENCY = re.compile(r"[$€£¥]$")
# Tokens text2num reads: words as `decide.schemas.span.WORD` has them, and every other
# non-space character on its own (punctuation separates numbers: "ten, eleven" is two).
_TOKEN = re.compile(r"[^\W_]+(?:['’\-.&/][^\W_]+)*|[^\w\s]")


@dataclass(frozen=True)
class NumberPlace:
    start: int  # character offsets in the text of what was read as the number
    end: int
    value: str  # canonical JSON number: "12500", "2.5", "-3"


def canonical(value: Decimal) -> str:
    """`value` as a canonical JSON number: an integer without a decimal part, else the shortest
    decimal ("2.50" → "2.5")."""
    if value == value.to_integral_value():
        return str(int(value))  # also "-0" → "0"
    return format(value.normalize(), "f")


def _digit_places(text: str) -> list[NumberPlace]:
    places = []
    for match in NUMBER.finditer(text):
        sign, whole, fraction = match.groups()
        value = Decimal(("-" if sign else "") + whole.replace(",", "") + "." + (fraction or "0"))
        end = match.end()
        scaled = SCALE.match(text, end)
        if scaled is not None:
            word, k, letters = scaled.groups()
            if word or k or CURRENCY.search(text, 0, match.start()):
                value = value.scaleb(SCALES[(word or k or letters).lower()])
                end = scaled.end()
        places.append(NumberPlace(match.start(), end, canonical(value)))
    return places


class _Token:
    """A word as text2num's `find_numbers` reads it (its `Token` protocol)."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._lower = text.lower()

    def text(self) -> str:
        return self._text

    def text_lowercase(self) -> str:
        return self._lower

    def not_a_number_part(self) -> bool:
        return False

    def nt_separated(self, previous: _Token) -> bool:
        return False


def _word_places(text: str) -> list[NumberPlace]:
    tokens = [(m.start(), m.end()) for m in _TOKEN.finditer(text)]
    if not tokens:
        return []
    found = text_to_num.find_numbers([_Token(text[a:b]) for a, b in tokens], "en", threshold=0)
    places = []
    for occurrence in found:
        if occurrence.is_ordinal:
            continue
        start, end = tokens[occurrence.start][0], tokens[occurrence.end - 1][1]
        places.append(NumberPlace(start, end, canonical(Decimal(occurrence.text))))
    return places


def number_places(text: str) -> list[NumberPlace]:
    """Every number `text` states, in order of position (see the module docstring). Where words
    and digits overlap ("1.2 million", read from its digits with their scale), the digits win."""
    digits = _digit_places(text)
    starts = [d.start for d in digits]  # in order, and the places do not overlap
    words = []
    for w in _word_places(text):
        k = bisect.bisect_left(starts, w.end)  # digit places starting before the word ends
        if k and digits[k - 1].end > w.start:
            continue  # overlaps the last of them, the only one that can reach into the word
        if not any(c.isdigit() for c in text[w.start : w.end]):
            words.append(w)
    return sorted(digits + words, key=lambda p: p.start)


__all__ = ["NUMBER", "NumberPlace", "canonical", "number_places"]
