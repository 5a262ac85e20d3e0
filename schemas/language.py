"""JSON Schema (any draft, read in its 2020-12 form from `drafts.normalize`) → the byte language of
a slot's canonical compact JSON values.

`compile_language(schema)` returns a `Language`: a minimal byte DFA (with code point counters for
length-bounded strings, see `automata`) whose accepted strings are canonical compact JSON texts of
values the schema accepts. Canonical means: no whitespace, object keys in one fixed order (first
appearance in the schema), strings escaped as `json.dumps(ensure_ascii=False)` does, integers
without sign on zero or exponent, non-integers as plain decimals of at most 15 digits. Every keyword
is either expressed exactly, ignored because it is an annotation (`drafts` decides which), or
refused with its JSON pointer (of the schema as written). `not` and `if`/`then`/`else` are built
by complement when the negated or tested language is complete; other assertions (`contains`,
`oneOf` between overlapping branches, non-integral `multipleOf`, …) are still exact when the rest
of the schema admits few values: those are enumerated and filtered by `jsonschema` itself. The
language may leave out values it cannot spell canonically (objects with undeclared keys, numbers
with more digits); it never admits an invalid one. `Language.complete` records whether it left
nothing out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from . import automata
from .automata import DFA, NFA
from .canonical import canonical_json
from .drafts import VALIDATORS, Normalized, Warning, normalize
from .errors import EmptySchema, SchemaError, UnsupportedSchema
from .keywords import KeywordCompiler


@dataclass
class Language:
    """The compiled byte language of one schema, with what is needed to decode and re-check."""

    dfa: DFA
    complete: bool
    schema: Any
    validator: Any = field(repr=False)
    key_rank: dict[str, int] = field(repr=False)
    draft: str = "2020-12"  # the draft `$schema` names; `validator` is that draft's class
    normalized: Any = field(default=None, repr=False)  # the schema in 2020-12 form
    warnings: list[Warning] = field(default_factory=list)  # unknown keywords, ignored
    cuts: list[str] = field(default_factory=list)  # depth limits, anyOf branches: values left out
    omitted: tuple[str, str, str] | None = None  # (pointer, keyword, why) of a left-out part

    def __getstate__(self) -> dict[str, Any]:
        # jsonschema validators hold closures; rebuild instead of pickling (Ray workers).
        return {k: v for k, v in self.__dict__.items() if k != "validator"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.validator = _validator(self.schema, self.draft)

    def is_empty(self) -> bool:
        return automata.is_empty(self.dfa)

    def canonical(self, value: Any) -> str:
        return canonical_json(value, self.key_rank)

    def accepts(self, text: str) -> bool:
        return self.dfa.accepts(text.encode("utf-8"))

    def accepts_many(self, texts: Sequence[str]) -> list[bool]:
        """`accepts` of every text, sharing the work of common prefixes."""
        return self.dfa.accepts_many([t.encode("utf-8") for t in texts])

    def values(self, limit: int) -> list[str] | None:
        found = automata.enumerate_strings(self.dfa, limit)
        return None if found is None else [s.decode("utf-8") for s in found]


FORMAT_CHECKER = jsonschema.Draft202012Validator.FORMAT_CHECKER


def _validator(schema: Any, draft: str) -> Any:
    """The checker of every answer: `draft`'s own validator class on the original schema."""
    cls = VALIDATORS[draft]
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def compile_language(
    schema: Any, *, max_recursion: int = 3, strict: bool = False, draft: str | None = None
) -> Language:
    """Compile one question schema of any draft (its `$schema`; 2020-12 without one); raises
    `UnsupportedSchema` / `MalformedSchema`. `strict`: unknown keywords are refused, not
    ignored with a warning. `draft` ("draft-04", …, "2020-12") applies when `$schema` is absent."""
    norm = normalize(schema, strict=strict, draft=draft)
    try:
        return _compile(schema, norm, max_recursion)
    except SchemaError as exc:
        # Name the user's location, not one of the 2020-12 form.
        named = exc.pointer.rsplit("/", 1)[-1] == exc.keyword
        exc.pointer = norm.original_pointer(exc.pointer)
        if named:  # a renamed keyword ($dynamicRef → $ref, items → prefixItems) is named as written
            exc.keyword = exc.pointer.rsplit("/", 1)[-1].replace("~1", "/").replace("~0", "~")
        exc.args = (f"{exc.pointer or '#'}: {exc.keyword}: {exc.message}",)
        raise


def _compile(schema: Any, norm: Normalized, max_recursion: int) -> Language:
    comp = KeywordCompiler(norm.schema, max_recursion, norm.draft)
    cycle = comp.in_place_cycle()
    if cycle is not None:
        ref, chain = cycle
        path = " → ".join("#" + norm.original_pointer(p) for p in chain)
        raise UnsupportedSchema(
            ref,
            "$ref",
            f"a cycle of references that never goes into a property or an item ({path}): "
            "it never reaches a value to constrain, and validators recurse on it forever",
        )
    try:
        lang = comp.node([("", norm.schema)], ())
        nfa = NFA()
        dfa = automata.determinize(nfa, lang.build(nfa))
        for pointer in nfa.narrowed:
            comp.cuts[
                f"{pointer or '#'}: strings of another branch that share a path with this one "
                "are held to its length bounds (one length counter per path)"
            ] = None
    except automata.RegionConflict as exc:
        ptr = exc.regions[-1].pointer
        raise UnsupportedSchema(
            ptr,
            "maxLength",
            "strings with different length bounds in one union (anyOf / type "
            "list) cannot share a counter",
        ) from None
    except automata.TooComplex as exc:
        # The blow-up shows in the whole automaton; name the keyword most likely behind it.
        big = ("enum", "pattern", "anyOf", "oneOf", "allOf", "properties", "items", "$ref")
        keyword = next((k for k in big if isinstance(schema, dict) and k in schema), "")
        pointer = f"/{keyword}" if keyword else ""
        raise UnsupportedSchema(
            pointer, keyword or "schema", f"schema too large to compile: {exc}"
        ) from None
    return Language(
        dfa,
        lang.complete,
        schema,
        _validator(schema, norm.draft),
        comp.rank,
        norm.draft,
        norm.schema,
        norm.warnings,
        list(comp.cuts),
        comp.omitted,
    )


def empty_refusal(lang: Language) -> UnsupportedSchema | None:
    """The honest refusal of a language without values: "no value satisfies" only when nothing
    valid was left out, else which left-out part held every valid value. None when not empty."""
    if not lang.is_empty():
        return None
    if lang.complete:
        why = "no value satisfies this schema (its constraints contradict each other)"
        return EmptySchema("", "schema", why)
    pointer, keyword, why = lang.omitted or ("#", "schema", "values the slot cannot spell")
    return UnsupportedSchema(
        pointer,
        keyword,
        "valid values exist, but every one lies outside what a slot can spell: " + why,
    )
