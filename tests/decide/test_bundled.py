"""The bundled decision model ships inside the package and is what `decide run` uses when no
model is given: the README's first command, run here on the example claims, must decide every
claim, well above chance (the full accuracy table is `benchmarks/accuracy.py`).

The floors are regression guards, not the product targets: the model shipped on 2026-12-03
(`decide train --recipe bundled`, docs/bundled-model.md) gets 356 of 360 answers right on the
example claims (the 2026-12-02 weights 351), while a broken model, tokenizer or packing lands
near chance (about 30 %); on the first 60 MAMS-ACSA val reviews it beats both majority baselines
by more than 20 points (the issue's target is 10)."""

from __future__ import annotations

import importlib.util
import json
import random
import re
from pathlib import Path

import polars as pl
from click.testing import CliRunner

from decide import Decider
from decide.cli import main
from decide.engine import load_model
from decide.jobs.models import BUNDLED, bundled_model_path
from decide.schemas.span import document_numbers, in_document

ROOT = Path(__file__).resolve().parents[2]


def test_the_bundled_model_is_shipped_small_and_licensed() -> None:
    assert bundled_model_path() == BUNDLED, f"no bundled model at {BUNDLED}"
    files = {p.name: p.stat().st_size for p in BUNDLED.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "LICENSE", "NOTICE"} <= set(files)
    assert sum(files.values()) <= 50 * 2**20, files
    assert json.loads((BUNDLED / "config.json").read_text())["torch_dtype"] == "bfloat16"
    assert "all-MiniLM-L6-v2" in (BUNDLED / "NOTICE").read_text()


def test_readme_first_command_decides_the_example_claims_mostly_right(tmp_path) -> None:
    out = tmp_path / "claims"
    args = ["run", str(ROOT / "examples" / "claims.parquet"), "--spec",
            str(ROOT / "examples" / "claims.yaml"), "-o", str(out), "--no-progress"]  # fmt: skip
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["model"] == str(BUNDLED)
    spec = importlib.util.spec_from_file_location(
        "check_claims", ROOT / "examples" / "check_claims.py"
    )
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    score = check.score(out)
    assert score["documents"] == 40
    assert score["right"] >= 0.75 * score["total"], score
    # The spec marks claimant, city, amount and policy_limit `extract: true`: all four are
    # copied from each letter (spans, numbers).
    claims = pl.read_parquet(ROOT / "examples" / "claims.parquet")
    letters = dict(zip(claims["doc_id"], claims["document"], strict=True))
    for row in pl.read_parquet(out / "answers" / "*.parquet").iter_rows(named=True):
        answers = json.loads(row["answers_json"])
        for qid in ("claimant", "city"):
            assert in_document(answers[qid], letters[row["doc_id"]]), (row["doc_id"], answers)
        for qid in ("amount", "policy_limit"):
            stated = document_numbers(letters[row["doc_id"]])
            assert str(answers[qid]) in stated, (row["doc_id"], answers)


def test_bundled_model_beats_the_mams_baselines_by_ten_points() -> None:
    from decide.jobs.decisions import DecisionEngine
    from decide.jobs.spec import Decoding
    from decide.train.evaluate import evaluate_mams

    engine = DecisionEngine(load_model(BUNDLED), Decoding(threshold=0.9), batch_size=16)
    report = evaluate_mams(engine, limit=60)
    assert report.failed_rows == 0
    assert report.sentiment.total > 100 and report.mention.total == 480
    assert report.sentiment.rate >= report.sentiment_baseline.rate + 0.10, report
    assert report.mention.rate >= report.mention_baseline.rate + 0.10, report
    # the aspect given, every annotated aspect is asked once more, of the 3 sentiments only
    assert report.sentiment_given_aspect.total == report.sentiment.total
    assert report.sentiment_given_aspect.rate >= report.sentiment_baseline.rate + 0.10, report


def test_decider_defaults_to_the_bundled_model() -> None:
    decider = Decider()
    # Not a round amount: those are guarded, with a floor, by the round-amounts test below.
    letter = (
        "Dear claims team, my car was hit in a parking lot in Denver on 3 May. I claim 4,275 "
        "dollars for the repairs. My policy is active. Regards, Maria Lopez"
    )
    d = decider.decide(letter, [
        {"id": "claim_type", "text": "What kind of claim is this?",
         "schema": {"enum": ["auto", "home", "health", "travel"]}},
        {"id": "amount", "text": "How many dollars are claimed?",
         "schema": {"type": "integer", "minimum": 0, "maximum": 100000}},
    ])  # fmt: skip
    assert d.ok and d.answers == {"claim_type": "auto", "amount": 4275}, d


