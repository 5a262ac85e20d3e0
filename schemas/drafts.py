"""Every published JSON Schema draft, normalised to the draft 2020-12 form the compiler understands.

`normalize(schema, strict=False)` reads `$schema` (draft-04, -06, -07, 2019-09, 2020-12; none means
2020-12) and returns a `Normalized`: the draft's name, its `jsonschema` validator class (the checker
of every decoded answer, run on the *original* schema), and an equivalent schema in 2020-12 form
that the compiler builds from. The rewrite is keyword by keyword, for schema locations only:

- `id` (draft-04) / `$id`: dropped at the root; below the root a fragment `#name` becomes
  `$anchor: name`, `#/…` is dropped, any other `$id` is dropped when no reference can see it (the
  schema has no `$ref`) and refused otherwise (it changes the base URI).
- `$ref` siblings are ignored in draft-04/06/07 (they are kept only under `definitions`/`$defs`,
  so pointers into them still resolve); `$ref` pointers are rewritten to the new locations.
- array-form `items` + `additionalItems` → `prefixItems` + `items`; `additionalItems` next to a
  single `items` is ignored, as those drafts do.
- `dependencies` → `dependentRequired` (lists) and `dependentSchemas` (schemas).
- draft-04 boolean `exclusiveMinimum`/`exclusiveMaximum` → the numeric 2020-12 bound.
- `$recursiveRef: "#"` (2019-09) and `$dynamicRef` (2020-12) → `$ref`, exact because a schema
  with a single resource (no `$id` below the root) has nothing else in its dynamic scope.
- a `format` the draft defines and decide compiles (`formats.FORMATS`: date, time, date-time,
  uuid, ipv4, email, duration, uri) is an assertion in every installation; any other format
  the draft's format checker does not check here is an annotation for `jsonschema`: it is
  dropped (with a warning), so the slot admits what the checker admits.
- keywords the draft does not define are annotations: known annotation keywords (`title`,
  `readOnly`, `$comment`, …), `x-…` extensions and names starting with `_` or `$` silently;
  a likely misspelling of one of the draft's assertion keywords (another case, or one or two
  edits away) is refused with the suggestion; any other name is accepted with a `Warning`
  (`strict=True` refuses it instead).

Keywords of other drafts that the compiler would otherwise interpret (`prefixItems` in a draft-07
schema, `const` in draft-04, …) are moved under `x-decide-ignored` with a warning, as the draft
ignores them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any
from urllib.parse import unquote

import jsonschema
from jsonschema import validators

from .errors import MalformedSchema, UnsupportedSchema, child
from .formats import FORMATS

# The first draft that defines each format decide compiles (the others are in every draft).
FORMAT_SINCE = {"date": "draft-07", "time": "draft-07", "uuid": "2019-09", "duration": "2019-09"}

DRAFT_URIS = {
    "draft-04": "http://json-schema.org/draft-04/schema",
    "draft-06": "http://json-schema.org/draft-06/schema",
    "draft-07": "http://json-schema.org/draft-07/schema",
    "2019-09": "https://json-schema.org/draft/2019-09/schema",
    "2020-12": "https://json-schema.org/draft/2020-12/schema",
}


def exact_number(number: Any) -> Fraction | None:
    """The exact rational a JSON number stands for: a float by the shortest decimal that reads
    back as it (`repr`: 0.1 is 1/10, not the binary fraction nearest it); None when not finite."""
    if isinstance(number, float):
        return Fraction(repr(number)) if math.isfinite(number) else None
    return Fraction(number)


def multiple_of(validator: Any, divisor: Any, instance: Any, schema: Any) -> Any:
    """`multipleOf` judged on the decimals as written, as the specification defines it ("division
    by this keyword's value results in an integer") and Pydantic judges it: `jsonschema` divides
    floats, so 0.3 is not a multiple of 0.1 there, nor 19.99 of 0.01."""
    if not validator.is_type(instance, "number"):
        return
    value, step = exact_number(instance), exact_number(divisor)
    if value is None or step is None or (value / step).denominator != 1:
        yield jsonschema.ValidationError(f"{instance!r} is not a multiple of {divisor}")


# Each draft's `jsonschema` validator with `multipleOf` judged exactly (above): the checker of
# every answer, of the decision object and of the values the compiler enumerates.
VALIDATORS: dict[str, Any] = {
    name: validators.extend(cls, {"multipleOf": multiple_of})
    for name, cls in {
        "draft-04": validators.Draft4Validator,
        "draft-06": validators.Draft6Validator,
        "draft-07": validators.Draft7Validator,
        "2019-09": validators.Draft201909Validator,
        "2020-12": validators.Draft202012Validator,
    }.items()
}
Validator = VALIDATORS["2020-12"]


def validator_class(schema: Any) -> Any:
    """The validator class of the draft `schema`'s `$schema` names (2020-12 without one), with
    `multipleOf` judged exactly (`VALIDATORS`)."""
    stock = validators.validator_for(schema, default=validators.Draft202012Validator)
    for cls in VALIDATORS.values():
        if cls.META_SCHEMA == stock.META_SCHEMA:
            return cls
    return Validator


ORDER = list(DRAFT_URIS)
DEFAULT = "2020-12"
IGNORED = "x-decide-ignored"

# Non-assertions of every draft (and containers of sub-schemas only reached through `$ref`).
ANNOTATIONS = {
    "title",
    "description",
    "default",
    "examples",
    "$comment",
    "deprecated",
    "readOnly",
    "writeOnly",
    "contentMediaType",
    "contentEncoding",
    "contentSchema",
    "$schema",
    "$vocabulary",
}
CONTAINERS = {"definitions", "$defs"}
_EXTRA = {
    "draft-04": {"exclusiveMinimum", "exclusiveMaximum", "id"},
    "draft-06": {"$id"},
    "draft-07": {"$id"},
    "2019-09": {"$id", "$anchor", "$recursiveAnchor"},
    "2020-12": {"$id", "$anchor", "$dynamicAnchor"},
}
# Keywords the compiler interprets (after normalisation); one of these that the draft does not
# define must be moved out of the compiler's way.
COMPILED = set(validators.Draft202012Validator.VALIDATORS) | {"$anchor", "$dynamicAnchor", "$id"}
COMPILED |= {"then", "else", "minContains", "maxContains"}


# Keywords `jsonschema` evaluates inside another keyword's validator, so absent from its
# `VALIDATORS`: `then`/`else` (read by `if`, draft-07 on), `minContains`/`maxContains` (read by
# `contains`, 2019-09 on).
_READ_BY = {"draft-07": {"then", "else"}, "2019-09": {"minContains", "maxContains"}}


def keywords(draft: str) -> set[str]:
    """Assertion/applicator keywords `jsonschema` evaluates in `draft` (plus its identifiers)."""
    own = set(VALIDATORS[draft].VALIDATORS) | _EXTRA[draft]
    for since, read in _READ_BY.items():
        if ORDER.index(draft) >= ORDER.index(since):
            own |= read
    return own


ALL_KEYWORDS = set().union(*(keywords(d) for d in ORDER)) | ANNOTATIONS | CONTAINERS


@dataclass(frozen=True)
class Warning:
    """An unknown keyword accepted as an annotation (`--strict` refuses it)."""

    pointer: str
    keyword: str
    message: str

    def __str__(self) -> str:
        return f"{self.pointer or '#'} {self.keyword}: {self.message}"


@dataclass
class Normalized:
    draft: str
    validator_class: Any
    schema: Any  # 2020-12 form
    warnings: list[Warning] = field(default_factory=list)
    origins: dict[str, str] = field(default_factory=dict, repr=False)  # new pointer -> original

    def original_pointer(self, pointer: str) -> str:
        """The user's pointer for a location of the 2020-12 form (errors name the original)."""
        parts = pointer.split("/")
        for n in range(len(parts), 0, -1):
            head = "/".join(parts[:n])
            if head in self.origins:
                return "/".join([self.origins[head], *parts[n:]])
        return pointer


def draft_of(schema: Any, default: str = DEFAULT) -> str:
    """The draft named by `$schema` (`default` without one); `UnsupportedSchema` for another."""
    if not isinstance(schema, dict) or "$schema" not in schema:
        return default
    uri = schema["$schema"]
    if not isinstance(uri, str):
        raise MalformedSchema("/$schema", "$schema", "must be a URI string")
    bare = uri.strip().rstrip("#").rstrip("/")
    for name, known in DRAFT_URIS.items():
        # http/https variants name the same draft (jsonschema only registers one spelling).
        if bare.split("://", 1)[-1] == known.split("://", 1)[-1]:
            return name
    raise UnsupportedSchema(
        "/$schema",
        "$schema",
        f"unknown draft {uri!r}; supported: {', '.join(DRAFT_URIS[d] for d in ORDER)}",
    )


def edit_distance(a: str, b: str) -> int:
    """Optimal string alignment distance (insertions, deletions, substitutions, transpositions)."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[-1]


def misspelling(keyword: str, draft: str) -> str | None:
    """The assertion keyword of `draft` that `keyword` likely misspells, if any."""
    if keyword.startswith(("x-", "_", "$")) or keyword.lower().startswith("x-"):
        return None
    candidates = sorted(keywords(draft) - {"id", "$id", "$anchor", "$dynamicAnchor"})
    for kw in candidates:
        if kw.lower() == keyword.lower():
            return kw
    limit = 0 if len(keyword) <= 4 else 1 if len(keyword) <= 7 else 2
    best = None
    for kw in candidates:
        d = edit_distance(keyword, kw)
        if d <= limit and (best is None or d < best[0]):
            best = (d, kw)
    return None if best is None else best[1]


class _Normalizer:
    def __init__(self, root: Any, draft: str, strict: bool) -> None:
        self.draft = draft
        self.legacy = ORDER.index(draft) <= ORDER.index("draft-07")
        self.known = keywords(draft)
        self.checker = VALIDATORS[draft].FORMAT_CHECKER
        self.strict = strict
        self.warnings: list[Warning] = []
        self.paths: dict[str, str] = {}  # original pointer -> pointer in the normalised schema
        self.origins: dict[str, str] = {}  # and back (also for renamed keywords)
        self.refs: list[tuple[dict, str, str]] = []  # (node, original pointer, $ref value)
        self.ids: list[str] = []  # pointers of base-changing $id below the root
        self.has_ref = _mentions_ref(root)

    def warn(self, pointer: str, keyword: str, message: str) -> None:
        if self.strict:
            raise UnsupportedSchema(pointer, keyword, message + " (refused: --strict)")
        self.warnings.append(Warning(pointer, keyword, message))

    def node(self, s: Any, ptr: str, new: str) -> Any:
        self.paths[ptr] = new
        self.origins[new] = ptr
        if not isinstance(s, dict):
            return s
        out: dict[str, Any] = {}
        ignored: dict[str, Any] = {}
        items = s.items()
        if self.legacy and "$ref" in s:
            # Draft-04/06/07: `$ref` replaces its siblings; definitions stay reachable.
            for kw, v in items:
                if kw not in ("$ref", *CONTAINERS):
                    ignored[kw] = v
            items = [(k, v) for k, v in items if k in ("$ref", *CONTAINERS)]
        for kw, v in items:
            here = child(ptr, kw)
            if kw in CONTAINERS:
                if isinstance(v, dict):
                    out[kw] = {
                        k: self.node(x, child(here, k), child(new, kw, k)) for k, x in v.items()
                    }
                else:
                    out[kw] = v
            elif kw in self.known:
                self.keyword(s, kw, v, ptr, new, out, ignored)
            elif kw == "$schema" and ptr:
                # Ignored below the root unless a reference enters an embedded resource.
                if self.has_ref and draft_of({kw: v}) != self.draft:
                    raise UnsupportedSchema(here, kw, "a different $schema below the root")
            elif kw in ANNOTATIONS or kw.startswith("x-"):
                out[kw] = v
            else:
                self.unknown(kw, v, here, out, ignored)
        if ignored:
            out[IGNORED] = ignored
        return out

    def unknown(self, kw: str, v: Any, here: str, out: dict, ignored: dict) -> None:
        other = [d for d in ORDER if kw in keywords(d)]
        if other:
            where = ", ".join(other)
            self.warn(here, kw, f"a keyword of {where}, not of {self.draft}: ignored")
        elif not kw.startswith(("_", "$")):
            typo = misspelling(kw, self.draft)
            if typo is not None:
                raise UnsupportedSchema(
                    here, kw, f"unknown keyword; did you mean {typo!r}? (prefix with x- to mark "
                    "an extension)"
                )  # fmt: skip
            self.warn(here, kw, "unknown keyword: ignored as an annotation")
        if kw in COMPILED:
            ignored[kw] = v
        else:
            out[kw] = v

    def keyword(
        self, s: dict, kw: str, v: Any, ptr: str, new: str, out: dict, ignored: dict
    ) -> None:
        here = child(ptr, kw)
        sub = self.node
        renamed = {"$recursiveRef": "$ref", "$dynamicRef": "$ref", "$dynamicAnchor": "$anchor"}
        renamed.update(items="prefixItems" if isinstance(v, list) else "items")
        renamed.update(additionalItems="items", dependencies="dependentRequired")
        if kw in renamed:
            self.origins[child(new, renamed[kw])] = here
        if kw in ("id", "$id"):
            if not ptr:
                return
            if isinstance(v, str) and v.startswith("#"):
                if len(v) > 1 and not v.startswith("#/"):
                    out["$anchor"] = v[1:]
                return
            if self.has_ref:
                self.ids.append(here)
                raise UnsupportedSchema(
                    here, kw, f"{kw} below the root changes the base URI of references"
                )
            return
        if kw == "$ref" or kw == "$recursiveRef":
            if kw == "$recursiveRef" and v != "#":
                raise UnsupportedSchema(here, kw, "$recursiveRef must be '#'")
            out["$ref"] = v
            self.refs.append((out, ptr, v))
            return
        if kw == "$dynamicRef":
            out["$ref"] = v
            self.refs.append((out, ptr, v))
            return
        if kw == "$dynamicAnchor":
            out["$anchor"] = v
            return
        if kw == "$recursiveAnchor":
            return
        if kw == "format":
            # A format decide compiles itself is an assertion wherever the draft defines it,
            # whatever checker libraries this installation happens to have.
            compiled = v in FORMATS and ORDER.index(self.draft) >= ORDER.index(
                FORMAT_SINCE.get(v, "draft-04")
            )
            if isinstance(v, str) and v not in self.checker.checkers and not compiled:
                self.warn(
                    here, kw, f"format {v!r} is not checked by jsonschema ({self.draft}): "
                    "an annotation, any string is valid"
                )  # fmt: skip
                return
            out[kw] = v
            return
        if kw in ("exclusiveMinimum", "exclusiveMaximum") and self.draft == "draft-04":
            bound = "minimum" if kw == "exclusiveMinimum" else "maximum"
            if v is True and bound in s:
                out[kw] = s[bound]
            return
        if kw in ("minimum", "maximum") and self.draft == "draft-04":
            if s.get("exclusive" + kw[0].upper() + kw[1:]) is True:
                return
            out[kw] = v
            return
        if kw == "items" and isinstance(v, list):
            out["prefixItems"] = [
                sub(x, child(here, i), child(new, "prefixItems", i)) for i, x in enumerate(v)
            ]
            if "additionalItems" in s:
                extra = child(ptr, "additionalItems")
                out["items"] = sub(s["additionalItems"], extra, child(new, "items"))
            return
        if kw == "additionalItems":
            if not isinstance(s.get("items"), list):
                ignored[kw] = v
            return
        if kw == "dependencies" and isinstance(v, dict):
            for name, dep in v.items():
                if isinstance(dep, list):
                    out.setdefault("dependentRequired", {})[name] = dep
                else:
                    at = child(new, "dependentSchemas", name)
                    out.setdefault("dependentSchemas", {})[name] = sub(dep, child(here, name), at)
            return
        if kw in ("properties", "patternProperties", "dependentSchemas") and isinstance(v, dict):
            out[kw] = {k: sub(x, child(here, k), child(new, kw, k)) for k, x in v.items()}
            return
        if kw in ("allOf", "anyOf", "oneOf", "prefixItems") and isinstance(v, list):
            out[kw] = [sub(x, child(here, i), child(new, kw, i)) for i, x in enumerate(v)]
            return
        if kw in _SINGLE:
            out[kw] = sub(v, here, child(new, kw))
            return
        out[kw] = v

    def rewrite_refs(self, root: Any) -> None:
        for node, _ptr, ref in self.refs:
            if not isinstance(ref, str) or not ref.startswith("#"):
                continue
            frag = unquote(ref[1:])
            if frag.startswith("/") and frag in self.paths:
                node["$ref"] = "#" + self.paths[frag]
            elif frag == "":
                node["$ref"] = "#"


_SINGLE = {
    "not",
    "if",
    "then",
    "else",
    "additionalProperties",
    "items",
    "contains",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
}


def _mentions_ref(schema: Any) -> bool:
    if isinstance(schema, dict):
        if any(k in schema for k in ("$ref", "$recursiveRef", "$dynamicRef")):
            return True
        return any(_mentions_ref(v) for k, v in schema.items() if k not in ("enum", "const"))
    if isinstance(schema, list):
        return any(_mentions_ref(v) for v in schema)
    return False


def check_schema(schema: Any, draft: str) -> None:
    """`MalformedSchema` when `schema` is not valid against its draft's meta-schema."""
    try:
        VALIDATORS[draft].check_schema(schema)
    except jsonschema.SchemaError as exc:
        path = list(exc.absolute_path)
        keyword = next((str(p) for p in reversed(path) if isinstance(p, str)), str(exc.validator))
        raise MalformedSchema(child("", *path), keyword, exc.message) from None


def normalize(schema: Any, *, strict: bool = False, draft: str | None = None) -> Normalized:
    """The draft of `schema` and its 2020-12 form (see the module docstring). `draft` is the
    draft assumed when `schema` names none (default 2020-12)."""
    draft = draft_of(schema, draft or DEFAULT)
    check_schema(schema, draft)
    norm = _Normalizer(schema, draft, strict)
    out = norm.node(schema, "", "")
    if isinstance(out, dict):
        out.pop("$schema", None)
    norm.rewrite_refs(out)
    return Normalized(draft, VALIDATORS[draft], out, norm.warnings, norm.origins)
