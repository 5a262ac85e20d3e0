"""Derived answers (`derive:`): checked at spec load, never asked, computed from the decided ones.

The end-to-end tests use a tiny random model: its asked answers are arbitrary, so every derived
answer is checked against the expression evaluated here, in Python, over that row's own answers.
"""

from __future__ import annotations

import json
import math

import polars as pl
import pytest
from helpers.jobdata import write_docs

from decide import Decider
from decide.jobs.checks import plan_checks
from decide.jobs.derive import plan_derived
from decide.jobs.runner import run_job
from decide.jobs.spec import SpecError, parse_spec

B, INT, N = (
    {"type": "boolean"},
    {"type": "integer", "minimum": 0, "maximum": 50},
    {"type": "number"},
)
ASKED = [
    {"id": "amount", "text": "How many dollars are claimed?", "schema": INT},
    {"id": "limit", "text": "What is the limit?", "schema": INT},
    {"id": "active", "text": "Is the policy active?", "schema": B},
    {"id": "kind", "text": "What kind?", "schema": {"enum": ["auto", "home"]}},
]
DERIVED = [
    {"id": "over", "text": "Over the limit?", "derive": "amount > limit", "schema": B},
    {"id": "eligible", "text": "Eligible?", "derive": "active && !over", "schema": B},
    {"id": "margin", "text": "Margin", "derive": "limit - amount", "schema": {"type": "integer"}},
    {"id": "home", "text": "Home?", "derive": 'kind == "home"', "schema": B},
]


@pytest.fixture(scope="module")
def model(tiny_checkpoint):
    return tiny_checkpoint("bert", vocab="small", init_std=0.2)


def refusal(questions: list[dict]) -> str:
    with pytest.raises(SpecError) as info:
        parse_spec({"questions": questions}, "job.yaml")
    return str(info.value)


def q(qid: str, schema: dict, derive: str | None = None) -> dict:
    out = {"id": qid, "text": qid, "schema": schema}
    return out | ({"derive": derive} if derive else {})


def test_spec_load_refuses_unusable_expressions_naming_question_and_pointer() -> None:
    unknown = refusal([q("a", INT), q("b", B, "a > c")])
    assert "/questions/1/derive" in unknown and "'b'" in unknown and "'c'" in unknown
    cycle = refusal([q("a", INT), q("x", B, "y"), q("y", B, "x")])
    assert "/questions/1/derive" in cycle and "cycle: x -> y -> x" in cycle
    parse = refusal([q("a", INT), q("b", B, "a >")])
    assert "/questions/1/derive" in parse and "cannot parse 'a >'" in parse
    result = refusal([q("a", INT), q("b", B, "a + 1")])
    assert "'a + 1' gives int, but the question's schema is bool" in result
    mixed = refusal([q("a", INT), q("r", N), q("b", B, "a > r")])
    assert "/questions/2/derive" in mixed and "no overload of > for int and double" in mixed
    operand = refusal([q("s", {"type": "string"}), q("b", B, "s && true")])
    assert "an operand of && is not a bool" in operand
    untyped = refusal([q("o", {"type": "object"}), q("b", B, "o == null")])
    assert "'o', whose schema has no CEL type" in untyped
    assert "either extract or derive" in refusal([{**q("b", B, "true"), "extract": True}])
    # Types that do fit: enums of strings, int into a number schema, nullable inputs.
    parse_spec({"questions": [q("k", {"enum": ["a", "b"]}), q("n", {"type": ["integer", "null"]}),
                              q("x", N, "n * 2"), q("y", B, 'k in ["a"] && size(k) == 1')]})  # fmt: skip


