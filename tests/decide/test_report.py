"""Reports: report.json validates against its schema (and a corrupted one does not); a report
built part by part equals the one built from every part in memory at once; the page renders in
real headless Chromium with its sections and charts, search filters the table, and the console
stays clean."""

from __future__ import annotations

import json
import math
import os
import random
import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner
from helpers.browser import CHROMEDRIVER, CHROMIUM, chromium_driver
from helpers.jobdata import QUESTIONS, write_docs

from decide import report as report_module
from decide import report_figures as figures_module
from decide.api import run_job
from decide.cli import main
from decide.jobs.columns import answer_fields, answers_dtype
from decide.jobs.spec import parse_spec
from decide.report import ReportError, build_report, sample_documents, validate_report, write_report
from decide.report_html import number_label, render_html

DOCS = Path(__file__).parents[2] / "docs"


@pytest.fixture(scope="module")
def job(tiny_checkpoint, tmp_path_factory) -> Path:
    where = tmp_path_factory.mktemp("report-job")
    docs = write_docs(where / "in.parquet", 30, seed=11)
    frame = pl.read_parquet(docs)
    amounts = [f" Total ${1000 + 37 * i:,}.00 claimed." for i in range(frame.height)]
    frame = frame.with_columns(pl.col("document") + pl.Series(amounts))
    frame = pl.concat([frame, pl.DataFrame({"doc_id": ["empty-1"], "document": [""]})])
    frame.write_parquet(docs)
    # `city` and `amount` are extract questions, so their answers occur in the text: the page
    # marks them (`amount` where its number is written, "$1,259.00" for 1259).
    questions = [{**q, "extract": True} if q["id"] in ("city", "amount") else q for q in QUESTIONS]
    run_job(
        parse_spec({"questions": questions}),
        [docs],
        where / "out",
        model=tiny_checkpoint("bert", vocab="small", init_std=0.2),
        progress=False,
    )
    return where / "out"


def test_report_json_validates_and_a_corrupted_one_does_not(job: Path) -> None:
    report = json.loads((job / "report.json").read_text())
    validate_report(report)
    assert report["counts"]["total"] == 31 and report["counts"]["ok"] == 30
    assert report["counts"]["failed_by_reason"] == {"empty_document": 1}
    assert [q["id"] for q in report["questions"]] == [q["id"] for q in QUESTIONS]
    assert sum(report["confidence"]["counts"]) == 30 * len(QUESTIONS)
    assert report["throughput"]["forward_passes"] > 0
    for corrupt in (
        lambda r: r["counts"].__setitem__("ok", -1),
        lambda r: r["questions"][0].__setitem__("id", "bad id"),
        lambda r: r["confidence"].__setitem__("counts", [1, 2]),
        lambda r: r.pop("failures"),
        lambda r: r["job"]["fingerprints"].__setitem__("model", "xyz"),
    ):
        broken = json.loads(json.dumps(report))
        corrupt(broken)
        with pytest.raises(ReportError, match=r"report\.schema\.json at"):
            validate_report(broken)


def test_decide_report_rebuilds_both_files(job: Path) -> None:
    (job / "report.json").unlink()
    (job / "report.html").unlink()
    result = CliRunner().invoke(main, ["report", str(job)])
    assert result.exit_code == 0, result.output
    assert (job / "report.json").is_file() and (job / "report.html").is_file()
    bad = CliRunner().invoke(main, ["report", str(job / "answers")])
    assert bad.exit_code == 2 and "no manifest.json" in bad.output


def test_page_stays_small_and_self_contained(job: Path) -> None:
    page = (job / "report.html").read_text()
    for needle in ("http://", "https://", "<link", "src="):
        assert needle not in page
    assert len(page.encode()) < 5_000_000
    assert build_report(job)["counts"]["decided"] == 31


MANY_QUESTIONS = [
    *QUESTIONS,
    {"id": "score", "text": "Score?", "schema": {"type": "number"}},
    {"id": "tags", "text": "Tags?",
     "schema": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 2}},
    {"id": "note", "text": "Note?", "schema": {"type": "string", "maxLength": 40}},
    {"id": "never", "text": "Never answered?", "schema": {"type": ["string", "null"]}},
]  # fmt: skip
ERRORS = [  # message, error_kind (None: a part written before the column existed)
    ("document is empty", "empty_document"),
    ("answer fails validation: amount: 30000 is greater than the maximum of 20000",
     "answer_invalid"),
    ("document needs 9000 tokens, the model takes 8192", "document_too_long"),
    ("rule /rules/0 (amount < 100) violated: amount is 200", "rule_violated"),
    ("", None),
]  # fmt: skip


