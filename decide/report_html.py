"""`report.html`: one self-contained page (inline CSS, JS and SVG; no network) for reviewers.

Contract. `render_html(report, rows)` renders `templates/report.html.j2` (jinja2, autoescaped:
every value that comes from the job is escaped) with `templates/report.css` and
`templates/report.js` inlined, so the page needs nothing but itself. Sections, in order: a
summary, the review queue and calibration (when the job has them; see `report_review_html`), the
failures (first, since they need action), per-question answer distributions as SVG bar charts,
the confidence histogram, the least confident answers, and a searchable, sortable table of the
sampled documents (`rows`, embedded as JSON); clicking a row shows the document text next to its
answers, low-confidence answers highlighted and string and number answers marked where they occur
in the text. Chart geometry is computed here and drawn by the template's macros; the script only
filters, sorts and shows rows.
"""

from __future__ import annotations

import json
import math
from functools import cache
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from .report_review_html import review_context

LOW_CONFIDENCE = 0.5
WIDTH = 520


@cache
def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("decide", "templates"),
        autoescape=select_autoescape(["html", "html.j2"], default=True),
        undefined=StrictUndefined,
        keep_trailing_newline=True,
    )
    env.filters["pct"] = percent
    return env


def _static(name: str) -> Markup:
    """A file of the package's own (CSS, script): trusted, inlined as it is."""
    loader = _environment().loader
    assert loader is not None
    source, _, _ = loader.get_source(_environment(), name)
    return Markup(source)


def percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f} %"


def fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def number_label(value: float, step: float) -> str:
    """A bin edge as people write numbers: thousands separated, as many decimals as the bin
    width needs, never scientific notation (12,140 and 0.25, not 1.214e+04)."""
    decimals = 0 if step >= 1 else min(12, -math.floor(math.log10(step)))
    return f"{value:,.{decimals}f}"


def bar_chart(labels: list[str], counts: list[int], title: str) -> dict[str, Any]:
    """Horizontal bars, one per label, with the count at the end."""
    top = max(counts) if counts and max(counts) > 0 else 1
    label_w = 170
    bars = [
        {"y": 4 + 22 * i, "w": (WIDTH - label_w - 60) * count / top, "label": label,
         "short": label if len(label) <= 26 else label[:25] + "…", "count": count}
        for i, (label, count) in enumerate(zip(labels, counts, strict=True))
    ]  # fmt: skip
    return {"title": title, "width": WIDTH, "height": 22 * len(labels) + 8, "label_w": label_w,
            "bars": bars}  # fmt: skip


def column_chart(labels: list[str], counts: list[int], title: str) -> dict[str, Any]:
    """Vertical columns (histograms), labels under every other column (all when ≤ 10)."""
    base = 140
    top = max(counts) if counts and max(counts) > 0 else 1
    n = max(len(counts), 1)
    step = (WIDTH - 20) / n
    columns = [
        {"x": 10 + i * step, "h": (base - 20) * count / top, "label": label, "count": count,
         "labelled": i % 2 == 0 or n <= 10}
        for i, (label, count) in enumerate(zip(labels, counts, strict=True))
    ]  # fmt: skip
    return {"title": title, "width": WIDTH, "height": 170, "base": base, "step": step,
            "columns": columns}  # fmt: skip


def _distribution_chart(question: dict[str, Any]) -> dict[str, Any] | None:
    dist = question["distribution"]
    title = f"answers to {question['id']}"
    if dist["type"] == "histogram":
        if not dist["bins"]:
            return None
        step = dist["bins"][0]["high"] - dist["bins"][0]["low"]
        labels = [number_label(b["low"], step) for b in dist["bins"]]
        return column_chart(labels, [b["count"] for b in dist["bins"]], title)
    labels = [v["value"] if isinstance(v["value"], str) else json.dumps(v["value"])
              for v in dist["values"]]  # fmt: skip
    counts = [v["count"] for v in dist["values"]]
    if dist["other"]:
        labels.append(f"({dist['distinct'] - len(dist['values'])} other values)")
        counts.append(dist["other"])
    return bar_chart(labels, counts, title) if labels else None


def _question_line(question: dict[str, Any]) -> str:
    """How many rows answered, how many answered null, and the mean confidence of the answers
    given (a question answered null on every row has none)."""
    line = f"{question['answered']:,} answered"
    if question["nulls"]:
        line += f", {question['nulls']:,} null"
    if question.get("failed"):
        line += f", {question['failed']:,} failed (no answer)"
    if question.get("withheld"):
        line += f", {question['withheld']:,} withheld by absent_below"
    if question.get("unread"):
        line += (f", {question['unread']:,} given absent unread (no window of a long document "
                 "was likely to hold it)")  # fmt: skip
    if question["answered"]:
        line += f"; mean confidence {fmt(question['answered_confidence'], 3)}"
    return line


def _confidence_meaning(report: dict[str, Any]) -> str:
    if (report.get("calibration") or {}).get("calibrated"):
        return "Calibrated probability that each answer is right (see Calibration above)."
    return (
        "Product of the probabilities each answer was committed with: model-derived, not "
        "calibrated."
    )


def render_html(report: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    c, t = report["counts"], report["throughput"]
    cards = [
        ("documents", fmt(c["total"])),
        ("ok", fmt(c["ok"])),
        ("failed", fmt(c["failed"])),
        ("documents/s", fmt(t["documents_per_second"])),
        ("forward passes/doc", fmt(t["forward_passes_per_document"])),
        ("answer tokens/forward pass", fmt(t["answer_tokens_per_forward_pass"])),
        ("mean confidence", fmt(report["confidence"]["mean"], 3)),
    ]
    reasons = sorted(c["failed_by_reason"].items(), key=lambda kv: -kv[1])
    questions = [{"id": q["id"], "text": q["text"], "chart": _distribution_chart(q),
                  "line": _question_line(q)} for q in report["questions"]]  # fmt: skip
    question_ids = [q["id"] for q in report["questions"]]
    sample = {"rows": rows, "questions": question_ids, "low": LOW_CONFIDENCE}
    # Every "<" as its JSON escape: neither "</script" nor "<!--" (which with a "<script" after
    # it keeps the element open past its end tag) can appear in the element's text.
    payload = json.dumps(sample, ensure_ascii=False, default=str).replace("<", "\\u003c")
    confidence_labels = [f"{i / 10:.1f}" for i in range(10)]
    context = {
        "css": _static("report.css"),
        "script": _static("report.js"),
        "sample": Markup(payload),  # JSON with "<" escaped: it cannot end the script element
        "job": report["job"],
        "generated": report["generated"],
        "cards": cards,
        "filler": None if t["filler_tokens"] is None else fmt(t["filler_tokens"]),
        "review": review_context(report),
        "failed": c["failed"],
        "reasons": [(reason.replace("_", " "), n) for reason, n in reasons],
        "failures": report["failures"],
        "questions": questions,
        "confidence_meaning": _confidence_meaning(report),
        "low": LOW_CONFIDENCE,
        "confidence_chart": column_chart(
            confidence_labels, report["confidence"]["counts"], "confidence of all answers"
        ),
        "lowest": [
            {**r, "answer": json.dumps(r["answer"], ensure_ascii=False)}
            for r in report["lowest_confidence"]
        ],
        "heads": ["doc_id", "status", *question_ids, "min conf."],
    }
    return _environment().get_template("report.html.j2").render(context, r=context["review"])
