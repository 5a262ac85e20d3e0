"""The keyword-by-keyword compiler of one schema (its 2020-12 form) into `shapes.Lang` pieces.

`KeywordCompiler.node` flattens a conjunction of subschemas (`allOf`, `$ref`), splits it by JSON
type and builds each type's language from the keywords that structure it (`STRUCTURAL`);
assertions it cannot build exactly (`FILTERS`) are met by enumerating the few values the rest
admits and filtering them with `jsonschema`, or refused with their pointer. `language.py` wraps
the result into a `Language`; nothing here is public API.
"""

from __future__ import annotations

import json
from typing import Any

from . import automata
from .automata import DFA, NFA
from .canonical import canonical_json, key_rank
from .drafts import VALIDATORS
from .errors import (
    EmptySchema,
    MalformedSchema,
    SchemaError,
    UnsupportedSchema,
    child,
    pointed_at,
)
from .numbers import fits_digits
from .shapes import (
    DIGITS,
    EMPTY,
    Conj,
    DecimalDigits,
    Lang,
    Shapes,
    decimal_divisor,
    digit_limits,
    literal,
    looks_like_pydantic_decimal,
    pydantic_decimal,
    union,
)

STRUCTURAL = {
    "type",
    "enum",
    "const",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "properties",
    "required",
    "additionalProperties",
    "patternProperties",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "$ref",
    "allOf",
    "anyOf",
    "oneOf",
}
# Exact only by enumerating a finite candidate set and asking jsonschema.
FILTERS = {
    "not",
    "if",
    "then",
    "else",
    "multipleOf",
    "uniqueItems",
    "contains",
    "minContains",
    "maxContains",
    "dependentRequired",
    "dependentSchemas",
    "minProperties",
    "maxProperties",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
}
TYPES = ("null", "boolean", "object", "array", "string", "integer", "fraction")
ENUMERATION_LIMIT = 1024
MAX_DEPENDENCIES = 6  # dependentRequired/dependentSchemas entries split into cases (2^n)
MAX_NESTING = 3  # arrays/objects nested inside an unconstrained value ({}) deeper are left out

_ANY_VALUE: dict[int, DFA] = {}