def _value(qid: str, rng: random.Random) -> Any:
    if qid == "never" or rng.random() < 0.1:
        return None
    return {
        "kind": lambda: rng.choice(["auto", "home", "health", "travel"]),
        "eligible": lambda: rng.random() < 0.6,
        "amount": lambda: rng.randrange(0, 20001),  # many distinct numbers: a histogram
        "city": lambda: rng.choice(["Boston", "Denver", "Austin", "Tulsa", "Reno", "Provo"]),
        "days": lambda: rng.randrange(0, 5),  # few distinct numbers: categories
        "police": lambda: rng.choice([True, False]),
        "contact": lambda: {"team": rng.choice(["claims", "fraud"]), "level": rng.randrange(1, 4)},
        "code": lambda: rng.choice("ABC") + str(rng.randrange(10)),  # 30 strings: top values
        "score": lambda: round(rng.uniform(-2, 2), 1),
        "tags": lambda: rng.sample(["a", "b", "c"], rng.randrange(3)),
        "note": lambda: f"note {rng.randrange(40)}",
    }[qid]()


def _write_output(out: Path, sizes: list[int], seed: int = 0) -> Path:
    """An output directory of several parts with the runner's columns and types; confidences
    from a few values (ties), null answers and confidences, one part of failures only, one empty
    part."""
    rng = random.Random(seed)
    fields = answer_fields({q["id"]: [q["schema"]] for q in MANY_QUESTIONS})
    schema = {
        "doc_id": pl.String, "status": pl.String, "error": pl.String,
        "answers": answers_dtype(fields), "answers_json": pl.String,
        "confidence": pl.Struct({qid: pl.Float64 for qid in fields}), "nfe": pl.Int32,
        "value_tokens": pl.Int32, "filler_tokens": pl.Int32, "error_kind": pl.String,
        "partial": pl.Boolean, "errors": pl.Struct({qid: pl.String for qid in fields}),
        "withheld_json": pl.String,
    }  # fmt: skip
    (out / "answers").mkdir(parents=True)
    doc = 0
    for part, size in enumerate(sizes):
        rows = []
        for _ in range(size):
            doc += 1
            if part == 2 or rng.random() < 0.2:
                error, kind = rng.choice(ERRORS)
                rows.append({"doc_id": f"doc-{doc:05d}", "status": "error", "error": error,
                             "error_kind": kind, "nfe": 0, "value_tokens": 0,
                             "filler_tokens": 0})  # fmt: skip
                continue
            values = {qid: _value(qid, rng) for qid in fields}
            confidence = {qid: rng.choice([None, 0.0, 0.25, 0.5, 0.5, 0.75, 1.0, rng.random()])
                          for qid in fields}  # fmt: skip
            # An answer without a confidence failed (a partial row): not in the decision, named
            # in `errors`; a null answer has its confidence, as the engine gives one.
            lost = [qid for qid, c in confidence.items() if c is None]
            values = {qid: v for qid, v in values.items() if qid not in lost}
            held = rng.sample(list(fields), rng.choice([0, 0, 0, 1, 2]))  # `absent_below`
            withheld = {qid: {"value": "x", "confidence": 0.3} for qid in held} or None
            rows.append({
                "doc_id": f"doc-{doc:05d}", "status": "ok", "error": None,
                "answers": {qid: f.cell(values.get(qid)) for qid, f in fields.items()},
                "partial": bool(lost),
                "errors": {qid: "no span" if qid in lost else None for qid in fields} if lost
                else None,
                "answers_json": json.dumps(values, separators=(",", ":")),
                "confidence": confidence, "nfe": rng.randrange(1, 9),
                "value_tokens": rng.randrange(3, 30), "filler_tokens": rng.randrange(0, 60),
                "withheld_json": None if withheld is None else json.dumps(withheld),
            })  # fmt: skip
        frame = pl.DataFrame(rows, schema=schema, orient="row" if rows else None)
        frame.write_parquet(out / "answers" / f"part-{part:05d}.parquet")
    manifest = {
        "status": "complete",
        "fingerprints": {"model": "0123456789abcdef", "spec": "fedcba9876543210"},
        "model": "bundled", "model_type": "bert", "inputs": [],
        "spec": {"questions": MANY_QUESTIONS, "rules": {"type": "object"}},
        "counts": {"total": doc + 2, "invalid_rows": 2},
        "seconds": 3.0, "throughput": {"documents": doc, "answer_tokens": 500},
    }  # fmt: skip
    (out / "manifest.json").write_text(json.dumps(manifest))
    return out


