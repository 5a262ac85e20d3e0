"""Derived answers: questions computed from other answers by a CEL expression, never asked.

A question with `derive: "<CEL>"` (`over_limit: amount > policy_limit`) is not packed into any
block: once the answers it reads are decided, its value is the expression evaluated over them
(`cel-python`, see docs/jobs.md for why that implementation). `plan_derived` checks a question
set up front and raises `DeriveError` (with the JSON pointer `/questions/<i>/derive`) for an
unknown id, a cycle, a parse error, a construct outside the typed subset, or a type error: the
inputs' CEL types come from their schemas (boolean, integer, number, string, enums and consts of
one of these, each optionally with null), and the result type must be the derived question's
own. `DerivePlan.evaluate` computes every derived answer in dependency order: a null or missing
input makes the answer null when its schema admits null, else an answer-level error; its
confidence is the product of the confidences of the asked answers it depends on (each counted
once, through derived inputs too). Values are validated with `jsonschema` by the caller.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import celpy
import lark
from celpy import celtypes

from decide.schemas.nullable import value_schema

NUMERIC = ("int", "double")
SCHEMA_TYPES = {"boolean": "bool", "integer": "int", "number": "double", "string": "string"}
FUNCTIONS = {"size": None, "int": "int", "double": "double", "string": "string"}
METHODS = {"contains": "bool", "startsWith": "bool", "endsWith": "bool", "size": "int"}


class DeriveError(ValueError):
    """A derive expression that cannot be used: `pointer` locates it in the spec."""

    def __init__(self, pointer: str, message: str) -> None:
        super().__init__(f"{pointer}: {message}")
        self.pointer = pointer


@dataclass(frozen=True)
class CelType:
    base: str  # bool | int | double | string | null | list(<T>)
    nullable: bool = False

    def __str__(self) -> str:
        return self.base + ("?" if self.nullable and self.base != "null" else "")


def schema_type(schema: Any) -> CelType | None:
    """The CEL type of a question's answers, or None when its schema has none we read."""
    schema, null_branch = value_schema(schema)
    if not isinstance(schema, dict):
        return None
    if "const" in schema or "enum" in schema:
        values = [schema["const"]] if "const" in schema else list(schema["enum"])
        kinds = {_value_type(v) for v in values if v is not None}
        nullable = null_branch or None in values
        # `type: number` (or whole and decimal values mixed) reads every value as a double:
        # `{type: number, enum: [1, 2, 3]}` halves to 0.5, not 0
        if (
            kinds
            and kinds <= {"int", "double"}
            and ("double" in kinds or schema.get("type") == "number")
        ):
            return CelType("double", nullable)
        if len(kinds) != 1 or None in kinds:
            return None
        return CelType(kinds.pop(), nullable)
    declared = schema.get("type")
    names = [declared] if isinstance(declared, str) else declared
    if not isinstance(names, list):
        return None
    bases = {SCHEMA_TYPES.get(n) for n in names if n != "null"}
    if len(bases) != 1 or None in bases:
        return CelType("null", True) if not bases and "null" in names else None
    return CelType(bases.pop(), null_branch or "null" in names)


def _value_type(value: Any) -> str | None:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    return None


