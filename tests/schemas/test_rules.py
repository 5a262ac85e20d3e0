"""Cross-question rules: refused outside the enforceable subset (with a pointer), and enforced
exactly while decoding: random rule sets over random enum / boolean / integer questions, decided
by a tiny random model, never produce a violation, and a row fails only when no combination of
answers can satisfy the rules (checked by brute force)."""

from __future__ import annotations

import itertools
import json

import jsonschema
import pytest
from helpers.ruled import random_question, values_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from decide.engine import load_model
from decide.jobs.decisions import DecisionEngine, Item
from decide.jobs.failures import FailureKind
from decide.jobs.questionset import QuestionsRefused, Stage
from decide.jobs.spec import Question
from decide.schemas import SchemaError


@pytest.fixture(scope="module")
def loaded(tiny_checkpoint):
    return load_model(tiny_checkpoint("llada", vocab="small", init_std=0.2))


def _engine(loaded, rules):
    return DecisionEngine(loaded, batch_size=8, rules=rules)


QUESTIONS = [
    {"id": "kind", "text": "Kind?", "schema": {"enum": ["a", "b", "c"]}},
    {"id": "ok", "text": "OK?", "schema": {"type": "boolean"}},
    {"id": "n", "text": "N?", "schema": {"type": "integer", "minimum": 0, "maximum": 20000}},
    {"id": "name", "text": "Name?", "schema": {"type": "string", "maxLength": 8}},
]


def _compiled(engine):
    return [engine.compiler.compile(Question.model_validate(q)) for q in QUESTIONS]


@pytest.mark.parametrize(
    ("rules", "pointer"),
    [
        ({"if": {"properties": {"ok": {"not": {"const": True}}}}}, "/if/properties/ok/not"),
        ({"if": {"properties": {"name": {"const": "x"}}}, "then": {"properties": {"ok": {"const": True}}}},
         "/if/properties/name"),  # where the rule names it (it was the bare /properties/name)
        ({"if": {"properties": {"n": {"minimum": "1"}}}}, "/if/properties/n/minimum"),
        ({"then": {"properties": {"ok": {"const": True}}}}, "#"),
        ({"anyOf": [{"properties": {"ok": {"const": True}}}]}, "/anyOf"),
        ({"if": {"properties": {"n": {"const": "seven"}}}}, "/if/properties/n"),
    ],
)  # fmt: skip
def test_unenforceable_rules_are_refused_with_a_pointer(loaded, rules, pointer) -> None:
    engine = _engine(loaded, rules)
    with pytest.raises(QuestionsRefused) as info:
        engine.questions(_compiled(engine))
    assert info.value.stage is Stage.rules and info.value.kind is FailureKind.schema_refused
    assert isinstance(info.value.cause, SchemaError)
    assert str(info.value.cause).startswith(pointer), str(info.value)


def test_if_then_else_is_enforced(loaded) -> None:
    rules = {"allOf": [
        {"if": {"properties": {"ok": {"const": False}}}, "then": {"properties": {"n": {"const": 0}}},
         "else": {"properties": {"n": {"minimum": 100}}}},
        {"dependentSchemas": {"kind": {"properties": {"kind": {"enum": ["b", "c"]}}}}},
        {"dependentRequired": {"kind": ["ok"]}},
    ]}  # fmt: skip
    engine = _engine(loaded, rules)
    compiled = _compiled(engine)
    texts = [f"document number {i} with words" for i in range(16)]
    decisions = list(engine.decide(Item(i, t, compiled) for i, t in enumerate(texts)))
    assert all(d.ok for d in decisions), [d.error for d in decisions]
    for d in decisions:
        assert d.answers["kind"] in ("b", "c")
        assert (d.answers["n"] == 0) if not d.answers["ok"] else (d.answers["n"] >= 100)
    assert engine.questions(
        compiled
    ).ruleset.rules  # three rules compiled, two with something to enforce


def test_infeasible_rules_fail_the_row_with_a_reason(loaded) -> None:
    rules = {"allOf": [
        {"dependentSchemas": {"ok": {"properties": {"n": {"maximum": 5}}}}},
        {"dependentSchemas": {"ok": {"properties": {"n": {"minimum": 10}}}}},
    ]}  # fmt: skip
    engine = _engine(loaded, rules)
    (decision,) = engine.decide([Item(0, "text", _compiled(engine))])
    assert decision.status == "error"
    assert "satisfies the rules" in decision.error