def _reference_report(out: Path) -> dict[str, Any]:
    """The report built by hand from every part in memory at once: the oracle for
    `build_report`, less the fields copied from the manifest (`format`, `job`, `generated`)."""
    r, f = report_module, figures_module
    frame = pl.read_parquet(sorted((out / "answers").glob("part-*.parquet")))
    ok, failed = frame.filter(pl.col("status") == "ok"), frame.filter(pl.col("status") == "error")
    reasons: dict[str, int] = {}
    for kind in failed["error_kind"].fill_null("unknown").to_list():
        reasons[kind] = reasons.get(kind, 0) + 1
    reasons["null_doc_id"] = 2

    def confidence(values: pl.Series) -> dict[str, Any]:
        values = values.drop_nulls()
        values = values.filter(values.is_finite()).clip(0.0, 1.0)  # NaN and infinities: counted
        index = (values * 10).floor().clip(0, 9).cast(pl.Int64)
        counts = dict(index.value_counts().iter_rows())
        mean = values.mean()
        return {"counts": [counts.get(i, 0) for i in range(10)],
                "mean": None if mean is None else float(mean)}  # fmt: skip

    def distribution(column: pl.Series) -> dict[str, Any]:
        present = column.drop_nulls()
        if isinstance(present.dtype, pl.Struct | pl.List):
            present = pl.Series([json.dumps(v, separators=(",", ":")) for v in present.to_list()])
        distinct = present.n_unique()
        if distinct <= f.CATEGORY_LIMIT or not present.dtype.is_numeric():
            counts = present.value_counts(name="n")
            top = counts.sort(["n", counts.columns[0]], descending=[True, False])
            top = top.head(f.CATEGORY_LIMIT)
            values = [{"value": v, "count": n} for v, n in top.iter_rows()]
            return {"type": "categories" if distinct <= f.CATEGORY_LIMIT else "top",
                    "values": values, "other": present.len() - sum(v["count"] for v in values),
                    "distinct": distinct}  # fmt: skip
        values = present.cast(pl.Float64)
        low, high = values.min(), values.max()
        width = (high - low) / 10 if high > low else 1.0
        index = ((values - low) / width).floor().clip(0, 9).cast(pl.Int64)
        counts = dict(index.value_counts().iter_rows())
        return {"type": "histogram", "min": low, "max": high, "mean": values.mean(),
                "bins": [{"low": low + i * width, "high": low + (i + 1) * width,
                          "count": counts.get(i, 0)} for i in range(10)]}  # fmt: skip

    def nulls(qid: str) -> int:  # answered null: the key is in the decision, its value null
        decisions = [json.loads(t) for t in ok["answers_json"].drop_nulls()]
        return sum(1 for d in decisions if qid in d and d[qid] is None)

    def failures(qid: str) -> int:  # its answer failed: the row's `errors` name it
        rows = ok["errors"].to_list() if "errors" in ok.columns else []
        return sum(1 for e in rows if e and e.get(qid) is not None)

    def answered_mean(qid: str) -> float | None:
        given = conf.filter(answers[qid].is_not_null())[qid].drop_nulls()
        mean = given.filter(given.is_finite()).clip(0.0, 1.0).mean()
        return None if mean is None else float(mean)

    answers, conf = ok["answers"].struct.unnest(), ok["confidence"].struct.unnest()
    long = (
        ok.select("doc_id", pl.col("confidence").struct.unnest())
        .unpivot(index="doc_id", variable_name="question", value_name="conf")
        .drop_nulls("conf")
        .filter(pl.col("conf").is_finite())
    )
    order = {q["id"]: i for i, q in enumerate(MANY_QUESTIONS)}
    least = long.sort([pl.col("conf"), pl.col("question").replace_strict(order), pl.col("doc_id")])
    least = least.head(r.LOWEST).select("doc_id", "question", "conf")
    answers_json = dict(ok.select("doc_id", "answers_json").iter_rows())
    nfe, tokens = int(frame["nfe"].sum()), int(frame["value_tokens"].sum())
    held = ok["withheld_json"].drop_nulls().to_list()
    return {
        "counts": {"total": frame.height + 2, "decided": frame.height, "ok": ok.height,
                   "failed": failed.height + 2, "invalid_rows": 2, "failed_by_reason": reasons},
        "throughput": {"documents_per_second": frame.height / 3.0, "forward_passes": nfe,
                       "forward_passes_per_document": nfe / frame.height, "answer_tokens": tokens,
                       "answer_tokens_per_forward_pass": tokens / nfe,
                       "filler_tokens": int(frame["filler_tokens"].sum())},
        "questions": [{"id": q["id"], "text": q["text"],
                       "answered": answers[q["id"]].drop_nulls().len(),
                       "nulls": nulls(q["id"]), "failed": failures(q["id"]),
                       "distribution": distribution(answers[q["id"]]),
                       "confidence": confidence(conf[q["id"]]),
                       "answered_confidence": answered_mean(q["id"]),
                       "confidence_not_finite": int((~conf[q["id"]].drop_nulls().is_finite())
                                                    .sum()),
                       "withheld": sum(q["id"] in json.loads(w) for w in held),
                       "unread": 0}  # no document read in windows (test_evidence_ranker.py)
                      for q in MANY_QUESTIONS],
        "confidence": confidence(long["conf"]),
        "lowest_confidence": [{"doc_id": d, "question": q, "confidence": c,
                               "answer": json.loads(answers_json[d]).get(q)}
                              for d, q, c in least.iter_rows()],
        "failures": [{"doc_id": d, "error": e}
                     for d, e in failed.select("doc_id", "error").sort("doc_id")
                     .head(r.FAILURES).iter_rows()],
        "rules": {"declared": True, "narrowed": {},
                  "violations": reasons.get("answer_invalid", 0)
                  + reasons.get("rule_violated", 0)},
    }  # fmt: skip