class _Checker:
    """Static types of the typed CEL subset over a celpy (lark) parse tree."""

    def __init__(self, env: Mapping[str, CelType]) -> None:
        self.env = env

    def fail(self, message: str) -> None:
        raise TypeError(message)

    def same(self, op: str, a: CelType, b: CelType, allowed: tuple[str, ...]) -> str:
        if a.base != b.base or a.base not in allowed:
            mixed = {a.base, b.base} == {*NUMERIC}
            hint = " (convert with double(...) or int(...))" if mixed else ""
            self.fail(f"no overload of {op} for {a.base} and {b.base}{hint}")
        return a.base

    def check(self, node: Any) -> CelType:
        if isinstance(node, lark.Token):
            return self.literal(node)
        kind, kids = node.data, node.children
        if (
            kind
            in (
                "expr",
                "conditionalor",
                "conditionaland",
                "relation",
                "addition",
                "multiplication",
                "unary",
                "member",
                "primary",
            )
            and len(kids) == 1
        ):
            return self.check(kids[0])
        if kind == "expr":  # c ? a : b
            if self.check(kids[0]).base != "bool":
                self.fail("the condition of ?: is not a bool")
            a, b = self.check(kids[1]), self.check(kids[2])
            if a.base == "null" or b.base == "null":
                other = b if a.base == "null" else a
                return CelType(other.base, True)
            self.same("?:", a, b, (a.base,))
            return CelType(a.base, a.nullable or b.nullable)
        if kind in ("conditionalor", "conditionaland"):
            op = "||" if kind == "conditionalor" else "&&"
            for kid in kids:
                if self.check(kid).base != "bool":
                    self.fail(f"an operand of {op} is not a bool")
            return CelType("bool")
        if kind in ("relation", "addition", "multiplication"):
            op_node, right = kids
            left = self.check(op_node.children[0])
            return self.binary(op_node.data, left, self.check(right))
        if kind == "unary":
            op, operand = kids[0].data, self.check(kids[1])
            if op == "unary_not" and operand.base == "bool":
                return CelType("bool")
            if op == "unary_neg" and operand.base in NUMERIC:
                return CelType(operand.base)
            self.fail(f"no overload of {'!' if op == 'unary_not' else '-'} for {operand.base}")
        if kind == "paren_expr":
            return self.check(kids[0])
        if kind == "ident":
            name = str(kids[0])
            if name not in self.env:
                self.fail(f"unknown id {name!r}")
            return self.env[name]
        if kind == "literal":
            return self.literal(kids[0])
        if kind == "list_lit":
            items = [self.check(k) for k in (kids[0].children if kids else [])]
            if not items or len({i.base for i in items}) != 1:
                self.fail("a list literal needs one or more items of one type")
            return CelType(f"list({items[0].base})")
        if kind == "ident_arg":
            return self.call(str(kids[0]), None, kids[1].children if len(kids) > 1 else [])
        if kind == "member_dot_arg":
            target = self.check(kids[0])
            return self.call(str(kids[1]), target, kids[2].children if len(kids) > 2 else [])
        self.fail(
            f"{kind} is not supported in derive (operators, literals, answer ids, lists, "
            "size, int, double, string, contains, startsWith, endsWith)"
        )
        raise AssertionError  # unreachable

    def literal(self, token: lark.Token) -> CelType:
        kinds = {
            "INT_LIT": "int",
            "FLOAT_LIT": "double",
            "STRING_LIT": "string",
            "MLSTRING_LIT": "string",
            "BOOL_LIT": "bool",
            "NULL_LIT": "null",
        }
        if token.type not in kinds:
            self.fail(f"literal {token!s} ({token.type}) is not supported in derive")
        return CelType(kinds[token.type], token.type == "NULL_LIT")

    def binary(self, op: str, a: CelType, b: CelType) -> CelType:
        symbol = {
            "relation_lt": "<",
            "relation_le": "<=",
            "relation_gt": ">",
            "relation_ge": ">=",
            "relation_eq": "==",
            "relation_ne": "!=",
            "relation_in": "in",
            "addition_add": "+",
            "addition_sub": "-",
            "multiplication_mul": "*",
            "multiplication_div": "/",
            "multiplication_mod": "%",
        }.get(op, op)
        if op in ("relation_eq", "relation_ne"):
            if "null" not in (a.base, b.base):
                self.same(symbol, a, b, (a.base,))
            return CelType("bool")
        if op == "relation_in":
            if b.base != f"list({a.base})":
                self.fail(f"no overload of in for {a.base} and {b.base}")
            return CelType("bool")
        if op.startswith("relation_"):
            self.same(symbol, a, b, (*NUMERIC, "string"))
            return CelType("bool")
        if op == "addition_add":
            return CelType(self.same(symbol, a, b, (*NUMERIC, "string")))
        if op == "multiplication_mod":
            return CelType(self.same(symbol, a, b, ("int",)))
        return CelType(self.same(symbol, a, b, NUMERIC))

    def call(self, name: str, target: CelType | None, args: list) -> CelType:
        types = [self.check(a) for a in args]
        if target is None and name in FUNCTIONS and len(types) == 1:
            arg = types[0].base
            if name == "size" and (arg == "string" or arg.startswith("list(")):
                return CelType("int")
            if name == "string" and arg == "bool":
                # celpy writes "True"/"False" where CEL writes "true"/"false": a rule comparing
                # with 'true' would never hold
                self.fail("string(bool) is not CEL's here (celpy gives 'True'); write "
                          "`x ? 'true' : 'false'`")  # fmt: skip
            if name != "size" and arg in (*NUMERIC, "string"):
                return CelType(FUNCTIONS[name] or "int")
        if target is not None and target.base == "string" and name in METHODS:
            wanted = 0 if name == "size" else 1
            if len(types) == wanted and all(t.base == "string" for t in types):
                return CelType(METHODS[name])
        shown = ", ".join(t.base for t in types)
        self.fail(f"no overload of {name}({shown})" + (f" on {target.base}" if target else ""))
        raise AssertionError  # unreachable


