"""`absent_below`: answers decoded with less confidence are given as their question's absent value
(`jobs.withhold`), the decoded value kept in `withheld`; rules that want a value keep it; the spec
refuses a threshold a question cannot use; fingerprints change only when it is set.

The end-to-end tests use a tiny random model. Withholding comes after decoding, so every answer
is checked against the same document decided without a threshold."""

from __future__ import annotations

import json

import polars as pl
import pytest
from click.testing import CliRunner
from helpers.browser import CHROMEDRIVER, CHROMIUM, chromium_driver
from helpers.jobdata import long_text, read_answers, write_docs

from decide.api import Decider
from decide.cli import main
from decide.jobs.calibrate import ABSENT_GRID, choose_absent_below, suggest_absent_below
from decide.jobs.questions import CompiledQuestion
from decide.jobs.runner import run_job
from decide.jobs.spec import SpecError, parse_spec
from decide.jobs.withhold import withhold
from decide.report import build_report, sample_documents, validate_report

NAME = {"id": "name", "text": "Who is the claimant?", "schema": {"type": ["string", "null"]}}
KIND = {
    "id": "kind",
    "text": "What kind of claim is it?",
    "schema": {"enum": ["auto", "home", "none"]},
    "absent": "none",
}
COUNT = {"id": "count", "text": "How many cars?", "schema": {"type": "integer", "minimum": 0,
                                                             "maximum": 9}}  # fmt: skip
QUESTIONS = [NAME, KIND, COUNT]
TEXTS = [
    "Maria Lopez reports that her car was hit in Denver on Monday.",
    "The kitchen flooded overnight; the plumber came at nine.",
    "Two cars collided near the station. Nobody was hurt.",
    "Claim for a broken window after a storm, filed by the tenant.",
]


def compiled(question: dict) -> CompiledQuestion:
    return CompiledQuestion(
        question["id"], question["text"], question["schema"], None,
        absent=question.get("absent"), absent_below=question.get("absent_below"),
    )  # fmt: skip


def test_unsure_answers_become_absent_and_are_recorded() -> None:
    questions = [compiled(NAME), compiled(KIND), compiled(COUNT)]
    answers = {"name": "maria", "kind": "home", "count": 2}
    confidence = {"name": 0.4, "kind": 0.7, "count": 0.1}
    withheld = withhold(questions, answers, confidence, 0.8)
    # `count` has no absent value (its schema refuses null, no `absent:`): it keeps its answer.
    assert answers == {"name": None, "kind": "none", "count": 2}
    assert confidence == pytest.approx({"name": 0.6, "kind": 0.3, "count": 0.1})
    assert withheld == {"name": {"value": "maria", "confidence": 0.4},
                        "kind": {"value": "home", "confidence": 0.7}}  # fmt: skip
    # At the threshold, already absent, or no threshold at all: nothing is withheld.
    for answers, p, default in (("maria", 0.8, 0.8), (None, 0.1, 0.9), ("maria", 0.1, None)):
        given = {"name": answers}
        assert withhold([compiled(NAME)], given, {"name": p}, default) == {}
        assert given == {"name": answers}
    # A question's own threshold overrides the job's, both ways.
    own = [compiled({**NAME, "absent_below": 0.3}), compiled({**KIND, "absent_below": 0.9})]
    answers = {"name": "maria", "kind": "home"}
    withheld = withhold(own, answers, {"name": 0.4, "kind": 0.7}, 0.5)
    assert answers == {"name": "maria", "kind": "none"} and list(withheld) == ["kind"]


