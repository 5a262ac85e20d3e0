"""Calibration: the maps (a calibrated input is left nearly alone, an over-confident one is
corrected), `decide calibrate` on a tiny random job (bad gold rows skipped with a message, the
file validates), and calibrated runs (answers never change, only confidences; a file fitted for
another model or spec exits 2 unless forced; the review queue)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner
from helpers.jobdata import QUESTIONS, read_answers, write_docs

from decide.cli import main
from decide.jobs import calibration as cal
from decide.jobs.calibrate import (
    DUPLICATES_NAMED,
    ConfidencePlan,
    answers_match,
    refuse_duplicate_ids,
    validate_calibration,
)
from decide.jobs.spec import SpecError


def _synthetic(n: int, truth, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    confidence = rng.uniform(0.3, 1.0, n)
    return confidence, (rng.random(n) < truth(confidence)).astype(float)


@pytest.mark.parametrize("kind", ["enum", "string"])  # temperature, Platt
def test_a_calibrated_input_is_left_nearly_unchanged(kind: str) -> None:
    confidence, right = _synthetic(5000, lambda p: p)
    fitted = cal.fit_map(kind, confidence, right)
    assert fitted.method == ("temperature" if kind == "enum" else "platt")
    assert np.abs(fitted(confidence) - confidence).max() < 0.03
    assert cal.ece(fitted(confidence), right) < 0.02


def _sharp(p: np.ndarray) -> np.ndarray:  # right σ(logit(p) / 3) of the time: over-confident
    return 1 / (1 + ((1 - p) / p) ** (1 / 3))


@pytest.mark.parametrize(("kind", "truth"), [("boolean", _sharp), ("enum", _sharp),
                                             ("integer", _sharp), ("string", lambda p: p**4)])  # fmt: skip
def test_an_over_confident_input_is_corrected(kind: str, truth) -> None:
    confidence, right = _synthetic(4000, truth, seed=1)
    fitted = cal.fit_map(kind, confidence, right)
    held_out, truth = _synthetic(4000, truth, seed=2)
    before, after = cal.ece(held_out, truth), cal.ece(fitted(held_out), truth)
    assert before > 0.1 and after < before / 3
    assert cal.brier(fitted(held_out), truth) < cal.brier(held_out, truth)
    order = np.argsort(held_out)
    assert np.all(np.diff(fitted(held_out)[order]) >= 0)  # monotone: never reorders answers


def test_labels_where_confidence_misleads_give_a_constant_map_not_a_decreasing_one() -> None:
    """Platt's slope was unconstrained: on labels where the more confident answers were less
    often right it fitted a < 0, and the run turned 0.9989 into 0.0096 and 0.469 into 0.169,
    reversing the review queue. The best increasing map there is the constant accuracy."""
    confidence, right = _synthetic(400, lambda p: 1.3 - p, seed=3)
    fitted = cal.fit_map("string", confidence, right)
    assert fitted.method == "platt" and fitted.a == 0.0
    mapped = fitted(np.array([0.3, 0.469, 0.9989]))
    assert np.ptp(mapped) == 0 and abs(mapped[0] - right.mean()) < 0.02


def test_pooling_rule_and_kinds() -> None:
    conf, right = _synthetic(200, lambda p: p)
    labels = {"many": (conf, right), "few": (conf[:10], right[:10]), "lone": (conf[:5], right[:5])}
    kinds = {"many": "enum", "few": "enum", "lone": "string"}
    fitted = cal.fit_maps(labels, kinds)
    assert fitted.questions["many"]["fitted_on"] == "question"
    assert fitted.questions["few"]["fitted_on"] == "kind"
    assert fitted.questions["few"]["map"] == fitted.kinds["enum"]["map"]
    assert fitted.questions["lone"] == {"kind": "string", "labels": 5, "fitted_on": "none",
                                        "map": {"method": "identity"}}  # fmt: skip
    assert fitted.map_for("unknown", "enum").method == "temperature"
    assert fitted.map_for("unknown", "number").method == "identity"
    assert [cal.schema_kind(q["schema"]) for q in QUESTIONS] == [
        "enum", "boolean", "integer", "string", "range", "boolean", "object", "string",
    ]  # fmt: skip
    assert answers_match("Boston", "boston") and answers_match(3, 3.0)
    assert not answers_match(True, 1) and not answers_match({"a": 1}, {"a": 2})


DOCS = 24


@pytest.fixture(scope="module")
def job(tiny_checkpoint, tmp_path_factory) -> dict:
    where = tmp_path_factory.mktemp("calibration-job")
    docs = write_docs(where / "in.parquet", DOCS, seed=5)
    (where / "spec.json").write_text(json.dumps({"questions": QUESTIONS}))
    model = tiny_checkpoint("bert", vocab="small", init_std=0.2)
    args = ["run", str(docs), "--spec", str(where / "spec.json"), "--model", str(model),
            "--no-progress"]  # fmt: skip
    result = CliRunner().invoke(main, [*args, "-o", str(where / "raw")])
    assert result.exit_code == 0, result.output
    answers = read_answers(where / "raw")
    # Gold: the job's own answers, a third of them made wrong, three bad ones (one gold row per
    # doc id: duplicates are refused) and a row for a document not in the job.
    bad = {
        "doc-00001": "not json",
        "doc-00002": json.dumps({"kind": "boat", "eligible": True}),
        "doc-00003": "[1, 2]",
    }
    rows = []
    for i, row in enumerate(answers.iter_rows(named=True)):
        gold = json.loads(row["answers_json"])
        if i % 3 == 0:
            gold["eligible"] = not gold["eligible"]
            gold["kind"] = "travel" if gold["kind"] != "travel" else "auto"
        rows.append({"doc_id": row["doc_id"], "gold": bad.get(row["doc_id"], json.dumps(gold))})
    rows += [{"doc_id": "no-such-doc", "gold": "{}"}]
    pl.DataFrame(rows).write_parquet(where / "gold.parquet")
    return {"where": where, "args": args, "answers": answers}


def test_decide_calibrate_skips_bad_rows_with_a_message(job: dict) -> None:
    where = job["where"]
    result = CliRunner().invoke(main, ["calibrate", str(where / "raw"), str(where / "gold.parquet"),
                                       "-o", str(where / "calibration.json")])  # fmt: skip
    assert result.exit_code == 0, result.output
    for needle in (f"row {DOCS} (doc_id 'no-such-doc'): skipped, doc_id not in the job",
                   "row 1 (doc_id 'doc-00001'): skipped, gold is not JSON text",
                   "row 2 (doc_id 'doc-00002'): gold for 'kind' skipped, invalid against the "
                   "question schema",
                   "row 3 (doc_id 'doc-00003'): skipped, gold is not a JSON object"):  # fmt: skip
        assert needle in result.output
    assert "ECE (10 equal-mass)" in result.output and "Brier score" in result.output
    document = json.loads((where / "calibration.json").read_text())
    validate_calibration(document)
    manifest = json.loads((where / "raw" / "manifest.json").read_text())
    assert document["model_fingerprint"] == manifest["fingerprints"]["model"]
    assert document["spec_fingerprint"] == manifest["fingerprints"]["spec"]
    # doc-00001 and doc-00003 skipped; doc-00002: "boat" is not a kind, its `eligible` counts
    assert document["questions"]["kind"]["labels"] == DOCS - 3
    assert document["questions"]["eligible"]["labels"] == DOCS - 2
    assert f"{DOCS - 2} gold rows, " in result.output
    assert document["questions"]["kind"]["fitted_on"] == "kind"  # < 50 labels: pooled
    assert document["questions"]["eligible"]["map"]["method"] == "temperature"
    assert document["questions"]["amount"]["map"]["method"] == "platt"
    assert document["metrics"]["after"]["ece"] <= document["metrics"]["before"]["ece"] + 1e-9
    broken = {**document, "model_fingerprint": "xyz"}
    with pytest.raises(SpecError, match="not a calibration file"):
        validate_calibration(broken)


def test_calibrated_run_changes_confidences_never_answers(job: dict) -> None:
    where, args = job["where"], job["args"]
    if not (where / "calibration.json").is_file():
        test_decide_calibrate_skips_bad_rows_with_a_message(job)
    out = where / "calibrated"
    result = CliRunner().invoke(main, [*args, "-o", str(out), "--calibration",
                                       str(where / "calibration.json"), "--review-below", "0.6"])  # fmt: skip
    assert result.exit_code == 0, result.output
    raw, calibrated = job["answers"], read_answers(out)
    assert calibrated["answers_json"].to_list() == raw["answers_json"].to_list()
    assert calibrated["answers"].to_list() == raw["answers"].to_list()
    assert calibrated["raw_confidence"].to_list() == raw["confidence"].to_list()
    document = json.loads((where / "calibration.json").read_text())
    fitted = cal.Fitted(document["questions"], document["kinds"])
    for before, after in zip(raw["confidence"].to_list(), calibrated["confidence"].to_list(),
                             strict=True):  # fmt: skip
        for qid, value in before.items():
            assert after[qid] == pytest.approx(float(fitted.map_for(qid)(value)), abs=1e-12)
    # Review queue: rows with any calibrated confidence below 0.6.
    lowest = calibrated["confidence"].struct.unnest().min_horizontal()
    assert calibrated["review"].to_list() == (lowest < 0.6).to_list()
    queue = pl.read_parquet(out / "review.parquet")
    assert sorted(queue["doc_id"]) == sorted(calibrated.filter("review")["doc_id"])
    manifest = json.loads((out / "manifest.json").read_text())
    review = manifest["review"]
    assert review["rows"] == queue.height and review["share"] == queue.height / DOCS
    accepted = calibrated.filter(~pl.col("review"))["confidence"].struct.unnest()
    if accepted.height:
        expected = np.concatenate([accepted[c].to_numpy() for c in accepted.columns]).mean()
        assert review["expected_accuracy_accepted"] == pytest.approx(expected)
    assert manifest["calibration"]["review_below"] == 0.6
    report = json.loads((out / "report.json").read_text())
    assert report["calibration"]["review"]["rows"] == queue.height
    assert report["calibration"]["reliability"]
    assert report["calibration"]["risk_coverage"][0]["coverage"] == 1.0


def test_calibration_for_another_model_or_spec_exits_2(job: dict) -> None:
    where, args = job["where"], job["args"]
    if not (where / "calibration.json").is_file():
        test_decide_calibrate_skips_bad_rows_with_a_message(job)
    document = json.loads((where / "calibration.json").read_text())
    for key in ("model_fingerprint", "spec_fingerprint"):
        other = where / f"other-{key}.json"
        other.write_text(json.dumps({**document, key: "0123456789abcdef"}))
        result = CliRunner().invoke(main, [*args, "-o", str(where / f"refused-{key}"),
                                           "--calibration", str(other)])  # fmt: skip
        assert result.exit_code == 2, result.output
        assert "fitted for another" in result.output and "--force-calibration" in result.output
        assert f"fitted on the job in {where / 'raw'}" in result.output  # which labelled job
        assert not list((where / f"refused-{key}").glob("answers/part-*"))
    forced = CliRunner().invoke(main, [*args, "-o", str(where / "forced"), "--calibration",
                                       str(other), "--force-calibration"])  # fmt: skip
    assert forced.exit_code == 0, forced.output
    manifest = json.loads((where / "forced" / "manifest.json").read_text())
    assert manifest["calibration"]["forced"] is True
    missing = CliRunner().invoke(main, [*args, "-o", str(where / "missing"), "--calibration",
                                        str(where / "nope.json")])  # fmt: skip
    assert missing.exit_code == 2 and "cannot read the calibration" in missing.output


def test_resume_refuses_another_calibration(job: dict, tmp_path: Path) -> None:
    where, args = job["where"], job["args"]
    if not (where / "calibration.json").is_file():
        test_decide_calibrate_skips_bad_rows_with_a_message(job)
    out = tmp_path / "out"
    first = CliRunner().invoke(main, [*args, "-o", str(out), "--review-below", "0.5"])
    assert first.exit_code == 0, first.output
    again = CliRunner().invoke(main, [*args, "-o", str(out), "--resume", "--review-below", "0.9"])
    assert again.exit_code == 2 and "another review_below" in again.output
    plain = CliRunner().invoke(main, [*args, "-o", str(out), "--resume"])
    assert plain.exit_code == 2 and "--review-below" in plain.output


def test_temperature_is_multi_class_temperature_over_evenly_spread_other_options() -> None:
    for k, t, p in ((4, 3.0, 0.9), (3, 0.5, 0.6), (2, 2.0, 0.8)):
        scores = np.log([p, *[(1 - p) / (k - 1)] * (k - 1)]) / t
        softmax = np.exp(scores) / np.exp(scores).sum()
        assert float(cal.Map("temperature", temperature=t, options=k)(p)) == pytest.approx(
            softmax[0]
        )
    assert float(cal.Map("temperature", temperature=5.0, options=4)(0.25)) == pytest.approx(0.25)
    assert cal.schema_options({"enum": ["a", "b", "c", "d"]}) == 4
    assert cal.schema_options({"type": ["boolean", "null"]}) == 3
    assert cal.schema_options({"type": "integer", "minimum": 1, "maximum": 3}) == 3


def test_plan_keeps_nulls_and_failed_rows(tmp_path: Path) -> None:
    from decide.jobs.calibrate import ConfidencePlan, Labels, build_document

    labels, rng = Labels(), np.random.default_rng(3)
    for c in rng.uniform(0.5, 1.0, 100):
        labels.add("a", {"enum": ["x", "y", "z"]}, c, rng.random() < c**2)
    fingerprints = {"model": "0" * 16, "spec": "1" * 16}
    document = build_document(labels, fingerprints, job="job", gold="gold")
    (tmp_path / "c.json").write_text(json.dumps(document))
    plan = ConfidencePlan(tmp_path / "c.json", 0.5, fingerprints, {"a": {"enum": ["x", "y", "z"]}})
    frame = pl.DataFrame({"status": ["ok", "ok", "error"], "partial": [False, False, None],
                          "confidence": [{"a": 0.9, "b": None}, {"a": 0.2, "b": 0.7}, None]})  # fmt: skip
    out = plan.frame(frame)
    assert out["raw_confidence"].to_list() == frame["confidence"].to_list()
    first, second, failed = out["confidence"].to_list()
    assert first["b"] is None and failed is None  # unanswered stays null, failed rows too
    assert first["a"] == pytest.approx(float(plan.map("a")(0.9)))
    assert second["b"] == pytest.approx(float(plan.map("b")(0.7)))  # unknown question: identity
    assert out["review"].to_list() == [False, True, False]


def test_spec_keys_do_not_change_the_fingerprint() -> None:
    from decide.jobs.spec import parse_spec

    plain = parse_spec({"questions": QUESTIONS})
    keyed = parse_spec({"questions": QUESTIONS, "calibration": "c.json", "review_below": 0.9})
    assert keyed.fingerprint() == plain.fingerprint()  # a calibration fitted on one fits both
    for bad in ({"review_below": 0}, {"review_below": 1.5}, {"calibrate": "c.json"}):
        with pytest.raises(SpecError):
            parse_spec({"questions": QUESTIONS, **bad})


# A doc_id on several gold rows (same or conflicting labels) is refused, not counted twice.
def _golds(job: dict) -> dict:
    answers = job["answers"]
    return dict(zip(answers["doc_id"], answers["answers_json"], strict=True))


def _calibrate(job: dict, rows: list[dict], name: str):
    where = job["where"]
    pl.DataFrame(rows).write_parquet(where / f"{name}.parquet")
    output = where / f"{name}.json"
    args = ["calibrate", str(where / "raw"), str(where / f"{name}.parquet"), "-o", str(output)]
    result = CliRunner().invoke(main, args)
    return result, output


def test_identical_and_conflicting_duplicate_gold_rows_exit_2(job: dict) -> None:
    golds = _golds(job)
    rows = [{"doc_id": doc_id, "gold": gold} for doc_id, gold in golds.items()]
    flipped = json.loads(golds["doc-00002"])
    flipped["eligible"] = not flipped["eligible"]
    rows += [
        {"doc_id": "doc-00001", "gold": golds["doc-00001"]},  # the same row again
        {"doc_id": "doc-00002", "gold": json.dumps(flipped)},  # a conflicting label
    ]
    result, output = _calibrate(job, rows, "duplicated")
    assert result.exit_code == 2, result.output
    assert "2 doc_ids with more than one gold row" in result.output
    assert f"doc_id 'doc-00001' at rows 1, {DOCS}" in result.output
    assert f"doc_id 'doc-00002' at rows 2, {DOCS + 1}" in result.output
    assert "answers matched" not in result.output and not output.exists()


def test_one_gold_row_per_doc_id_still_fits(job: dict) -> None:
    rows = [{"doc_id": doc_id, "gold": gold} for doc_id, gold in _golds(job).items()]
    rows += [{"doc_id": None, "gold": "{}"}, {"doc_id": None, "gold": "{}"}]  # skipped, not dupes
    result, output = _calibrate(job, rows, "unique")
    assert result.exit_code == 0, result.output
    assert f"{DOCS} gold rows, " in result.output and output.is_file()


def test_the_error_names_the_first_few_duplicated_ids() -> None:
    ids = [f"d{i}" for i in range(DUPLICATES_NAMED + 3)]
    gold = pl.DataFrame({"doc_id": ids + ids, "gold": ["{}"] * (2 * len(ids))})
    with pytest.raises(SpecError) as raised:
        refuse_duplicate_ids(gold, Path("gold.parquet"))
    message = str(raised.value)
    assert message.startswith(f"gold.parquet: {len(ids)} doc_ids with more than one gold row")
    assert f"doc_id 'd0' at rows 0, {len(ids)}" in message
    assert f"'d{DUPLICATES_NAMED - 1}'" in message and f"'d{DUPLICATES_NAMED}'" not in message
    assert "and 3 more doc_ids" in message
    refuse_duplicate_ids(pl.DataFrame({"doc_id": [1, 2, None, None]}), Path("g"))  # no error


def test_a_partial_row_goes_to_review_however_confident_its_other_answers() -> None:
    """A row whose extract answer failed (no confidence for it) was auto-accepted."""
    frame = pl.DataFrame(
        {
            "status": ["ok", "ok", "ok", "error"],
            "partial": [False, True, False, None],
            "confidence": [
                {"a": 0.99, "z": 0.98},
                {"a": 0.99, "z": None},
                {"a": 0.5, "z": 0.99},
                None,
            ],
        }
    )
    plan = ConfidencePlan(None, 0.9, {"model": "m", "spec": "s"}, {})
    assert plan.frame(frame)["review"].to_list() == [False, True, True, False]


def test_all_right_labels_do_not_make_every_answer_certain() -> None:
    """Fitted to hard 0/1 labels, a boolean question whose 40 answers were all right got T near
    0 (0.11 on the example claims' `policy_active`): a raw 0.6 became 0.97, so no doubtful answer
    of it ever reached the review queue. Platt's smoothed targets keep T sane."""
    rng = np.random.default_rng(4)
    confidence = rng.uniform(0.95, 0.999, 40)
    for right in (np.ones(40), (confidence > 0.97).astype(float)):  # all right; some wrong
        fitted = cal.fit_map("boolean", confidence, right)
        assert fitted.method == "temperature" and fitted.temperature > 0.5
        assert float(fitted(0.6)) < 0.75 and float(fitted(0.999)) < 1 - 1e-4


def _copy_job(where: Path, to: Path, change) -> Path:
    """The job in `where / "raw"` copied to `to`, each answer part rewritten by `change`."""
    import shutil

    shutil.copytree(where / "raw", to)
    for part in (to / "answers").glob("part-*.parquet"):
        change(pl.read_parquet(part)).write_parquet(part)
    return to


def test_a_nan_confidence_is_skipped_with_a_message_not_fitted(job: dict, tmp_path: Path) -> None:
    """One NaN confidence used to go into the fit: NaN bins in calibration.json (invalid JSON),
    and a NaN Platt map makes every calibrated confidence NaN, which no threshold is above."""
    where = job["where"]

    def poison(frame: pl.DataFrame) -> pl.DataFrame:
        bad = pl.col("doc_id") == "doc-00004"
        for qid in ("kind", "amount"):
            value = (
                pl.when(bad).then(float("nan")).otherwise(pl.col("confidence").struct.field(qid))
            )
            frame = frame.with_columns(pl.col("confidence").struct.with_fields(value.alias(qid)))
        return frame

    clean = _copy_job(where, tmp_path / "clean", lambda frame: frame)
    raw = _copy_job(where, tmp_path / "raw", poison)
    labels = {}
    for name in ("clean", "raw"):
        output = tmp_path / f"{name}.json"
        result = CliRunner().invoke(main, ["calibrate", str(tmp_path / name),
                                           str(where / "gold.parquet"), "-o", str(output)])  # fmt: skip
        assert result.exit_code == 0, result.output
        labels[name] = json.loads(output.read_text())["questions"]
    assert clean != raw
    for qid in ("kind", "amount"):
        assert (f"row 4 (doc_id 'doc-00004'): gold for {qid!r} skipped, the job's confidence "
                "nan is not a number in [0, 1]") in result.output  # fmt: skip

    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} in calibration.json")

    json.loads(output.read_text(), parse_constant=refuse)
    for qid in ("kind", "amount"):
        assert labels["raw"][qid]["labels"] == labels["clean"][qid]["labels"] - 1


