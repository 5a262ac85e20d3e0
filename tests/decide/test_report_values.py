"""Reports of values at the edges: confidences that are NaN or infinite, integers beyond what
JavaScript holds exactly, null and failed answers, evidence in documents with characters beyond
the basic plane, numbers near the largest double, long and wide texts; and answer parts that
cannot be read as one table. Each is checked in report.json and, where the page shows it, in real
headless Chromium."""

from __future__ import annotations

import itertools
import json
import math
import re
import shutil
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner
from helpers.browser import CHROMEDRIVER, CHROMIUM, chromium_driver

from decide.cli import main
from decide.jobs.columns import answer_fields, answers_dtype
from decide.jobs.evidence import evidence_dtype
from decide.report import ReportError, build_report, validate_report, write_report

browser = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER),
    reason="needs Debian's chromium and chromium-driver (.ci/run installs them)",
)


def _output(
    out: Path, questions: list[dict[str, Any]], rows: list[dict[str, Any]], seconds: float = 1.0
) -> Path:
    """An output directory of one part typed as the runner types it. Each row: `doc_id`,
    `answers` (the decision object; None for an error row), `confidence`, and optionally
    `errors` (per failed question, why), `evidence` (per question), `text` (the document, written
    to the input file the manifest names)."""
    fields = answer_fields({q["id"]: [q["schema"]] for q in questions})
    ids = list(fields)
    doc_type = pl.Int64 if all(isinstance(r["doc_id"], int) for r in rows) else pl.String
    schema = {
        "doc_id": doc_type, "status": pl.String, "error": pl.String,
        "answers": answers_dtype(fields), "answers_json": pl.String,
        "confidence": pl.Struct({qid: pl.Float64 for qid in ids}), "nfe": pl.Int32,
        "value_tokens": pl.Int32, "filler_tokens": pl.Int32, "error_kind": pl.String,
        "partial": pl.Boolean, "errors": pl.Struct({qid: pl.String for qid in ids}),
        "windows": pl.Int32, "evidence": evidence_dtype(ids),
    }  # fmt: skip
    written = []
    for row in rows:
        answers = row["answers"]
        ok = answers is not None
        errors = row.get("errors")
        written.append({
            "doc_id": row["doc_id"], "status": "ok" if ok else "error",
            "error": None if ok else "document is empty",
            "error_kind": None if ok else "empty_document",
            "answers": {qid: f.cell(answers.get(qid)) for qid, f in fields.items()} if ok
            else None,
            "answers_json": json.dumps(answers, separators=(",", ":")) if ok else None,
            "confidence": {qid: row["confidence"].get(qid) for qid in ids} if ok else None,
            "nfe": 2, "value_tokens": 3, "filler_tokens": 1,
            "partial": bool(errors) if ok else None,
            "errors": {qid: errors.get(qid) for qid in ids} if errors else None,
            "windows": 0,
            "evidence": {qid: (row.get("evidence") or {}).get(qid) for qid in ids}
            if row.get("evidence") else None,
        })  # fmt: skip
    (out / "answers").mkdir(parents=True)
    frame = pl.DataFrame(written, schema=schema, orient="row")
    frame.write_parquet(out / "answers" / "part-00000.parquet")
    docs = out.parent / f"{out.name}-in.parquet"
    texts = [(r["doc_id"], r["text"]) for r in rows if "text" in r]
    pl.DataFrame(texts, schema={"doc_id": doc_type, "document": pl.String},
                 orient="row").write_parquet(docs)  # fmt: skip
    manifest = {
        "status": "complete",
        "fingerprints": {"model": "0123456789abcdef", "spec": "fedcba9876543210"},
        "model": "bundled", "model_type": "bert", "inputs": [str(docs)],
        "spec": {"questions": questions}, "counts": {"total": len(rows), "invalid_rows": 0},
        "seconds": seconds,
    }  # fmt: skip
    (out / "manifest.json").write_text(json.dumps(manifest))
    return out