def test_derived_questions_are_ordered_nulls_and_confidence() -> None:
    questions = [
        ("eligible", B, "active && !over"),  # reads a derived answer declared after it
        ("over", B, "amount > limit"),
        ("amount", {"type": ["integer", "null"]}, None),
        ("limit", INT, None),
        ("active", B, None),
        ("maybe", {"type": ["boolean", "null"]}, "amount > limit"),
    ]
    plan = plan_derived(questions)
    assert [d.id for d in plan.order] == ["over", "eligible", "maybe"]
    conf = {"amount": 0.5, "limit": 0.8, "active": 0.9}
    values, confidence, errors = plan.evaluate({"amount": 7, "limit": 5, "active": True}, conf)
    assert values == {"over": True, "eligible": False, "maybe": True} and not errors
    # The product over the asked answers it depends on, each once (amount and limit reach
    # `eligible` through `over` only once).
    assert confidence["over"] == pytest.approx(0.4)
    assert confidence["eligible"] == pytest.approx(0.5 * 0.8 * 0.9)
    values, confidence, errors = plan.evaluate({"amount": None, "limit": 5, "active": True}, conf)
    assert values == {"maybe": None}  # its schema admits null
    assert errors["over"] == "derive 'amount > limit': input 'amount' is null"
    assert errors["eligible"] == "derive 'active && !over': input 'over' is missing"
    _, _, errors = plan_derived([("a", INT, None), ("d", INT, "10 / a")]).evaluate({"a": 0}, {})
    assert "failed" in errors["d"] and "divi" in errors["d"]


def test_a_number_answer_that_is_a_whole_number_is_still_a_double() -> None:
    """A `number` question's answer comes back 680 as often as 680.5 (the decoder spells the
    shortest JSON): the expressions were checked with a double there, and read one."""
    questions = [("total", N, None), ("big", B, "total > 1000.0"), ("half", N, "total / 2.0")]
    plan = plan_derived(questions)
    for total, big, half in ((680, False, 340.0), (1200.5, True, 600.25), (3300, True, 1650.0)):
        values, _, errors = plan.evaluate({"total": total}, {})
        assert not errors and values == {"big": big, "half": half}
        assert isinstance(values["half"], float)
    checks = plan_checks([("total < 1000000.0", "too large")], questions)
    assert checks.violated({"total": 680}) is None
    assert checks.violated({"total": 2_000_000})[1] == "too large"


def test_double_arithmetic_and_string_concatenation_give_answers() -> None:
    """celpy gives `+ - *` of doubles and `+` of strings as plain Python values, which were
    refused ("a result of type float is not an answer"): every row lost those answers, and a
    rule over them never ran. Only a result ending in `/` got through."""
    questions = [("amount", {"type": "integer"}, None), ("limit", {"type": "integer"}, None),
                 ("name", {"type": "string"}, None), ("rate", {"type": "number"}, None),
                 ("excess", {"type": "number"}, "double(amount) - double(limit)"),
                 ("total", {"type": "number"}, "rate + rate"),
                 ("fee", {"type": "number"}, "double(amount) * rate"),
                 ("label", {"type": "string"}, "name + ' (' + string(amount) + ')'"),
                 ("ratio", {"type": "number"}, "double(amount) / double(limit)")]  # fmt: skip
    answers = {"amount": 5, "limit": 4, "name": "ann", "rate": 0.25}
    values, _, errors = plan_derived(questions).evaluate(answers, dict.fromkeys(answers, 1.0))
    assert errors == {}
    assert values == {"excess": 1.0, "total": 0.5, "fee": 1.25, "label": "ann (5)",
                      "ratio": 1.25}  # fmt: skip
    assert all(type(v) in (float, str) for v in values.values())
    checks = plan_checks([("excess <= 2.0 && label != ''", "m")],
                         [(q, s_, d) for q, s_, d in questions])  # fmt: skip
    assert checks.violated({**answers, **values}) is None