MAX_DEPTH = 200  # parse-tree levels; celpy's evaluator recurses per level (about 95 terms of `+`)


def check_depth(tree: Any, where: str, what: str) -> None:
    """Refuse an expression nested deeper than `MAX_DEPTH` (a sum of hundreds of terms): it
    passed `validate`, then celpy's recursive evaluator failed every row (RecursionError)."""
    stack, deepest = [(tree, 1)], 0
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(node, lark.Tree):
            stack.extend((child, depth + 1) for child in node.children)
    if deepest > MAX_DEPTH:
        raise DeriveError(where, f"{what} nests {deepest} levels deep, more than {MAX_DEPTH}: "
                          "split it into derived questions")  # fmt: skip


def _idents(tree: Any) -> set[str]:
    """The variable names an expression reads (function names excluded)."""
    if isinstance(tree, lark.Token):
        return set()
    if tree.data == "ident":
        return {str(tree.children[0])}
    out: set[str] = set()
    kids = tree.children[1:] if tree.data == "ident_arg" else tree.children
    for kid in kids:
        out |= _idents(kid)
    return out


@dataclass(frozen=True)
class Derived:
    id: str
    expression: str
    program: Any  # celpy Runner
    inputs: tuple[str, ...]  # ids it reads directly
    asked: tuple[str, ...]  # asked (not derived) ids it depends on, through derived ones too
    nullable: bool  # its schema admits null
    result: CelType
    doubles: frozenset[str] = frozenset()  # inputs typed number: a whole value is still a double
    validator: Any = None  # of its own schema: a value it refuses fails this answer, not the row