def _strict(path: Path) -> Any:
    """JSON as every parser reads it: no NaN, no Infinity."""

    def refuse(constant: str) -> None:
        raise ValueError(f"{path.name} holds {constant}, which is not JSON")

    return json.loads(path.read_text(), parse_constant=refuse)


QUESTIONS = [
    {"id": "account", "text": "Account number?", "schema": {"type": "integer"}},
    {"id": "city", "text": "Which city?", "schema": {"type": ["string", "null"]}},
    {"id": "code", "text": "Which clause code?", "extract": True,
     "schema": {"type": "string", "pattern": "^ZX[0-9]{3}$"}},
    {"id": "note", "text": "Any note?", "schema": {"type": "string"}},
]  # fmt: skip
BIG_ID, BIG_ACCOUNT = 2**53 + 1, 12345678901234567  # JSON.parse reads ...992 and ...568
TEXT = "😀😀 Filed in Reno. The clause code is ZX417."
SPAN = TEXT.index("ZX417")  # characters; the script counts two UTF-16 units per emoji
NO_SPAN = "question 'code' (extract): no span of the document is a value of this question's schema"


@pytest.fixture
def edges(tmp_path: Path) -> Path:
    """A NaN and an infinite confidence, an integer id and answer beyond 2^53, a null answer, an
    empty string answer, a partial row, an error row, evidence after two emoji."""
    whole = {"window": None, "start": 0, "end": len(TEXT), "span_start": SPAN,
             "span_end": SPAN + 5}  # fmt: skip
    rows = [
        {"doc_id": BIG_ID, "text": TEXT,
         "answers": {"account": BIG_ACCOUNT, "city": None, "code": "ZX417", "note": ""},
         "confidence": {"account": 0.9, "city": math.nan, "code": 0.8, "note": math.inf},
         "evidence": {"code": whole}},
        {"doc_id": 2, "text": "A claim from Reno.",
         "answers": {"account": 5, "city": "Reno", "note": "late"},
         "confidence": {"account": 0.3, "city": 0.6, "note": -math.inf},
         "errors": {"code": NO_SPAN}},
        {"doc_id": 3, "text": "", "answers": None, "confidence": {}},
    ]  # fmt: skip
    return _output(tmp_path / "out", QUESTIONS, rows)


def test_confidences_that_are_not_numbers_are_counted_apart(edges: Path) -> None:
    """A NaN confidence failed the report (polars cannot bin NaN), and NaN or infinity would
    have been written into report.json, which JSON parsers refuse."""
    report = write_report(edges)
    validate_report(report)
    saved = _strict(edges / "report.json")
    questions = {q["id"]: q for q in saved["questions"]}
    assert {qid: q["confidence_not_finite"] for qid, q in questions.items()} == {
        "account": 0, "city": 1, "code": 0, "note": 2
    }  # fmt: skip
    assert questions["note"]["confidence"] == {"counts": [0] * 10, "mean": None}
    assert questions["note"]["answered"] == 2 and questions["note"]["answered_confidence"] is None
    assert sum(saved["confidence"]["counts"]) == 4  # account twice, city (0.6), code
    assert [(r["question"], r["confidence"]) for r in saved["lowest_confidence"]] == [
        ("account", 0.3), ("city", 0.6), ("code", 0.8), ("account", 0.9)
    ]  # fmt: skip
    page = (edges / "report.html").read_text()
    assert "2 with a confidence that is not a number" in page
    broken = json.loads(json.dumps(saved))
    broken["confidence"]["mean"] = math.nan  # JSON Schema's bounds let NaN through
    with pytest.raises(ReportError, match="not finite at /confidence/mean"):
        validate_report(broken)