def test_a_map_with_a_nan_parameter_is_refused_naming_it(tmp_path: Path) -> None:
    from decide.jobs.calibrate import Labels, build_document

    labels, rng = Labels(), np.random.default_rng(5)
    for c in rng.uniform(0.5, 1.0, 60):
        labels.add("name", {"type": "string"}, c, rng.random() < c)
    fingerprints = {"model": "0" * 16, "spec": "1" * 16}
    document = build_document(labels, fingerprints, job="job", gold="gold")
    document["questions"]["name"]["map"] = {"method": "platt", "a": float("nan"), "b": 0.0}
    (tmp_path / "c.json").write_text(json.dumps(document))  # Python writes NaN
    with pytest.raises(SpecError, match=r"c\.json: .*/questions/name/map/a: nan is not a finite"):
        ConfidencePlan(tmp_path / "c.json", 0.9, fingerprints, {"name": {"type": "string"}})


def test_a_row_with_a_nan_confidence_goes_to_review() -> None:
    """NaN compares below nothing and `min_horizontal` passes over it: such a row was accepted."""
    frame = pl.DataFrame({"status": ["ok", "ok", "ok"], "partial": [False, False, False],
                          "confidence": [{"a": 0.99, "z": float("nan")}, {"a": 0.99, "z": 0.98},
                                         {"a": float("inf"), "z": 0.99}]})  # fmt: skip
    plan = ConfidencePlan(None, 0.9, {"model": "m", "spec": "s"}, {})
    assert plan.frame(frame)["review"].to_list() == [True, False, True]


