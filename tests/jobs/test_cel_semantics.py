"""CEL in `derive:` and `rules:` as a user reading cel.dev expects it (jobs/derive.py,
jobs/checks.py): evaluation errors say their cause (celpy called `int('12x')` "overflow" and
`0.0 / 0.0` "inf"), doubles divide by zero as IEEE 754 does, `int()` and `double()` read what
CEL reads, an answer compared with `null` reaches the expression, values CEL cannot hold fail
their answer instead of the row, what is outside the subset is refused saying what it is, and in
the Python API a rule naming an id none of a call's questions has is refused, not dropped."""

from __future__ import annotations

import pytest

from decide.jobs.checks import plan_checks
from decide.jobs.derive import DeriveError, plan_derived
from decide.jobs.spec import SpecError, parse_spec

INT, NUM, STR, BOOL = ({"type": "integer"}, {"type": "number"}, {"type": "string"},
                       {"type": "boolean"})  # fmt: skip
NULLABLE_INT = {"type": ["integer", "null"]}


def derived(expression: str, own: dict, answers: dict, **schemas: dict) -> tuple[dict, dict]:
    """(values, errors) of `out: <expression>` over `answers` (inputs typed by `schemas`)."""
    questions = [(qid, schema, None) for qid, schema in schemas.items()]
    plan = plan_derived([*questions, ("out", own, expression)])
    values, _, errors = plan.evaluate(answers, dict.fromkeys(answers, 1.0))
    return values, errors


def error_of(expression: str, own: dict, answers: dict, **schemas: dict) -> str:
    values, errors = derived(expression, own, answers, **schemas)
    assert not values and list(errors) == ["out"], (values, errors)
    return errors["out"]


def test_double_division_by_zero_says_so() -> None:
    """`0.0 / 0.0` failed "the result inf is not a finite number": celpy makes every double
    divided by zero +inf."""
    ab = {"a": NUM, "b": NUM}
    assert error_of("a / b", NUM, {"a": 0.0, "b": 0.0}, **ab) == (
        "derive 'a / b' failed: division of zero by zero: 0.0 / 0.0 is not a number"
    )
    assert error_of("a / b", NUM, {"a": -3.0, "b": 0.0}, **ab) == (
        "derive 'a / b' failed: division by zero: -3.0 / 0.0 is -infinite"
    )
    assert error_of("int(a / b)", INT, {"a": 2.0, "b": 0.0}, **ab) == (
        "derive 'int(a / b)' failed: int(inf): an infinite number has no int value "
        "(division by zero: 2.0 / 0.0 is infinite)"
    )  # raised OverflowError out of `evaluate`
    assert error_of("a * b", NUM, {"a": 1e200, "b": 1e200}, **ab) == (
        "derive 'a * b' failed: the result is infinite (past the largest double, about 1.8e308)"
    )
    assert error_of("a / b", INT, {"a": 7, "b": 0}, a=INT, b=INT) == (
        "derive 'a / b' failed: division by zero: 7 / 0"
    )
    assert error_of("a % b", INT, {"a": 7, "b": 0}, a=INT, b=INT) == (
        "derive 'a % b' failed: modulus by zero: 7 % 0"
    )


def test_a_double_divided_by_zero_is_signed_infinity_or_nan_in_rules() -> None:
    """celpy gave +inf for `-1.0 / 0.0` and for `0.0 / 0.0`: `x / 0.0 < 0.0` never held for a
    negative x, and `0.0 / 0.0 > 1.0` held."""
    questions = [("x", NUM, None), ("y", NUM, None)]
    negative = plan_checks([("x / y < 0.0", "m")], questions)
    assert negative.violated({"x": -1.0, "y": 0.0}) is None
    assert negative.violated({"x": 1.0, "y": -0.0}) is None  # 1 / -0 is -infinity
    assert negative.violated({"x": 1.0, "y": 0.0}) is not None
    nan = plan_checks([("x / y > 1.0 || x / y <= 1.0", "NaN compares false")], questions)
    assert nan.violated({"x": 0.0, "y": 0.0})[1] == "NaN compares false"
    assert nan.violated({"x": 3.0, "y": 0.0}) is None