class DerivePlan:
    """The derived questions of one question set, in an order where inputs come first."""

    def __init__(self, order: list[Derived]) -> None:
        self.order = order
        self.ids = {d.id for d in order}

    def evaluate(
        self, answers: Mapping[str, Any], confidence: Mapping[str, float]
    ) -> tuple[dict[str, Any], dict[str, float], dict[str, str]]:
        """(values, confidences, errors) of the derived answers given the asked ones. An
        answer absent from `answers` (it failed) counts as missing."""
        values: dict[str, Any] = {}
        conf: dict[str, float] = {}
        errors: dict[str, str] = {}
        known = dict(answers)
        for d in self.order:
            missing = [i for i in d.inputs if i not in known]
            nulls = [i for i in d.inputs if i in known and known[i] is None]
            if missing or nulls:
                if d.nullable and not missing:
                    values[d.id] = known[d.id] = None
                    conf[d.id] = math.prod(confidence.get(i, 1.0) for i in d.asked)
                else:
                    what = "missing" if missing else "null"
                    errors[d.id] = (
                        f"derive {d.expression!r}: input {(missing or nulls)[0]!r} is {what}"
                    )
                continue
            try:
                value = _from_cel(d.program.evaluate(cel_inputs(known, d.inputs, d.doubles)))
            except (celpy.CELEvalError, TypeError, ValueError, ZeroDivisionError) as exc:
                errors[d.id] = f"derive {d.expression!r} failed: {_cel_message(exc)}"
                continue
            if d.result.base == "double" and isinstance(value, int):
                value = float(value)
            refused = _refusal(d.validator, value)
            if refused is not None:  # outside its own schema: this answer fails, not the row
                errors[d.id] = f"derive {d.expression!r} gave {value!r}: {refused}"
                continue
            values[d.id] = known[d.id] = value
            conf[d.id] = math.prod(confidence.get(i, 1.0) for i in d.asked)
        return values, conf, errors


def _validator(schema: Any) -> Any:
    """The validator the decision object is judged with (`decide.schemas.drafts.Validator`: its
    own `multipleOf` on decimals as written), over the schema normalised to 2020-12."""
    from decide.schemas.drafts import Validator, normalize

    return Validator(normalize(schema).schema, format_checker=Validator.FORMAT_CHECKER)


def _refusal(validator: Any, value: Any) -> str | None:
    """Why the derived question's schema refuses `value` (its first error), or None."""
    if validator is None:
        return None
    error = next(iter(validator.iter_errors(value)), None)
    return None if error is None else error.message


def _cel_message(exc: BaseException) -> str:
    args = getattr(exc, "args", ())
    return str(args[0]) if args else type(exc).__name__


def cel_inputs(
    answers: Mapping[str, Any], inputs: Sequence[str], doubles: Collection[str]
) -> dict[str, Any]:
    """The CEL values of `inputs`: by the type the expression was checked with, so an answer to
    a `number` question is a double even when it is a whole number (680 read as 680.0)."""
    return {i: _to_cel(answers[i], i in doubles) for i in inputs}


def number_inputs(env: Mapping[str, CelType]) -> frozenset[str]:
    """The inputs an expression was type-checked to read as doubles (`cel_inputs`)."""
    return frozenset(name for name, t in env.items() if t.base == "double")


def _to_cel(value: Any, double: bool = False) -> Any:
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        return celtypes.DoubleType(float(value)) if double else celtypes.IntType(value)
    if isinstance(value, float):
        return celtypes.DoubleType(value)
    if isinstance(value, str):
        return celtypes.StringType(value)
    raise TypeError(f"an answer of type {type(value).__name__} has no CEL type here")


def _from_cel(value: Any) -> Any:
    if isinstance(value, celpy.CELEvalError):
        raise value
    if value is None:
        return None
    # celpy gives `+ - *` of doubles and `+` of strings as plain `float` and `str` (its
    # DoubleType/StringType operators return Python values): those are answers too.
    if isinstance(value, celtypes.BoolType | bool):
        return bool(value)
    if isinstance(value, celtypes.DoubleType | float):
        if not math.isfinite(float(value)):
            raise ValueError(f"the result {float(value)} is not a finite number")
        return float(value)
    if isinstance(value, celtypes.IntType | celtypes.UintType | int):
        return int(value)
    if isinstance(value, celtypes.StringType | str):
        return str(value)
    raise TypeError(f"a result of type {type(value).__name__} is not an answer")