def test_an_unwritable_calibration_path_exits_2_with_a_message(job: dict, tmp_path: Path) -> None:
    where = job["where"]
    output = tmp_path / "no-such-dir" / "c.json"
    result = CliRunner().invoke(main, ["calibrate", str(where / "raw"),
                                       str(where / "gold.parquet"), "-o", str(output)])  # fmt: skip
    assert result.exit_code == 2, result.output
    assert f"error: {output}: cannot write the calibration (No such file" in result.output


def test_resume_names_the_calibration_files_it_compares(job: dict, tmp_path: Path) -> None:
    where, args = job["where"], job["args"]
    if not (where / "calibration.json").is_file():
        test_decide_calibrate_skips_bad_rows_with_a_message(job)
    out = tmp_path / "out"
    first = CliRunner().invoke(main, [*args, "-o", str(out), "--review-below", "0.5"])
    assert first.exit_code == 0, first.output
    calibration = where / "calibration.json"
    again = CliRunner().invoke(main, [*args, "-o", str(out), "--resume", "--review-below", "0.5",
                                      "--calibration", str(calibration)])  # fmt: skip
    assert again.exit_code == 2
    assert ("the earlier run of this directory used no calibration file, this run calibration "
            f"file {calibration} (sha256 ") in again.output  # fmt: skip
    assert "None" not in again.output