def test_round_amounts_mostly_keep_their_trailing_zeros() -> None:
    """A known weakness, guarded: a round amount written with a thousands separator sometimes
    loses its last zero ("7,000 dollars" -> 700). The synthetic test amounts are rarely round, so
    benchmarks/accuracy.py does not show it. On these 60 seeded letters (49 round amounts) the
    model shipped on 2026-12-04 (evening: gold strings taught as read) gets all 60 right, as did
    the models shipped earlier on 2026-12-04 and on 2026-12-03 (the 2026-12-04 recipe's trained
    weights alone 59, all 49 round ones); the 2026-12-03 recipe's trained weights before their
    interpolation with the start 39 (48/60), which is why they were not shipped alone. The
    2026-12-02 model (stage 9) got 48 round amounts right and 59/60 in all; stage 7 got 47 (58/60),
    stage 6 48 (59/60), stage 4 49 (60/60), the unshipped stage 5 40 (51/60), stage 2 44 (55/60),
    the GPU model before it 36 (47/60)."""
    rng = random.Random(0)
    letters = [
        "Dear claims team, a pipe burst in our kitchen in Austin. I claim {a} for the repairs. "
        "My policy is active. Regards, Tom Berg",
        "Dear claims team, my car was hit in a parking lot in Denver on 3 May. I claim {a} for "
        "the repairs. My policy is active. Regards, Maria Lopez",
        "Hello, my luggage was lost on a flight to Rome. The total I am claiming is {a}. Thanks, "
        "Ana Silva",
        "Claim form\nPolicyholder: John Reed\nCity: Leeds\nClaim amount: {a}\nNotes: storm "
        "damage to the roof.",
        "I broke my wrist and needed a cast. The hospital bill came to {a}, which I would like "
        "reimbursed. Best, Kim Cho",
    ]
    styles = [lambda n: f"${n:,}", lambda n: f"{n:,} dollars", lambda n: f"USD {n:,}",
              lambda n: f"${n}"]  # fmt: skip
    cases = []
    for letter in letters:
        for _ in range(12):
            n = rng.choice([rng.randint(1, 99) * 100, rng.randint(1, 60) * 1000,
                            rng.randint(2, 99) * 10, rng.randint(100, 60000)])  # fmt: skip
            cases.append((letter.format(a=rng.choice(styles)(n)), n))
    question = {"id": "amount", "text": "How many dollars are claimed?",
                "schema": {"type": "integer", "minimum": 0, "maximum": 100000}}  # fmt: skip
    decided = Decider().decide_many([text for text, _ in cases], [question])
    right = [d.answers["amount"] == n for d, (_, n) in zip(decided, cases, strict=True)]
    round_right = [ok for ok, (_, n) in zip(right, cases, strict=True) if n % 10 == 0]
    assert len(round_right) == 49
    assert sum(round_right) >= 45, f"{sum(round_right)}/49 round amounts right"
    assert sum(right) >= 55, f"{sum(right)}/60 amounts right"


def test_extract_answers_come_back_as_the_document_writes_them() -> None:
    """The bundled vocabulary is uncased, strips accents and closes up the spaces around digits
    and punctuation ("São Paulo" reads "sao paulo", "Tent 4P" "tent4p"); an extract answer is
    still given back in the document's own text, whichever span the model picks."""
    letter = (
        "Hello, this is Ana Lúcia Pereira writing from São Paulo, Brazil. The Orbix X2 "
        "Headphones and the Nomad Tent 4P I ordered from Kitapçı Store arrived broken."
    )
    questions = [
        {"id": "customer", "text": "Who is the customer?", "extract": True,
         "schema": {"type": "string", "maxLength": 24}},
        {"id": "city", "text": "Which city does the customer write from?", "extract": True,
         "schema": {"type": "string", "maxLength": 16}},
        {"id": "product", "text": "Which product is it about?", "extract": True,
         "schema": {"type": "string", "minLength": 3, "maxLength": 20}},
        {"id": "lower", "text": "Which product is it about?", "extract": True,
         "schema": {"type": "string", "pattern": "^[a-z0-9 ]+$", "maxLength": 20}},
    ]  # fmt: skip
    d = Decider().decide(letter, questions)
    assert d.ok, d.error
    for qid in ("customer", "city", "product"):
        answer = d.answers[qid]
        assert answer in letter, d.answers  # case, accents and spaces as written
        assert answer != answer.lower(), d.answers  # every span here starts with a capital
    # A schema only the vocabulary's own spelling satisfies keeps that spelling.
    assert d.answers["lower"] == d.answers["lower"].lower() and in_document(
        d.answers["lower"], letter
    )


