"""ECMA-262 regular expressions (the subset JSON Schema `pattern` needs) → byte NFA fragments.

`parse` turns a pattern into a small AST (`Set`, `Cat`, `Alt`, `Rep`, anchors) and refuses, with
`RegexUnsupported`, what cannot be a regular language or would mean different things in ECMA-262
and Python `re` (backreferences, lookaround, word boundaries, `\\p{…}`, control escapes).
`emit` writes the language of an AST into an `NFA`, encoding every code point either as canonical
JSON string content (`json=True`: `"`, `\\` and control characters escaped exactly as
`json.dumps(ensure_ascii=False)` does, with the `inc` bit on the last byte of each code point) or as
raw UTF-8 (numbers). `search_language` gives the unanchored-search semantics `pattern` has: a
string is in the language iff the pattern matches somewhere in it.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import charclass as cc
from .automata import NFA, Frag


class RegexUnsupported(ValueError):
    pass


@dataclass(frozen=True)
class Set:
    chars: cc.CharSet


@dataclass(frozen=True)
class Cat:
    items: tuple


@dataclass(frozen=True)
class Alt:
    items: tuple


@dataclass(frozen=True)
class Rep:
    item: object
    lo: int
    hi: int | None


@dataclass(frozen=True)
class Anchor:
    kind: str  # "^" or "$"


_SYNTAX = set("^$\\.*+?()[]{}|/")
_MAX_REPEAT = 1000


class _Parser:
    def __init__(self, pattern: str) -> None:
        self.p = pattern
        self.i = 0

    def peek(self) -> str | None:
        return self.p[self.i] if self.i < len(self.p) else None

    def take(self) -> str:
        if self.i >= len(self.p):
            raise RegexUnsupported("unexpected end of pattern")
        c = self.p[self.i]
        self.i += 1
        return c

    def parse(self):
        node = self.alternation()
        if self.i != len(self.p):
            raise RegexUnsupported(f"unbalanced ')' at offset {self.i}")
        return node

    def alternation(self):
        items = [self.sequence()]
        while self.peek() == "|":
            self.i += 1
            items.append(self.sequence())
        return items[0] if len(items) == 1 else Alt(tuple(items))

    def sequence(self):
        items = []
        while self.peek() not in (None, "|", ")"):
            atom = self.atom()
            atom = self.quantified(atom)
            items.append(atom)
        return items[0] if len(items) == 1 else Cat(tuple(items))

    def quantified(self, atom):
        while True:
            c = self.peek()
            if c in ("*", "+", "?"):
                self.i += 1
                lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
            elif c == "{" and self._brace_quantifier() is not None:
                lo, hi, end = self._brace_quantifier()
                self.i = end
            else:
                return atom
            if isinstance(atom, Anchor):
                raise RegexUnsupported("quantified anchor")
            if self.peek() == "?":
                self.i += 1  # lazy quantifiers match the same language
            if self.peek() == "+":
                raise RegexUnsupported("possessive quantifier")
            if (hi is not None and hi > _MAX_REPEAT) or lo > _MAX_REPEAT:
                raise RegexUnsupported(f"repetition bound over {_MAX_REPEAT}")
            atom = Rep(atom, lo, hi)

    def _brace_quantifier(self):
        j = self.i + 1
        digits = ""
        while j < len(self.p) and self.p[j].isdigit() and self.p[j].isascii():
            digits += self.p[j]
            j += 1
        if not digits:
            return None
        lo = int(digits)
        hi: int | None = lo
        if j < len(self.p) and self.p[j] == ",":
            j += 1
            more = ""
            while j < len(self.p) and self.p[j].isdigit() and self.p[j].isascii():
                more += self.p[j]
                j += 1
            hi = int(more) if more else None
        if j < len(self.p) and self.p[j] == "}":
            if hi is not None and hi < lo:
                raise RegexUnsupported("numbers out of order in {} quantifier")
            return lo, hi, j + 1
        return None

    def atom(self):
        c = self.take()
        if c == "(":
            if self.p.startswith("?:", self.i):
                self.i += 2
            elif self.p.startswith("?<", self.i) and self.p[self.i + 2 : self.i + 3] not in "=!":
                end = self.p.find(">", self.i)
                if end < 0:
                    raise RegexUnsupported("unterminated group name")
                self.i = end + 1
            elif self.peek() == "?":
                raise RegexUnsupported("lookaround and inline flags are not regular")
            node = self.alternation()
            if self.take() != ")":
                raise RegexUnsupported("missing ')'")
            return node
        if c in "^$":
            return Anchor(c)
        if c == ".":
            return Set(cc.DOT)
        if c == "[":
            return Set(self.char_class())
        if c == "\\":
            return Set(self.escape(in_class=False))
        if c in "*+?":
            raise RegexUnsupported("nothing to repeat")
        if c == ")":
            raise RegexUnsupported("unbalanced ')'")
        if c in "{}]":
            return Set(cc.of(c))
        return Set(cc.of(c))

    def escape(self, in_class: bool) -> cc.CharSet:
        c = self.take()
        if c in "dDwWsS":
            return cc.shorthand(c)
        simple = {"t": "\t", "n": "\n", "r": "\r", "v": "\v", "f": "\f"}
        if c in simple:
            return cc.of(simple[c])
        if c == "0" and not (self.peek() or "").isdigit():
            return cc.of("\0")
        if c == "x":
            h = self.p[self.i : self.i + 2]
            if len(h) == 2 and all(x in "0123456789abcdefABCDEF" for x in h):
                self.i += 2
                return cc.of(chr(int(h, 16)))
            raise RegexUnsupported("malformed \\x escape")
        if c == "u":
            h = self.p[self.i : self.i + 4]
            if len(h) == 4 and all(x in "0123456789abcdefABCDEF" for x in h):
                self.i += 4
                cp = int(h, 16)
                if 0xD800 <= cp <= 0xDFFF:
                    raise RegexUnsupported("surrogate escapes")
                return ((cp, cp),)
            raise RegexUnsupported("\\u{…} and malformed \\u escapes")
        if c == "b" and in_class:
            return cc.of("\b")
        if c == "-" and in_class:
            return cc.of("-")
        if c in _SYNTAX:
            return cc.of(c)
        raise RegexUnsupported(f"escape \\{c}")

    def char_class(self) -> cc.CharSet:
        negated = self.peek() == "^"
        if negated:
            self.i += 1
        if self.peek() == "]":
            raise RegexUnsupported("empty class [] or [^]")
        ranges: list[cc.CharSet] = []
        while True:
            c = self.take()
            if c == "]":
                break
            if c == "[":
                raise RegexUnsupported("'[' inside a class (Python reads it as a set operation)")
            lo = self.escape(in_class=True) if c == "\\" else cc.of(c)
            if self.peek() == "-" and self.p[self.i + 1 : self.i + 2] not in ("]", ""):
                self.i += 1
                c2 = self.take()
                hi = self.escape(in_class=True) if c2 == "\\" else cc.of(c2)
                if len(lo) != 1 or len(hi) != 1 or lo[0][0] != lo[0][1] or hi[0][0] != hi[0][1]:
                    raise RegexUnsupported("class range with a shorthand endpoint")
                if hi[0][0] < lo[0][0]:
                    raise RegexUnsupported("class range out of order")
                ranges.append(((lo[0][0], hi[0][0]),))
            else:
                ranges.append(lo)
        chars = cc.union(*ranges)
        return cc.minus(cc.ANY, chars) if negated else cc.minus(chars, cc.SURROGATES)


def parse(pattern: str):
    """AST of `pattern`; rejects patterns Python's `re` (jsonschema's engine) cannot compile."""
    import re

    try:
        re.compile(pattern)
    except re.error as exc:
        raise RegexUnsupported(f"Python re rejects the pattern: {exc}") from exc
    return _Parser(pattern).parse()


def _has_anchor(node) -> bool:
    if isinstance(node, Anchor):
        return True
    if isinstance(node, (Cat, Alt)):
        return any(_has_anchor(x) for x in node.items)
    if isinstance(node, Rep):
        return _has_anchor(node.item)
    return False


_JSON_SHORT = {0x22: b'\\"', 0x5C: b"\\\\", 0x08: b"\\b", 0x0C: b"\\f", 0x0A: b"\\n"}
_JSON_SHORT.update({0x0D: b"\\r", 0x09: b"\\t"})
_NEEDS_ESCAPE: cc.CharSet = cc.union(((0x00, 0x1F),), cc.of('"', "\\"))


def json_escape(cp: int) -> bytes:
    """Canonical JSON encoding of one code point inside a string (as `json.dumps` writes it)."""
    if cp in _JSON_SHORT:
        return _JSON_SHORT[cp]
    if cp < 0x20:
        return b"\\u%04x" % cp
    return chr(cp).encode("utf-8")


def emit_set(nfa: NFA, src: int, dst: int, chars: cc.CharSet, json: bool) -> None:
    """Edges from `src` to `dst` spelling exactly one code point of `chars`."""
    plain = cc.minus(chars, _NEEDS_ESCAPE) if json else chars
    if json:
        for lo, hi in cc.intersect(chars, _NEEDS_ESCAPE):
            for cp in range(lo, hi + 1):
                data = json_escape(cp)
                cur = src
                for k, byte in enumerate(data):
                    nxt = dst if k == len(data) - 1 else nfa.state(nfa.region[src])
                    nfa.edge(cur, byte, byte, nxt, int(k == len(data) - 1))
                    cur = nxt
    for lo, hi in plain:
        for seq in cc.utf8_ranges(lo, hi):
            cur = src
            for k, (blo, bhi) in enumerate(seq):
                last = k == len(seq) - 1
                nxt = dst if last else nfa.state(nfa.region[src])
                nfa.edge(cur, blo, bhi, nxt, int(last))
                cur = nxt


def emit(nfa: NFA, node, json: bool) -> Frag:
    """Fragment for an anchor-free AST."""
    if isinstance(node, Set):
        a, b = nfa.state(), nfa.state()
        emit_set(nfa, a, b, node.chars, json)
        return a, b
    if isinstance(node, Cat):
        return nfa.cat(emit(nfa, x, json) for x in node.items)
    if isinstance(node, Alt):
        return nfa.alt(emit(nfa, x, json) for x in node.items)
    if isinstance(node, Rep):
        parts = [emit(nfa, node.item, json) for _ in range(node.lo)]
        if node.hi is None:
            parts.append(nfa.star(emit(nfa, node.item, json)))
        else:
            # x{0,k} as nested options keeps the NFA linear in k.
            tail = None
            for _ in range(node.hi - node.lo):
                inner = emit(nfa, node.item, json)
                tail = nfa.opt(inner if tail is None else nfa.cat([inner, tail]))
            if tail is not None:
                parts.append(tail)
        return nfa.cat(parts)
    if isinstance(node, Anchor):
        raise RegexUnsupported("anchor inside a group or repetition")
    raise TypeError(node)


def search_language(nfa: NFA, pattern: str, json: bool = True) -> Frag:
    """Strings (JSON-encoded when `json`) in which `pattern` matches somewhere."""
    ast = parse(pattern)
    alternatives = ast.items if isinstance(ast, Alt) else (ast,)
    frags = []
    for alt in alternatives:
        items = list(alt.items) if isinstance(alt, Cat) else [alt]
        head = bool(items) and items[0] == Anchor("^")
        while items and items[0] == Anchor("^"):
            items.pop(0)
        tail = bool(items) and items[-1] == Anchor("$")
        while items and items[-1] == Anchor("$"):
            items.pop()
        if any(_has_anchor(x) for x in items):
            raise RegexUnsupported("anchor that is not at the start or end of an alternative")
        parts = [] if head else [nfa.star(emit(nfa, Set(cc.ANY), json))]
        parts.append(emit(nfa, Cat(tuple(items)), json))
        if not tail:
            parts.append(nfa.star(emit(nfa, Set(cc.ANY), json)))
        frags.append(nfa.cat(parts))
    return nfa.alt(frags)


def full_language(nfa: NFA, pattern: str, json: bool) -> Frag:
    """Strings matching `pattern` as a whole (our own format and number grammars)."""
    return emit(nfa, parse(pattern), json)