# A job with integer doc ids, per-row questions on half its rows, and a derived question.
ROW_QUESTIONS = [{"id": "tier", "text": "Which tier?", "schema": json.dumps({"enum": ["a", "b"]})}]
ROW_SPEC = {
    "questions": [
        {"id": "eligible", "text": "Is the claim eligible?", "schema": {"type": "boolean"}},
        {"id": "police", "text": "Was a police report filed?",
         "schema": {"type": ["boolean", "null"]}},
        {"id": "flag", "text": "Flagged?", "derive": "eligible",
         "schema": {"type": ["boolean", "null"]}},
    ]
}  # fmt: skip


@pytest.fixture(scope="module")
def row_job(tiny_checkpoint, tmp_path_factory) -> dict:
    where = tmp_path_factory.mktemp("calibration-row-job")
    write_docs(where / "docs.parquet", 8, seed=9)
    docs = pl.read_parquet(where / "docs.parquet").with_columns(
        pl.int_range(pl.len(), dtype=pl.Int64).alias("doc_id"),
        pl.Series("questions", [ROW_QUESTIONS] * 4 + [None] * 4),
    )
    docs.write_parquet(where / "in.parquet")
    (where / "spec.json").write_text(json.dumps(ROW_SPEC))
    model = tiny_checkpoint("bert", vocab="small", init_std=0.2)
    result = CliRunner().invoke(main, ["run", str(where / "in.parquet"), "--spec",
                                       str(where / "spec.json"), "--model", str(model),
                                       "--no-progress", "-o", str(where / "raw")])  # fmt: skip
    assert result.exit_code == 0, result.output
    return {"where": where, "answers": read_answers(where / "raw")}