def plan_derived(questions: Sequence[tuple[str, Any, str | None]]) -> DerivePlan:
    """Check and order the derived questions among `questions` ((id, schema, derive) in spec
    order; the pointer uses that index). Raises `DeriveError`."""
    env = celpy.Environment()
    index = {qid: i for i, (qid, _, _) in enumerate(questions)}
    schemas = {qid: schema for qid, schema, _ in questions}
    parsed: dict[str, tuple[str, Any, set[str]]] = {}
    for i, (qid, _schema, derive) in enumerate(questions):
        if derive is None:
            continue
        where = f"/questions/{i}/derive"
        try:
            tree = env.compile(derive)
        except celpy.CELParseError as exc:
            detail = " ".join(str(exc).split())
            raise DeriveError(
                where, f"question {qid!r}: cannot parse {derive!r}: {detail}"
            ) from exc
        check_depth(tree, where, f"question {qid!r}: its derive expression")
        names = _idents(tree)
        for name in sorted(names):
            if name not in index:
                raise DeriveError(
                    where,
                    f"question {qid!r}: {derive!r} reads {name!r}, which is "
                    "not the id of a question here",
                )
        parsed[qid] = (derive, tree, names)
    order = _topological(parsed, index)
    types: dict[str, CelType] = {}
    plans: list[Derived] = []
    asked_of: dict[str, tuple[str, ...]] = {}
    for qid in order:
        derive, tree, names = parsed[qid]
        where = f"/questions/{index[qid]}/derive"
        own = schema_type(schemas[qid])
        if own is None:
            raise DeriveError(
                where,
                f"question {qid!r}: a derived question's schema must be a "
                "boolean, integer, number or string type (or an enum of one)",
            )
        env_types = {}
        for name in names:
            t = types.get(name) or schema_type(schemas[name])
            if t is None:
                raise DeriveError(
                    where,
                    f"question {qid!r}: {derive!r} reads {name!r}, whose "
                    "schema has no CEL type (boolean, integer, number, string, "
                    "or an enum of one of these)",
                )
            env_types[name] = CelType(t.base)  # a null input never reaches the expression
        try:
            result = _Checker(env_types).check(tree)
        except TypeError as exc:
            raise DeriveError(where, f"question {qid!r}: {derive!r}: type error: {exc}") from exc
        fits = result.base == own.base or (result.base, own.base) == ("int", "double")
        if result.base == "null":
            fits = own.nullable
        if not fits or (result.nullable and not own.nullable):
            raise DeriveError(
                where,
                f"question {qid!r}: {derive!r} gives {result}, but the question's schema is {own}",
            )
        types[qid] = own
        asked: dict[str, None] = {}
        for name in sorted(names):
            for a in asked_of.get(name, (name,)):
                asked[a] = None
        asked_of[qid] = tuple(asked)
        program = env.program(tree)
        plans.append(Derived(qid, derive, program, tuple(sorted(names)), tuple(asked),
                             own.nullable, own, number_inputs(env_types),
                             _validator(schemas[qid])))  # fmt: skip
    return DerivePlan(plans)


def _topological(
    parsed: Mapping[str, tuple[str, Any, set[str]]], index: Mapping[str, int]
) -> list[str]:
    """Derived ids with every derived input before its readers; a cycle is a `DeriveError`."""
    order: list[str] = []
    state: dict[str, int] = {}  # 1 visiting, 2 done

    def visit(qid: str, path: list[str]) -> None:
        if state.get(qid) == 2:
            return
        if state.get(qid) == 1:
            cycle = [*path[path.index(qid) :], qid]
            raise DeriveError(
                f"/questions/{index[qid]}/derive",
                f"question {qid!r}: derive "
                f"{parsed[qid][0]!r} is part of a cycle: {' -> '.join(cycle)}",
            )
        state[qid] = 1
        for name in sorted(parsed[qid][2]):
            if name in parsed:
                visit(name, [*path, qid])
        state[qid] = 2
        order.append(qid)

    for qid in sorted(parsed, key=index.__getitem__):
        visit(qid, [])
    return order
