"""Open-ended slots laid out short and grown (`Decoding.grow_slots`): on tiny random models of
a bidirectional and a block-causal family, every answer is a value of its schema, values longer
than the short layout come back whole (their slot grew), and the short layout spends fewer
answer positions than the whole one."""

from __future__ import annotations

import json

import pytest

from decide.engine import load_model
from decide.jobs.decisions import DecisionEngine, Item
from decide.jobs.spec import Decoding, Question

QUESTIONS = [
    {"id": "name", "text": "Who wrote it?", "schema": {"type": "string"}},
    {"id": "count", "text": "How many?", "schema": {"type": "integer", "minimum": 0}},  # unbounded
    {"id": "kind", "text": "Which kind?", "schema": {"enum": ["a", "b", "c"]}},
    {"id": "note", "text": "Anything else?", "schema": {"type": "string", "maxLength": 40}},
]


@pytest.mark.parametrize("model_type", ["llada", "sdar"])
def test_short_slots_grow_for_long_values_and_answers_stay_valid(model_type, tiny_checkpoint):
    loaded = load_model(tiny_checkpoint(model_type, init_std=0.2))
    engine = DecisionEngine(loaded, batch_size=4)
    questions = engine.questions([Question.model_validate(q) for q in QUESTIONS])
    slots = {q.id: q.slot for q in questions}
    assert slots["name"].first_length < slots["name"].length
    assert slots["kind"].first_length == slots["kind"].length
    items = [Item(i, f"Document {i}: Ann Lee counted {i} birds.", questions) for i in range(8)]
    runs = {}
    for grow in (True, False):
        engine.set_decoding(Decoding(grow_slots=grow))
        runs[grow] = {d.doc_id: d for d in engine.decide(items)}
        assert all(d.ok for d in runs[grow].values()), [d.error for d in runs[grow].values()]
    grew = 0
    for decision in runs[True].values():
        engine.questions(questions).validator().validate(decision.answers)
        for qid in ("name", "count", "note"):
            tokens = slots[qid].vocab.encode(json.dumps(decision.answers[qid]))
            grew += len(tokens) >= slots[qid].first_length  # cannot end in the short layout
    assert grew > 0  # random weights write long values: their slots grew and held them whole
    short = sum(d.answer_tokens for d in runs[True].values())
    whole = sum(d.answer_tokens for d in runs[False].values())
    assert short < whole