def test_upper_case_options_are_answered_as_written() -> None:
    """The uncased vocabulary cannot spell "Yes" or "USD": such options are spelled as it reads
    them and answered as written (they were refused, or silently never answered when another
    option was lower case)."""
    claims = [
        "The claim is approved and will be paid in full: 1,200 dollars by bank transfer.",
        "We decline this claim. The policy had lapsed; no payment of the 900 euros is due.",
    ]
    questions = [
        {"id": "pay", "text": "Will the claim be paid?", "schema": {"enum": ["Yes", "No"]}},
        {"id": "currency", "text": "Which currency is the amount in?",
         "schema": {"anyOf": [{"enum": ["USD", "EUR"]}, {"type": "null"}]}},
        {"id": "mixed", "text": "Is the policy in force?", "schema": {"enum": ["Yes", "no"]}},
    ]  # fmt: skip
    decisions = Decider().decide_many(claims, questions)
    for d in decisions:
        assert d.ok, d.error
        assert d.answers["pay"] in ("Yes", "No") and d.answers["mixed"] in ("Yes", "no")
        assert d.answers["currency"] in ("USD", "EUR", None)
    # the same decisions, with the same confidence, as options written in lower case
    lower = json.loads(json.dumps(questions).replace('"Yes"', '"yes"').replace('"No"', '"no"')
                       .replace('"USD"', '"usd"').replace('"EUR"', '"eur"'))  # fmt: skip
    for d, low in zip(decisions, Decider().decide_many(claims, lower), strict=True):
        assert {k: v.lower() if v else v for k, v in d.answers.items()} == low.answers
        assert d.confidence == low.confidence


