"""Languages of single JSON types under their type-specific keywords, as buildable NFA fragments.

A `Lang` is a recipe (`build(nfa)` writes a fresh fragment each call, so arrays can repeat an item
language) plus `complete`: whether it holds the canonical spelling of *every* valid value (needed
before `oneOf` may treat branches as disjoint). `Shapes` holds one builder per JSON type: `null`,
`boolean`, `integer` and `fraction` (digit-range languages from `numbers`), `string` (content DFA
from `pattern`s and `format`s, length bounds as a code point counter region), `array`
(`prefixItems`/`items`/`minItems`/`maxItems`, and `uniqueItems` over a small finite item language as
distinct items in canonical order) and `object` (declared properties in key-rank order, `required`,
`additionalProperties`, `patternProperties` applied to the declared names). `Shapes` is mixed into
the compiler in `language`, which supplies `node` (compile a sub-schema) and `rank`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np

from . import automata, formats, numbers
from . import charclass as cc
from .automata import DFA, NFA, Frag
from .drafts import exact_number
from .errors import UnsupportedSchema, child
from .regex import RegexUnsupported, full_language, search_language

MAX_NESTING = 3  # arrays/objects nested inside an unconstrained value ({}) deeper are left out
UNIQUE_ITEMS_LIMIT = 16  # uniqueItems is built structurally over at most this many item values
Conj = list[tuple[str, Any]]
# A member `{DIGITS: DecimalDigits(…)}` of a conjunction holds its numbers to the digit limits of
# a Pydantic `Decimal` (JSON Schema has no keyword for them: `keywords.any_of` reads them from
# the pattern of the string branch Pydantic writes beside the number branch). jsonschema ignores
# the key; only a `DecimalDigits` value, never one from a user's schema, is read.
DIGITS = "decide:decimalDigits"


@dataclass(frozen=True)
class DecimalDigits:
    max_digits: int | None
    decimal_places: int | None


def digit_limits(flat: Conj) -> list[DecimalDigits]:
    return [s[DIGITS] for _, s in flat if isinstance(s.get(DIGITS), DecimalDigits)]


# What `pydantic.json_schema.GenerateJsonSchema.decimal_schema` writes as the pattern of a
# Decimal's string form (Pydantic 2.10 to 2.13), by which of max_digits / decimal_places is set.
_PYDANTIC_PREFIX = r"^(?!^[-+.]*$)[+-]?0*"


def _pydantic_decimal_pattern(max_digits: int | None, decimal_places: int | None) -> str:
    if max_digits is not None and decimal_places is not None:
        whole = max(0, max_digits - decimal_places)
        return _PYDANTIC_PREFIX + (
            rf"(?:\d{{0,{whole}}}|(?=[\d.]{{1,{max_digits + 1}}}0*$)"
            rf"\d{{0,{whole}}}\.\d{{0,{decimal_places}}}0*$)"
        )
    if max_digits is not None:
        return _PYDANTIC_PREFIX + (
            rf"(?:\d{{0,{max_digits}}}|(?=[\d.]{{1,{max_digits + 1}}}0*$)\d*\.\d*0*$)"
        )
    if decimal_places is not None:
        return _PYDANTIC_PREFIX + rf"\d*\.?\d{{0,{decimal_places}}}0*$"
    return _PYDANTIC_PREFIX + r"\d*\.?\d*$"


def pydantic_decimal(schema: Any) -> DecimalDigits | None:
    """The digit limits of a Pydantic `Decimal` whose string form `schema` is (`type: string`
    with exactly the pattern Pydantic writes for them; `DecimalDigits(None, None)` for none),
    else None. The numbers in the pattern are read back and it is written again from them, so
    only Pydantic's own pattern is recognised."""
    if not isinstance(schema, dict) or schema.get("type") != "string":
        return None
    pattern = schema.get("pattern")
    if not isinstance(pattern, str) or not pattern.startswith(_PYDANTIC_PREFIX):
        return None
    counts = [int(n) for n in re.findall(r"\{(?:0|1),(\d+)\}", pattern)]
    candidates = [DecimalDigits(None, None)]
    if counts:
        candidates.append(DecimalDigits(None, counts[-1]))
    if len(counts) >= 2:
        candidates.append(DecimalDigits(counts[1] - 1, None))
        candidates.append(DecimalDigits(counts[1] - 1, counts[-1]))
    for c in candidates:
        if _pydantic_decimal_pattern(c.max_digits, c.decimal_places) == pattern:
            return c
    return None