def _means(report: Any, where: str = "") -> dict[str, float | None]:
    """Every mean in a report, by path; the report keeps `None` in their place."""
    found = {}
    items = report.items() if isinstance(report, dict) else enumerate(report)
    for key, value in items:
        if key in ("mean", "answered_confidence"):
            found[f"{where}/{key}"], report[key] = value, None
        elif isinstance(value, dict | list):
            found.update(_means(value, f"{where}/{key}"))
    return found


@pytest.mark.parametrize("small", [False, True], ids=["defaults", "small-limits"])
def test_streamed_report_equals_the_all_in_memory_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small: bool
) -> None:
    if small:  # short lists, few categories
        monkeypatch.setattr(report_module, "LOWEST", 40)
        monkeypatch.setattr(report_module, "FAILURES", 9)
        monkeypatch.setattr(figures_module, "CATEGORY_LIMIT", 4)
    out = _write_output(tmp_path / "out", [37, 0, 12, 61, 5, 140, 3, 44], seed=5)
    report = build_report(out)
    validate_report(report)
    expected = _reference_report(out)
    got = {key: report[key] for key in expected}
    got_means, expected_means = _means(got), _means(expected)
    assert got == expected
    # Means are sums of floats: the reference sums the long table in one chunk (pairwise), the
    # stream part by part, so the last bits may differ.
    assert got_means.keys() == expected_means.keys()
    for key, mean in expected_means.items():
        assert (mean is None) == (got_means[key] is None), key
        assert mean is None or math.isclose(mean, got_means[key], rel_tol=1e-12), key
    kinds = {q["id"]: q["distribution"]["type"] for q in report["questions"]}
    assert kinds["amount"] == kinds["score"] == "histogram" and kinds["note"] == "top"
    ties = [row["confidence"] for row in report["lowest_confidence"]]
    assert len(ties) > len(set(ties))  # the order of equal confidences was checked too
    write_report(out)
    assert (out / "report.html").is_file()


def test_confidences_that_are_not_numbers_stay_out_of_the_figures(tmp_path: Path) -> None:
    """NaN and infinite confidences (the review queue takes them as doubtful) failed the report;
    they are counted per question and left out of histograms, means and the lowest list."""
    out = _write_output(tmp_path / "out", [37, 0, 12, 61], seed=8)
    part = out / "answers" / "part-00003.parquet"
    frame = pl.read_parquet(part)
    odd = [math.nan, math.inf, -math.inf]
    confidence = frame["confidence"].struct.unnest().with_columns(  # of given answers only
        pl.when((pl.int_range(pl.len()) % 4 == i) & pl.col(q).is_not_null())
        .then(pl.lit(odd[i % 3])).otherwise(pl.col(q)).alias(q)
        for i, q in enumerate(["kind", "amount", "score", "never"])
    )  # fmt: skip
    confidence = confidence.select(pl.struct(confidence.columns).alias("confidence"))
    frame = frame.with_columns(
        pl.when(pl.col("status") == "ok").then(confidence["confidence"]).alias("confidence")
    )
    frame.write_parquet(part)
    report = build_report(out)
    validate_report(report)
    counts = {q["id"]: q["confidence_not_finite"] for q in report["questions"]}
    assert counts["kind"] > 0 and counts["amount"] > 0 and counts["eligible"] == 0
    expected = _reference_report(out)
    got = {key: report[key] for key in expected}
    got_means, expected_means = _means(got), _means(expected)
    assert got == expected
    for key, mean in expected_means.items():  # sums of floats: to the last bits
        assert (mean is None) == (got_means[key] is None), key
        assert mean is None or math.isclose(mean, got_means[key], rel_tol=1e-12), key


