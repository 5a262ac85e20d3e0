"""Exact languages of canonical JSON numbers between bounds, as regexes for `regex.full_language`.

Canonical integers are `0` or `-?[1-9][0-9]*` (no `-0`, no exponent). Canonical non-integers are
`-?I.F` with `F` non-empty and ending in a non-zero digit, and at most 15 digits in `I` and `F`
together: with that many digits distinct decimals stay distinct doubles, so a value strictly inside
an exclusive bound stays strictly inside after `json.loads` turns it into a float, and no value can
overflow to infinity or round to zero. Integer bounds are compared exactly (Python compares ints
with floats exactly); decimal bounds are read from `repr` of the schema's float, the decimal
`json.loads` rounds back to the same double.
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

MAX_DIGITS = 15


def _any_digits(k: int) -> str:
    return "" if k == 0 else ("[0-9]" if k == 1 else f"[0-9]{{{k}}}")


def _digit_range(lo: int, hi: int) -> str:
    return str(lo) if lo == hi else f"[{lo}-{hi}]"


def _uint_range(lo: int, hi: int) -> list[str]:
    """Regex alternatives for the decimal spelling of every integer in [lo, hi] (0 <= lo <= hi)."""
    out: list[str] = []
    if lo == 0:
        out.append("0")
        lo = 1
    if lo > hi:
        return out
    # Split into runs of equal length, then by the classic prefix decomposition.
    length = len(str(lo))
    while lo <= hi:
        top = min(hi, 10**length - 1)
        out.extend(_same_length(str(lo), str(top)))
        lo = top + 1
        length += 1
    return out


def _same_length(a: str, b: str) -> list[str]:
    if a == b:
        return [a]
    if len(a) == 1:
        return [_digit_range(int(a), int(b))]
    if a[0] == b[0]:
        return [a[0] + x for x in _same_length(a[1:], b[1:])]
    n = len(a) - 1
    out: list[str] = []
    head_lo, head_hi = int(a[0]), int(b[0])
    if a[1:] == "0" * n:
        start = head_lo
    else:
        out.extend(a[0] + x for x in _same_length(a[1:], "9" * n))
        start = head_lo + 1
    end = head_hi if b[1:] == "9" * n else head_hi - 1
    if start <= end:
        out.append(_digit_range(start, end) + _any_digits(n))
    if b[1:] != "9" * n:
        out.extend(b[0] + x for x in _same_length("0" * n, b[1:]))
    return out


def _uint_at_least(lo: int) -> list[str]:
    """Every integer >= lo (lo >= 0)."""
    n = len(str(lo))
    out = _uint_range(lo, 10**n - 1)
    out.append(f"[1-9][0-9]{{{n},}}")
    return out


def integer_regex(lo: int | None, hi: int | None) -> str | None:
    """Regex of canonical integers in [lo, hi] (None = unbounded); None when empty."""
    alts: list[str] = []
    # Non-negative part.
    if hi is None or hi >= 0:
        a = max(lo, 0) if lo is not None else 0
        alts += _uint_at_least(a) if hi is None else _uint_range(a, hi)
    # Negative part: -x with x in [max(1, -hi), -lo].
    if lo is None or lo < 0:
        a = max(1, -hi) if hi is not None else 1
        if lo is None:
            alts += ["-" + x for x in _uint_at_least(a)]
        elif a <= -lo:
            alts += ["-" + x for x in _uint_range(a, -lo)]
    if not alts:
        return None
    return "(" + "|".join(alts) + ")"


def integer_bounds(
    minimum: object, maximum: object, ex_min: object, ex_max: object
) -> tuple[int | None, int | None]:
    """Tightest integer bounds implied by the four numeric keywords (exact rational compare)."""
    lo: int | None = None
    hi: int | None = None
    for value, exclusive in ((minimum, False), (ex_min, True)):
        if value is None:
            continue
        f = Fraction(value)
        cand = math.floor(f) + 1 if exclusive else math.ceil(f)
        lo = cand if lo is None else max(lo, cand)
    for value, exclusive in ((maximum, False), (ex_max, True)):
        if value is None:
            continue
        f = Fraction(value)
        cand = math.ceil(f) - 1 if exclusive else math.floor(f)
        hi = cand if hi is None else min(hi, cand)
    return lo, hi


FRAC = "[0-9]*[1-9]"


def fraction_shape() -> str:
    """Unsigned canonical non-integers with at most MAX_DIGITS digits."""
    alts = [f"0\\.[0-9]{{0,{MAX_DIGITS - 2}}}[1-9]"]
    for k in range(1, MAX_DIGITS):
        room = MAX_DIGITS - k
        alts.append(f"[1-9]{_any_digits(k - 1)}\\.[0-9]{{0,{room - 1}}}[1-9]")
    return "(" + "|".join(alts) + ")"


def _split(d: Decimal) -> tuple[str, str]:
    s = format(d, "f")
    ip, _, fp = s.partition(".")
    return ip.lstrip("0") or "0", fp.rstrip("0")


def fraction_at_most(bound: Decimal, strict: bool) -> str | None:
    """Unsigned canonical non-integers y with y <= bound (y < bound when strict), bound >= 0;
    None when there are none."""
    ip, fp = _split(bound)
    n = len(ip)
    alts: list[str] = []
    if n >= 2:
        more = f"[0-9]{{0,{n - 2}}}" if n > 2 else ""
        alts.append(f"(0|[1-9]{more})\\.{FRAC}")
    for i in range(n):
        first = 1 if (i == 0 and n > 1) else 0
        if int(ip[i]) > first:
            alts.append(f"{ip[:i]}[{first}-{int(ip[i]) - 1}]{_any_digits(n - i - 1)}\\.{FRAC}")
    for j in range(len(fp)):
        d = int(fp[j])
        if d > 0:
            short = f"|[1-{d - 1}]" if d > 1 else ""
            alts.append(f"{ip}\\.{fp[:j]}([0-{d - 1}][0-9]*[1-9]{short})")
        if fp[j] != "0" and (j + 1 < len(fp) or not strict):
            alts.append(f"{ip}\\.{fp[: j + 1]}")
    return "(" + "|".join(alts) + ")" if alts else None


def fraction_at_least(bound: Decimal, strict: bool) -> str:
    """Unsigned canonical non-integers y with y >= bound (y > bound when strict); bound >= 0."""
    ip, fp = _split(bound)
    n = len(ip)
    alts = [f"[1-9][0-9]{{{n},}}\\.{FRAC}"]
    for i in range(n):
        if int(ip[i]) < 9:
            alts.append(f"{ip[:i]}[{int(ip[i]) + 1}-9]{_any_digits(n - i - 1)}\\.{FRAC}")
    if not fp:
        alts.append(f"{ip}\\.{FRAC}")
    else:
        for j in range(len(fp)):
            if int(fp[j]) < 9:
                alts.append(f"{ip}\\.{fp[:j]}[{int(fp[j]) + 1}-9]([0-9]*[1-9])?")
        alts.append(f"{ip}\\.{fp}{FRAC}")
        if not strict:
            alts.append(f"{ip}\\.{fp}")
    return "(" + "|".join(alts) + ")"


def decimal_of(value: object) -> Decimal:
    """The decimal a schema bound stands for: ints exactly, floats by their shortest repr."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(value)
    # `+ 0` turns -0.0 into 0 so sign tests on the bound behave.
    return (Decimal(value) if isinstance(value, int) else Decimal(repr(value))) + 0


