"""The report of a calibrated job with a review queue: report.json carries the calibration file's
reliability bins, this job's risk–coverage table and the queue (and validates); the page lists
the review queue first and draws the reliability diagram and the risk–coverage curve, checked in
real headless Chromium where it is installed."""

from __future__ import annotations

import itertools
import json
from html.parser import HTMLParser
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from helpers.browser import CHROMEDRIVER, CHROMIUM, chromium_driver
from helpers.jobdata import QUESTIONS, write_docs

from decide.cli import main
from decide.report import validate_report


@pytest.fixture(scope="module")
def calibrated_job(tiny_checkpoint, tmp_path_factory) -> Path:
    where = tmp_path_factory.mktemp("review-job")
    docs = write_docs(where / "in.parquet", 24, seed=7)
    (where / "spec.json").write_text(json.dumps({"questions": QUESTIONS}))
    model = tiny_checkpoint("bert", vocab="small", init_std=0.2)
    args = ["run", str(docs), "--spec", str(where / "spec.json"), "--model", str(model),
            "--no-progress"]  # fmt: skip
    first = CliRunner().invoke(main, [*args, "-o", str(where / "raw")])
    assert first.exit_code == 0, first.output
    answers = pl.read_parquet(where / "raw" / "answers" / "*.parquet")
    gold = [{"doc_id": d, "gold": a} for d, a in zip(answers["doc_id"], answers["answers_json"],
                                                      strict=True)]  # fmt: skip
    for row in gold[::2]:  # half the `eligible` answers wrong
        value = json.loads(row["gold"])
        row["gold"] = json.dumps({**value, "eligible": not value["eligible"]})
    pl.DataFrame(gold).write_parquet(where / "gold.parquet")
    fitted = CliRunner().invoke(main, ["calibrate", str(where / "raw"), str(where / "gold.parquet"),
                                       "-o", str(where / "calibration.json")])  # fmt: skip
    assert fitted.exit_code == 0, fitted.output
    run = CliRunner().invoke(main, [*args, "-o", str(where / "out"), "--calibration",
                                    str(where / "calibration.json"), "--review-below", "0.9"])  # fmt: skip
    assert run.exit_code == 0, run.output
    assert "review.parquet" in run.output
    return where / "out"


def test_report_json_carries_calibration_and_review(calibrated_job: Path) -> None:
    report = json.loads((calibrated_job / "report.json").read_text())
    validate_report(report)
    info = report["calibration"]
    manifest = json.loads((calibrated_job / "manifest.json").read_text())
    assert info["calibrated"] and info["reliability"] == manifest["calibration"]["reliability"]
    assert info["review"] == manifest["review"]
    queue = pl.read_parquet(calibrated_job / "review.parquet")
    assert info["review"]["rows"] == queue.height > 0
    listed = [r["confidence"] for r in info["review_queue"]]
    assert listed == sorted(listed) and all(c < 0.9 for c in listed)
    curve = info["risk_coverage"]
    assert [r["threshold"] for r in curve] == sorted(r["threshold"] for r in curve)
    assert all(a["coverage"] >= b["coverage"] for a, b in itertools.pairwise(curve))
    broken = json.loads(json.dumps(report))
    broken["calibration"]["review"]["share"] = 2
    with pytest.raises(Exception, match=r"report\.schema\.json"):
        validate_report(broken)


def test_page_lists_the_queue_first_and_draws_both_charts(calibrated_job: Path) -> None:
    page = (calibrated_job / "report.html").read_text()
    found: list[tuple[str, dict]] = []

    class Collect(HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.append((tag, dict(attrs)))

    Collect().feed(page)
    sections = [a["id"] for t, a in found if t == "section"]
    assert sections[:3] == ["summary", "review", "calibration"]
    classes = [a.get("class") for t, a in found if t == "svg"]
    assert "reliability" in classes and "risk-coverage" in classes
    for needle in ("http://", "https://", "<link", "src="):
        assert needle not in page


@pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER),
    reason="needs Debian's chromium and chromium-driver (.ci/run installs them)",
)
def test_review_queue_and_charts_in_headless_chromium(calibrated_job: Path) -> None:
    from selenium.webdriver.common.by import By

    report = json.loads((calibrated_job / "report.json").read_text())
    driver = chromium_driver()
    try:
        driver.get((calibrated_job / "report.html").resolve().as_uri())
        sections = [s.get_attribute("id") for s in driver.find_elements(By.TAG_NAME, "section")]
        assert sections[:3] == ["summary", "review", "calibration"]  # the queue comes first
        queue = driver.find_elements(By.CSS_SELECTOR, "#review-table tr")
        assert len(queue) == 1 + len(report["calibration"]["review_queue"]) > 1
        diagram = driver.find_element(By.CSS_SELECTOR, "svg.reliability")
        assert diagram.is_displayed() and len(diagram.find_elements(By.TAG_NAME, "circle")) >= 2
        curve = driver.find_element(By.CSS_SELECTOR, "svg.risk-coverage")
        assert curve.is_displayed() and curve.find_elements(By.TAG_NAME, "polyline")
        assert driver.find_element(By.ID, "documents").is_displayed()
        errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
        assert errors == []
    finally:
        driver.quit()


