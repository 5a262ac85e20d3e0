"""Extract questions end to end: every string answer is a span of its own document.

Random models answer free strings with whatever their masks allow, so the same job without
`extract` is the control: its answers are mostly not in the document, and with `extract` every
one is (checked on the output text, not through the slot that produced it).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import polars as pl
import pytest
from helpers.jobdata import check_output, read_answers, write_docs
from tokenizers import Tokenizer

from decide import Decider
from decide.jobs.extracted import as_written
from decide.jobs.runner import run_job
from decide.jobs.spec import SpecError, parse_spec
from decide.schemas import Vocabulary, compile_slot
from decide.schemas.span import WrittenSpans, document_spans, in_document, number_in_document
from decide.train.synthetic import sample_document

ROOT = Path(__file__).resolve().parents[2]

QUESTIONS = [
    {"id": "city", "text": "Which city?", "extract": True,
     "schema": {"type": "string", "minLength": 2, "maxLength": 12}},
    {"id": "who", "text": "Who is named?", "extract": True,
     "schema": {"type": ["string", "null"], "maxLength": 20}},
    {"id": "kind", "text": "What kind of claim is it?",
     "schema": {"enum": ["auto", "home", "health", "travel"]}},
    {"id": "eligible", "text": "Is the claim eligible?", "schema": {"type": "boolean"}},
]  # fmt: skip


def free(questions: list[dict]) -> list[dict]:
    return [{k: v for k, v in q.items() if k != "extract"} for q in questions]


def outside(frame: pl.DataFrame, docs: dict) -> int:
    """String answers of ok rows that are not in their document."""
    missed = 0
    for row in frame.filter(pl.col("status") == "ok").iter_rows(named=True):
        for qid in ("city", "who"):
            value = json.loads(row["answers_json"])[qid]
            missed += value is not None and not in_document(value, docs[row["doc_id"]])
    return missed


@pytest.mark.parametrize("model_type", ["llada", "sdar", "bert"])
def test_extract_answers_are_spans_of_their_document(model_type, models, tmp_path) -> None:
    path = write_docs(tmp_path / "in.parquet", 30, seed=3)
    frame_in = pl.read_parquet(path)
    docs = dict(zip(frame_in["doc_id"], frame_in["document"], strict=True))
    # A document with no span of 2 to 12 characters ("a" is its only span): `city` cannot be
    # answered from it. And a long one, with hundreds of spans to keep masks for.
    rng = random.Random(0)
    long = " ".join(sample_document(rng, "test")[1] for _ in range(2))
    assert len(document_spans(long, max_chars=20)) > 400
    extra = pl.DataFrame({"doc_id": ["tiny", "long"], "document": ["a.", long]})
    pl.concat([frame_in, extra]).write_parquet(path)
    docs.update(tiny="a.", long=long)
    results = {}
    for name, questions in (("extract", QUESTIONS), ("free", free(QUESTIONS))):
        out = tmp_path / name
        run_job(parse_spec({"questions": questions, "partial_rows": "error"}), [path], out,
                model=models[model_type],
                batch_size=8, progress=False)  # fmt: skip
        results[name] = check_output(out, set(docs), free(QUESTIONS))
    extracted = results["extract"]
    tiny = extracted.filter(pl.col("doc_id") == "tiny").row(0, named=True)
    assert tiny["status"] == "error" and "'city' (extract)" in tiny["error"]
    assert "no span of the document" in tiny["error"]
    assert extracted.filter(pl.col("status") == "ok").height == 31
    assert outside(extracted, docs) == 0
    assert outside(results["free"], docs) > 10  # the control: random free strings are not spans


NUMBER_QUESTIONS = [
    {"id": "amount", "text": "How many dollars are claimed?", "extract": True,
     "schema": {"type": "integer", "minimum": 1, "maximum": 100000}},
    {"id": "rate", "text": "What rate applies?", "extract": True,
     "schema": {"type": ["number", "null"], "minimum": 0, "maximum": 10}},
    QUESTIONS[0],  # a span question in the same block: both kinds per document
]  # fmt: skip


@pytest.mark.parametrize("model_type", ["llada", "bert"])
def test_numeric_extract_answers_are_numbers_of_their_document(model_type, models, tmp_path):
    rng = random.Random(5)
    docs = {}
    for i in range(16):
        amount, limit = rng.randrange(100, 99000), rng.randrange(1000, 99000, 500)
        docs[f"d{i}"] = (f"Claim {i + 1} from Denver: ${amount:,} of damage, limit {limit:,}, "
                         f"rate {rng.randrange(1, 999) / 100}, filed on day {rng.randrange(1, 31)}.")  # fmt: skip
    docs["none"] = "Storm damage in Boston, amount to follow."  # no number for `amount`
    path = tmp_path / "in.parquet"
    pl.DataFrame({"doc_id": list(docs), "document": list(docs.values())}).write_parquet(path)
    results = {}
    for name, questions in (("extract", NUMBER_QUESTIONS), ("free", free(NUMBER_QUESTIONS))):
        run_job(parse_spec({"questions": questions, "partial_rows": "error"}), [path],
                tmp_path / name,
                model=models[model_type], batch_size=8, progress=False)  # fmt: skip
        results[name] = check_output(tmp_path / name, set(docs), free(NUMBER_QUESTIONS))
    none = results["extract"].filter(pl.col("doc_id") == "none").row(0, named=True)
    assert none["status"] == "error" and "'amount' (extract)" in none["error"]
    assert "no number of the document" in none["error"]

    def copied(frame: pl.DataFrame) -> list[bool]:
        out = []
        for row in frame.filter(pl.col("status") == "ok").iter_rows(named=True):
            answers = json.loads(row["answers_json"])
            out.append(number_in_document(answers["amount"], docs[row["doc_id"]]))
            rate = answers["rate"]
            out.append(rate is None or number_in_document(rate, docs[row["doc_id"]]))
            out.append(in_document(answers["city"], docs[row["doc_id"]]))
        return out

    assert len(copied(results["extract"])) == 3 * 16 and all(copied(results["extract"]))
    assert copied(results["free"]).count(False) > 8  # the control: random numbers are not stated


def test_per_row_extract_and_the_python_api(models, tmp_path) -> None:
    row_questions = [
        {"id": "city", "text": "Which city?", "schema": json.dumps(QUESTIONS[0]["schema"]),
         "extract": True},
        {"id": "kind", "text": "Kind?", "schema": json.dumps(QUESTIONS[2]["schema"]),
         "extract": None},  # a struct field left null reads as false
    ]  # fmt: skip
    text = "The storm flooded Denver and Boston on Monday"
    pl.DataFrame(
        {"doc_id": ["a", "b"], "document": [text, "water in the basement in Tulsa"],
         "questions": [row_questions, row_questions]},
        schema_overrides={"questions": pl.List(pl.Struct(
            {"id": pl.String, "text": pl.String, "schema": pl.String, "extract": pl.Boolean}))},
    ).write_parquet(tmp_path / "in.parquet")  # fmt: skip
    run_job(parse_spec({}), [tmp_path / "in.parquet"], tmp_path / "out",
            model=models["bert"], progress=False)  # fmt: skip
    frame = read_answers(tmp_path / "out")
    assert frame["status"].to_list() == ["ok", "ok"]
    answers = [json.loads(a) for a in frame["answers_json"]]
    assert in_document(answers[0]["city"], text)
    assert in_document(answers[1]["city"], "water in the basement in Tulsa")

    decider = Decider(models["bert"], batch_size=4)
    decision = decider.decide(text, QUESTIONS)
    assert decision.ok and in_document(decision.answers["city"], text)


def test_truncated_documents_offer_spans_of_what_the_model_sees(models) -> None:
    """With `long_documents="truncate"` the model sees the head and tail of a long document;
    spans come from those parts only, never from the cut middle nor across the cut."""
    decider = Decider(models["bert"], batch_size=8, long_documents="truncate")
    questions = [{**QUESTIONS[0], "schema": {"type": "string", "maxLength": 60}}, QUESTIONS[2]]
    for i in range(6):
        words = " ".join(f"w{k}" for k in range(100 * i, 100 * i + 1500))  # all distinct
        text = f"Storm damage in Denver. {words} Filed by the Boston office."
        decision = decider.decide(text, questions)
        assert decision.ok and decision.truncated, decision.error
        head, tail = decider.engine.packer.pack(text, decider._compile(questions)).parts
        cut = set(text.split()) - set(head.split()) - set(tail.split())
        assert len(cut) > 500  # most of the document is not in the prompt
        city = decision.answers["city"]
        assert in_document(city, head) or in_document(city, tail), city
        assert not cut & set(city.split()), city


def test_extract_refusals_name_the_question(models, tmp_path) -> None:
    path = write_docs(tmp_path / "in.parquet", 2)
    late = {"id": "late", "text": "Late?", "extract": True, "schema": {"type": "boolean"}}
    with pytest.raises(SpecError, match=r"question 'late': schema refused: /type: extract"):
        run_job(parse_spec({"questions": [late]}), [path], tmp_path / "o1",
                model=models["llada"], progress=False)  # fmt: skip
    # Rules test finite questions only; an extract enum is finite, but its answers differ per
    # document, so rules over it are refused up front.
    town = {
        "id": "town",
        "text": "Town?",
        "extract": True,
        "schema": {"enum": ["Boston", "Denver"]},
    }
    rules = {"if": {"properties": {"town": {"const": "Boston"}}},
             "then": {"properties": {"eligible": {"const": True}}}}  # fmt: skip
    with pytest.raises(
        SpecError, match=r"rules refused: /if/properties/town: extract: rules cannot constrain"
    ):
        run_job(parse_spec({"questions": [town, QUESTIONS[3]], "rules": rules}), [path],
                tmp_path / "o2", model=models["llada"], progress=False)  # fmt: skip
    # The same with per-row questions: found row by row, an error row each.
    per_row = [{**q, "schema": json.dumps(q["schema"])} for q in (town, QUESTIONS[3])]
    pl.DataFrame({"doc_id": ["a"], "document": ["Boston"], "questions": [per_row]}).write_parquet(
        tmp_path / "rows.parquet"
    )
    run_job(parse_spec({"rules": rules}), [tmp_path / "rows.parquet"], tmp_path / "o3",
            model=models["llada"], progress=False)  # fmt: skip
    error = read_answers(tmp_path / "o3")["error"][0]
    assert error.startswith("rules: /if/properties/town: extract: rules cannot constrain")
    with pytest.raises(SpecError, match=r"questions\.0\.extract"):
        parse_spec({"questions": [{**QUESTIONS[0], "extract": "sometimes"}]})


def test_extract_is_part_of_the_fingerprint_and_absent_when_off() -> None:
    on = parse_spec({"questions": QUESTIONS})
    off = parse_spec({"questions": free(QUESTIONS)})
    assert on.fingerprint() != off.fingerprint()
    assert "extract" not in off.questions[0].as_dict()  # fingerprints of older jobs unchanged
    assert on.questions[0].as_dict()["extract"] is True


DAYS = {"id": "days", "text": "How many days ago was the purchase?", "extract": True,
        "unit": "days", "schema": {"type": "integer", "minimum": 0, "maximum": 365}}  # fmt: skip


def test_a_unit_makes_written_durations_answers(models, tmp_path) -> None:
    docs = {
        "words": "Bought it a fortnight ago and it broke down on Monday.",
        "mixed": "Bought it two weeks ago, it broke yesterday.",
        "none": "It broke down on Monday.",
    }
    path = tmp_path / "in.parquet"
    pl.DataFrame({"doc_id": list(docs), "document": list(docs.values())}).write_parquet(path)
    for name, question in (
        ("unit", DAYS),
        ("plain", {k: v for k, v in DAYS.items() if k != "unit"}),
    ):
        run_job(parse_spec({"questions": [question]}), [path], tmp_path / name,
                model=models["llada"], progress=False)  # fmt: skip
    got = {
        name: {r["doc_id"]: r for r in read_answers(tmp_path / name).iter_rows(named=True)}
        for name in ("unit", "plain")
    }
    answer = {k: json.loads(r["answers_json"] or "{}").get("days") for k, r in got["unit"].items()}
    assert answer["words"] == 14  # "a fortnight" is the only length of time it states
    assert answer["mixed"] in (14, 2, 1)  # two weeks, the number two, yesterday
    assert (
        got["unit"]["none"]["error"] and "no number of the document" in got["unit"]["none"]["error"]
    )
    # Without the unit a fortnight is no number the document states.
    assert "no number of the document" in got["plain"]["words"]["error"]


def test_unit_needs_a_numeric_extract_question_and_enters_the_fingerprint(models, tmp_path):
    with pytest.raises(SpecError, match=r"unit: 'days' needs extract: true"):
        parse_spec({"questions": [{k: v for k, v in DAYS.items() if k != "extract"}]})
    with pytest.raises(SpecError, match=r"questions\.0\.unit"):
        parse_spec({"questions": [{**DAYS, "unit": "hours"}]})
    path = write_docs(tmp_path / "in.parquet", 2)
    named = {**DAYS, "schema": {"type": "string"}}
    with pytest.raises(SpecError, match=r"question 'days': schema refused: /type: unit"):
        run_job(parse_spec({"questions": [named]}), [path], tmp_path / "o",
                model=models["llada"], progress=False)  # fmt: skip
    # Pydantic's Decimal: a number or a pattern string whose lookahead the compiler leaves out,
    # so what it copies is numbers and a unit applies
    decimal = {
        "anyOf": [{"type": "number"}, {"type": "string", "pattern": "^(?!^[-+.]*$)[0-9.]*$"}]
    }
    run_job(parse_spec({"questions": [{**DAYS, "schema": decimal}]}), [path], tmp_path / "d",
            model=models["llada"], progress=False)  # fmt: skip
    decided = read_answers(tmp_path / "d")  # compiled, not refused (decided or no number)
    assert decided.height == 2
    for answers in decided["answers_json"].drop_nulls():
        assert isinstance(json.loads(answers).get("days", 0), int | float)
    plain = parse_spec({"questions": [{k: v for k, v in DAYS.items() if k != "unit"}]})
    assert parse_spec({"questions": [DAYS]}).fingerprint() != plain.fingerprint()
    assert "unit" not in plain.questions[0].as_dict()


def test_as_written_gives_a_span_its_documents_text_when_the_schema_admits_it() -> None:
    tokenizer = Tokenizer.from_file(str(ROOT / "decide" / "model" / "tokenizer.json"))
    vocab = Vocabulary.from_tokenizer(tokenizer, excluded={tokenizer.get_vocab_size()})
    text = "Filed by José García in Tulsa, OK on 3 May 2024 for $4,275."
    spans = WrittenSpans(text)

    def written(value, schema):
        return as_written(value, spans, schema, compile_slot(schema, vocab))

    assert written("jose garcia", {"type": "string"}) == "José García"
    assert written("tulsa,ok", {"type": ["string", "null"], "maxLength": 9}) == "Tulsa, OK"
    # The document's text must be a value too: a pattern, a length or an enum can keep the
    # spelling the model produced.
    assert written("jose garcia", {"type": "string", "pattern": "^[a-z ]+$"}) == "jose garcia"
    assert written("tulsa,ok", {"type": "string", "maxLength": 8}) == "tulsa,ok"
    assert written("tulsa", {"enum": ["tulsa", "denver"]}) == "tulsa"
    # Not spans: numbers, dates (already ISO), null, and a string the document does not hold.
    assert written(4275, {"type": "integer"}) == 4275
    assert written("2024-05-03", {"type": "string", "format": "date"}) == "2024-05-03"
    assert written(None, {"type": ["string", "null"]}) is None
    assert written("boston", {"type": "string"}) == "boston"


def test_pydantic_optionals_extract_what_their_value_branch_admits(models, tmp_path) -> None:
    """`anyOf: [X, {type: null}]` (Pydantic's Optional[X]) extracts as `type: [X, null]`: an
    Optional[int] copies numbers (before, it copied text spans, never an integer, so every
    answer was null) and an Optional[str] is a plain string column (before, JSON text)."""

    def optional(schema: dict) -> dict:
        return {"anyOf": [schema, {"type": "null"}], "default": None, "title": "T"}

    questions = [
        {**NUMBER_QUESTIONS[0], "schema": optional(NUMBER_QUESTIONS[0]["schema"])},
        {**QUESTIONS[0], "schema": optional(QUESTIONS[0]["schema"])},
    ]
    docs = {f"d{i}": f"Claim {i}: ${1200 + 37 * i:,} of damage in Denver, {3 + i} days ago."
            for i in range(16)}  # fmt: skip
    path = tmp_path / "in.parquet"
    pl.DataFrame({"doc_id": list(docs), "document": list(docs.values())}).write_parquet(path)
    run_job(parse_spec({"questions": questions}), [path], tmp_path / "out",
            model=models["llada"], batch_size=8, progress=False)  # fmt: skip
    frame = read_answers(tmp_path / "out")
    assert frame.schema["answers"] == pl.Struct({"amount": pl.Int64, "city": pl.String})
    amounts = []
    for row in frame.iter_rows(named=True):
        assert row["status"] == "ok", row["error"]
        answers = json.loads(row["answers_json"])
        assert row["answers"] == answers  # the struct holds the values, not their JSON text
        assert answers["amount"] is None or number_in_document(
            answers["amount"], docs[row["doc_id"]]
        )
        assert answers["city"] is None or in_document(answers["city"], docs[row["doc_id"]])
        amounts.append(answers["amount"])
    assert sum(a is not None for a in amounts) >= 4, amounts
