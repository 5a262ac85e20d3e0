"""CEL rules over a decision: `rules: [{rule: "<CEL>", message: ...}]`.

A spec's `rules` may be a list of CEL boolean expressions over question ids (asked and derived
ones) instead of a JSON Schema. A CEL rule that reads only finite questions (enums, booleans,
small ranges) asked of the model, none of them extract, is enforced while decoding like JSON
Schema rules: `enforcement` makes it a `schemas.rules.ValueRule`, tabulated over its questions'
joint values, so no commit that makes it unsatisfiable is made. Every CEL rule is also checked
once a document's answers are decided and derived: a row whose answers violate one fails with
that rule's message (`FailureKind.rule_violated`); for the rules enforced while decoding this
never happens. `plan_checks` refuses,
with the pointer `/rules/<i>/rule`, a rule naming an unknown id, one that does not parse or type
check (the same typed subset and input types as `derive`, `jobs.derive`), or one whose result is
not a bool. A rule reading an answer that is null or missing is not applicable to that row (it
neither passes nor fails it), so a partial row is judged by the rules over the answers it has;
a null answer the rule compares with null (`x != null && x > 5`) reaches it, as in `derive`.
Over one row's own questions (`unasked="skip"`) a rule reading an id the row does not ask does
not apply to it either, as a JSON Schema rule's `properties` ignores a key the row's decision
lacks; a typo is then a job's usage error, found against every id it may ask (`rule_ids`).
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import celpy

from decide.schemas.rules import MAX_ASSIGNMENTS, ValueRule

from .derive import (
    CelType,
    DeriveError,
    _Checker,
    _idents,
    cel_inputs,
    check_depth,
    failure,
    null_tested,
    number_inputs,
    program,
    schema_type,
)


@dataclass(frozen=True)
class Check:
    index: int
    rule: str
    message: str
    program: Any
    inputs: tuple[str, ...]
    doubles: frozenset[str] = frozenset()  # inputs typed number (`derive.cel_inputs`)
    null_tested: frozenset[str] = frozenset()  # inputs compared with null: a null one reaches it


class CheckPlan:
    def __init__(self, checks: list[Check]) -> None:
        self.checks = checks

    def violated(self, answers: Mapping[str, Any]) -> tuple[Check, str] | None:
        """The first rule the answers violate (with why), or None."""
        for check in self.checks:
            why = _judge(check, answers)
            if why is not None:
                return check, why
        return None

    def enforcement(self, finite: Mapping[str, int]) -> tuple[list[ValueRule], dict[int, str]]:
        """The rules enforced while decoding, as value rules, and for every other rule why not.
        `finite`: for each question asked of the model, its number of values (0 when it is not
        finite, or is extract). Rules are taken in order while the questions they link have at
        most `MAX_ASSIGNMENTS` joint values together."""
        enforced, why_not = [], {}
        group: dict[str, str] = {}
        size: dict[str, int] = {}  # a group's root -> its questions' joint values

        def root(q: str) -> str:
            while group.setdefault(q, q) != q:
                q = group[q]
            size.setdefault(q, finite[q])
            return q

        for check in self.checks:
            outside = [i for i in check.inputs if not finite.get(i)]
            if outside:
                kinds = ", ".join(
                    f"{i} ({'derived' if i not in finite else 'not finite or extract'})"
                    for i in outside
                )
                why_not[check.index] = f"reads {kinds}"
                continue
            roots = {root(i) for i in check.inputs}
            joint = math.prod(size[r] for r in roots)
            if joint > MAX_ASSIGNMENTS:
                why_not[check.index] = (f"links questions with {joint} joint values (more than "
                                        f"{MAX_ASSIGNMENTS})")  # fmt: skip
                continue
            first, *rest = sorted(roots)
            for r in rest:
                group[r] = first
            size[first] = joint
            pointer = f"/rules/{check.index}"
            enforced.append(ValueRule(pointer, check.inputs, partial(_holds, check)))
        return enforced, why_not


def _judge(check: Check, answers: Mapping[str, Any]) -> str | None:
    """Why `answers` violate `check`, or None when they satisfy it or it does not apply."""
    if any(
        i not in answers or (answers[i] is None and i not in check.null_tested)
        for i in check.inputs
    ):
        return None  # not applicable: an input is missing, or null and not compared with null
    nulls = [i for i in check.inputs if answers[i] is None]
    try:
        result = check.program.evaluate(cel_inputs(answers, check.inputs, check.doubles))
        if isinstance(result, celpy.CELEvalError):
            raise result
    except (celpy.CELEvalError, TypeError, ValueError, ZeroDivisionError) as exc:
        return f"rule could not be evaluated{failure(exc, nulls).removeprefix(' failed')}"
    return None if bool(result) else check.message


def _holds(check: Check, values: Mapping[str, Any]) -> bool:
    return _judge(check, values) is None


def _parse(env: celpy.Environment, rule: str, where: str) -> Any:
    try:
        tree = env.compile(rule)
    except celpy.CELParseError as exc:
        detail = " ".join(str(exc).split())
        raise DeriveError(where, f"cannot parse {rule!r}: {detail}") from exc
    check_depth(tree, where, "the rule")
    return tree


def rule_ids(rules: Sequence[tuple[str, str]]) -> dict[str, str]:
    """Every question id the CEL `rules` ((CEL, message) in spec order) read, with the pointer of
    the first rule reading it (`DeriveError` for a rule that does not parse): a job whose rows
    ask their own questions checks them against every id it may ask, as it does the ids of JSON
    Schema rules (`schemas.rules.rule_question_ids`)."""
    env = celpy.Environment()
    out: dict[str, str] = {}
    for i, (rule, _) in enumerate(rules):
        where = f"/rules/{i}/rule"
        for name in sorted(_idents(_parse(env, rule, where))):
            out.setdefault(name, where)
    return out


def unknown_rule_id(read: Mapping[str, str], asked: Collection[str], where: str) -> str | None:
    """The refusal of the first id the rules read (`read`: id -> pointer, JSON Schema or CEL
    rules, `runner.rule_ids`) that none of `asked` has, or None. A rule over an id a question
    set lacks does not apply to it, so over the questions of a whole call (`Decider.decide`,
    `where="this call"`) such an id is a typo that would silently switch the rule off."""
    for qid, pointer in read.items():
        if qid not in asked:
            close = difflib.get_close_matches(qid, sorted(asked), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            ids = sorted(asked)
            shown = ", ".join(ids[:12]) + (f", … ({len(ids)} in all)" if len(ids) > 12 else "")
            return (f"rules: {pointer}: {qid!r} is not the id of any question of {where} "
                    f"({shown}){hint}")  # fmt: skip
    return None


def plan_checks(
    rules: Sequence[tuple[str, str]],
    questions: Sequence[tuple[str, Any, str | None]],
    unasked: str = "refuse",
) -> CheckPlan:
    """Check `rules` ((CEL, message) in spec order) against `questions` ((id, schema, derive));
    raises `DeriveError` with the rule's pointer. A rule reading an id that is not one of
    `questions` is refused (`unasked="refuse"`: the questions are all a job asks), or does not
    apply to them and is left out of the plan (`"skip"`: one row's own questions); it must parse
    either way, and a rule over ids all among them must type check."""
    if unasked not in ("refuse", "skip"):
        raise ValueError(f"unasked: {unasked!r} is not 'refuse' or 'skip'")
    env = celpy.Environment()
    types: dict[str, CelType | None] = {qid: schema_type(schema) for qid, schema, _ in questions}
    checks = []
    for i, (rule, message) in enumerate(rules):
        where = f"/rules/{i}/rule"
        tree = _parse(env, rule, where)
        names = _idents(tree)
        if unasked == "skip" and not names <= types.keys():
            continue  # reads a question these do not ask: not applicable
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
        inputs = tuple(sorted(names))
        checks.append(Check(i, rule, message, program(env, tree), inputs,
                            number_inputs(env_types), null_tested(tree)))  # fmt: skip
    return CheckPlan(checks)