def test_page_labels_numbers_as_written_and_escapes_what_the_job_wrote(tmp_path: Path) -> None:
    assert [number_label(v, s) for v, s in ((12140.0, 1214.0), (-2.0, 0.4), (0.25, 0.05))] == [
        "12,140", "-2.0", "0.25"
    ]  # fmt: skip
    out = _write_output(tmp_path / "out", [37, 0, 12, 61], seed=2)
    report = build_report(out)
    never = next(q for q in report["questions"] if q["id"] == "never")
    assert never["answered"] == 0 and never["nulls"] > 0 and never["answered_confidence"] is None
    assert never["confidence"]["mean"] is not None  # the null answers have confidences
    report["failures"][0]["error"] = "<img src=x onerror=alert(1)>"
    page = render_html(report, sample_documents(out, report))
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    chart = page[page.index("<h3>never ") :]
    chart = chart[: chart.index("</div>")]
    held = f", {never['withheld']} withheld by absent_below" if never["withheld"] else ""
    lost = f", {never['failed']} failed (no answer)" if never["failed"] else ""
    assert "no answers" in chart and f"0 answered, {never['nulls']} null{lost}{held}</p>" in chart
    assert "mean confidence" not in chart
    amount = page[page.index("<h3>amount ") :]
    labels = re.findall(r'text-anchor="middle">([^<]*)</text>', amount[: amount.index("</svg>")])
    assert labels and not any("e+" in label for label in labels)
    assert any(re.fullmatch(r"\d{1,2},\d{3}", label) for label in labels)


def test_parts_written_before_the_token_and_kind_columns(tmp_path: Path) -> None:
    out = _write_output(tmp_path / "out", [30, 12, 20], seed=3)
    first = out / "answers" / "part-00000.parquet"
    old = pl.read_parquet(first)
    old.drop("value_tokens", "filler_tokens", "error_kind").write_parquet(first)
    report = build_report(out)
    validate_report(report)
    throughput = report["throughput"]
    assert throughput["answer_tokens"] is None and throughput["filler_tokens"] is None
    assert throughput["answer_tokens_per_forward_pass"] is None
    parts = sorted((out / "answers").glob("*.parquet"))
    assert throughput["forward_passes"] == sum(pl.read_parquet(p)["nfe"].sum() for p in parts)
    # Error rows of the old part have no kind; neither have those of the newer parts whose kind
    # is null.
    later = pl.read_parquet(parts[1:])
    unclassified = (
        old.filter(pl.col("status") == "error").height
        + later.filter((pl.col("status") == "error") & pl.col("error_kind").is_null()).height
    )
    assert report["counts"]["failed_by_reason"]["unknown"] == unclassified > 0


def test_sampled_documents_stream_and_stay_seeded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in (("SAMPLE_FAILURES", 15), ("SAMPLE_LOW", 6), ("SAMPLE_RANDOM", 30)):
        monkeypatch.setattr(report_module, name, value)
    out = _write_output(tmp_path / "out", [37, 0, 12, 61, 5, 140, 3, 44], seed=6)
    frame = pl.read_parquet(sorted((out / "answers").glob("part-*.parquet")))
    ok = frame.filter(pl.col("status") == "ok").with_columns(
        pl.min_horizontal(pl.col("confidence").struct.unnest()).alias("_min")
    )
    rows = sample_documents(out, {}, seed=3)
    ids = [row["doc_id"] for row in rows]
    failures = frame.filter(pl.col("status") == "error")["doc_id"].head(15).to_list()
    low = ok.sort("_min", maintain_order=True)["doc_id"].head(6).to_list()
    assert ids[:15] == failures and ids[15:21] == low
    sample = ids[21:]
    assert len(sample) == 30 and len(set(sample)) == 30
    assert set(sample) <= set(ok["doc_id"].to_list()) - set(low)
    assert sample_documents(out, {}, seed=3) == rows
    assert [r["doc_id"] for r in sample_documents(out, {}, seed=4)][21:] != sample
    by_id = {row["doc_id"]: row for row in frame.iter_rows(named=True)}
    for row in rows:
        source = by_id[row["doc_id"]]
        assert row["status"] == source["status"] and row["nfe"] == source["nfe"]
        assert row["answers"] == (source["answers_json"] and json.loads(source["answers_json"]))


@pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER),
    reason="needs Debian's chromium and chromium-driver (.ci/run installs them)",
)
def test_page_in_headless_chromium(job: Path) -> None:
    from selenium.webdriver.common.by import By

    driver = chromium_driver()
    try:
        driver.get((job / "report.html").resolve().as_uri())
        for section in ("summary", "failures", "questions", "confidence", "documents"):
            assert driver.find_element(By.ID, section).is_displayed()
        assert not driver.find_elements(By.ID, "review")  # no calibration, no review_below
        charts = driver.find_elements(By.CSS_SELECTOR, "svg.chart-svg")
        assert len(charts) == len(QUESTIONS) + 1  # one per question, one for confidence
        assert all(c.find_elements(By.TAG_NAME, "rect") for c in charts)
        rows = driver.find_elements(By.CSS_SELECTOR, "#doc-body tr")
        assert len(rows) == 31
        # A document whose (random) city answer is words, not the amount's digits: where two
        # answers are the same text, the earlier question's mark is the one shown.
        answered = pl.read_parquet(job / "answers" / "*.parquet").filter(pl.col("status") == "ok")
        doc_id, answers = next(
            (row["doc_id"], json.loads(row["answers_json"]))
            for row in answered.sort("doc_id").iter_rows(named=True)
            if not any(c.isdigit() for c in json.loads(row["answers_json"])["city"])
        )
        search = driver.find_element(By.ID, "search")
        search.send_keys(doc_id)
        rows = driver.find_elements(By.CSS_SELECTOR, "#doc-body tr")
        assert [r.find_element(By.TAG_NAME, "td").text for r in rows] == [doc_id]
        rows[0].click()
        detail = driver.find_element(By.ID, "detail").text
        assert f"Document {doc_id}" in detail and "confidence" in detail
        # The city answer is marked where it occurs in the document text, and every mark is an
        # answer of this document: a string as written (up to case and spaces), a number as
        # the document writes it.
        marks = driver.find_elements(By.CSS_SELECTOR, "#detail pre mark")
        for m in marks:
            answer = answers[m.get_attribute("data-question")]
            if isinstance(answer, str):
                assert "".join(m.text.split()).lower() == "".join(answer.split()).lower()
            else:
                assert float(m.text.replace(",", "")) == answer, (m.text, answer)
        city = [m.text for m in marks if m.get_attribute("data-question") == "city"]
        assert city
        # The amount is marked where the document writes it ("$1,259.00" for 1259).
        written = f"{1000 + 37 * int(doc_id.split('-')[1]):,}.00"
        amount = [m.text for m in marks if m.get_attribute("data-question") == "amount"]
        assert f"{answers['amount']:,}.00" == written and amount == [written], (answers, amount)
        # Marks ignore accents, as an uncased vocabulary does ("zurich" for "Zürich"), and keep
        # the original text; a number is marked however the text writes it.
        text = "Filed by José Müller in Zürich: $12,500.00 via the São Paulo office, not Zurich."
        marked = driver.execute_script(
            "return window.decideMarks(arguments[0], arguments[1]);",
            text,
            {"city": "zurich", "code": "sao  paulo", "amount": 12500, "kind": "home"},
        )
        assert marked == [
            ["city", "Zürich"], ["amount", "12,500.00"], ["code", "São Paulo"], ["city", "Zurich"]
        ]  # fmt: skip
        search.clear()
        search.send_keys("document is empty")
        rows = driver.find_elements(By.CSS_SELECTOR, "#doc-body tr")
        assert [r.find_element(By.TAG_NAME, "td").text for r in rows] == ["empty-1"]
        driver.find_elements(By.CSS_SELECTOR, "#doc-table th")[0].click()
        search.clear()
        search.send_keys(" ")  # any change re-renders; sorting must not throw either
        errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
        assert errors == []
        search.clear()
        driver.find_element(By.CSS_SELECTOR, "#doc-body tr").click()
        # The screenshot in docs/ is refreshed on request only: a test run leaves the tree alone.
        if os.environ.get("DECIDE_UPDATE_SCREENSHOT") and DOCS.is_dir():
            driver.save_screenshot(str(DOCS / "report-screenshot.png"))
    finally:
        driver.quit()


def test_documents_with_markup_leave_the_page_working(tiny_checkpoint, tmp_path) -> None:
    """The sample JSON embeds document texts in a script element: "<!--" then "<script" in a
    text kept the element open past its end tag (the page showed no documents), "</script>"
    would end it. Both are shown as text, every row listed."""
    from selenium.webdriver.common.by import By

    texts = {
        "comment": "Invoice <!-- <script> from Acme, total $7",
        "ends": "Note </script><script>document.title='x'</script> total $9",
        "plain": "A roof claim in Lyon",
    }
    pl.DataFrame({"doc_id": list(texts), "document": list(texts.values())}).write_parquet(
        tmp_path / "in.parquet"
    )
    model = tiny_checkpoint("bert", vocab="small", init_std=0.2)
    run_job(parse_spec({"questions": QUESTIONS[:2]}), [tmp_path / "in.parquet"],
            tmp_path / "out", model=model, progress=False)  # fmt: skip
    driver = chromium_driver()
    try:
        driver.get((tmp_path / "out" / "report.html").resolve().as_uri())
        rows = driver.find_elements(By.CSS_SELECTOR, "#doc-body tr")
        assert sorted(r.find_element(By.TAG_NAME, "td").text for r in rows) == sorted(texts)
        for doc_id, text in texts.items():
            search = driver.find_element(By.ID, "search")
            search.clear()
            search.send_keys(doc_id)
            driver.find_element(By.CSS_SELECTOR, "#doc-body tr").click()
            assert text in driver.find_element(By.ID, "detail").text
        assert driver.title != "x"
    finally:
        driver.quit()