class KeywordCompiler(Shapes):
    def __init__(self, root: Any, max_recursion: int, draft: str = "2020-12") -> None:
        self.root = root
        self.max_recursion = max_recursion
        # `root` is the 2020-12 form; sub-schemas are checked with 2020-12 semantics and the
        # original draft's format checker (drafts.normalize keeps only formats it checks).
        checker = VALIDATORS[draft].FORMAT_CHECKER
        self.validator = VALIDATORS["2020-12"](root, format_checker=checker)
        self.rank = key_rank(root)
        self.cuts: dict[str, None] = {}
        self.omitted: tuple[str, str, str] | None = None
        self.anchors: dict[str, str] = {}
        self._find_anchors(root, "")

    def _find_anchors(self, schema: Any, ptr: str) -> None:
        """`$anchor`s of schema locations (not inside annotations, as jsonschema sees them)."""
        if not isinstance(schema, dict):
            return
        for kw, sub in schema.items():
            here = child(ptr, kw)
            if kw == "$anchor" and isinstance(sub, str):
                self.anchors[sub] = ptr
            elif kw == "$id" and ptr:
                # drafts.normalize removed or refused every $id in a schema location.
                raise UnsupportedSchema(here, kw, "$id below the root")
            elif kw in _SCHEMA_MAPS and isinstance(sub, dict):
                for name, x in sub.items():
                    self._find_anchors(x, child(here, name))
            elif kw in _SCHEMA_LISTS and isinstance(sub, list):
                for n, x in enumerate(sub):
                    self._find_anchors(x, child(here, n))
            elif kw in _SCHEMA_ONE:
                self._find_anchors(sub, here)

    def resolve(self, ptr: str, ref: Any) -> tuple[str, Any]:
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise UnsupportedSchema(ptr, "$ref", f"only local '#…' references are supported "
                                    f"(a spec file's question may refer to schema files beside "
                                    f"the spec): {ref}")  # fmt: skip
        frag = ref[1:]
        if frag and not frag.startswith("/"):
            if frag not in self.anchors:
                raise MalformedSchema(ptr, "$ref", f"no $anchor named {frag!r}")
            frag = self.anchors[frag]
        try:
            return frag, pointed_at(self.root, frag)
        except LookupError:
            why = f"{ref} points nowhere"
            if frag.startswith(("/$defs/", "/definitions/")):
                why += (
                    " in this question's schema (a field of a Pydantic model needs the model's "
                    "$defs beside it: `decide.questions_from_model` puts them there)"
                )
            raise MalformedSchema(ptr, "$ref", why) from None

    def in_place_cycle(self) -> tuple[str, list[str]] | None:
        """A cycle of references that comes back to a schema for the same value (through `$ref`,
        `allOf`, `anyOf`, `not`, `if`, … but never into a property or an item), reachable from
        the root: (pointer of a `$ref` on it, the pointers of its schemas in order, first one
        last again), or None. Such a schema constrains nothing and validators recurse on it
        forever (JSON Schema leaves its meaning undefined); a cycle through `properties` or
        `items` (a tree) is fine, every turn being one level deeper in the value."""
        nodes: dict[int, tuple[str, list[tuple[str, int, bool]]]] = {}
        schemas: dict[int, dict[str, Any]] = {}
        todo: list[tuple[str, Any]] = [("", self.root)]
        while todo:
            ptr, s = todo.pop()
            if not isinstance(s, dict) or id(s) in nodes:
                continue
            edges: list[tuple[str, int, bool]] = []  # (pointer of the edge, target, is a $ref)
            nodes[id(s)] = (ptr, edges)
            schemas[id(s)] = s
            for where, sub, in_place in _subschemas(s, ptr):
                if where.endswith("/$ref"):
                    try:
                        target_ptr, sub = self.resolve(where, sub)
                    except SchemaError:
                        continue  # refused with its pointer when the compiler gets there
                    todo.append((target_ptr, sub))
                else:
                    todo.append((where, sub))
                if in_place and isinstance(sub, dict):
                    edges.append((where, id(sub), where.endswith("/$ref")))
        # Depth-first over the in-place edges, the root first: a target still on the path
        # closes a cycle.
        state: dict[int, int] = {}  # 1 on the path, 2 done
        for start in nodes:
            if start in state:
                continue
            path: list[tuple[int, int]] = [(start, 0)]  # (node, next edge to follow)
            taken: list[tuple[str, bool]] = []  # the edge into each node of `path` but the first
            state[start] = 1
            while path:
                node, i = path[-1]
                edges = nodes[node][1]
                if i == len(edges):
                    state[node] = 2
                    path.pop()
                    if taken:
                        taken.pop()
                    continue
                path[-1] = (node, i + 1)
                where, target, is_ref = edges[i]
                if state.get(target) == 1:
                    at = [n for n, _ in path].index(target)
                    ring = [*taken[at:], (where, is_ref)]
                    ref = next((w for w, r in reversed(ring) if r), where)
                    chain = [nodes[n][0] for n, _ in path[at:]] + [nodes[target][0]]
                    return ref, chain
                if target not in state:
                    state[target] = 1
                    path.append((target, 0))
                    taken.append((where, is_ref))
        return None

    def valid(self, conj: Conj, value: Any) -> bool:
        return all(self.validator.evolve(schema=s).is_valid(value) for _, s in conj)

    # The main recursion ------------------------------------------------------------------------

    def node(self, conj: Conj, refs: tuple[str, ...]) -> Lang:
        flat: Conj = []
        work = list(conj)
        seen: set[int] = set()
        while work:
            ptr, s = work.pop(0)
            if len(refs) > 64:
                raise UnsupportedSchema(ptr, "$ref", "more than 64 nested references")
            if s is True:
                continue
            if s is False:
                return EMPTY
            if not isinstance(s, dict):
                raise MalformedSchema(ptr, "", "a schema must be an object or a boolean")
            if id(s) in seen:
                continue
            seen.add(id(s))
            # Keywords were classified by drafts.normalize: anything not compiled here is an
            # annotation (or an unknown keyword jsonschema ignores as well).
            flat.append((ptr, s))
            if "$ref" in s:
                target_ptr, target = self.resolve(child(ptr, "$ref"), s["$ref"])
                if refs.count(target_ptr) >= self.max_recursion:
                    # recursion cut: deeper values left out
                    self.cuts[
                        f"$ref to #{target_ptr} expanded at most {self.max_recursion} times"
                    ] = None
                    self.omit(
                        child(ptr, "$ref"), "$ref", "values nested deeper than the recursion limit"
                    )
                    return Lang(EMPTY.build, False)
                refs = (*refs, target_ptr)
                work.append((target_ptr, target))
            for i, sub in enumerate(s.get("allOf", ())):
                work.append((child(ptr, "allOf", i), sub))
        for i, (ptr, s) in enumerate(flat):
            if "anyOf" in s:
                settled = _settled(flat)
                rest = [
                    *settled[:i],
                    (ptr, {k: v for k, v in settled[i][1].items() if k != "anyOf"}),
                    *settled[i + 1 :],
                ]
                return union(self.any_of(rest, ptr, s["anyOf"], refs))
        for i, (_, s) in enumerate(flat):
            if "oneOf" in s:
                return self.one_of(flat, i, refs)
        split = self.dependencies(flat, refs)
        if split is not None:
            return split
        filters = [
            (child(ptr, kw), kw)
            for ptr, s in flat
            for kw in s
            if kw in FILTERS
            and not (kw == "uniqueItems" and s[kw] is False)
            and not (kw == "multipleOf" and decimal_divisor(s[kw]) is not None)
        ]
        if filters and all(kw == "not" for _, kw in filters):
            built = self.negation(flat, refs)
            if built is not None:
                return built
        conditional = [i for i, (_, s) in enumerate(flat) if "if" in s]
        if len(conditional) == 1 and all(kw in ("if", "then", "else") for _, kw in filters):
            built = self.condition(flat, conditional[0], refs)
            if built is not None:
                return built
        if filters and all(kw == "uniqueItems" for _, kw in filters):
            unique = [s["uniqueItems"] for _, s in flat if "uniqueItems" in s]
            arrays = any(s.get("type") == "array" for _, s in flat)
            if arrays and any(unique):
                built = self.unique_array(flat, refs)
                if built is not None:
                    return built
        if filters:
            # `flat` is already expanded, so its allOf / $ref must not be expanded again.
            drop = FILTERS | {"allOf", "$ref"}
            stripped = [(p, {k: v for k, v in s.items() if k not in drop}) for p, s in flat]
            base = self.node(stripped, refs)
            if all(kw == "uniqueItems" for _, kw in filters):
                try:
                    return self.enumerate(base, flat, filters[0])
                except UnsupportedSchema:
                    # Distinct items over an unbounded item language are not regular: keep the
                    # arrays of at most one item (always distinct), leave longer ones out.
                    ptr = filters[0][0]
                    self.cuts[f"{ptr}: uniqueItems arrays hold at most one item"] = None
                    self.omit(ptr, "uniqueItems", "arrays of two or more distinct items")
                    one = [*stripped, (ptr, {"maxItems": 1})]
                    return Lang(self.node(one, refs).build, False)
            return self.enumerate(base, flat, filters[0])
        if not any(kw in STRUCTURAL or kw in FILTERS for _, s in flat for kw in s):
            # `{}` or annotations only: an unconstrained value, nesting limited to MAX_NESTING
            return self.any_value(refs.count("<nest>"))
        return self.typed(flat, refs)

    def dependencies(self, flat: Conj, refs: tuple[str, ...]) -> Lang | None:
        """`dependentRequired` / `dependentSchemas` by cases on the trigger key: (objects without
        it) ∪ (objects with it and what it requires). Exact, because both cases admit every
        non-object. None when the conjunction has no dependency (or too many to split)."""
        deps = [
            (i, kw, key)
            for i, (_, s) in enumerate(flat)
            for kw in ("dependentRequired", "dependentSchemas")
            if isinstance(s.get(kw), dict)
            for key in s[kw]
        ]
        if not deps or len(deps) > MAX_DEPENDENCIES:
            return None
        i, kw, key = deps[0]
        settled = _settled(flat)
        ptr, s = settled[i]
        rest = {k: v for k, v in s[kw].items() if k != key}
        member = {k: v for k, v in s.items() if k != kw}
        if rest:
            member[kw] = rest
        base = [*settled[:i], (ptr, member), *settled[i + 1 :]]
        where = child(ptr, kw, key)
        absent = [*base, (where, {"properties": {key: False}})]
        if kw == "dependentRequired":
            present = [*base, (where, {"required": [key, *s[kw][key]]})]
        else:
            present = [*base, (where, {"required": [key]}), (where, s[kw][key])]
        return union([self.node(absent, refs), self.node(present, refs)])

    def omit(self, pointer: str, keyword: str, why: str) -> None:
        """Record the first reason the language leaves valid values out."""
        if self.omitted is None:
            self.omitted = (pointer or "#", keyword, why)

    def negation(self, flat: Conj, refs: tuple[str, ...]) -> Lang | None:
        """`not` by complement: exact when the negated language is complete and uncounted (a value
        outside it is then invalid for it). None when that does not hold."""
        drop = {"not", "allOf", "$ref"}
        rest = [(p, {k: v for k, v in s.items() if k not in drop}) for p, s in flat]
        base = self.node(rest, refs)
        dfa = self.language_of(base)
        # base ∖ inner = base ∖ (inner ∩ base): narrowing the negated schema by the rest lets it
        # be complete far more often (e.g. `not: {minimum: 5}` next to `type: integer`).
        for ptr, s in flat:
            if "not" not in s:
                continue
            negated = self.narrowed((child(ptr, "not"), s["not"]), rest, refs)
            if negated is None:
                return None
            dfa = automata.product(dfa, automata.complement(negated))
        return Lang(lambda nfa: nfa.embed(dfa, None), base.complete)

    def narrowed(self, sub: tuple[str, Any], rest: Conj, refs: tuple[str, ...]) -> DFA | None:
        """The complete, uncounted language of `sub` narrowed by `rest` (None if there is none).
        Narrowing by a weaker rest (string length bounds and formats dropped where that only
        widens it) is as good for the complement, since only values of `rest` are tested, and it
        often removes the counter (e.g. `if` on one property of an object with a maxLength)."""
        for conj in ([sub, *rest], [sub, *[(p, _relax(s)) for p, s in rest]]):
            lang = self.node(conj, refs)
            if lang.complete:
                dfa = self.language_of(lang)
                if not dfa.region.any():
                    return dfa
        return None

    def condition(self, flat: Conj, i: int, refs: tuple[str, ...]) -> Lang | None:
        """`if`/`then`/`else` as (IF ∩ THEN) ∪ (ELSE ∖ IF), every part narrowed by the rest of the
        schema; exact when IF is complete and uncounted. None when that does not hold."""
        ptr, s = flat[i]
        drop = {"if", "then", "else", "allOf", "$ref"}
        rest = [(p, {k: v for k, v in x.items() if k not in drop}) for p, x in flat]
        cond_dfa = self.narrowed((child(ptr, "if"), s["if"]), rest, refs)
        if cond_dfa is None:
            return None
        parts = []
        for kw, keep in (("then", cond_dfa), ("else", automata.complement(cond_dfa))):
            branch = [(child(ptr, kw), s[kw])] if kw in s else []
            lang = self.node([*branch, *rest], refs)
            parts.append((automata.product(self.language_of(lang), keep), lang.complete))
        return Lang(
            lambda nfa: nfa.alt(nfa.embed(d, None) for d, _ in parts), all(c for _, c in parts)
        )

    def any_value(self, nesting: int) -> Lang:
        """Unconstrained value: its (region-free) DFA is built once per nesting level."""
        if nesting not in _ANY_VALUE:
            _ANY_VALUE[nesting] = self.language_of(self.typed([], ("<nest>",) * nesting))
        dfa = _ANY_VALUE[nesting]
        self.cuts[
            f"arrays/objects inside an unconstrained value ({{}}) at most {MAX_NESTING} deep"
        ] = None
        return Lang(lambda nfa: nfa.embed(dfa), False)

    def language_of(self, lang: Lang) -> DFA:
        nfa = NFA()
        return automata.determinize(nfa, lang.build(nfa))

    def enumerate(self, base: Lang, conj: Conj, blame: tuple[str, str]) -> Lang:
        """Exact filter through jsonschema of a finite candidate language."""
        texts = automata.enumerate_strings(self.language_of(base), ENUMERATION_LIMIT)
        if texts is None:
            ptr, kw = blame
            raise UnsupportedSchema(
                ptr,
                kw,
                f"{kw} is only supported where the rest of the schema admits at most "
                f"{ENUMERATION_LIMIT} values",
            )
        keep = [t.decode("utf-8") for t in texts if self.valid(conj, json.loads(t))]
        return Lang(literal(keep).build, base.complete)

    def any_of(self, rest: Conj, ptr: str, branches: Any, refs: tuple[str, ...]) -> list[Lang]:
        """The languages of an `anyOf`'s branches, each with `rest`. A branch that uses what the
        compiler refuses (a lookaround in Pydantic's `Decimal` pattern) is left out, as long as
        another compiles: the others' values stay valid, and `decide validate` says what was
        left out. Only when every branch is refused is the first refusal raised."""
        out: list[Lang] = []
        refused: list[UnsupportedSchema] = []
        digits = self.decimal_digits(ptr, branches)
        for j, branch in enumerate(branches):
            where = child(ptr, "anyOf", j)
            try:
                number = isinstance(branch, dict) and branch.get("type") == "number"
                if digits is not None and number:
                    held = self.node([*rest, digits, (where, branch)], refs)
                    out.append(Lang(held.build, False))
                    continue
                out.append(self.node([*rest, (where, branch)], refs))
            except UnsupportedSchema as exc:
                if isinstance(exc, EmptySchema):
                    raise
                refused.append(exc)
                self.cuts[f"{where or '#'}: this anyOf branch's values ({exc})"] = None
                self.omit(where, exc.keyword, f"this anyOf branch's values: {exc.message}")
                out.append(Lang(EMPTY.build, False))
        if len(refused) == len(out):
            raise refused[0]
        return out

    def decimal_digits(self, ptr: str, branches: Any) -> tuple[str, dict[str, Any]] | None:
        """Pydantic writes a `Decimal` as `anyOf: [{type: number}, {type: string, pattern}]`,
        its `max_digits` / `decimal_places` only in the pattern (which the compiler refuses, so
        the string branch is left out) while `Model.model_validate` enforces them on numbers too.
        When the pattern is exactly Pydantic's, the conjunction member that holds the number
        branches to those limits (`shapes.DIGITS`; None when it sets none); a pattern that only
        looks like one is reported, as numbers are then not held to what it may limit."""
        if not isinstance(branches, list):
            return None
        number = any(isinstance(b, dict) and b.get("type") == "number" for b in branches)
        for k, branch in enumerate(branches):
            where = child(ptr, "anyOf", k, "pattern")
            limits = pydantic_decimal(branch)
            if limits is None:
                if number and looks_like_pydantic_decimal(branch):
                    self.cuts[
                        f"{where}: the digit limits of this pattern (Pydantic's Decimal "
                        "max_digits / decimal_places?) are not recognised: numbers are not held "
                        "to them, and `Model.model_validate` may refuse an answer"
                    ] = None
                continue
            if not number or limits == DecimalDigits(None, None):
                return None
            said = ", ".join(
                f"{name}={value}"
                for name, value in (
                    ("max_digits", limits.max_digits),
                    ("decimal_places", limits.decimal_places),
                )
                if value is not None
            )
            self.cuts[
                f"{ptr or '#'}: numbers with more digits than Pydantic's Decimal allows ({said}, "
                f"read from its pattern at {where})"
            ] = None
            return (where, {DIGITS: limits})
        return None

    def one_of(self, flat: Conj, i: int, refs: tuple[str, ...]) -> Lang:
        ptr, _ = flat[i]
        settled = _settled(flat)
        rest = [
            *settled[:i],
            (ptr, {k: v for k, v in settled[i][1].items() if k != "oneOf"}),
            *settled[i + 1 :],
        ]
        s = flat[i][1]
        branches = [
            self.node([*rest, (child(ptr, "oneOf", j), b)], refs) for j, b in enumerate(s["oneOf"])
        ]
        dfas = [self.language_of(b) for b in branches]
        disjoint = all(
            not automata.intersects(dfas[a], dfas[b])
            for a in range(len(dfas))
            for b in range(a + 1, len(dfas))
        )
        if disjoint and all(b.complete for b in branches):
            return union(branches)
        return self.enumerate(union(branches), flat, (child(ptr, "oneOf"), "oneOf"))

    def typed(self, flat: Conj, refs: tuple[str, ...]) -> Lang:
        enums = [
            (p, s["enum"] if "enum" in s else [s["const"]])
            for p, s in flat
            if "enum" in s or "const" in s
        ]
        if enums:
            # The other enums are members of `flat`: `valid` keeps the values they all hold.
            candidates = list(enums[0][1])
            limits = digit_limits(flat)
            texts: list[str] = []
            for v in candidates:
                if self.valid(flat, v):
                    text = canonical_json(v, self.rank)
                    number = isinstance(v, (int, float)) and not isinstance(v, bool)
                    if number and not all(
                        fits_digits(text, d.max_digits, d.decimal_places) for d in limits
                    ):
                        continue
                    if text not in texts:
                        texts.append(text)
            return literal(texts)
        types = set(TYPES)
        for _, s in flat:
            if "type" in s:
                names = s["type"] if isinstance(s["type"], list) else [s["type"]]
                allowed = set()
                for name in names:
                    allowed |= {"integer", "fraction"} if name == "number" else {name}
                types &= allowed
        parts = []
        for t in TYPES:
            if t in types:
                parts.append(getattr(self, "t_" + t)(flat, refs))
        if not parts:
            return EMPTY
        return union(parts)

    # One method per JSON type ------------------------------------------------------------------