def test_the_spec_refuses_a_threshold_a_question_cannot_use_and_fingerprints_it() -> None:
    def refused(question: dict) -> str:
        with pytest.raises(SpecError) as info:
            parse_spec({"questions": [question]}, "job.yaml")
        return str(info.value)

    assert "needs an absent value" in refused({**COUNT, "absent_below": 0.5})
    assert "questions.0" in refused({**COUNT, "absent_below": 0.5})
    derived = {**NAME, "derive": "'x'", "schema": {"type": ["string", "null"]}, "absent_below": 0.5}
    assert "not derived ones" in refused(derived)
    assert "absent_below" in refused({**NAME, "absent_below": 0.0})
    with pytest.raises(SpecError, match=r"decoding\.absent_below"):
        parse_spec({"questions": QUESTIONS, "decoding": {"absent_below": 1.5}})
    plain = parse_spec({"questions": QUESTIONS}).fingerprint()
    assert parse_spec({"questions": QUESTIONS, "decoding": {"absent_below": None}}).fingerprint() \
        == plain  # fmt: skip
    job = parse_spec({"questions": QUESTIONS, "decoding": {"absent_below": 0.8}}).fingerprint()
    own = parse_spec({"questions": [{**NAME, "absent_below": 0.8}, KIND, COUNT]}).fingerprint()
    assert len({plain, job, own}) == 3


@pytest.fixture(scope="module")
def bert(tiny_checkpoint):
    return tiny_checkpoint("bert", vocab="small", init_std=0.2)


def test_decided_answers_below_the_threshold_are_withheld(bert) -> None:
    plain = Decider(bert, batch_size=4).decide_many(TEXTS, QUESTIONS)
    held = Decider(bert, batch_size=4, absent_below=1.0).decide_many(TEXTS, QUESTIONS)
    withheld_any = 0
    for before, after in zip(plain, held, strict=True):
        assert before.ok and after.ok, (before.error, after.error)
        assert after.answers["count"] == before.answers["count"]  # no absent value
        assert after.confidence["count"] == before.confidence["count"]
        for qid, absent in (("name", None), ("kind", "none")):
            value, p = before.answers[qid], before.confidence[qid]
            if value == absent or p >= 1.0:
                assert after.answers[qid] == value and qid not in (after.withheld or {})
                continue
            withheld_any += 1
            assert after.answers[qid] == absent
            assert after.withheld[qid] == {"value": value, "confidence": p}
            assert after.confidence[qid] == pytest.approx(1.0 - p)
        assert json.loads(after.answers_json) == after.answers
    assert withheld_any >= 2  # the random model answers most of them with a value


def test_a_rule_that_wants_a_value_keeps_it(bert) -> None:
    # Enforced while decoding: every count (0 to 9) wants a kind that is not absent.
    rules = {"if": {"properties": {"count": {"minimum": 0}}},
             "then": {"properties": {"kind": {"enum": ["auto", "home"]}}}}  # fmt: skip
    plain = Decider(bert, batch_size=4, rules=rules).decide_many(TEXTS, QUESTIONS)
    ruled = Decider(bert, batch_size=4, absent_below=1.0, rules=rules).decide_many(TEXTS, QUESTIONS)
    kept = 0
    for before, after in zip(plain, ruled, strict=True):
        assert before.ok and after.ok, (before.error, after.error)
        assert after.answers["kind"] == before.answers["kind"] != "none"
        if before.confidence["kind"] < 1.0:
            # Withholding `kind` would break the rule: all or nothing, so the decoded answers
            # stand and nothing is withheld, `name` included.
            kept += 1
            assert after.answers == before.answers and after.withheld is None
        elif before.answers["name"] is not None:  # `kind` is sure: `name` alone is withheld
            assert after.answers["name"] is None and list(after.withheld) == ["name"]
    assert kept >= 2


def test_a_windowed_document_withholds_its_kept_answers(bert) -> None:
    text = long_text(300) + " Maria Lopez filed this home claim."
    plain = Decider(bert, batch_size=8).decide(text, QUESTIONS)
    held = Decider(bert, batch_size=8, absent_below=1.0).decide(text, QUESTIONS)
    assert plain.windows > 1 and held.windows == plain.windows
    for qid, absent in (("name", None), ("kind", "none")):
        if plain.answers[qid] == absent:
            assert held.answers[qid] == absent
            continue
        assert held.answers[qid] == absent
        assert held.withheld[qid]["value"] == plain.answers[qid]
        assert held.evidence[qid] is None  # no evidence for an answer not given
    assert held.answers["count"] == plain.answers["count"]
    assert held.withheld  # the random model is unsure of something it answered


