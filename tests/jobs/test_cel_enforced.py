"""CEL rules over finite questions are enforced while decoding: random CEL rules over random
enum / boolean / small-integer questions, decided by a tiny random model, never produce an object
that violates one (judged by `celpy`, as the after-decoding check judges it), and a row fails
only when brute force over every combination of values finds none that satisfies them all."""

from __future__ import annotations

import itertools
import json

import celpy
import pytest
from helpers.ruled import random_question, values_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from decide.engine import load_model
from decide.jobs.decisions import DecisionEngine, Item
from decide.jobs.failures import FailureKind
from decide.jobs.spec import Question


@pytest.fixture(scope="module")
def loaded(tiny_checkpoint):
    return load_model(tiny_checkpoint("llada", vocab="small", init_std=0.2))


def _kind(q: dict) -> str:
    return "enum" if "enum" in q["schema"] else q["schema"]["type"]


def _atom(draw, questions: list[dict]) -> str:
    q = draw(st.sampled_from(questions))
    qid, kind = q["id"], _kind(q)
    if kind == "boolean":
        return draw(st.sampled_from([qid, f"!{qid}"]))
    if kind == "enum":
        values = q["schema"]["enum"]
        if draw(st.booleans()):
            return f'{qid} == "{draw(st.sampled_from(values))}"'
        chosen = draw(st.lists(st.sampled_from(values), min_size=1, unique=True))
        return f"{qid} in [{', '.join(json.dumps(v) for v in chosen)}]"
    op = draw(st.sampled_from(["<", "<=", "==", "!=", ">", ">="]))
    others = [o for o in questions if o is not q and _kind(o) == "integer"]
    if others and draw(st.booleans()):  # a comparison between two answers
        other = draw(st.sampled_from(others))["id"]
        return f"{qid} {op} {other} + {draw(st.integers(-3, 3))}"
    return f"{qid} {op} {draw(st.integers(0, q['schema']['maximum']))}"


def _expression(draw, questions: list[dict], depth: int = 0) -> str:
    if depth >= 2 or draw(st.booleans()):
        return _atom(draw, questions)
    op = draw(st.sampled_from(["&&", "||", "!"]))
    if op == "!":
        return f"!({_expression(draw, questions, depth + 1)})"
    left = _expression(draw, questions, depth + 1)
    return f"({left}) {op} ({_expression(draw, questions, depth + 1)})"


@st.composite
def cel_rule_sets(draw):
    questions = [random_question(draw, i) for i in range(draw(st.integers(2, 4)))]
    rules = [{"rule": _expression(draw, questions), "message": f"rule {k}"}
             for k in range(draw(st.integers(1, 3)))]  # fmt: skip
    return questions, rules


def _judges(rules: list[dict]):
    env = celpy.Environment()
    programs = [env.program(env.compile(r["rule"])) for r in rules]

    def holds(answers: dict) -> bool:
        values = {k: celpy.json_to_cel(v) for k, v in answers.items()}
        return all(bool(p.evaluate(values)) for p in programs)

    return holds


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])  # fmt: skip
@given(cel_rule_sets())
def test_random_cel_rules_are_never_violated(loaded, case) -> None:
    questions, rules = case
    engine = DecisionEngine(loaded, batch_size=8, rules=rules)
    compiled = [engine.compiler.compile(Question.model_validate(q)) for q in questions]
    qset = engine.questions(compiled)
    assert qset.ruleset is not None and len(qset.ruleset.rules) == len(rules)  # all enforced
    holds = _judges(rules)
    ids = [q["id"] for q in questions]
    feasible = any(holds(dict(zip(ids, combo, strict=True)))
                   for combo in itertools.product(*(values_of(q["schema"]) for q in questions)))  # fmt: skip
    texts = [f"case {i}: some words about nothing" for i in range(6)]
    for d in engine.decide(Item(i, t, compiled) for i, t in enumerate(texts)):
        if d.ok:
            assert holds(json.loads(d.answers_json)), (rules, d.answers_json)
        else:
            assert not feasible, (rules, d.error)
            assert "rules" in d.error and d.kind != FailureKind.rule_violated, d.error