@browser
def test_the_page_shows_answers_as_report_json_writes_them(edges: Path) -> None:
    """The page showed a doc id and an answer beyond 2^53 rounded (and search did not find the
    id), a null answer as an empty cell, nothing of a failed answer, no documents at all when a
    confidence was NaN (the embedded JSON did not parse), and evidence offsets counted in UTF-16
    units where the answers count characters."""
    from selenium.webdriver.common.by import By

    write_report(edges)
    driver = chromium_driver()
    try:
        driver.get((edges / "report.html").resolve().as_uri())

        def rows() -> dict[str, list[Any]]:
            found = {}
            for tr in driver.find_elements(By.CSS_SELECTOR, "#doc-body tr"):
                cells = tr.find_elements(By.TAG_NAME, "td")
                found[cells[0].text] = cells
            return found

        table = rows()
        assert set(table) == {str(BIG_ID), "2", "3"}
        big = table[str(BIG_ID)]  # doc_id, status, account, city, code, note, min conf.
        assert [c.text for c in big[2:6]] == [str(BIG_ACCOUNT), "null", "ZX417", ""]
        assert "null" in big[3].get_attribute("class").split()
        assert "low" in big[3].get_attribute("class").split()  # NaN: a person should look
        failed = table["2"][4]
        assert failed.text == "failed" and failed.get_attribute("title") == NO_SPAN
        search = driver.find_element(By.ID, "search")
        search.send_keys(str(BIG_ID))
        assert list(rows()) == [str(BIG_ID)]
        rows()[str(BIG_ID)][0].click()
        detail = driver.find_element(By.CSS_SELECTOR, "#detail dl").text
        assert f"{BIG_ACCOUNT} (confidence 0.900)" in detail  # (selenium collapses spaces)
        assert "null (confidence NaN)" in detail and "(confidence Infinity)" in detail
        link = driver.find_element(By.CSS_SELECTOR, '#detail dd[data-question="code"]')
        assert f"characters {SPAN}–{SPAN + 5}" in link.text  # as the answers' evidence says
        link.click()
        marked = driver.find_elements(By.CSS_SELECTOR, "#detail pre mark.evidence-span")
        assert [m.get_attribute("textContent") for m in marked] == ["ZX417"]
        search.clear()
        search.send_keys("reno")
        rows()["2"][0].click()
        code = driver.find_element(By.XPATH, '//*[@id="detail"]//dt[text()="code"]')
        reason = code.find_element(By.XPATH, "following-sibling::dd[1]").text
        assert reason == f"failed: {NO_SPAN}"
        errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
        assert errors == []
    finally:
        driver.quit()


def test_least_confident_answers_are_highlighted_only_below_the_threshold(edges: Path) -> None:
    """Every answer of the least confident table was highlighted, 0.9 as much as 0.3, while the
    page says answers below 0.5 are."""
    write_report(edges)
    page = (edges / "report.html").read_text()
    table = page[page.index("<h3>Least confident answers</h3>") :]
    table = table[: table.index("</table>")]
    row = re.compile(r'<td class="([^"]*)">[^<]*</td><td>([0-9.]+)</td></tr>')
    cells = [(cls, float(conf)) for cls, conf in row.findall(table)]
    assert [conf for _, conf in cells] == [0.3, 0.6, 0.8, 0.9]
    assert [("low" in cls.split()) for cls, _ in cells] == [True, False, False, False]


def test_numbers_beyond_the_largest_double_keep_a_histogram(tmp_path: Path) -> None:
    """Answers from -1.7e308 to 1.5e308 span more than a double holds: the bin width was
    infinite and the report failed (NaN cannot be binned)."""
    values = [1.5e308, -1.7e308, 1e308] + [float(i) for i in range(25)]
    question = {"id": "x", "text": "X?", "schema": {"type": "number"}}
    rows = [{"doc_id": f"d{i}", "answers": {"x": v}, "confidence": {"x": 0.9}}
            for i, v in enumerate(values)]  # fmt: skip
    out = _output(tmp_path / "out", [question], rows)
    write_report(out)
    distribution = _strict(out / "report.json")["questions"][0]["distribution"]
    assert distribution["type"] == "histogram"  # its mean is null if the sum overflowed
    assert [b["count"] for b in distribution["bins"]] == [1, 0, 0, 0, 0, 25, 0, 0, 0, 2]
    assert distribution["bins"][0]["low"] == -1.7e308
    assert distribution["bins"][-1]["high"] == 1.5e308


