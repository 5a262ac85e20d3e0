"""The JSON Schema form of cross-question rules, parsed into formulas over atoms (`schemas.rules`
enforces them).

`Parser` reads `if`/`then`/`else`, `dependentRequired`, `dependentSchemas` and `allOf` of
these, whose conditions and consequences are `properties` of *atoms* (`const`, `enum`, `type`,
integer bounds on one answer) plus `required`, into `Rule`s whose formulas reference atoms by
index; anything else is refused with the JSON pointer of the keyword.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .drafts import Validator
from .errors import MalformedSchema, UnsupportedSchema

ANNOTATIONS = {"title", "description", "$comment", "examples", "default"}
RULE_KEYWORDS = {"allOf", "if", "then", "else", "dependentRequired", "dependentSchemas"}
ATOM_KEYWORDS = {"const", "enum", "type", "minimum", "maximum", "exclusiveMinimum",
                 "exclusiveMaximum"}  # fmt: skip
BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


@dataclass(frozen=True)
class Atom:
    question: str
    schema: dict[str, Any]  # the atom as written (const/enum/type/bounds)
    key: str = field(compare=False, default="")

    def holds(self, value: Any) -> bool:
        return Validator(self.schema).is_valid(value)


# A formula is ("and", [formulas]) | ("atom", index) | ("true",) | ("false",)
# | ("if", cond, then, else) | ("table", question ids, bool array over their cells' indices).
Formula = tuple


@dataclass
class Rule:
    pointer: str
    formula: Formula
    questions: set[str]


def _check_keys(node: dict[str, Any], allowed: set[str], pointer: str) -> None:
    for key in node:
        if key not in allowed and key not in ANNOTATIONS:
            raise UnsupportedSchema(
                f"{pointer}/{key}", key,
                f"rules support {', '.join(sorted(allowed))} here; `{key}` is not enforced "
                "while decoding, so it is refused rather than silently ignored",
            )  # fmt: skip


class Parser:
    def __init__(self, questions: dict[str, Any]) -> None:
        self.questions = questions  # id -> question schema, the questions this document is asked
        self.mentioned: dict[str, str] = {}  # every question id the rules name -> first pointer
        self.atoms: list[Atom] = []
        self._index: dict[tuple[str, str], int] = {}

    def atom(self, qid: str, schema: Any, pointer: str) -> int:
        if schema is True:
            return -1
        if not isinstance(schema, dict):
            raise MalformedSchema(pointer, "properties", "an atom must be a schema object")
        _check_keys(schema, ATOM_KEYWORDS, pointer)
        if not set(schema) & ATOM_KEYWORDS:
            raise UnsupportedSchema(pointer, "properties", "an atom needs const, enum, type or "
                                    "integer bounds")  # fmt: skip
        for bound in BOUNDS:
            if bound in schema and not isinstance(schema[bound], int | float):
                raise MalformedSchema(f"{pointer}/{bound}", bound, "must be a number")
        key = json.dumps(schema, sort_keys=True)
        if (qid, key) not in self._index:
            self._index[(qid, key)] = len(self.atoms)
            self.atoms.append(Atom(qid, schema, key))
        return self._index[(qid, key)]

    def clause(self, node: Any, pointer: str) -> Formula:
        """A condition or consequence: `properties` of atoms, and `required` questions."""
        if node is True:
            return ("true",)
        if not isinstance(node, dict):
            raise UnsupportedSchema(pointer, "if", "conditions and consequences must be objects "
                                    "with `properties`")  # fmt: skip
        _check_keys(node, {"properties", "required"}, pointer)
        required = node.get("required", [])
        if not isinstance(required, list) or not all(isinstance(q, str) for q in required):
            raise MalformedSchema(f"{pointer}/required", "required", "must be a list of ids")
        parts: list[Formula] = []
        for i, qid in enumerate(required):
            if not self.asked(qid, f"{pointer}/required/{i}"):
                parts.append(("false",))  # every asked answer is present; an unasked one never
        properties = node.get("properties", {})
        if not isinstance(properties, dict):
            raise MalformedSchema(f"{pointer}/properties", "properties", "must be an object")
        for qid, schema in properties.items():
            where = f"{pointer}/properties/{qid}"
            if not self.asked(qid, where):
                continue  # `properties` ignores a key the decision object does not have
            index = self.atom(qid, schema, where)
            if index >= 0:
                parts.append(("atom", index))
        return ("and", parts)

    def rule(self, node: Any, pointer: str) -> list[Rule]:
        if not isinstance(node, dict):
            raise MalformedSchema(pointer or "#", "rules", "rules must be a schema object")
        _check_keys(node, RULE_KEYWORDS, pointer)
        out: list[Rule] = []
        for i, sub in enumerate(node.get("allOf", [])):
            out.extend(self.rule(sub, f"{pointer}/allOf/{i}"))
        if "if" in node:
            cond = self.clause(node["if"], f"{pointer}/if")
            then = self.clause(node.get("then", True), f"{pointer}/then")
            other = self.clause(node.get("else", True), f"{pointer}/else")
            out.append(Rule(f"{pointer}/if", ("if", cond, then, other), set()))
        elif "then" in node or "else" in node:
            raise MalformedSchema(pointer or "#", "then", "`then`/`else` without `if`")
        for qid, needed in node.get("dependentRequired", {}).items():
            where = f"{pointer}/dependentRequired/{qid}"
            if not isinstance(needed, list) or not all(isinstance(q, str) for q in needed):
                raise MalformedSchema(where, "dependentRequired", "must be a list of ids")
            missing = [n for i, n in enumerate(needed) if not self.asked(n, f"{where}/{i}")]
            if self.asked(qid, where) and missing:
                out.append(Rule(where, ("and", [("false",)]), set()))
        for qid, sub in node.get("dependentSchemas", {}).items():
            where = f"{pointer}/dependentSchemas/{qid}"
            clause = self.clause(sub, where)
            if self.asked(qid, where):
                out.append(Rule(where, clause, set()))
        return out

    def asked(self, qid: Any, pointer: str) -> bool:
        """Whether this document is asked `qid`; records every id the rules name."""
        if not isinstance(qid, str):
            raise MalformedSchema(pointer, "rules", "question ids are strings")
        self.mentioned.setdefault(qid, pointer)
        return qid in self.questions


def evaluate(
    formula: Formula, truth: dict[int, bool], chosen: dict[str, int] | None = None
) -> bool:
    """A formula's value given each atom's truth and, for tables, each question's chosen cell."""
    kind = formula[0]
    if kind in ("true", "false"):
        return kind == "true"
    if kind == "atom":
        return truth[formula[1]]
    if kind == "table":
        assert chosen is not None
        return bool(formula[2][tuple(chosen[q] for q in formula[1])])
    if kind == "and":
        return all(evaluate(f, truth, chosen) for f in formula[1])
    cond, then, other = formula[1], formula[2], formula[3]
    return evaluate(then if evaluate(cond, truth, chosen) else other, truth, chosen)


def atoms_of(formula: Formula) -> Iterable[int]:
    if formula[0] == "atom":
        yield formula[1]
    elif formula[0] == "and":
        for f in formula[1]:
            yield from atoms_of(f)
    elif formula[0] == "if":
        for f in formula[1:]:
            yield from atoms_of(f)