def whole_digits_limit(max_digits: int | None, decimal_places: int | None) -> int | None:
    """Most digits before the point Pydantic's `Decimal(max_digits, decimal_places)` allows
    (None: no limit); `0` counts as one such digit, as Pydantic counts it."""
    if max_digits is None:
        return None
    return max_digits if decimal_places is None else max(0, max_digits - decimal_places)


def digit_limited_integers(max_digits: int, decimal_places: int | None) -> str | None:
    """Regex of the canonical integers (signed) with at most the digits Pydantic allows
    (`max_digits` set); None when there are none."""
    whole = whole_digits_limit(max_digits, decimal_places)
    if not whole:
        return None
    return f"(0|-?[1-9]{_any_digits_upto(whole - 1)})"


def digit_limited_fractions(max_digits: int | None, decimal_places: int | None) -> str | None:
    """Regex of the unsigned canonical non-integers `I.F` Pydantic's `Decimal(max_digits,
    decimal_places)` accepts: at most `decimal_places` digits in `F`, at most `max_digits` in
    `I` (none when it is `0`) and `F` together, and at most `max_digits - decimal_places` in `I`;
    None when there are none."""
    whole = whole_digits_limit(max_digits, decimal_places)
    alts: list[str] = []
    if max_digits is None:
        assert decimal_places is not None
        if decimal_places >= 1:
            alts.append(f"(0|[1-9][0-9]*)\\.[0-9]{{0,{decimal_places - 1}}}[1-9]")
    else:
        assert whole is not None
        for k in range(0, whole + 1):
            room = max_digits - k
            if decimal_places is not None:
                room = min(room, decimal_places)
            if room < 1:
                continue
            head = "0" if k == 0 else "[1-9]" + _any_digits(k - 1)
            alts.append(f"{head}\\.[0-9]{{0,{room - 1}}}[1-9]")
    return "(" + "|".join(alts) + ")" if alts else None


def fits_digits(text: str, max_digits: int | None, decimal_places: int | None) -> bool:
    """Whether the canonical number `text` has no more digits than Pydantic's
    `Decimal(max_digits, decimal_places)` allows."""
    ip, _, fp = text.lstrip("-").partition(".")
    whole = 0 if ip == "0" and fp else len(ip)
    limit = whole_digits_limit(max_digits, decimal_places)
    if limit is not None and whole > limit:
        return False
    if max_digits is not None and whole + len(fp) > max_digits:
        return False
    return decimal_places is None or len(fp) <= decimal_places


def _any_digits_upto(k: int) -> str:
    return "" if k == 0 else f"[0-9]{{0,{k}}}"