@browser
def test_long_and_wide_texts_keep_the_page_in_its_width(tmp_path: Path) -> None:
    """A question text with a long URL and long unbroken answers widened the page past the
    window; bar labels of wide characters ran out of the chart's left edge; histogram labels of
    large numbers overlapped one another and ran out of the right edge."""
    wide = ["W" * 30, "😀" * 30, "a" * 300, "日本語" * 10, '<b>x</b> & "q"']
    questions = [
        {"id": "name", "text": "Which name? " + "https://example.com/" + "x" * 300,
         "schema": {"type": "string"}},
        {"id": "amount", "text": "How much?", "schema": {"type": "integer"}},
    ]  # fmt: skip
    rows = [{"doc_id": f"d{i}", "answers": {"name": wide[i % 5], "amount": i * 370_000_000_001},
             "confidence": {"name": 0.9, "amount": 0.3}} for i in range(30)]  # fmt: skip
    out = _output(tmp_path / "out", questions, rows)
    write_report(out)
    driver = chromium_driver()
    try:
        driver.get((out / "report.html").resolve().as_uri())
        width = driver.execute_script("return document.documentElement.scrollWidth")
        assert width <= driver.execute_script("return window.innerWidth")
        boxes = driver.execute_script(
            "return Array.from(document.querySelectorAll('#questions svg')).map(function (s) {"
            "  return Array.from(s.querySelectorAll('text')).map(function (t) {"
            "    var b = t.getBBox(); return [t.textContent, b.x, b.x + b.width, b.y,"
            "                                 s.width.baseVal.value]; }); });"
        )
        names, amounts = boxes
        assert names and all(left >= 0 for _, left, _, _, _ in names), names
        labels = sorted((b for b in amounts if b[3] > 140), key=lambda b: b[1])  # under the axis
        assert len(labels) >= 3
        assert all(left >= 0 and right <= svg for _, left, right, _, svg in labels), labels
        assert all(a[2] < b[1] for a, b in itertools.pairwise(labels)), labels
    finally:
        driver.quit()


def test_parts_that_cannot_be_read_together_are_refused_by_name(edges: Path, tmp_path: Path):
    """A part of another job (other questions) copied into answers/ made `decide report` fail
    with polars' traceback; it is refused (exit 2) naming the column and the part."""
    other = _output(tmp_path / "other", [{"id": "y", "text": "Y?", "schema": {"type": "boolean"}}],
                    [{"doc_id": 7, "answers": {"y": True}, "confidence": {"y": 0.5}}])  # fmt: skip
    shutil.copy(other / "answers" / "part-00000.parquet", edges / "answers" / "part-00001.parquet")
    with pytest.raises(ReportError, match=r"answers of different types: .*part-00001\.parquet"):
        build_report(edges)
    result = CliRunner().invoke(main, ["report", str(edges)])
    assert result.exit_code == 2 and "cannot be read as one table" in result.output


def test_a_slow_job_shows_its_rate(tmp_path: Path) -> None:
    """Three documents in 15 minutes showed "0.00" documents per second."""
    question = {"id": "x", "text": "X?", "schema": {"type": "boolean"}}
    rows = [{"doc_id": f"d{i}", "answers": {"x": True}, "confidence": {"x": 0.9}} for i in range(3)]
    out = _output(tmp_path / "out", [question], rows, seconds=900.0)
    write_report(out)
    page = (out / "report.html").read_text()
    assert '<span class="muted">documents/s</span><b>0.0033</b>' in page
    assert '<span class="muted">forward passes/doc</span><b>2.00</b>' in page