def looks_like_pydantic_decimal(schema: Any) -> bool:
    """A string schema whose pattern starts as Pydantic's `Decimal` patterns do."""
    pattern = schema.get("pattern") if isinstance(schema, dict) else None
    return isinstance(pattern, str) and pattern.startswith(_PYDANTIC_PREFIX)


@dataclass(frozen=True)
class Lang:
    """A buildable language: `build` writes a fresh fragment into an NFA each time it is called."""

    build: Callable[[NFA], Frag]
    complete: bool


def literal(texts: list[str]) -> Lang:
    data = [t.encode("utf-8") for t in texts]

    def build(nfa: NFA) -> Frag:
        return nfa.alt(nfa.literal(d) for d in data) if data else nfa.nothing()

    return Lang(build, True)


EMPTY = literal([])


def _spans(content: DFA, lo: int, hi: int | None, pointer: str) -> bool:
    """Whether some string `content` accepts has between `lo` and `hi` code points."""
    nfa = NFA()
    region = nfa.new_region(lo, hi, pointer)
    body = nfa.embed(content, region)
    close, end = nfa.state(region), nfa.state()  # bounds are checked on leaving the region
    nfa.epsilon(body[1], close)
    nfa.edge(close, 0x22, 0x22, end)
    return not automata.is_empty(automata.determinize(nfa, (body[0], end)))


def union(langs: list[Lang]) -> Lang:
    if len(langs) == 1:
        return langs[0]
    return Lang(lambda nfa: nfa.alt(x.build(nfa) for x in langs), all(x.complete for x in langs))


