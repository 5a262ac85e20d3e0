"""CEL rules over a decision, checked after decoding: `rules: [{rule: "<CEL>", message: ...}]`.

A spec's `rules` may be a list of CEL boolean expressions over question ids (asked and derived
ones) instead of a JSON Schema. JSON Schema rules are enforced while decoding (`schemas.rules`);
CEL rules are checked once a document's answers are decided and derived: a row whose answers
violate one fails with that rule's message (`FailureKind.rule_violated`). `plan_checks` refuses,
with the pointer `/rules/<i>/rule`, a rule naming an unknown id, one that does not parse or type
check (the same typed subset and input types as `derive`, `jobs.derive`), or one whose result is
not a bool. A rule reading an answer that is null or missing is not applicable to that row (it
neither passes nor fails it), so a partial row is judged by the rules over the answers it has.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import celpy

from .derive import CelType, DeriveError, _cel_message, _Checker, _idents, _to_cel, schema_type


@dataclass(frozen=True)
class Check:
    index: int
    rule: str
    message: str
    program: Any
    inputs: tuple[str, ...]


class CheckPlan:
    def __init__(self, checks: list[Check]) -> None:
        self.checks = checks

    def violated(self, answers: Mapping[str, Any]) -> tuple[Check, str] | None:
        """The first rule the answers violate (with why), or None."""
        for check in self.checks:
            if any(answers.get(i) is None for i in check.inputs):
                continue  # not applicable: an input is null or missing
            try:
                result = check.program.evaluate({i: _to_cel(answers[i]) for i in check.inputs})
            except (celpy.CELEvalError, TypeError, ValueError, ZeroDivisionError) as exc:
                return check, f"rule could not be evaluated: {_cel_message(exc)}"
            if isinstance(result, celpy.CELEvalError):
                return check, f"rule could not be evaluated: {_cel_message(result)}"
            if not bool(result):
                return check, check.message
        return None


def plan_checks(
    rules: Sequence[tuple[str, str]], questions: Sequence[tuple[str, Any, str | None]]
) -> CheckPlan:
    """Check `rules` ((CEL, message) in spec order) against `questions` ((id, schema, derive));
    raises `DeriveError` with the rule's pointer."""
    env = celpy.Environment()
    types: dict[str, CelType | None] = {qid: schema_type(schema) for qid, schema, _ in questions}
    checks = []
    for i, (rule, message) in enumerate(rules):
        where = f"/rules/{i}/rule"
        try:
            tree = env.compile(rule)
        except celpy.CELParseError as exc:
            detail = " ".join(str(exc).split())
            raise DeriveError(where, f"cannot parse {rule!r}: {detail}") from exc
        names = _idents(tree)
        env_types = {}
        for name in sorted(names):
            if name not in types:
                raise DeriveError(where, f"{rule!r} reads {name!r}, which is not a question id")
            if types[name] is None:
                raise DeriveError(where, f"{rule!r} reads {name!r}, whose schema has no CEL type")
            env_types[name] = CelType(types[name].base)  # type: ignore[union-attr]
        try:
            result = _Checker(env_types).check(tree)
        except TypeError as exc:
            raise DeriveError(where, f"{rule!r}: type error: {exc}") from exc
        if result.base != "bool":
            raise DeriveError(where, f"{rule!r} gives {result}, a rule must give a bool")
        checks.append(Check(i, rule, message, env.program(tree), tuple(sorted(names))))
    return CheckPlan(checks)