def test_parts_removed_or_copied_in_are_warned_of(
    edges: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A part copied twice into answers/ (its rows counted twice: more ok rows than documents)
    or one removed was reported without a word; the manifest's counts tell."""
    manifest = json.loads((edges / "manifest.json").read_text())
    manifest["counts"].update({"ok": 2, "error": 1})  # as the runner counts the three rows
    (edges / "manifest.json").write_text(json.dumps(manifest))
    with caplog.at_level("WARNING", logger="decide.report"):
        build_report(edges)
    assert not caplog.records
    part = edges / "answers" / "part-00000.parquet"
    shutil.copy(part, edges / "answers" / "part-00001.parquet")
    with caplog.at_level("WARNING", logger="decide.report"):
        report = build_report(edges)
    assert report["counts"]["decided"] == 6
    assert "answer parts hold 6 rows, the manifest counts 3 decided" in caplog.text


@browser
def test_sorting_the_documents_orders_numbers_by_value(tmp_path: Path) -> None:
    """Clicking a column of numbers (or integer doc ids) sorted them as text: 10, 100, 2, 9."""
    from selenium.webdriver.common.by import By

    question = {"id": "n", "text": "How many?", "schema": {"type": ["integer", "null"]}}
    values = {10: 100, 9: 2, 100: 10, 2: 9, 5: None}
    rows = [{"doc_id": d, "answers": {"n": v}, "confidence": {"n": 0.9}} for d, v in values.items()]
    out = _output(tmp_path / "out", [question], rows)
    write_report(out)
    driver = chromium_driver()
    try:
        driver.get((out / "report.html").resolve().as_uri())
        heads = driver.find_elements(By.CSS_SELECTOR, "#doc-table th")

        def column(i: int) -> list[str]:
            return [
                tr.find_elements(By.TAG_NAME, "td")[i].text
                for tr in driver.find_elements(By.CSS_SELECTOR, "#doc-body tr")
            ]

        heads[0].click()
        assert column(0) == ["2", "5", "9", "10", "100"]
        heads[2].click()
        assert column(2) == ["2", "9", "10", "100", "null"]
        heads[2].click()
        assert column(2) == ["null", "100", "10", "9", "2"]
    finally:
        driver.quit()


@browser
def test_question_ids_that_name_object_properties(tmp_path: Path) -> None:
    """A question id such as `constructor` (the id pattern allows it) was found in every row by
    the script (`in` sees an object's inherited properties): a row not asked it listed it as
    answered "undefined", and a row with evidence broke the document view (script error)."""
    from selenium.webdriver.common.by import By

    questions = [
        {"id": "constructor", "text": "Which builder?", "schema": {"type": "string"}},
        {"id": "toString", "text": "Late?", "schema": {"type": "boolean"}},
        {"id": "code", "text": "Code?", "extract": True, "schema": {"type": "string"}},
    ]  # fmt: skip
    text = "Paid late. Code ZX1."
    span = {"window": None, "start": 0, "end": len(text), "span_start": 16, "span_end": 19}
    rows = [
        {"doc_id": "asked", "answers": {"constructor": "Acme", "toString": True, "code": "ZX1"},
         "confidence": {"constructor": 0.9, "toString": 0.9, "code": 0.9}, "text": text},
        {"doc_id": "other", "answers": {"toString": False, "code": "ZX1"},
         "confidence": {"toString": 0.8, "code": 0.9}, "evidence": {"code": span}, "text": text},
    ]  # fmt: skip
    out = _output(tmp_path / "out", questions, rows)
    write_report(out)
    driver = chromium_driver()
    try:
        driver.get((out / "report.html").resolve().as_uri())
        driver.find_element(By.ID, "search").send_keys("other")
        row = driver.find_element(By.CSS_SELECTOR, "#doc-body tr")
        assert [td.text for td in row.find_elements(By.TAG_NAME, "td")][2:5] == ["", "false", "ZX1"]
        row.click()
        terms = [dt.text for dt in driver.find_elements(By.CSS_SELECTOR, "#detail dt")]
        assert terms == ["toString", "code"]
        errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
        assert errors == []
    finally:
        driver.quit()
