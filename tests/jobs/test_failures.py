"""Failure kinds and answer-level failures: `Decider.decide` raises a typed `DecisionError`,
`decide_many` and the runner return error decisions with a `kind`, and an extract question with
no span fails its own answer, not the row (unless `partial_rows: error`)."""

from __future__ import annotations

import json

import polars as pl
import pytest

from decide import Decider, DecisionError, FailureKind
from decide.jobs.runner import run_job
from decide.jobs.spec import parse_spec

QUESTIONS = [
    {"id": "kind", "text": "What kind?", "schema": {"enum": ["auto", "home", "health"]}},
    {"id": "city", "text": "Which city?", "extract": True,
     "schema": {"type": "string", "pattern": "ton$", "maxLength": 12}},
    {"id": "amount", "text": "How many dollars?", "extract": True,
     "schema": {"type": "integer", "minimum": 0, "maximum": 100000}},
    {"id": "active", "text": "Is the policy active?", "schema": {"type": "boolean"}},
    {"id": "big", "text": "Big?", "derive": "amount > 1000", "schema": {"type": "boolean"}},
]  # fmt: skip


@pytest.fixture(scope="module")
def decider(tiny_checkpoint):
    model = tiny_checkpoint("bert", vocab="small", init_std=0.2)
    return Decider(model, batch_size=4, long_documents="error")  # windows: test_windows_decide


def test_decide_raises_typed_errors_in_api_words(decider) -> None:
    with pytest.raises(DecisionError) as info:
        decider.decide("   ", QUESTIONS[:1])
    assert (
        info.value.kind is FailureKind.empty_document
        and info.value.decision.kind == "empty_document"
    )
    with pytest.raises(DecisionError) as info:
        decider.decide("claim " * 5000, QUESTIONS[:1])
    assert info.value.kind is FailureKind.document_too_long
    assert 'long_documents="truncate"' in str(info.value) and "--truncate" not in str(info.value)
    # decide_many keeps returning per-item results, each with its kind (None when ok).
    many = decider.decide_many(["", "A car was hit in Boston, $2,500 claimed."], QUESTIONS[:1])
    assert [d.status for d in many] == ["error", "ok"]
    assert [d.kind for d in many] == [FailureKind.empty_document, None]


def test_extract_without_span_keeps_the_other_answers(decider, tmp_path) -> None:
    # No span of b ends in "ton" as city's pattern asks: no span is a value of its schema.
    docs = {"a": "A car was hit in Boston, $2,500 claimed.", "b": "Car hit in Rome, $700 asked."}
    path = tmp_path / "in.parquet"
    pl.DataFrame({"doc_id": list(docs), "document": list(docs.values())}).write_parquet(path)
    run_job(parse_spec({"questions": QUESTIONS}), [path], tmp_path / "keep", model=decider.loaded,
            batch_size=4, progress=False)  # fmt: skip
    frame = pl.read_parquet(tmp_path / "keep" / "answers" / "*.parquet").sort("doc_id")
    assert frame["status"].to_list() == ["ok", "ok"]
    assert frame["partial"].to_list() == [False, True]
    full, partial = frame.row(0, named=True), frame.row(1, named=True)
    assert full["errors"] is None and full["error_kind"] is None
    answers = json.loads(partial["answers_json"])
    assert "city" not in answers and partial["answers"]["city"] is None
    assert answers["amount"] == 700 and answers["big"] is False  # the others are kept
    assert set(answers) == {"kind", "amount", "active", "big"}
    assert "'city' (extract): no span" in partial["errors"]["city"]
    assert partial["errors"]["kind"] is None and partial["confidence"]["city"] is None
    # The same in the API; and `partial_rows: error` keeps the old all-or-nothing rows.
    d = decider.decide(docs["b"], QUESTIONS)
    assert d.ok and d.partial and d.errors["city"] and d.answers["amount"] == 700
    run_job(parse_spec({"questions": QUESTIONS, "partial_rows": "error"}), [path],
            tmp_path / "strict", model=decider.loaded, batch_size=4, progress=False)  # fmt: skip
    strict = pl.read_parquet(tmp_path / "strict" / "answers" / "*.parquet").sort("doc_id")
    assert strict["status"].to_list() == ["ok", "error"]
    assert strict["error_kind"].to_list() == [None, "no_span"]
    assert "'city' (extract)" in strict["error"][1]


def test_a_derived_answer_with_a_missing_input_is_an_answer_error(decider) -> None:
    questions = [QUESTIONS[0], QUESTIONS[1],
                 {"id": "long", "text": "Long?", "derive": "size(city) > 6",
                  "schema": {"type": "boolean"}}]  # fmt: skip
    d = decider.decide("Car hit in Rome.", questions)
    assert d.ok and d.partial and set(d.answers) == {"kind"}
    assert d.errors == {"kind": None, "city": d.errors["city"],
                        "long": "derive 'size(city) > 6': input 'city' is missing"}  # fmt: skip
    strict = Decider(decider.loaded.path, batch_size=2, partial_rows="error")
    with pytest.raises(DecisionError) as info:
        strict.decide("Car hit in Rome.", questions)
    assert info.value.kind is FailureKind.no_span