def test_expressions_nested_too_deep_are_refused_at_load() -> None:
    """A sum of 300 terms passed `validate`, then celpy's recursive evaluator failed every row
    (RecursionError: `internal_error`, or the whole job aborted for an enforced rule)."""
    amount = {"id": "amount", "text": "A?", "schema": {"type": "integer", "minimum": 0,
                                                       "maximum": 10}}  # fmt: skip
    long_sum = " + ".join(["amount"] * 300)
    derived = {"id": "x", "text": "X?", "schema": {"type": "integer"}, "derive": long_sum}
    with pytest.raises(SpecError, match=r"/questions/1/derive: question 'x': its derive "
                       r"expression nests \d+ levels deep, more than 200"):  # fmt: skip
        parse_spec({"questions": [amount, derived]})
    with pytest.raises(SpecError, match=r"/rules/0/rule: the rule nests \d+ levels deep"):
        parse_spec({"questions": [amount],
                    "rules": [{"rule": f"{long_sum} > 3", "message": "m"}]})  # fmt: skip
    sixty = {**derived, "derive": " + ".join(["amount"] * 60)}
    values, _, errors = plan_derived(
        [("amount", amount["schema"], None), ("x", {"type": "integer"}, sixty["derive"])]
    ).evaluate({"amount": 2}, {"amount": 1.0})
    assert values == {"x": 120} and errors == {}


def test_string_of_a_bool_is_refused_with_the_way_to_write_it() -> None:
    """celpy's string(true) is "True" where CEL's is "true": a rule `string(ok) == 'true'`
    never held."""
    questions = [
        {"id": "ok", "text": "OK?", "schema": {"type": "boolean"}},
        {"id": "s", "text": "S", "schema": {"type": "string"}, "derive": "string(ok)"},
    ]
    with pytest.raises(SpecError, match=r"/questions/1/derive: .*string\(bool\).*x \? 'true'"):
        parse_spec({"questions": questions})
    ternary = {**questions[1], "derive": "ok ? 'true' : 'false'"}
    plan = plan_derived([("ok", {"type": "boolean"}, None), ("s", {"type": "string"},
                                                              ternary["derive"])])  # fmt: skip
    assert plan.evaluate({"ok": True}, {"ok": 1.0})[0] == {"s": "true"}


def test_a_derived_value_outside_its_own_schema_fails_that_answer_only() -> None:
    """333.33… against `multipleOf: 0.01` failed the whole row (`answer_invalid`, every decoded
    answer lost, and the report counted a rule violation in a job without rules)."""
    plan = plan_derived([("a", {"type": "number"}, None),
                         ("third", {"type": "number", "multipleOf": 0.01}, "a / 3.0"),
                         ("rest", {"type": "number", "minimum": 0}, "a - 10.0")])  # fmt: skip
    values, _, errors = plan.evaluate({"a": 1000.0}, {"a": 1.0})
    assert values == {"rest": 990.0}
    assert errors == {"third": "derive 'a / 3.0' gave 333.3333333333333: 333.3333333333333 is "
                               "not a multiple of 0.01"}  # fmt: skip
    values, _, errors = plan.evaluate({"a": 59.97}, {"a": 1.0})  # 19.99: decimals as written
    assert values == {"third": 19.99, "rest": 49.97} and errors == {}


def test_a_number_enum_is_read_as_doubles() -> None:
    """`{type: number, enum: [1, 2, 3]}` was typed int from its values (so `x / 2` gave 0 for 1)
    and `{type: number, enum: [0, 0.5, 1]}` had "no CEL type"."""
    plan = plan_derived([("x", {"type": "number", "enum": [1, 2, 3]}, None),
                         ("half", {"type": "number"}, "x / 2.0"),
                         ("y", {"type": "number", "enum": [0, 0.5, 1]}, None),
                         ("big", {"type": "boolean"}, "y > 0.25 && x > 1.5")])  # fmt: skip
    values, _, errors = plan.evaluate({"x": 1, "y": 0.5}, {"x": 1.0, "y": 1.0})
    assert values == {"half": 0.5, "big": False} and errors == {}
    integer = plan_derived([("n", {"type": "integer", "enum": [1, 2, 3]}, None),
                            ("m", {"type": "integer"}, "n / 2")])  # fmt: skip
    assert integer.evaluate({"n": 3}, {"n": 1.0})[0] == {"m": 1}  # integers stay integers