_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SCHEMA_ONE = (
    "items",
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
)


# Sub-schemas applied to the same value as their parent (the others go into a part of it).
_IN_PLACE = {"$ref", "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas"}


def _subschemas(schema: dict[str, Any], ptr: str) -> list[tuple[str, Any, bool]]:
    """The sub-schemas a validator applies from `schema` (not `$defs`, only reached through a
    `$ref`, which is given as its pointer and value): (pointer, sub-schema, in place)."""
    out: list[tuple[str, Any, bool]] = []
    for kw, sub in schema.items():
        here = child(ptr, kw)
        in_place = kw in _IN_PLACE
        if kw == "$ref":
            out.append((here, sub, True))
        elif kw in _SCHEMA_MAPS and kw not in ("$defs", "definitions") and isinstance(sub, dict):
            out.extend((child(here, name), x, in_place) for name, x in sub.items())
        elif kw in _SCHEMA_LISTS and isinstance(sub, list):
            out.extend((child(here, n), x, in_place) for n, x in enumerate(sub))
        elif kw in _SCHEMA_ONE:
            out.append((here, sub, in_place))
    return out


_MONOTONE_MAPS = ("properties", "patternProperties")
_MONOTONE_ONE = ("additionalProperties", "items")
_MONOTONE_LISTS = ("allOf", "anyOf", "prefixItems")


def _relax(schema: Any) -> Any:
    """`schema` without length bounds and formats in positions where dropping a keyword can only
    admit more values (not under `not`, `oneOf`, `if`, …, which stay as they are)."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for k, v in schema.items():
        if k in ("minLength", "maxLength", "format"):
            continue
        if k in _MONOTONE_MAPS and isinstance(v, dict):
            out[k] = {name: _relax(x) for name, x in v.items()}
        elif k in _MONOTONE_ONE:
            out[k] = _relax(v)
        elif k in _MONOTONE_LISTS and isinstance(v, list):
            out[k] = [_relax(x) for x in v]
        else:
            out[k] = v
    return out


def _settled(flat: Conj) -> Conj:
    """The conjunction with `allOf` and `$ref` removed from its members: `node` already put
    their targets into it, and expanding them again in a branch would recurse forever."""
    return [(p, {k: v for k, v in s.items() if k not in ("allOf", "$ref")}) for p, s in flat]