def test_conversions_say_why_they_fail_and_read_what_cel_reads() -> None:
    """`int('12x')` failed "return error for overflow"; `int('0x10')` gave 16, `int(' 1_000 ')`
    1000 and `int('١٢')` 12, where CEL's int() of a string reads decimal digits only."""
    s = {"s": STR}
    assert error_of("int(s)", INT, {"s": "12x"}, **s) == (
        "derive 'int(s)' failed: '12x' is not an integer (int() reads decimal digits with an "
        "optional sign)"
    )
    for text in (" 12", "1_000", "0x10", "١٢", "", "1.5"):
        assert "is not an integer" in error_of("int(s)", INT, {"s": text}, **s), text
    assert derived("int(s)", INT, {"s": "-42"}, **s)[0] == {"out": -42}
    assert derived("int(s)", INT, {"s": "+7"}, **s)[0] == {"out": 7}
    assert error_of("int(s)", INT, {"s": "99999999999999999999"}, **s) == (
        "derive 'int(s)' failed: int('99999999999999999999') is outside the 64-bit int range "
        "(-2^63 to 2^63 - 1)"
    )
    assert error_of("double(s)", NUM, {"s": "abc"}, **s) == (
        "derive 'double(s)' failed: 'abc' is not a number (double() reads a decimal number such "
        "as -1.5 or 2e3)"
    )
    assert "is not a number" in error_of("double(s)", NUM, {"s": "1_000.5"}, **s)
    assert "larger than the largest double" in error_of("double(s)", NUM, {"s": "1e400"}, **s)
    assert derived("double(s)", NUM, {"s": "-2.5e3"}, **s)[0] == {"out": -2500.0}
    d = {"d": NUM}
    assert derived("int(d)", INT, {"d": -2.7}, **d)[0] == {"out": -2}  # toward zero, as CEL
    assert error_of("int(d)", INT, {"d": 1e30}, **d) == (
        "derive 'int(d)' failed: int(1e+30) is outside the 64-bit int range (-2^63 to 2^63 - 1)"
    )


def test_integer_overflow_names_the_operation() -> None:
    ab = {"a": INT, "b": INT}
    top = 2**63 - 1
    assert error_of("a + b", INT, {"a": top, "b": 1}, **ab) == (
        "derive 'a + b' failed: integer overflow: 9223372036854775807 + 1 is outside the "
        "64-bit int range (-2^63 to 2^63 - 1)"
    )
    assert "integer overflow: -9223372036854775808 / -1" in error_of(
        "a / b", INT, {"a": -(2**63), "b": -1}, **ab
    )
    assert "integer overflow: -(-9223372036854775808)" in error_of(
        "-a", INT, {"a": -(2**63)}, a=INT
    )
    # an error on the right of `+` was lost to "found no matching overload ... CELEvalError"
    assert error_of("1 + int(s)", INT, {"s": "x"}, s=STR) == (
        "derive '1 + int(s)' failed: 'x' is not an integer (int() reads decimal digits with an "
        "optional sign)"
    )


def test_an_answer_cel_cannot_hold_fails_that_answer_not_the_row() -> None:
    """A `number` answer past a double's range raised OverflowError out of `evaluate`; an
    integer past 64 bits failed "overflow"."""
    assert error_of("d * 2.0", NUM, {"d": 10**400}, d=NUM) == (
        "derive 'd * 2.0' failed: input 'd' is 10000000000000000000… (401 digits): larger than "
        "the largest double (about 1.8e308)"
    )
    assert error_of("a + 1", INT, {"a": 2**70}, a=INT) == (
        "derive 'a + 1' failed: input 'a' is 1180591620717411303424: outside CEL's 64-bit int "
        "range (-2^63 to 2^63 - 1)"
    )
    checks = plan_checks([("a > 0", "m")], [("a", INT, None)])
    assert checks.violated({"a": 2**70})[1] == (
        "rule could not be evaluated: input 'a' is 1180591620717411303424: outside CEL's 64-bit "
        "int range (-2^63 to 2^63 - 1)"
    )


def test_an_answer_compared_with_null_reaches_the_expression() -> None:
    """A null input never reached the expression, so `discount == null ? price : ...` never
    gave the price, and `3 == null` failed ("found no matching overload") where CEL says
    false."""
    schemas = {"price": NUM, "discount": {"type": ["number", "null"]}}
    expression = "discount == null ? price : price - discount"
    assert derived(expression, NUM, {"price": 10.0, "discount": None}, **schemas)[0] == {
        "out": 10.0
    }
    assert derived(expression, NUM, {"price": 10.0, "discount": 2.5}, **schemas)[0] == {"out": 7.5}
    assert derived("(n) != null", BOOL, {"n": 3}, n=NULLABLE_INT)[0] == {"out": True}
    assert derived("null == n", BOOL, {"n": None}, n=NULLABLE_INT)[0] == {"out": True}
    # compared with null, then used as a number while null (the test the wrong way round)
    assert error_of("n == null ? n + 1 : 0", INT, {"n": None}, n=NULLABLE_INT) == (
        "derive 'n == null ? n + 1 : 0': input 'n' is null"
    )
    assert error_of("n != null ? 0 : n", INT, {"n": None}, n=NULLABLE_INT) == (
        "derive 'n != null ? 0 : n': input 'n' is null"
    )  # gave null to a question that does not admit it
    # an input not compared with null keeps the rule: null answer, or an error
    assert derived("n + 1", NULLABLE_INT, {"n": None}, n=NULLABLE_INT)[0] == {"out": None}
    assert error_of("n + 1", INT, {"n": None}, n=NULLABLE_INT) == (
        "derive 'n + 1': input 'n' is null"
    )
    # a missing (failed) input is missing, compared with null or not
    assert error_of("n == null", BOOL, {}, n=NULLABLE_INT) == (
        "derive 'n == null': input 'n' is missing"
    )