class Shapes:
    """Per-type builders; the compiler subclass provides `node`, `rank`, `language_of`."""

    rank: dict[str, int]

    def omit(self, pointer: str, keyword: str, why: str) -> None:
        raise NotImplementedError

    def t_null(self, flat: Conj, refs: tuple[str, ...]) -> Lang:
        return literal(["null"])

    def t_boolean(self, flat: Conj, refs: tuple[str, ...]) -> Lang:
        return literal(["true", "false"])

    def _bounds(self, flat: Conj) -> dict[str, list[Any]]:
        out: dict[str, list[Any]] = {}
        for _, s in flat:
            for kw in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
                if kw in s:
                    out.setdefault(kw, []).append(s[kw])
        return out

    def t_integer(self, flat: Conj, refs: tuple[str, ...]) -> Lang:
        b = self._bounds(flat)
        lo, hi = None, None
        for mn in [*b.get("minimum", []), None]:
            for emn in [*b.get("exclusiveMinimum", []), None]:
                lo2, _ = numbers.integer_bounds(mn, None, emn, None)
                if lo2 is not None:
                    lo = lo2 if lo is None else max(lo, lo2)
        for mx in [*b.get("maximum", []), None]:
            for emx in [*b.get("exclusiveMaximum", []), None]:
                _, hi2 = numbers.integer_bounds(None, mx, None, emx)
                if hi2 is not None:
                    hi = hi2 if hi is None else min(hi, hi2)
        if lo is not None and hi is not None and lo > hi:
            return EMPTY
        rx = numbers.integer_regex(lo, hi)
        if rx is None:
            return EMPTY
        # x is a multiple of a / 10^p exactly when x·10^p is one of a
        divisors = [a // math.gcd(a, 10**p) for a, p in _steps(flat)]
        limits = [d for d in digit_limits(flat) if d.max_digits is not None]
        if not divisors and not limits:
            return Lang(lambda nfa: full_language(nfa, rx, json=False), True)
        dfa = _regex_dfa(rx)
        if divisors:
            dfa = automata.product(dfa, _multiple_dfa(math.lcm(*divisors)))
        for d in limits:
            assert d.max_digits is not None
            within = numbers.digit_limited_integers(d.max_digits, d.decimal_places)
            if within is None:
                return EMPTY
            dfa = automata.product(dfa, _regex_dfa(within))
        return Lang(lambda nfa: nfa.embed(dfa), True)

    def t_fraction(self, flat: Conj, refs: tuple[str, ...]) -> Lang:
        steps = _steps(flat)
        places = max((p for _, p in steps), default=0)
        if any(p == 0 for _, p in steps):
            return EMPTY  # no non-integer is a multiple of an integer
        # x is a multiple of every a / 10^p exactly when x·10^places is one of every a·10^(places-p)
        modulus = math.lcm(*(a * 10 ** (places - p) for a, p in steps)) if steps else 0
        if steps and modulus * (places + 2) > MAX_DIVISOR:
            ptr = next(ptr for ptr, s in flat if "multipleOf" in s)
            raise UnsupportedSchema(
                child(ptr, "multipleOf"), "multipleOf",
                "these multipleOf steps together need too fine a grid of decimals",
            )  # fmt: skip
        b = self._bounds(flat)
        lows = [(numbers.decimal_of(v), False) for v in b.get("minimum", [])]
        lows += [(numbers.decimal_of(v), True) for v in b.get("exclusiveMinimum", [])]
        highs = [(numbers.decimal_of(v), False) for v in b.get("maximum", [])]
        highs += [(numbers.decimal_of(v), True) for v in b.get("exclusiveMaximum", [])]
        lo = max(lows, key=lambda x: (x[0], x[1])) if lows else None
        hi = min(highs, key=lambda x: (x[0], not x[1])) if highs else None
        shape = numbers.fraction_shape()
        within = [
            numbers.digit_limited_fractions(d.max_digits, d.decimal_places)
            for d in digit_limits(flat)
        ]
        if None in within:
            return EMPTY
        sides: list[tuple[str, list[str]]] = []
        # Positive y = x: lo <= y <= hi.  Negative x = -y: -hi <= y <= -lo.
        for sign, low, high in (("", lo, hi), ("-", _neg(hi), _neg(lo))):
            rxs = [shape, *(rx for rx in within if rx is not None)]
            if high is not None:
                if high[0] <= 0:
                    continue
                top = numbers.fraction_at_most(high[0], high[1])
                if top is None:
                    continue
                rxs.append(top)
            if low is not None and low[0] >= 0:
                rxs.append(numbers.fraction_at_least(low[0], low[1]))
            sides.append((sign, rxs))
        dfas = []
        for sign, rxs in sides:
            d = _regex_dfa(rxs[0])
            for rx in rxs[1:]:
                d = automata.product(d, _regex_dfa(rx))
            if steps:
                d = automata.product(d, _decimal_multiple_dfa(modulus, places))
            if not automata.is_empty(d):
                dfas.append((sign, d))
        if not dfas:
            return EMPTY

        def build(nfa: NFA) -> Frag:
            return nfa.alt(nfa.cat([nfa.literal(s.encode()), nfa.embed(d)]) for s, d in dfas)

        return Lang(build, True)

    def t_string(self, flat: Conj, refs: tuple[str, ...]) -> Lang:
        lo, hi = 0, None
        contents: list[DFA] = []
        pointer = ""
        for ptr, s in flat:
            for kw in ("minLength", "maxLength"):
                if kw in s:
                    pointer = child(ptr, kw)
            if "minLength" in s:
                lo = max(lo, int(s["minLength"]))
            if "maxLength" in s:
                hi = int(s["maxLength"]) if hi is None else min(hi, int(s["maxLength"]))
            if "pattern" in s:
                try:
                    contents.append(_pattern_dfa(s["pattern"]))
                except RegexUnsupported as exc:
                    raise UnsupportedSchema(child(ptr, "pattern"), "pattern", str(exc)) from None
                except automata.TooComplex as exc:
                    raise UnsupportedSchema(child(ptr, "pattern"), "pattern", str(exc)) from None
            if "format" in s:
                if s["format"] not in formats.FORMATS:
                    raise UnsupportedSchema(
                        child(ptr, "format"),
                        "format",
                        f"format {s['format']!r} is not one of {sorted(formats.FORMATS)}",
                    )
                cap = formats.FORMATS[s["format"]][1]
                contents.append(_format_dfa(s["format"]))
                if cap is not None:
                    hi = cap if hi is None else min(hi, cap)
                    pointer = pointer or child(ptr, "format")
        if hi is not None and lo > hi:
            return EMPTY
        content = contents[0] if contents else _any_string_dfa()
        for extra in contents[1:]:
            content = automata.product(content, extra)
        bounded = lo > 0 or hi is not None
        if bounded and not _spans(content, lo, hi, pointer):
            # No string of the pattern/format has a length in bounds (`pattern: "^[a-z]+$"` with
            # `maxLength: 0`): empty here, so an `anyOf` keeps its other branches' values
            # instead of the shared length counter holding them to this branch's bounds.
            return EMPTY

        def build(nfa: NFA) -> Frag:
            region = nfa.new_region(lo, hi, pointer) if bounded else 0
            open_q = nfa.literal(b'"')
            first = len(nfa.region)
            body = nfa.embed(content, region)
            close = nfa.state(region)
            if not bounded:
                nfa.unbounded.update(range(first, close + 1))
            end = nfa.state()
            nfa.edge(close, 0x22, 0x22, end)
            nfa.epsilon(body[1], close)
            return nfa.cat([open_q, body])[0], end

        return Lang(build, True)

    def _nest(self, flat: Conj, refs: tuple[str, ...]) -> tuple[str, ...] | None:
        """Declared nesting is never cut (recursion is bounded by `$ref` expansions); only the
        arrays/objects of an unconstrained value (empty `flat`) count towards MAX_NESTING."""
        if flat:
            return refs
        if refs.count("<nest>") >= MAX_NESTING:
            return None
        return (*refs, "<nest>")

    def t_array(self, flat: Conj, refs: tuple[str, ...]) -> Lang:
        nested = self._nest(flat, refs)
        if nested is None:
            return Lang(EMPTY.build, False)
        refs = nested
        lo, hi = 0, None
        prefix_len = 0
        for _, s in flat:
            lo = max(lo, int(s.get("minItems", 0)))
            if "maxItems" in s:
                hi = int(s["maxItems"]) if hi is None else min(hi, int(s["maxItems"]))
            prefix_len = max(prefix_len, len(s.get("prefixItems", ())))
            if s.get("items") is False:
                cap = len(s.get("prefixItems", ()))
                hi = cap if hi is None else min(hi, cap)
        if hi is not None and lo > hi:
            return EMPTY

        def item_conj(i: int | None) -> Conj:
            out: Conj = []
            for ptr, s in flat:
                pre = s.get("prefixItems", ())
                if i is not None and i < len(pre):
                    out.append((child(ptr, "prefixItems", i), pre[i]))
                elif "items" in s:
                    out.append((child(ptr, "items"), s["items"]))
            return out

        explicit = max(prefix_len, lo) if hi is None else min(max(prefix_len, lo), hi)
        items = [self.node(item_conj(i), refs) for i in range(explicit)]
        tail = self.node(item_conj(None), refs) if (hi is None or hi > explicit) else None
        complete = all(x.complete for x in items) and (tail is None or tail.complete)

        def build(nfa: NFA) -> Frag:
            end = nfa.state()
            start = nfa.literal(b"[")
            done = [] if lo > 0 else [start]
            cur = start
            for i, item in enumerate(items):
                sep = [nfa.literal(b",")] if i else []
                cur = nfa.cat([cur, *sep, item.build(nfa)])
                if i + 1 >= lo:
                    done.append(cur)
            if tail is not None:
                extra = (hi - explicit) if hi is not None else None
                if explicit == 0:
                    first = nfa.cat([start, tail.build(nfa)])
                    done.append(first)
                    cur, extra = first, (None if extra is None else extra - 1)
                if extra is None:
                    loop = nfa.star(nfa.cat([nfa.literal(b","), tail.build(nfa)]))
                    done.append(nfa.cat([cur, loop]))
                else:
                    for _ in range(extra):
                        cur = nfa.cat([cur, nfa.literal(b","), tail.build(nfa)])
                        done.append(cur)
            close = nfa.literal(b"]")
            for f in done:
                nfa.epsilon(f[1], close[0])
            nfa.epsilon(close[1], end)
            return start[0], end

        return Lang(build, complete)

    def unique_array(self, flat: Conj, refs: tuple[str, ...]) -> Lang | None:
        """`uniqueItems: true` over a small finite item language: arrays of distinct items in
        canonical (byte-wise sorted) order. None when that construction does not apply."""
        if any("prefixItems" in s or "contains" in s for _, s in flat):
            return None
        lo, hi = 0, None
        items: Conj = []
        for ptr, s in flat:
            lo = max(lo, int(s.get("minItems", 0)))
            if "maxItems" in s:
                hi = int(s["maxItems"]) if hi is None else min(hi, int(s["maxItems"]))
            if "items" in s:
                items.append((child(ptr, "items"), s["items"]))
        values = automata.enumerate_strings(
            self.language_of(self.node(items, refs)), UNIQUE_ITEMS_LIMIT
        )
        if values is None:
            return None
        values = sorted(values)
        hi = len(values) if hi is None else min(hi, len(values))
        if lo > hi:
            return EMPTY

        def build(nfa: NFA) -> Frag:
            # grid[i][k]: first i values decided, k of them written.
            grid = [[nfa.state() for _ in range(hi + 1)] for _ in range(len(values) + 1)]
            start = nfa.literal(b"[")
            nfa.epsilon(start[1], grid[0][0])
            for i, v in enumerate(values):
                for k in range(hi + 1):
                    nfa.epsilon(grid[i][k], grid[i + 1][k])
                    if k < hi:
                        item = nfa.literal((b"," if k else b"") + v)
                        nfa.epsilon(grid[i][k], item[0])
                        nfa.epsilon(item[1], grid[i + 1][k + 1])
            close = nfa.literal(b"]")
            for k in range(lo, hi + 1):
                nfa.epsilon(grid[len(values)][k], close[0])
            return start[0], close[1]

        return Lang(build, len(values) <= 1)

    def t_object(self, flat: Conj, refs: tuple[str, ...]) -> Lang:
        nested = self._nest(flat, refs)
        if nested is None:
            return Lang(EMPTY.build, False)
        refs = nested
        required: set[str] = set()
        declared: dict[str, None] = {}
        closed = False
        for _, s in flat:
            required |= set(s.get("required", ()))
            for k in s.get("properties", {}):
                declared[k] = None
            if s.get("additionalProperties") is False and not s.get("patternProperties"):
                closed = True
        for k in required:
            declared[k] = None
        keys = sorted(declared, key=lambda k: self.rank.get(k, len(self.rank)))
        fields: list[tuple[str, bool, Lang]] = []
        complete = closed
        if not closed and flat:
            self.omit(
                child(flat[0][0], "additionalProperties"),
                "additionalProperties",
                "objects with keys not named in `properties` (or `required`) are never generated",
            )
        for k in keys:
            conj: Conj = []
            allowed = True
            for ptr, s in flat:
                props = s.get("properties", {})
                matched = False
                if k in props:
                    conj.append((child(ptr, "properties", k), props[k]))
                    matched = True
                for pat, sub in s.get("patternProperties", {}).items():
                    if re.search(pat, k):
                        conj.append((child(ptr, "patternProperties", pat), sub))
                        matched = True
                if not matched and "additionalProperties" in s:
                    if s["additionalProperties"] is False:
                        allowed = False
                    conj.append((child(ptr, "additionalProperties"), s["additionalProperties"]))
            if not allowed:
                if k in required:
                    return EMPTY
                continue
            lang = self.node(conj, refs)
            complete = complete and lang.complete
            fields.append((json.dumps(k, ensure_ascii=False) + ":", k in required, lang))

        def build(nfa: NFA) -> Frag:
            start = nfa.literal(b"{")
            fresh, used = start[1], None  # lane with nothing written yet / with something written
            for key, req, lang in fields:
                new_used = nfa.state()
                if fresh is not None:
                    f = nfa.cat([nfa.literal(key.encode()), lang.build(nfa)])
                    nfa.epsilon(fresh, f[0])
                    nfa.epsilon(f[1], new_used)
                if used is not None:
                    f = nfa.cat([nfa.literal(b"," + key.encode()), lang.build(nfa)])
                    nfa.epsilon(used, f[0])
                    nfa.epsilon(f[1], new_used)
                    if not req:
                        nfa.epsilon(used, new_used)
                fresh = fresh if not req else None
                used = new_used
            close = nfa.literal(b"}")
            for lane in (fresh, used):
                if lane is not None:
                    nfa.epsilon(lane, close[0])
            return start[0], close[1]

        return Lang(build, complete)


def _neg(bound: tuple[Decimal, bool] | None) -> tuple[Decimal, bool] | None:
    return None if bound is None else (Decimal(0) - bound[0], bound[1])


_CACHE: dict[tuple[str, str], DFA] = {}


def _cached(kind: str, key: str, make: Callable[[NFA], Frag]) -> DFA:
    if len(_CACHE) > 1024:
        _CACHE.clear()  # distinct patterns per document must not grow it forever
    dfa = _CACHE.get((kind, key))
    if dfa is None:
        nfa = NFA()
        dfa = _CACHE[(kind, key)] = automata.determinize(nfa, make(nfa))
    return dfa


def _regex_dfa(rx: str) -> DFA:
    return _cached("raw", rx, lambda nfa: full_language(nfa, rx, json=False))


def _pattern_dfa(pattern: str) -> DFA:
    return _cached("pattern", pattern, lambda nfa: search_language(nfa, pattern, json=True))


def _format_dfa(name: str) -> DFA:
    rx = formats.FORMATS[name][0]
    return _cached("format", name, lambda nfa: full_language(nfa, rx, json=True))


def _any_string_dfa() -> DFA:
    from .regex import Rep, Set, emit

    return _cached("any", "", lambda nfa: emit(nfa, Rep(Set(cc.ANY), 0, None), json=True))


MAX_DIVISOR = 100_000


def decimal_divisor(value: Any) -> tuple[int, int] | None:
    """(a, p) with `value` = a / 10^p exactly (the decimal as written: 0.1 is 1 / 10^1) when
    `multipleOf: value` is built structurally (a remainder automaton over the digits, with the
    digits after the point counted), else None (the rest of the schema is enumerated)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    exact = exact_number(value)
    if exact is None or exact <= 0:
        return None
    places = 0
    while (exact * 10**places).denominator != 1:
        places += 1
        if places > numbers.MAX_DIGITS:
            return None
    a = int(exact * 10**places)
    return (a, places) if a * (places + 2) <= MAX_DIVISOR else None


def _steps(flat: Conj) -> list[tuple[int, int]]:
    """`decimal_divisor` of every `multipleOf` of the conjunction (the compiler enumerates the
    schemas whose divisors have none, so only built ones reach the number shapes)."""
    out = []
    for _, s in flat:
        if "multipleOf" in s:
            step = decimal_divisor(s["multipleOf"])
            if step is None:
                raise AssertionError(f"multipleOf {s['multipleOf']!r} is not built structurally")
            out.append(step)
    return out


def _decimal_multiple_dfa(m: int, places: int) -> DFA:
    """Unsigned decimals with a point and at most `places` digits after it whose digits, read
    as the integer x·10^places, are divisible by m: (digits after the point, remainder) is the
    state."""
    frac = 1 + m  # states: 0 start, 1 + r integer part, frac + f·m + r after f fraction digits
    states = frac + (places + 1) * m
    trans = np.full((states, 256), -1, dtype=np.int32)
    digits = np.arange(10)
    r = np.arange(m)[:, None]
    trans[0, 0x30 + digits] = 1 + digits % m
    trans[1 : 1 + m, 0x30:0x3A] = 1 + (10 * r + digits[None, :]) % m
    trans[1 : 1 + m, ord(".")] = frac + np.arange(m)
    for f in range(places):
        trans[frac + f * m : frac + (f + 1) * m, 0x30:0x3A] = (
            frac + (f + 1) * m + (10 * r + digits[None, :]) % m
        )
    accept = np.zeros(states, dtype=bool)
    for f in range(1, places + 1):
        rest = np.arange(m)
        accept[frac + f * m + rest] = (rest * 10 ** (places - f)) % m == 0
    zeros = np.zeros(states, dtype=np.int32)
    inc = np.zeros((states, 256), dtype=np.uint8)
    return automata.minimize(DFA(trans, inc, accept, zeros, [automata.Region(0, None, "")]))


def _multiple_dfa(m: int) -> DFA:
    """Integers (optionally signed, digits only) divisible by m: the remainder is the state."""
    states = m + 2  # 0 start, 1 after "-", 2 + r remainder r
    trans = np.full((states, 256), -1, dtype=np.int32)
    trans[0, ord("-")] = 1
    digits = np.arange(10)
    for s in (0, 1):
        trans[s, 0x30 + digits] = 2 + digits % m
    r = np.arange(m)[:, None]
    trans[2:, 0x30:0x3A] = 2 + (10 * r + digits[None, :]) % m
    accept = np.zeros(states, dtype=bool)
    accept[2] = True
    zeros = np.zeros(states, dtype=np.int32)
    inc = np.zeros((states, 256), dtype=np.uint8)
    return automata.minimize(DFA(trans, inc, accept, zeros, [automata.Region(0, None, "")]))