# Every row partial: `ref` is an extract question no document has a span for.
PARTIAL_SPEC = {
    "questions": [
        {"id": "eligible", "text": "Is the claim eligible?", "schema": {"type": "boolean"}},
        {"id": "ref", "text": "Which reference?", "extract": True,
         "schema": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{4}$"}},
    ]
}  # fmt: skip


def test_a_partial_row_is_listed_with_its_failed_answer(tiny_checkpoint, tmp_path: Path) -> None:
    """A row sent to review for a failed answer was listed under its least confident *other*
    answer (0.9-something, far above the threshold), and a row with no other answer not at all;
    an uncalibrated run's mean raw confidence was called an expected accuracy."""
    docs = write_docs(tmp_path / "in.parquet", 4, seed=3)
    (tmp_path / "spec.json").write_text(json.dumps(PARTIAL_SPEC))
    model = tiny_checkpoint("bert", vocab="small", init_std=0.2)
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["run", str(docs), "--spec", str(tmp_path / "spec.json"),
                                       "--model", str(model), "--no-progress", "-o", str(out),
                                       "--review-below", "0.001"])  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    validate_report(report)
    queue = report["calibration"]["review_queue"]
    assert [r["doc_id"] for r in queue] == [f"doc-{i:05d}" for i in range(4)]
    for entry in queue:
        assert entry["question"] == "ref" and entry["confidence"] is None
        assert "no span of the document" in entry["error"]
    page = (out / "report.html").read_text()
    review = page[page.index('<section id="review"') : page.index('<section id="calibration"')]
    assert review.count("no answer: question &#39;ref&#39; (extract): no span") == 4
    assert "expected accuracy" not in review and "mean confidence (uncalibrated" in review


def test_a_review_queue_without_rows_says_so() -> None:
    from decide.report_html import _environment
    from decide.report_review_html import review_context

    review = {"below": 0.5, "calibrated": False, "rows": 0, "ok_rows": 3, "share": 0.0,
              "accepted_answers": 6, "expected_accuracy_accepted": 0.93}  # fmt: skip
    curve = [{"threshold": 0.5, "coverage": 1.0, "expected_accuracy": 0.93}]
    context = review_context({"calibration": {
        "calibrated": False, "source": None, "forced": False, "fitted": None, "reliability": [],
        "reliability_before": [], "risk_coverage": curve, "review": review, "review_queue": [],
    }})  # fmt: skip
    page = _environment().get_template("review.html.j2").render(r=context)
    assert "No row was sent to review." in page and "review-table" not in page
    assert "expected accuracy" not in page  # uncalibrated: a mean confidence, labelled so


def test_a_calibration_with_null_measures_still_renders() -> None:
    """calibration.schema.json lets a measure or a bin's bound be null; the page formatted them
    with `:.3f` and the run ended in a TypeError (exit 3) after every row was decided."""
    from decide.report_review_html import review_context

    measures = {"answers": 0, "ece": None, "brier": None, "accuracy": None,
                "mean_confidence": None}  # fmt: skip
    bins = [{"low": None, "high": None, "confidence": 0.8, "accuracy": 0.7, "count": 3}]
    context = review_context({"calibration": {
        "calibrated": True, "source": "c.json", "forced": False,
        "fitted": {"before": measures, "after": measures}, "reliability": bins,
        "reliability_before": bins, "risk_coverage": [], "review": None, "review_queue": [],
    }})  # fmt: skip
    assert context is not None and context["fitted"] == "ECE – → –, Brier – → –"
    assert "confidence –––" in context["reliability"]["series"][0]["points"][0]["title"]