# --------------------------------------------------------------------------- property test


def _atom(draw, question: dict) -> dict:
    schema = question["schema"]
    if "enum" in schema:
        return draw(st.one_of(
            st.builds(lambda v: {"const": v}, st.sampled_from(schema["enum"])),
            st.builds(lambda vs: {"enum": vs},
                      st.lists(st.sampled_from(schema["enum"]), min_size=1, unique=True)),
        ))  # fmt: skip
    if schema.get("type") == "boolean":
        return {"const": draw(st.booleans())}
    high = schema["maximum"]
    kind = draw(st.sampled_from(["minimum", "maximum", "const", "range", "exclusiveMinimum"]))
    if kind == "range":
        a, b = sorted(draw(st.lists(st.integers(0, high), min_size=2, max_size=2)))
        return {"minimum": a, "maximum": b}
    return {kind: draw(st.integers(0, high))}


@st.composite
def rule_sets(draw):
    questions = [random_question(draw, i) for i in range(draw(st.integers(2, 4)))]
    rules = []
    for _ in range(draw(st.integers(1, 3))):
        cond_q, then_q = draw(st.lists(st.sampled_from(questions), min_size=2, max_size=2,
                                       unique_by=lambda q: q["id"]))  # fmt: skip
        rule = {"if": {"properties": {cond_q["id"]: _atom(draw, cond_q)}},
                "then": {"properties": {then_q["id"]: _atom(draw, then_q)}}}  # fmt: skip
        if draw(st.booleans()):
            rule["else"] = {"properties": {then_q["id"]: _atom(draw, then_q)}}
        rules.append(rule)
    return questions, {"allOf": rules}


def _satisfiable(questions: list[dict], validator) -> bool:
    ids = [q["id"] for q in questions]
    return any(validator.is_valid(dict(zip(ids, combo, strict=True)))
               for combo in itertools.product(*(values_of(q["schema"]) for q in questions)))  # fmt: skip


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])  # fmt: skip
@given(rule_sets())
def test_random_rules_are_never_violated(loaded, case) -> None:
    questions, rules = case
    engine = _engine(loaded, rules)
    compiled = [engine.compiler.compile(Question.model_validate(q)) for q in questions]
    full = {"type": "object", "properties": {q["id"]: q["schema"] for q in questions},
            "required": [q["id"] for q in questions], "allOf": [rules]}  # fmt: skip
    validator = jsonschema.Draft202012Validator(full)
    feasible = _satisfiable(questions, validator)
    texts = [f"case {i}: some words about nothing" for i in range(6)]
    for d in engine.decide(Item(i, t, compiled) for i, t in enumerate(texts)):
        if d.ok:
            assert validator.is_valid(json.loads(d.answers_json)), (rules, d.answers_json)
        else:
            assert not feasible, (rules, d.error)
            assert "rules" in d.error


def test_rules_on_questions_a_document_is_not_asked(loaded) -> None:
    """As JSON Schema judges the decision object: `properties` ignores an absent answer,
    `required` does not, so `then: {required: [n]}` forbids its condition when n is not asked."""
    rules = {"allOf": [
        {"dependentSchemas": {"ok": {"properties": {"n": {"const": 0}}}}},
        {"if": {"properties": {"kind": {"const": "a"}}}, "then": {"required": ["n"]}},
    ]}  # fmt: skip
    engine = _engine(loaded, rules)
    compiled = [q for q in _compiled(engine) if q.id in ("kind", "ok")]
    decisions = list(engine.decide(Item(i, f"text {i}", compiled) for i in range(12)))
    assert all(d.ok for d in decisions), [d.error for d in decisions]
    assert all(d.answers["kind"] != "a" for d in decisions)
    validator = jsonschema.Draft202012Validator(rules)
    assert all(validator.is_valid(d.answers) for d in decisions)


