"""Sets of Unicode code points as sorted disjoint intervals, and their UTF-8 byte encodings.

A `CharSet` is a tuple of inclusive `(lo, hi)` code point ranges, sorted and non-adjacent. Regex
character classes, JSON string contents and format alphabets are all `CharSet`s; `utf8_ranges`
turns one range into sequences of byte ranges (each sequence spells code points of equal encoded
length) so byte automata can be built without enumerating code points. Shorthand classes (`\\d`,
`\\w`, `\\s` and their negations) are the *intersection* of the ECMA-262 meaning the JSON Schema
spec asks for and the Python `re` meaning `jsonschema` checks with, so every string we generate
matches under both.
"""

from __future__ import annotations

import functools
import unicodedata

CharSet = tuple[tuple[int, int], ...]

MAX_CP = 0x10FFFF
SURROGATES: CharSet = ((0xD800, 0xDFFF),)


def normalize(ranges: list[tuple[int, int]] | CharSet) -> CharSet:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(r for r in ranges if r[0] <= r[1]):
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return tuple(out)


def union(*sets: CharSet) -> CharSet:
    return normalize([r for s in sets for r in s])


def negate(cs: CharSet) -> CharSet:
    out: list[tuple[int, int]] = []
    nxt = 0
    for lo, hi in cs:
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= MAX_CP:
        out.append((nxt, MAX_CP))
    return tuple(out)


def intersect(a: CharSet, b: CharSet) -> CharSet:
    return negate(union(negate(a), negate(b)))


def minus(a: CharSet, b: CharSet) -> CharSet:
    return intersect(a, negate(b))


def of(*chars: str) -> CharSet:
    return normalize([(ord(c), ord(c)) for c in chars])


def contains(cs: CharSet, cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in cs)


ANY: CharSet = minus(((0, MAX_CP),), SURROGATES)
DIGIT: CharSet = ((0x30, 0x39),)
WORD: CharSet = normalize([(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)])
# ECMA-262 WhiteSpace + LineTerminator; `\ufeff` is dropped because Python's `\s` lacks it.
_ECMA_SPACE: CharSet = normalize(
    [
        (0x09, 0x0D),
        (0x20, 0x20),
        (0xA0, 0xA0),
        (0x1680, 0x1680),
        (0x2000, 0x200A),
        (0x2028, 0x2029),
        (0x202F, 0x202F),
        (0x205F, 0x205F),
        (0x3000, 0x3000),
    ]
)
LINE_TERMINATORS: CharSet = of("\n", "\r", "\u2028", "\u2029")
DOT: CharSet = minus(ANY, LINE_TERMINATORS)


def _ranges_where(pred) -> CharSet:
    out: list[tuple[int, int]] = []
    start = None
    for cp in range(MAX_CP + 2):
        hit = cp <= MAX_CP and not (0xD800 <= cp <= 0xDFFF) and pred(chr(cp))
        if hit and start is None:
            start = cp
        elif not hit and start is not None:
            out.append((start, cp - 1))
            start = None
    return normalize(out)


@functools.cache
def _python_class(name: str) -> CharSet:
    """Code points Python's `re` puts in `\\d`, `\\w` or `\\s` (computed once, lazily)."""
    import re

    pat = re.compile(rf"\{name}")
    if name == "d":
        return _ranges_where(lambda c: unicodedata.category(c) == "Nd" and pat.match(c))
    return _ranges_where(lambda c: pat.match(c) is not None)


def shorthand(letter: str) -> CharSet:
    """`\\d \\w \\s \\D \\W \\S`: strings built from these match under ECMA-262 and Python `re`."""
    low = letter.lower()
    ecma = {"d": DIGIT, "w": WORD, "s": _ECMA_SPACE}[low]
    if letter == low:
        return intersect(ecma, _python_class(low)) if low == "s" else ecma
    return minus(ANY, union(ecma, _python_class(low)))


def _utf8(cp: int) -> bytes:
    return chr(cp).encode("utf-8")


def utf8_ranges(lo: int, hi: int) -> list[list[tuple[int, int]]]:
    """Byte-range sequences whose concatenated products are exactly the UTF-8 of `[lo, hi]`."""
    if lo > hi:
        return []
    if lo <= 0xDFFF and hi >= 0xD800:
        return utf8_ranges(lo, min(hi, 0xD7FF)) + utf8_ranges(max(lo, 0xE000), hi)
    for edge in (0x7F, 0x7FF, 0xFFFF):
        if lo <= edge < hi:
            return utf8_ranges(lo, edge) + utf8_ranges(edge + 1, hi)
    if hi <= 0x7F:
        return [[(lo, hi)]]
    for i in range(1, 4):
        m = (1 << (6 * i)) - 1
        if (lo & ~m) != (hi & ~m):
            if lo & m:
                return utf8_ranges(lo, lo | m) + utf8_ranges((lo | m) + 1, hi)
            if (hi & m) != m:
                return utf8_ranges(lo, (hi & ~m) - 1) + utf8_ranges(hi & ~m, hi)
    return [list(zip(_utf8(lo), _utf8(hi), strict=True))]