@pytest.fixture(scope="module")
def jobs(bert, tmp_path_factory) -> dict:
    """The same documents decided without a threshold (the API) and with `--absent-below 1.0`
    (the CLI)."""
    where = tmp_path_factory.mktemp("withheld-jobs")
    path = write_docs(where / "in.parquet", 12, seed=3)
    spec = parse_spec({"questions": QUESTIONS})
    run_job(spec, [path], where / "plain", model=bert, batch_size=4, progress=False)
    (where / "job.yaml").write_text(json.dumps({"questions": QUESTIONS}))
    result = CliRunner().invoke(
        main,
        ["run", str(path), "--spec", str(where / "job.yaml"), "-o", str(where / "held"),
         "--model", str(bert), "--absent-below", "1.0", "--no-progress"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return {"where": where, "plain": read_answers(where / "plain"),
            "held": read_answers(where / "held")}  # fmt: skip


def test_the_job_writes_what_it_withheld(jobs) -> None:
    plain, held = jobs["plain"], jobs["held"]
    assert plain["withheld_json"].null_count() == len(plain) == len(held) == 12
    assert held["spec_fingerprint"][0] != plain["spec_fingerprint"][0]
    rows = 0
    for before, after in zip(plain.iter_rows(named=True), held.iter_rows(named=True), strict=True):
        withheld = json.loads(after["withheld_json"] or "{}")
        for qid, held_value in withheld.items():
            rows += 1
            assert held_value["value"] == before["answers"][qid]
            # batches of 4 and of 16: the same answers, confidences to float rounding
            assert held_value["confidence"] == pytest.approx(before["confidence"][qid], rel=1e-3)
            assert after["answers"][qid] is None or after["answers"][qid] == "none"
        assert after["answers"]["count"] == before["answers"]["count"]
    assert rows >= 2


def test_the_suggested_threshold_gets_most_right_with_the_calibration_pooling_rule() -> None:
    # Three sure answers right, two unsure ones whose gold is absent, one unsure one right.
    sure = [("a", 0.99, "a", None), ("b", 0.97, "b", None), ("c", 0.96, "c", None)]
    unsure = [("d", 0.55, None, None), ("e", 0.65, None, None), ("f", 0.75, "f", None)]
    assert choose_absent_below(sure + unsure) == 0.7
    assert choose_absent_below(sure) is None  # nothing to gain
    tie = [("a", 0.99, "a", "none"), ("d", 0.55, "none", "none"), ("f", 0.75, "g", "none")]
    assert choose_absent_below(tie) == 0.6  # 0.6 and 0.7 get as many right: the lowest
    decoded = {"own": (sure + unsure) * 2, "few": unsure[:2], "lone": sure[:1]}
    kinds = {"own": "string", "few": "string", "lone": "integer"}
    suggested = suggest_absent_below(decoded, kinds, min_labels=10, min_pool=5)
    assert suggested["own"] == {"labels": 12, "absent_gold": 4, "right": 8, "threshold": 0.7,
                                "right_at_threshold": 12, "withheld": 4,
                                "fitted_on": "question"}  # fmt: skip
    # Two labels of its own: its kind's 14 labels choose, its own two are counted.
    few = suggested["few"]
    assert few["fitted_on"] == "kind" and few["threshold"] == 0.7 and few["labels"] == 2
    assert few["right"] == 0 and few["right_at_threshold"] == 2 and few["withheld"] == 2
    assert suggested["lone"]["fitted_on"] == "none" and suggested["lone"]["threshold"] is None


def test_calibrate_suggests_absent_below_from_labels_of_a_withholding_job(jobs) -> None:
    where, plain = jobs["where"], jobs["plain"]
    # Gold: the decoded names, except that those below a threshold of the grid are absent (the
    # grid value that splits the decoded names most evenly).
    rows = [r for r in plain.iter_rows(named=True)]
    named = [r["confidence"]["name"] for r in rows if r["answers"]["name"] is not None]
    split = min(ABSENT_GRID, key=lambda t: abs(sum(p < t for p in named) - len(named) / 2))
    unsure = {r["doc_id"] for r in rows
              if r["answers"]["name"] is not None and r["confidence"]["name"] < split}  # fmt: skip
    gold = [
        {"doc_id": r["doc_id"],
         "gold": json.dumps({"name": None if r["doc_id"] in unsure else r["answers"]["name"]})}
        for r in rows
    ]  # fmt: skip
    pl.DataFrame(gold).write_parquet(where / "gold.parquet")
    for job in ("plain", "held"):  # the held job's labels are read through `withheld_json`
        result = CliRunner().invoke(main, [
            "calibrate", str(where / job), str(where / "gold.parquet"), "--min-labels", "5",
            "-o", str(where / f"{job}.json"),
        ])  # fmt: skip
        assert result.exit_code == 0, result.output
        entry = json.loads((where / f"{job}.json").read_text())["absent_below"]["name"]
        assert entry["labels"] == 12 and entry["absent_gold"] == len(unsure) >= 2
        assert entry["right"] == 12 - len(unsure)  # as decoded, before any withholding
        assert entry["right_at_threshold"] == 12 and entry["withheld"] == len(unsure)
        assert entry["fitted_on"] == "question"
        assert entry["threshold"] <= split
        assert "absent_below" in result.output and "name: 12 labels" in result.output
        assert f"  name: absent_below: {entry['threshold']:g}\n" in result.output


def test_the_report_counts_and_shows_what_was_withheld(jobs) -> None:
    held = jobs["held"]
    report = json.loads((jobs["where"] / "held" / "report.json").read_text())
    validate_report(report)
    counts = {q["id"]: q["withheld"] for q in report["questions"]}
    rows = [json.loads(w) for w in held["withheld_json"] if w is not None]
    assert counts == {qid: sum(qid in r for r in rows) for qid in ("name", "kind", "count")}
    assert counts["count"] == 0 and counts["name"] + counts["kind"] >= 2
    plain = build_report(jobs["where"] / "plain")  # a job without the threshold
    assert all(q["withheld"] == 0 for q in plain["questions"])
    sampled = sample_documents(jobs["where"] / "held", report)
    shown = [r for r in sampled if r["withheld"]]
    assert shown and all(set(r["withheld"]) <= {"name", "kind"} for r in shown)


@pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER), reason="needs Debian's chromium and chromedriver"
)
def test_the_page_shows_a_withheld_value_beside_its_absent_answer(jobs) -> None:
    from selenium.webdriver.common.by import By

    held = jobs["held"].filter(pl.col("withheld_json").is_not_null())
    doc_id = held["doc_id"][0]
    withheld = json.loads(held["withheld_json"][0])
    driver = chromium_driver()
    try:
        driver.get((jobs["where"] / "held" / "report.html").resolve().as_uri())
        driver.find_element(By.ID, "search").send_keys(doc_id)
        driver.find_element(By.CSS_SELECTOR, "#doc-body tr").click()
        detail = " ".join(driver.find_element(By.ID, "detail").text.split())
        for qid, entry in withheld.items():  # the page's text with its spaces collapsed
            value = " ".join(str(entry["value"]).split())
            assert f"withheld: {value} (confidence" in detail, (qid, detail)
        assert f"{next(iter(withheld.values()))['confidence']:.3f}" in detail
        errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
        assert errors == []
    finally:
        driver.quit()


def test_a_pydantic_field_carries_its_threshold_to_its_question() -> None:
    from pydantic import BaseModel, Field

    from decide.api import questions_from_model

    class Claim(BaseModel):
        city: str | None = Field(
            None, description="Which city?", json_schema_extra={"absent_below": 0.7}
        )
        amount: int = Field(description="How many dollars?")

    city, amount = questions_from_model(Claim)
    assert city["absent_below"] == 0.7 and "absent_below" not in city["schema"]
    assert "absent_below" not in amount
    spec = parse_spec({"questions": [city, amount]})  # the schema admits null: accepted
    assert spec.questions[0].absent_below == 0.7