def test_upper_case_codes_are_extracted_and_generated_as_the_schema_writes_them() -> None:
    """An upper-case `pattern` (policy numbers, currency codes) or a date-time's "T" cannot be
    spelled by the uncased vocabulary: the slot is spelled case-folded and answered in the case
    its schema asks for; an extract answer is the document's span, with its evidence."""
    claims = [
        "Claim filed under policy AB-1234 for water damage on 2024-03-01T09:30:00Z.",
        "policy number: xz-0042 (written in lower case by the agent), reported 2024-05-17.",
    ]
    questions = [
        {"id": "policy", "text": "What is the policy number?", "extract": True,
         "schema": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{4}$"}},
        {"id": "code", "text": "Which currency code applies?",
         "schema": {"type": "string", "pattern": "^[A-Z]{3}$"}},
        {"id": "when", "text": "When was it reported?",
         "schema": {"type": "string", "format": "date-time"}},
    ]  # fmt: skip
    decisions = Decider().decide_many(claims, questions)
    for d, claim in zip(decisions, claims, strict=True):
        assert d.ok, d.error
        assert re.fullmatch("[A-Z]{2}-[0-9]{4}", d.answers["policy"]), d.answers
        assert in_document(d.answers["policy"], claim)
        assert re.fullmatch("[A-Z]{3}", d.answers["code"]), d.answers
        assert "T" in d.answers["when"], d.answers
    assert decisions[0].answers["policy"] == "AB-1234"  # the document's own text
    assert decisions[1].answers["policy"] == "XZ-0042"  # the schema's case, not the document's


def test_a_timedelta_field_extracts_the_length_of_time_the_text_states() -> None:
    """Pydantic writes `format: duration` for a `timedelta`: an extract answer is the ISO 8601
    duration of a length of time the document states, which Pydantic reads back."""
    from datetime import timedelta

    from pydantic import BaseModel, Field

    class Leave(BaseModel):
        length: timedelta = Field(description="How long is the leave?",
                                  json_schema_extra={"extract": True})  # fmt: skip

    letters = [
        "Hi HR, I need to take three weeks of unpaid leave from 2 June to care for my mother.",
        "Requesting parental leave of six weeks and three days, starting after the 14th.",
    ]
    decisions = Decider().decide_many(letters, Leave)
    lengths = [Leave.model_validate(d.answers).length for d in decisions]
    assert lengths[0] == timedelta(days=21), decisions[0].answers
    # "six weeks" alone is a length the text states too
    assert lengths[1] in (timedelta(days=45), timedelta(days=42)), decisions[1].answers


def test_optional_questions_score_stated_unstated_and_foreign_facts_apart() -> None:
    """`evaluate_unstated` (benchmarks/accuracy.py's optional-questions table): every fact of a
    document's domain asked as `X | None` plus one question of another domain; each answer lands
    in exactly one tally, and the misses are the answers not right."""
    from decide.jobs.decisions import DecisionEngine
    from decide.jobs.spec import Decoding
    from decide.train import handwritten
    from decide.train.evaluate import evaluate_unstated, unstated_questions

    for domain in handwritten.DOMAINS:
        questions = unstated_questions(domain)
        assert questions[-1]["id"].startswith("other_") and len(questions) <= 8
        assert all(q["schema"]["anyOf"][1] == {"type": "null"} for q in questions)
    docs = [d for d in handwritten.load_split("validation") if d.id.endswith(("-003", "-010"))]
    assert {d.domain for d in docs} == set(handwritten.DOMAINS)
    engine = DecisionEngine(load_model(BUNDLED), Decoding(threshold=0.9), batch_size=16)
    report = evaluate_unstated(engine, docs)
    assert report.failed_rows == 0
    facts = {d.id: handwritten.DOMAINS[d.domain].facts for d in docs}
    unstated = sum(d.answers.get(k) is None for d in docs for k in facts[d.id])
    tallies = [*report.stated.values(), *report.unstated.values(), *report.foreign.values()]
    assert sum(t.total for t in report.unstated.values()) == unstated > 0
    assert sum(t.total for t in report.foreign.values()) == len(docs)
    assert sum(t.total for t in tallies) == sum(len(f) + 1 for f in facts.values())
    assert len(report.misses) == sum(t.total - t.right for t in tallies)
    assert sum(t.total for t in report.documents.values()) == len(docs)


def test_cut_documents_score_stated_and_absent_facts_apart() -> None:
    """`evaluate_cut` (accuracy.py's cut-documents table): each cut document asks its string and
    number facts as `X | None`; every answer lands in one tally, the cut fact among the absent."""
    from decide.jobs.decisions import DecisionEngine
    from decide.jobs.spec import Decoding
    from decide.train import cut, handwritten
    from decide.train.evaluate import evaluate_cut

    docs = [d for d in handwritten.load_split("validation") if d.id.endswith(("-003", "-010"))]
    found = cut.cuts(docs)
    engine = DecisionEngine(load_model(BUNDLED), Decoding(threshold=0.9), batch_size=16)
    report = evaluate_cut(engine, docs)
    assert report.failed_rows == 0 and not report.foreign
    absent = sum(v is None for f in found for v in f.gold.values())
    tallies = [*report.stated.values(), *report.unstated.values()]
    assert sum(t.total for t in report.unstated.values()) == absent >= len(found) > 5
    assert sum(t.total for t in tallies) == sum(len(f.gold) for f in found)
    assert len(report.misses) == sum(t.total - t.right for t in tallies)
    assert sum(t.total for t in report.documents.values()) == len(found)


def test_evaluation_lists_each_failed_row_with_why() -> None:
    """A row that fails (here a document too long for the model's 512 positions) is counted and
    listed with its id and error, so accuracy.py can say why, not just how many."""
    import dataclasses

    from decide.jobs.decisions import DecisionEngine
    from decide.jobs.spec import Decoding
    from decide.train import handwritten
    from decide.train.evaluate import evaluate_handwritten, evaluate_unstated

    doc = next(d for d in handwritten.load_split("validation") if d.id.endswith("-003"))
    long = dataclasses.replace(doc, id="too-long", text=" ".join([doc.text] * 12))
    engine = DecisionEngine(load_model(BUNDLED), Decoding(threshold=0.9), batch_size=16)
    for report in (evaluate_handwritten(engine, [doc, long]), evaluate_unstated(engine, [long])):
        assert report.failed_rows == 1
        [(doc_id, error)] = report.failures
        assert doc_id == "too-long"
        assert re.search(r"document needs \d+ tokens .* the model takes 512", error), error