def test_derived_answers_are_computed_not_asked(model, tmp_path) -> None:
    path = write_docs(tmp_path / "in.parquet", 24, seed=7)
    spec = parse_spec({"questions": [*ASKED, *DERIVED]})
    result = run_job(spec, [path], tmp_path / "out", model=model, batch_size=8, progress=False)
    assert result.failed == 0
    frame = pl.read_parquet(tmp_path / "out" / "answers" / "*.parquet")
    for row in frame.iter_rows(named=True):
        a = json.loads(row["answers_json"])
        assert list(a) == [x["id"] for x in (*ASKED, *DERIVED)]
        assert a["over"] == (a["amount"] > a["limit"])
        assert a["eligible"] == (a["active"] and not a["over"])
        assert a["margin"] == a["limit"] - a["amount"] and a["home"] == (a["kind"] == "home")
        assert row["answers"]["eligible"] == a["eligible"]  # typed struct field too
        c = row["confidence"]
        assert c["eligible"] == pytest.approx(c["amount"] * c["limit"] * c["active"])
        assert c["home"] == pytest.approx(c["kind"])
    # No slot was spent on them: the packed prompt and skeleton hold the asked questions only.
    decider = Decider(model, batch_size=4)
    compiled = decider._compile([*ASKED, *DERIVED])
    todo = [c for c in compiled if c.derive is None]
    doc = decider.engine.packer.pack("A car was hit.", todo)
    assert [x.id for group in doc.groups for x in group] == [x["id"] for x in ASKED]
    d = decider.decide("A car was hit in Boston.", [*ASKED, *DERIVED])
    assert d.answers["over"] == (d.answers["amount"] > d.answers["limit"])
    assert math.isclose(d.confidence["over"], d.confidence["amount"] * d.confidence["limit"])


def test_rules_cannot_name_a_derived_question(model, tmp_path) -> None:
    path = write_docs(tmp_path / "in.parquet", 2)
    rules = {"if": {"properties": {"over": {"const": True}}},
             "then": {"properties": {"active": {"const": False}}}}  # fmt: skip
    spec = parse_spec({"questions": [*ASKED, *DERIVED], "rules": rules})
    with pytest.raises(SpecError, match="'over' is a derived question"):
        run_job(spec, [path], tmp_path / "out", model=model, progress=False)


def test_cli_validate_and_run_refuse_a_bad_expression_with_exit_2(model, tmp_path) -> None:
    from click.testing import CliRunner

    from decide.cli import main

    good = {"questions": [*ASKED, *DERIVED]}
    bad = {"questions": [*ASKED, {**DERIVED[0], "derive": "amount > limt"}]}
    (tmp_path / "good.json").write_text(json.dumps(good))
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    ok = CliRunner().invoke(main, ["validate", str(tmp_path / "good.json"), "--model", str(model)])
    assert ok.exit_code == 0, ok.output
    assert "all 4 questions supported" in ok.output  # the derived ones are not slots
    assert "derived: eligible = active && !over (bool), computed after decoding" in ok.output
    for command in (["validate", str(tmp_path / "bad.json"), "--model", str(model)],
                    ["run", str(write_docs(tmp_path / "in.parquet", 2)), "--spec",
                     str(tmp_path / "bad.json"), "-o", str(tmp_path / "out"), "--model",
                     str(model)]):  # fmt: skip
        refused = CliRunner().invoke(main, command)
        assert refused.exit_code == 2, refused.output
        assert "/questions/4/derive" in refused.output and "'amount > limt'" in refused.output
        assert "'limt'" in refused.output and "'over'" in refused.output
    assert not (tmp_path / "out").exists()