def test_a_rule_no_answer_can_satisfy_fails_the_row_with_its_pointer(loaded) -> None:
    """`dependentRequired` on an asked question needing an unasked one: no decision object of
    this document can be valid, so the row fails naming the rule, and other rows go on."""
    rules = {"dependentRequired": {"ok": ["n"]}}
    engine = _engine(loaded, rules)
    compiled = _compiled(engine)
    without_n = [q for q in compiled if q.id != "n"]
    items = [Item(0, "text", without_n), Item(1, "text", compiled)]
    first, second = sorted(engine.decide(items), key=lambda d: d.doc_id)
    assert not first.ok and "/dependentRequired/ok" in first.error, first.error
    assert second.ok, second.error


@pytest.mark.parametrize(
    "schema",
    [
        {"type": ["integer", "null"], "minimum": 0, "maximum": 20000},
        # Pydantic's Optional[int]: refused as "too many values of another kind" before
        {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 20000}, {"type": "null"}],
         "default": None, "title": "N"},
    ],
)  # fmt: skip
def test_rules_over_a_nullable_integer_either_way_it_is_spelt(loaded, schema) -> None:
    rules = {"if": {"properties": {"n": {"minimum": 100}}, "required": ["n"]},
             "then": {"properties": {"ok": {"const": False}}}}  # fmt: skip
    engine = _engine(loaded, rules)
    asked = [{**q, "schema": schema} if q["id"] == "n" else q for q in QUESTIONS]
    compiled = [engine.compiler.compile(Question.model_validate(q)) for q in asked]
    texts = [f"claim {i}: {100 * i} dollars" for i in range(16)]
    decisions = list(engine.decide(Item(i, t, compiled) for i, t in enumerate(texts)))
    assert all(d.ok for d in decisions), [d.error for d in decisions]
    for d in decisions:
        assert jsonschema.Draft202012Validator(rules).is_valid(d.answers), d.answers


def test_the_cheapest_choice_the_rules_allow(loaded) -> None:
    """`RuleSet.cheapest`: per linked group, the least total cost over the choices of one cell
    per question that satisfy every rule; a question without costs is free; None when the
    costs leave no satisfying choice."""
    rules = {"allOf": [
        {"if": {"properties": {"kind": {"const": "a"}}}, "then": {"properties": {"ok": {"const": True}}}},
        {"if": {"properties": {"ok": {"const": True}}}, "then": {"properties": {"n": {"minimum": 100}}}},
    ]}  # fmt: skip
    engine = _engine(loaded, rules)
    qset = engine.questions([Question.model_validate(q) for q in QUESTIONS])
    ruleset = qset.ruleset

    def cell(qid, value):
        return ruleset.holding(qid, value).index(True)

    def costs(**answers):  # each question's answers and their costs
        out = {}
        for qid, options in answers.items():
            row = [float("inf")] * len(ruleset.cells[qid])
            for value, cost in options:
                row[cell(qid, value)] = cost
            out[qid] = row
        return out

    # kind a is cheapest, but it needs ok true, which needs n >= 100: n = 7 is what is left
    chosen = ruleset.cheapest(costs(kind=[("a", 0.1), ("b", 0.5)], ok=[(True, 0.2), (False, 0.0)],
                                    n=[(7, 0.0)]))  # fmt: skip
    assert chosen is not None
    assert chosen["kind"] == cell("kind", "b") and chosen["ok"] == cell("ok", False)
    chosen = ruleset.cheapest(costs(kind=[("a", 0.1), ("b", 0.6)], ok=[(True, 0.2), (False, 0.0)],
                                    n=[(7, 0.0), (150, 0.2)]))  # fmt: skip
    assert chosen is not None  # 0.1 + 0.2 + 0.2 beats 0.6 + 0 + 0
    assert (chosen["kind"], chosen["ok"], chosen["n"]) == (cell("kind", "a"), cell("ok", True),
                                                           cell("n", 150))  # fmt: skip
    free = ruleset.cheapest(costs(kind=[("a", 0.0)]))  # ok and n free: they follow
    assert free is not None and free["ok"] == cell("ok", True) and free["n"] == cell("n", 150)
    assert ruleset.cheapest(costs(kind=[("a", 0.0)], ok=[(False, 0.0)])) is None
    assert not any(ruleset.holding("n", None)) and ruleset.holding("kind", "c").count(True) == 1