def test_evidence_pieces_merge_windows_and_count_as_the_script_does() -> None:
    """A windowed document's page data: the head and each evidence window (long ones cut
    around their span), merged in order, offsets in UTF-16 units (an emoji counts two)."""
    text = "😀 head. " + "x" * 5000 + " The code is ZX417 here. " + "y" * 9000
    span = text.index("ZX417")
    evidence = {
        "code": {"window": 3, "start": span - 30, "end": span + 60,
                 "span_start": span, "span_end": span + 5},
        "kind": {"window": 0, "start": 0, "end": 40, "span_start": None, "span_end": None},
        "wide": {"window": 4, "start": 6000, "end": 14000, "span_start": None, "span_end": None},
        "none": None,
    }  # fmt: skip
    pieces, marks = report_module._evidence_pieces(text, evidence)
    # In order, disjoint, each piece the document's own text at its (UTF-16) offset.
    units = [p[0] for p in pieces]
    assert units == sorted(units)
    for start, piece in pieces:
        char = start - 1 if start else 0  # the emoji before every other piece: one unit more
        assert text[char : char + len(piece)] == piece
    assert pieces[0][0] == 0 and pieces[0][1] == text[: report_module.TEXT_LIMIT]
    # The page shows the window's offsets as the answers' `evidence` gives them (characters).
    assert marks["code"] == {"window": [span - 29, span + 61], "span": [span + 1, span + 6],
                             "index": 3, "characters": [span - 30, span + 60]}  # fmt: skip
    assert marks["kind"]["span"] is None and "none" not in marks
    # The 8,000-character window is embedded as 4,000 characters from its start.
    wide = next(p for p in pieces if p[0] - 1 <= 6000 < p[0] - 1 + len(p[1]))
    assert wide[0] - 1 + len(wide[1]) == 6000 + report_module.EVIDENCE_LIMIT
    assert report_module._evidence_pieces(text, None) == (None, None)
    assert report_module._evidence_pieces(None, evidence) == (None, None)


@pytest.fixture(scope="module")
def windowed_job(tiny_checkpoint, tmp_path_factory) -> tuple[Path, str]:
    """A job whose second document is too long for the model: read in windows, evidence kept."""
    where = tmp_path_factory.mktemp("report-windows")
    filler = " ".join(f"Sentence {i} notes water damage in Denver." for i in range(300))
    middle = len(filler) // 2
    long = f"{filler[:middle]} The clause code is ZX417 for this claim. {filler[middle:]}"
    pl.DataFrame(
        {"doc_id": ["short", "long", "coded"],
         "document": ["A roof claim.", long, "A roof claim, clause code zx905 (Denver)."]}
    ).write_parquet(where / "in.parquet")  # fmt: skip
    questions = [
        {"id": "kind", "text": "What kind of claim is it?",
         "schema": {"enum": ["auto", "home", "none"]}, "absent": "none"},
        {"id": "code", "text": "Which clause code applies?", "extract": True,
         "schema": {"type": "string", "pattern": "^[Zz][Xx][0-9]{3}$"}},
    ]  # fmt: skip
    run_job(
        parse_spec({"questions": questions}),
        [where / "in.parquet"],
        where / "out",
        model=tiny_checkpoint("bert", vocab="small", init_std=0.2),
        progress=False,
    )
    return where / "out", long


def test_sampled_windowed_documents_carry_their_evidence(windowed_job) -> None:
    out, long = windowed_job
    rows = {r["doc_id"]: r for r in sample_documents(out, build_report(out))}
    assert rows["short"]["pieces"] is None and rows["short"]["evidence"] is None
    row = rows["long"]
    assert row["status"] == "ok" and set(row["evidence"]) == {"kind", "code"}
    code = row["evidence"]["code"]
    assert long[code["span"][0] : code["span"][1]] == "ZX417"  # ASCII: units are characters
    assert any(s <= code["window"][0] and code["window"][1] <= s + len(t) for s, t in row["pieces"])
    # Read whole: the extract answer's span is its evidence, the other answer has none.
    coded = rows["coded"]
    start = coded["text"].index("zx905")
    assert coded["evidence"] == {"code": {"window": [start, start + 5], "span": [start, start + 5],
                                          "index": None, "characters": [start, start + 5]}}  # fmt: skip
    assert coded["pieces"] == [[0, coded["text"]]]


@pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER),
    reason="needs Debian's chromium and chromium-driver (.ci/run installs them)",
)
def test_clicking_an_answer_highlights_its_evidence_in_chromium(windowed_job) -> None:
    from selenium.webdriver.common.by import By

    out, long = windowed_job
    answers = pl.read_parquet(out / "answers" / "*.parquet").filter(pl.col("doc_id") == "long")
    evidence = answers["evidence"][0]
    driver = chromium_driver()
    try:
        driver.get((out / "report.html").resolve().as_uri())
        driver.find_element(By.ID, "search").send_keys("long")
        rows = driver.find_elements(By.CSS_SELECTOR, "#doc-body tr")
        assert [r.find_element(By.TAG_NAME, "td").text for r in rows] == ["long"]
        rows[0].click()
        assert not driver.find_elements(By.CSS_SELECTOR, "#detail pre .evidence")
        for qid in ("code", "kind"):
            link = driver.find_element(By.CSS_SELECTOR, f'#detail dd[data-question="{qid}"]')
            link.click()
            window = driver.find_elements(By.CSS_SELECTOR, "#detail pre .evidence, "
                                          "#detail pre mark.evidence-span")  # fmt: skip
            shown = "".join(e.get_attribute("textContent") for e in window)
            assert shown == long[evidence[qid]["start"] : evidence[qid]["end"]]
            assert {e.get_attribute("data-question") for e in window} == {qid}
            spans = driver.find_elements(By.CSS_SELECTOR, "#detail pre mark.evidence-span")
            if qid == "code":
                assert [s.get_attribute("textContent") for s in spans] == ["ZX417"]
                assert "window" in link.text and "characters" in link.text
            else:
                assert spans == []
        # A document read whole: its extract answer marks the span it was copied from.
        search = driver.find_element(By.ID, "search")
        search.clear()
        search.send_keys("coded")
        driver.find_element(By.CSS_SELECTOR, "#doc-body tr").click()
        assert not driver.find_elements(By.CSS_SELECTOR, '#detail dd[data-question="kind"]')
        link = driver.find_element(By.CSS_SELECTOR, '#detail dd[data-question="code"]')
        assert "characters" in link.text and "window" not in link.text
        link.click()
        marked = driver.find_elements(By.CSS_SELECTOR, "#detail pre .evidence, "
                                      "#detail pre mark.evidence-span")  # fmt: skip
        assert [m.get_attribute("textContent") for m in marked] == ["zx905"]
        assert marked[0].tag_name == "mark"
        errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
        assert errors == []
    finally:
        driver.quit()


def test_object_and_array_answers_are_shown_as_the_decision_wrote_them(tmp_path: Path) -> None:
    """An object answer that left out an optional key was shown with the key as null (the
    struct column has every field): another valid value than the one given."""
    person = {"type": "object", "properties": {"first": {"type": "string"},
              "age": {"type": ["integer", "null"]}}, "required": ["first"],
              "additionalProperties": False}  # fmt: skip
    pets = {"type": "array", "items": person}
    fields = answer_fields({"person": [person], "pets": [pets]})
    assert fields["person"].dtype == pl.Struct({"first": pl.String, "age": pl.Int64})
    given = [({"first": ""}, [{"first": "rex"}]), ({"first": "a", "age": None}, [])]
    frame = pl.DataFrame(
        [{"status": "ok",
          "answers": {"person": fields["person"].cell(p), "pets": fields["pets"].cell(q)},
          "answers_json": json.dumps({"person": p, "pets": q}, separators=(",", ":"))}
         for p, q in given],
        schema={"status": pl.String, "answers": answers_dtype(fields), "answers_json": pl.String},
        orient="row",
    )  # fmt: skip
    frame.write_parquet(tmp_path / "part-00000.parquet")
    parts = figures_module.Parts([tmp_path / "part-00000.parquet"])
    shown = parts.ok.select(parts.answer("person"), parts.answer("pets")).collect()
    assert shown["person"].to_list() == ['{"first":""}', '{"first":"a","age":null}']
    assert shown["pets"].to_list() == ['[{"first":"rex"}]', "[]"]


def test_per_row_questions_are_shown_with_their_wording(tiny_checkpoint, tmp_path) -> None:
    """Questions only the rows ask had an empty text in report.json and on the page."""
    docs = write_docs(tmp_path / "in.parquet", 4, seed=3)
    yes_no = json.dumps({"type": "boolean"})
    rows = [
        [{"id": "late", "text": "Was it late?", "schema": yes_no}],
        [{"id": "late", "text": "Was it late?", "schema": yes_no}],
        [{"id": "late", "text": "Did it arrive late?", "schema": yes_no},
         {"id": "paid", "text": "Was it paid?", "schema": yes_no}],
        [{"id": "paid", "text": "Was it paid?", "schema": yes_no}],
    ]  # fmt: skip
    pl.read_parquet(docs).with_columns(pl.Series("questions", rows)).write_parquet(docs)
    model = tiny_checkpoint("bert", vocab="small", init_std=0.2)
    run_job(parse_spec({"questions": []}), [docs], tmp_path / "out", model=model, progress=False)
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    texts = {q["id"]: q["text"] for q in report["questions"]}
    assert texts == {"late": "Was it late? (and 1 other wording)", "paid": "Was it paid?"}
    assert "Was it late? (and 1 other wording)" in (tmp_path / "out" / "report.html").read_text()
