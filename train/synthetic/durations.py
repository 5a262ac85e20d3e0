"""Days since purchase as people write them, for training tickets only.

The generator's ticket phrasings all write "{days} days" in digits, so a model trained on them
copies digits and never learns that "two weeks ago" answers 14 (the hand-written validation
tickets say "a fortnight", "six weeks and three days", "two months"). For `DURATION_SHARE` of
training tickets `duration_phrase` rewrites the days as such a length, valued by the convention of
`decide.schemas.written_durations` (a week 7 days, a fortnight 14, a month 30), so the gold answer
stays the same number. Held-out documents are never rewritten (their draws are untouched).
Numbers up to 99 are spelled by `words`: a table of twenty-eight words, smaller than a dependency.
"""

from __future__ import annotations

import random

DURATION_SHARE = 0.4
ONES = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
TENS = ["-", "-", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]


def words(n: int) -> str:
    """`n` (0-99) in English words ("forty-five")."""
    if not 0 <= n < 100:
        raise ValueError(f"words() spells 0-99, got {n}")
    if n < 20:
        return ONES[n]
    return TENS[n // 10] + ("" if n % 10 == 0 else "-" + ONES[n % 10])


def _count(n: int, unit: str, rng: random.Random) -> str:
    """ "a week", "two weeks", "3 weeks" (digits now and then, as people mix them)."""
    if n == 1:
        return f"a {unit}" if rng.random() < 0.7 else f"one {unit}"
    return f"{n if rng.random() < 0.2 else words(n)} {unit}s"


def duration_phrase(days: int, rng: random.Random) -> str:
    """A length of `days` days (1-99) as a person might write it instead of "{days} days"."""
    if days >= 30 and days % 30 == 0:
        return _count(days // 30, "month", rng)
    if days % 7 == 0:
        if days == 14 and rng.random() < 0.4:
            return "a fortnight"
        return _count(days // 7, "week", rng)
    if days > 7 and rng.random() < 0.5:
        return f"{_count(days // 7, 'week', rng)} and {_count(days % 7, 'day', rng)}"
    return _count(days, "day", rng)