def _row_gold(row_job: dict, ids) -> Path:
    answers = row_job["answers"]
    path = row_job["where"] / f"gold-{ids.__name__}.parquet"
    rows = [{"doc_id": ids(d), "gold": a} for d, a in zip(answers["doc_id"],
                                                           answers["answers_json"], strict=True)]  # fmt: skip
    pl.DataFrame(rows).write_parquet(path)
    return path


def test_per_row_question_schemas_come_from_the_job_input(row_job: dict) -> None:
    """A gold file without a `questions` column gave per-row questions the schema `true`: kind
    "other" (a Platt map for an enum) and an absent_below suggestion for an enum without an
    absent value; a derived question was offered an absent_below the spec refuses."""
    where = row_job["where"]
    gold = _row_gold(row_job, int)
    result = CliRunner().invoke(main, ["calibrate", str(where / "raw"), str(gold), "-o",
                                       str(where / "int.json"), "--min-labels", "2"])  # fmt: skip
    assert result.exit_code == 0, result.output
    document = json.loads((where / "int.json").read_text())
    tier = document["questions"]["tier"]
    assert tier["kind"] == "enum" and tier["labels"] == 4
    assert tier["map"]["method"] == "temperature" and tier["map"]["options"] == 2
    assert set(document["absent_below"]) == {"police"}  # not tier (no absent), not flag (derived)
    assert "flag: absent_below" not in result.output


def test_gold_ids_as_text_match_a_job_of_integer_ids(row_job: dict) -> None:
    where = row_job["where"]
    gold = _row_gold(row_job, str)  # "3" for the job's 3
    result = CliRunner().invoke(main, ["calibrate", str(where / "raw"), str(gold), "-o",
                                       str(where / "str.json"), "--min-labels", "2"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "8 gold rows, " in result.output and "not in the job" not in result.output
    document = json.loads((where / "str.json").read_text())
    assert document["questions"]["tier"]["kind"] == "enum"  # the input's ids matched as text
    null = pl.DataFrame({"doc_id": [None, "0"], "gold": ["{}", "{}"]}, schema={
        "doc_id": pl.String, "gold": pl.String})  # fmt: skip
    null.write_parquet(where / "null.parquet")
    result = CliRunner().invoke(main, ["calibrate", str(where / "raw"), str(where / "null.parquet"),
                                       "-o", str(where / "null.json")])  # fmt: skip
    assert "null.parquet row 0 (doc_id None): skipped, doc_id is null" in result.output
