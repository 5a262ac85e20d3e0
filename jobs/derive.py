"""Derived answers: questions computed from other answers by a CEL expression, never asked.

A question with `derive: "<CEL>"` (`over_limit: amount > policy_limit`) is not packed into any
block: once the answers it reads are decided, its value is the expression evaluated over them
(`cel-python`, see docs/jobs.md for why that implementation). `plan_derived` checks a question
set up front and raises `DeriveError` (with the JSON pointer `/questions/<i>/derive`) for an
unknown id, a cycle, a parse error, a construct outside the typed subset, or a type error: the
inputs' CEL types come from their schemas (boolean, integer, number, string, enums and consts of
one of these, each optionally with null), and the result type must be the derived question's
own. `DerivePlan.evaluate` computes every derived answer in dependency order: a null or missing
input makes the answer null when its schema admits null, else an answer-level error, except
that a null input the expression compares with null (`x == null ? 0 : x`) reaches it; its
confidence is the product of the confidences of the asked answers it depends on (each counted
once, through derived inputs too). Values are validated with `jsonschema` by the caller.
Programs run with CEL's semantics where celpy's differ (`CEL_FUNCTIONS`), and an evaluation
error is worded in the user's terms (`failure`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
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
SUBSET = ("the typed subset: literals, answer ids, operators, ?:, `in` a list literal, size(), "
          "int(), double(), string(), and the string methods contains, startsWith, endsWith, "
          "size")  # fmt: skip
CONSTRUCTS = {  # parse-tree nodes outside the subset, as a user wrote them
    "member_dot": "field selection (x.f)",
    "member_dot_arg": "a method call",
    "member_index": "indexing (x[i])",
    "member_object": "a message literal",
    "map_lit": "a map literal",
    "dot_ident": "a qualified name (.x)",
    "dot_ident_arg": "a qualified call (.f())",
}
TIME_FUNCTIONS = {
    "timestamp", "duration", "getDate", "getDayOfMonth", "getDayOfWeek", "getDayOfYear",
    "getFullYear", "getMonth", "getHours", "getMilliseconds", "getMinutes", "getSeconds",
}  # fmt: skip
INT64 = (-(2**63), 2**63 - 1)  # CEL's int
INT_RANGE = "-2^63 to 2^63 - 1"


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
        what = CONSTRUCTS.get(kind, kind)
        self.fail(f"{what} is not supported here ({SUBSET})")
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
            what = {"UINT_LIT": "an unsigned int", "BYTES_LIT": "a bytes literal"}.get(
                token.type, token.type
            )
            self.fail(f"literal {token!s} ({what}) is not supported here ({SUBSET})")
        # celpy takes these and fails every row at run time ("overflow", or an infinite result)
        if token.type == "INT_LIT" and not INT64[0] <= _int_literal(str(token)) <= INT64[1]:
            self.fail(f"the literal {token!s} is outside the 64-bit int range ({INT_RANGE}); "
                      "write a double (with a decimal point) for a larger number")  # fmt: skip
        if token.type == "FLOAT_LIT" and not math.isfinite(float(str(token))):
            self.fail(f"the literal {token!s} is larger than the largest double (about 1.8e308)")
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
        if name == "has":
            self.fail("has() tests a field of a message or map, and an answer is neither; test "
                      "whether an answer is null with `x != null` (an answer compared with null "
                      "reaches the expression even when it is null)")  # fmt: skip
        if name in TIME_FUNCTIONS:
            self.fail(f"{name}() is not supported here: timestamps and durations are not in the "
                      "typed subset; a `format: date` answer is an ISO date string "
                      "(YYYY-MM-DD), and those compare in date order as strings "
                      "(`start <= end`)")  # fmt: skip
        if name not in FUNCTIONS and name not in METHODS:
            self.fail(f"{name}() is not supported here ({SUBSET})")
        shown = ", ".join(t.base for t in types)
        self.fail(f"no overload of {name}({shown})" + (f" on {target.base}" if target else ""))
        raise AssertionError  # unreachable


def _int_literal(text: str) -> int:
    """The value of a CEL int literal (`-12`, `0x1F`, `007`)."""
    body = text.lstrip("-")
    value = int(body, 16) if body[:2].lower() == "0x" else int(body)
    return -value if text.startswith("-") else value


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


def null_tested(tree: Any) -> frozenset[str]:
    """The ids an expression compares with `null` (`x == null`, `null != x`): their null answers
    reach it (`discount == null ? price : price - discount`), where any other null input makes a
    derived answer null and a rule not apply."""
    out: set[str] = set()
    for node in tree.iter_subtrees():
        if node.data != "relation" or len(node.children) != 2:
            continue
        op, right = node.children
        if not isinstance(op, lark.Tree) or op.data not in ("relation_eq", "relation_ne"):
            continue
        sides = (_bare(op.children[0]), _bare(right))
        if None in sides:  # `null` on one side
            out.update(side for side in sides if isinstance(side, str))
    return frozenset(out)


_NULL = None  # what `_bare` gives for the `null` literal


def _bare(node: Any) -> str | bool | None:
    """The id a node is (through parentheses), `_NULL` for the null literal, else False."""
    while isinstance(node, lark.Tree) and len(node.children) == 1:
        if node.data == "ident":
            return str(node.children[0])
        node = node.children[0]
    if isinstance(node, lark.Token) and node.type == "NULL_LIT":
        return _NULL
    return False


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
    null_tested: frozenset[str] = frozenset()  # inputs compared with null: a null one reaches it


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
            blocking = [i for i in nulls if i not in d.null_tested]
            if missing or blocking:
                if d.nullable and not missing:
                    values[d.id] = known[d.id] = None
                    conf[d.id] = float(math.prod(confidence.get(i, 1.0) for i in d.asked))
                else:
                    what = "missing" if missing else "null"
                    errors[d.id] = (
                        f"derive {d.expression!r}: input {(missing or blocking)[0]!r} is {what}"
                    )
                continue
            notes: list[str] = []
            try:
                with noting() as notes:
                    result = d.program.evaluate(cel_inputs(known, d.inputs, d.doubles))
                value = _from_cel(result, notes)
            except (celpy.CELEvalError, TypeError, ValueError, ZeroDivisionError) as exc:
                errors[d.id] = f"derive {d.expression!r}{failure(exc, nulls, notes)}"
                continue
            if value is None and not d.nullable and nulls:  # `n != null ? 0 : n`, n null
                errors[d.id] = f"derive {d.expression!r}: input {nulls[0]!r} is null"
                continue
            if d.result.base == "double" and isinstance(value, int):
                value = float(value)
            refused = _refusal(d.validator, value)
            if refused is not None:  # outside its own schema: this answer fails, not the row
                errors[d.id] = f"derive {d.expression!r} gave {value!r}: {refused}"
                continue
            values[d.id] = known[d.id] = value
            conf[d.id] = float(math.prod(confidence.get(i, 1.0) for i in d.asked))
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


# --- CEL's semantics where celpy's differ or its messages mislead ------------------------------
#
# Every program runs with `CEL_FUNCTIONS` in place of celpy's own: celpy divides every double by
# zero into +inf (`0.0 / 0.0` and `-1.0 / 0.0` too, so `x / 0.0 < 0.0` never held), calls any
# failed conversion "overflow" (`int('12x')`), reads `int('0x10')` as 16, `int(' 1_000 ')` as
# 1000, raises on `int(1.0 / 0.0)` instead of failing it, fails `3 == null` ("no matching
# overload") where CEL gives false, and loses an error met on the right of `+` or `*`.


def show(value: Any) -> str:
    """A CEL value as CEL writes it, cut short when long."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        text = str(int(value))
        if len(text) > 40:
            return f"{text[:20]}… ({len(text.lstrip('-'))} digits)"
    elif isinstance(value, float):
        text = repr(float(value))
    elif isinstance(value, str):
        text = repr(str(value))
    else:
        text = str(value)
    return text if len(text) <= 40 else f"{text[:20]}… ({len(text)} characters)"