def test_a_rule_comparing_an_answer_with_null_applies_to_a_null_answer() -> None:
    """`amount != null && amount <= 10` passed a row with a null amount: a rule reading a null
    answer did not apply."""
    questions = [("amount", NULLABLE_INT, None), ("kind", {"enum": ["a", "b", None]}, None)]
    checks = plan_checks([("amount != null && amount <= 10", "an amount is needed"),
                          ("amount == null || amount > 2", "too small"),
                          ("kind == 'a'", "kind a")], questions)  # fmt: skip
    assert checks.violated({"amount": None, "kind": "a"})[1] == "an amount is needed"
    assert checks.violated({"amount": 1, "kind": "a"})[1] == "too small"
    assert checks.violated({"amount": 5, "kind": None}) is None  # not compared: not applicable
    assert checks.violated({"kind": "a"}) is None  # a missing amount: not applicable
    # enforced while decoding, the table holds the same judgement of the null option
    rules, _ = plan_checks([("kind != null", "m")], questions).enforcement({"kind": 3, "amount": 0})
    assert [rules[0].holds({"kind": v}) for v in ("a", None)] == [True, False]


def test_what_is_outside_the_subset_is_refused_saying_what_it_is() -> None:
    def refusal(expression: str, **schemas: dict) -> str:
        with pytest.raises(DeriveError) as info:
            plan_derived([*((q, s, None) for q, s in schemas.items()), ("out", BOOL, expression)])
        return str(info.value)

    assert "has() tests a field of a message or map" in refusal("has(n)", n=NULLABLE_INT)
    assert "`x != null`" in refusal("has(n)", n=NULLABLE_INT)
    when = refusal("timestamp(d) > timestamp('2024-01-01T00:00:00Z')", d=STR)
    assert "timestamp() is not supported here" in when and "`start <= end`" in when
    assert "duration() is not supported here" in refusal("duration('1h') > duration('2h')")
    assert "matches() is not supported here" in refusal("s.matches('a+')", s=STR)
    assert "indexing (x[i]) is not supported here" in refusal("[true][0]")
    assert "a map literal is not supported here" in refusal("{'a': true} == {'a': true}")
    assert "field selection (x.f) is not supported here" in refusal("s.f", s=STR)
    assert "literal 1u (an unsigned int)" in refusal("1u == 1u")
    # literals celpy took and then failed every row with ("overflow", an infinite result)
    assert "the literal 9223372036854775808 is outside the 64-bit int range" in refusal(
        "9223372036854775808 > 0"
    )
    assert "the literal 1e400 is larger than the largest double" in refusal("1e400 > 0.0")
    assert plan_derived([("out", BOOL, "-9223372036854775808 < 0x7fffffffffffffff")]).evaluate(
        {}, {}
    )[0] == {"out": True}
    with pytest.raises(SpecError, match=r"/rules/0/rule: .*has\(\) tests a field"):
        parse_spec({"questions": [{"id": "n", "text": "N?", "schema": NULLABLE_INT}],
                    "rules": [{"rule": "has(n)", "message": "m"}]})  # fmt: skip


def test_a_derived_answer_of_literals_has_a_float_confidence() -> None:
    _, confidence, _ = plan_derived([("out", INT, "1 + 2")]).evaluate({}, {})
    assert confidence == {"out": 1.0} and isinstance(confidence["out"], float)


def test_the_api_refuses_a_rule_naming_an_id_none_of_the_calls_questions_has(
    tiny_checkpoint,
) -> None:
    """`Decider(rules=...)` with a typo decided every document as if the rule were not there: a
    rule over an id a question set lacks does not apply to it."""
    from decide import Decider

    model = tiny_checkpoint("bert", vocab="small", init_std=0.2)
    questions = [{"id": "police", "text": "Police?", "schema": BOOL},
                 {"id": "active", "text": "Active?", "schema": BOOL}]  # fmt: skip
    for rules, pointer in (([{"rule": "!active || polcie", "message": "m"}], "/rules/0/rule"),
                           ({"if": {"properties": {"polcie": {"const": True}}},
                             "then": {"properties": {"active": {"const": True}}}},
                            "/if/properties/polcie")):  # fmt: skip
        decider = Decider(model, batch_size=2, rules=rules)
        with pytest.raises(SpecError) as info:
            decider.decide_many(["A claim letter."], questions)
        assert str(info.value) == (f"rules: {pointer}: 'polcie' is not the id of any question "
                                   "of this call (active, police); did you mean 'police'?")  # fmt: skip
        with pytest.raises(SpecError, match="'polcie' is not the id"):
            decider.decide("A claim letter.", questions)
    ruled = Decider(model, batch_size=2, rules=[{"rule": "!active || police", "message": "m"}])
    for decision in ruled.decide_many(["A claim letter.", "Another one."], questions):
        assert decision.ok and (not decision.answers["active"] or decision.answers["police"])