_NOTES: ContextVar[list[str] | None] = ContextVar("decide_cel_notes", default=None)


@contextmanager
def noting() -> Iterator[list[str]]:
    """Collect what the evaluation inside noted (a division by zero): why a result is NaN or
    infinite, which CEL gives without an error."""
    notes: list[str] = []
    token = _NOTES.set(notes)
    try:
        yield notes
    finally:
        _NOTES.reset(token)


def _note(message: str) -> None:
    notes = _NOTES.get()
    if notes is not None:
        notes.append(message)


def _error(message: str) -> celpy.CELEvalError:
    return celpy.CELEvalError(message)


def _first_error(*values: Any) -> celpy.CELEvalError | None:
    return next((v for v in values if isinstance(v, celpy.CELEvalError)), None)


def _operator(symbol: str, op: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def apply(a: Any, b: Any) -> Any:
        if isinstance(a, celpy.CELEvalError):
            return a
        if isinstance(b, celpy.CELEvalError):
            return b  # as it was: celpy's `1 + <error>` made it "no matching overload"
        try:
            return op(a, b)
        except ZeroDivisionError:
            what = "modulus" if symbol == "%" else "division"
            return _error(f"{what} by zero: {show(a)} {symbol} {show(b)}")
        except (ValueError, OverflowError):  # celpy's int range check
            return _error(f"integer overflow: {show(a)} {symbol} {show(b)} is outside the "
                          f"64-bit int range ({INT_RANGE})")  # fmt: skip

    return apply


def _divide(a: Any, b: Any) -> Any:
    """`/`: a double divided by zero is NaN or a signed infinity (IEEE 754, as CEL), noted."""
    if isinstance(a, float) and isinstance(b, float) and float(b) == 0.0:
        if float(a) == 0.0 or math.isnan(a):
            what = "division of zero by zero" if float(a) == 0.0 else "division by zero"
            _note(f"{what}: {show(a)} / {show(b)} is not a number")
            return celtypes.DoubleType(math.nan)
        value = math.copysign(math.inf, a) * math.copysign(1.0, b)
        _note(f"division by zero: {show(a)} / {show(b)} is {'-' if value < 0 else ''}infinite")
        return celtypes.DoubleType(value)
    return _DIVIDE(a, b)


_DIVIDE = _operator("/", lambda a, b: a / b)


def _negate(a: Any) -> Any:
    if isinstance(a, celpy.CELEvalError):
        return a
    try:
        return -a
    except (ValueError, OverflowError):
        return _error(f"integer overflow: -({show(a)}) is outside the 64-bit int range "
                      f"({INT_RANGE})")  # fmt: skip


def _equality(negate: bool) -> Callable[[Any, Any], Any]:
    from celpy.evaluation import bool_eq, bool_ne

    def apply(a: Any, b: Any) -> Any:
        if isinstance(a, celpy.CELEvalError):
            return a
        if isinstance(b, celpy.CELEvalError):
            return b
        if a is None or b is None:  # CEL: null equals only null (celpy: `3 == null` failed)
            return celtypes.BoolType((a is None and b is None) != negate)
        return (bool_ne if negate else bool_eq)(a, b)

    return apply


_INT_TEXT = re.compile(r"[+-]?[0-9]+")
_DOUBLE_TEXT = re.compile(
    r"[+-]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)",
    re.IGNORECASE,
)


def _int(value: Any) -> Any:
    """CEL's `int()`: a string of decimal digits with an optional sign (ASCII only, no spaces or
    underscores), a double truncated toward zero, each within the 64-bit range."""
    if isinstance(value, celpy.CELEvalError):
        return value
    if isinstance(value, str):
        if not _INT_TEXT.fullmatch(value):
            return _error(f"{show(value)} is not an integer (int() reads decimal digits with an "
                          "optional sign)")  # fmt: skip
        number = int(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            what = "NaN (not a number)" if math.isnan(value) else "an infinite number"
            return _error(f"int({show(value)}): {what} has no int value")
        number = math.trunc(value)
    else:
        number = int(value)
    if not INT64[0] <= number <= INT64[1]:
        return _error(f"int({show(value)}) is outside the 64-bit int range ({INT_RANGE})")
    return celtypes.IntType(number)


def _double(value: Any) -> Any:
    """CEL's `double()`: a string is a decimal number (`-1.5`, `2e3`, `inf`, `NaN`; ASCII only,
    no spaces or underscores) within a double's range."""
    if isinstance(value, celpy.CELEvalError):
        return value
    if isinstance(value, str):
        if not _DOUBLE_TEXT.fullmatch(value):
            return _error(f"{show(value)} is not a number (double() reads a decimal number "
                          "such as -1.5 or 2e3)")  # fmt: skip
        number = float(value)
        if math.isinf(number) and "inf" not in value.lower():
            return _error(f"{show(value)} is larger than the largest double (about 1.8e308)")
        if not math.isfinite(number):
            word = "not a number" if math.isnan(number) else "infinite"
            _note(f"double({show(value)}) is {word}")
        return celtypes.DoubleType(number)
    return celtypes.DoubleType(float(value))


def _propagating(function: Callable[..., Any]) -> Callable[..., Any]:
    """A method whose argument may be an error: the error, as it was."""

    def apply(*args: Any) -> Any:
        error = _first_error(*args)
        return error if error is not None else function(*args)

    return apply


def _cel_functions() -> dict[str, Callable[..., Any]]:
    from celpy.evaluation import base_functions

    return {
        "_+_": _operator("+", lambda a, b: a + b),
        "_-_": _operator("-", lambda a, b: a - b),
        "_*_": _operator("*", lambda a, b: a * b),
        "_/_": _divide,
        "_%_": _operator("%", lambda a, b: a % b),
        "-_": _negate,
        "_==_": _equality(False),
        "_!=_": _equality(True),
        "int": _int,
        "double": _double,
        **{m: _propagating(base_functions[m]) for m in ("contains", "startsWith", "endsWith")},
    }


CEL_FUNCTIONS = _cel_functions()


def program(env: celpy.Environment, tree: Any) -> Any:
    """The celpy program of a checked expression, with CEL's semantics (`CEL_FUNCTIONS`)."""
    return env.program(tree, functions=CEL_FUNCTIONS)


def failure(exc: BaseException, nulls: Sequence[str] = (), notes: Sequence[str] = ()) -> str:
    """How an evaluation failed, after `derive '<expression>'` (or a rule): the cause in the
    user's terms. `nulls`: inputs given as null (compared with null in the expression): an
    operator that had no overload met one of them. `notes` (`noting`): what led to it, as a
    division by zero before `int()` of its infinite result."""
    if nulls and _no_overload(exc):
        return f": input {nulls[0]!r} is null"
    message = _cel_message(exc)
    led = next((n for n in notes if n != message), None)
    return f" failed: {message}" + (f" ({led})" if led else "")


def _no_overload(exc: BaseException) -> bool:
    args = getattr(exc, "args", ())
    cause = args[1] if len(args) > 1 else None
    return isinstance(exc, TypeError) or (isinstance(cause, type) and issubclass(cause, TypeError))


def _cel_message(exc: BaseException) -> str:
    args = getattr(exc, "args", ())
    if not args:
        return type(exc).__name__
    message = str(args[0])
    inner = args[2] if len(args) > 2 and isinstance(args[2], tuple) else ()
    if message == "return error for overflow":  # celpy's name for every ValueError
        if inner in ((), ("overflow",)):
            return f"integer overflow: a result is outside the 64-bit int range ({INT_RANGE})"
        return str(inner[0])
    if message in ("modulus or divide by zero", "divide by zero"):
        return "division by zero"
    return message


def cel_inputs(
    answers: Mapping[str, Any], inputs: Sequence[str], doubles: Collection[str]
) -> dict[str, Any]:
    """The CEL values of `inputs`: by the type the expression was checked with, so an answer to
    a `number` question is a double even when it is a whole number (680 read as 680.0). An
    answer CEL cannot hold (an integer past 64 bits) is a `ValueError` naming its input."""
    out = {}
    for i in inputs:
        try:
            out[i] = _to_cel(answers[i], i in doubles)
        except ValueError as exc:
            raise ValueError(f"input {i!r} is {show(answers[i])}: {exc}") from exc
    return out


def number_inputs(env: Mapping[str, CelType]) -> frozenset[str]:
    """The inputs an expression was type-checked to read as doubles (`cel_inputs`)."""
    return frozenset(name for name, t in env.items() if t.base == "double")


def _to_cel(value: Any, double: bool = False) -> Any:
    if value is None:  # an input compared with null (`null_tested`)
        return None
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        if double:
            try:
                return celtypes.DoubleType(float(value))
            except OverflowError:
                raise ValueError("larger than the largest double (about 1.8e308)") from None
        if not INT64[0] <= value <= INT64[1]:
            raise ValueError(f"outside CEL's 64-bit int range ({INT_RANGE})")
        return celtypes.IntType(value)
    if isinstance(value, float):
        return celtypes.DoubleType(value)
    if isinstance(value, str):
        return celtypes.StringType(value)
    raise TypeError(f"an answer of type {type(value).__name__} has no CEL type here")


def _from_cel(value: Any, notes: Sequence[str] = ()) -> Any:
    if isinstance(value, celpy.CELEvalError):
        raise value
    if value is None:
        return None
    # celpy gives `+ - *` of doubles and `+` of strings as plain `float` and `str` (its
    # DoubleType/StringType operators return Python values): those are answers too.
    if isinstance(value, celtypes.BoolType | bool):
        return bool(value)
    if isinstance(value, celtypes.DoubleType | float):
        number = float(value)
        if not math.isfinite(number):
            word = "not a number" if math.isnan(number) else "infinite"
            why = next((n for n in notes if n.endswith(word)), notes[0] if notes else None)
            if why is None:
                why = "the result is " + (
                    "NaN (not a number)"
                    if math.isnan(number)
                    else "infinite (past the largest double, about 1.8e308)"
                )
            raise ValueError(why)
        return number
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
        plans.append(Derived(qid, derive, program(env, tree), tuple(sorted(names)),
                             tuple(asked), own.nullable, own, number_inputs(env_types),
                             _validator(schemas[qid]), null_tested(tree)))  # fmt: skip
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
