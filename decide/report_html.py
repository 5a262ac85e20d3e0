"""`report.html`: one self-contained page (inline CSS, JS and SVG; no network) for reviewers.

Contract. `render_html(report, rows)` renders `templates/report.html.j2` (jinja2, autoescaped:
every value that comes from the job is escaped) with `templates/report.css` and
`templates/report.js` inlined, so the page needs nothing but itself. Sections, in order: a
summary, the review queue and calibration (when the job has them; see `report_review_html`), the
failures (first, since they need action), per-question answer distributions as SVG bar charts,
the confidence histogram, the least confident answers, and a searchable, sortable table of the
sampled documents (`rows`, embedded as JSON); clicking a row shows the document text next to its
answers, low-confidence answers highlighted and string and number answers marked where they occur
in the text. The rows are embedded so that the script shows what report.json and the answers say
(`page_row`: integers beyond 2^53 with all their digits, NaN confidences as "NaN"). Chart geometry
is computed here and drawn by the template's macros (labels cut or thinned by their estimated
width, so they stay inside their chart and apart); the script only filters, sorts and shows rows.
"""

from __future__ import annotations

import json
import math
import unicodedata
from functools import cache
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from .report_review_html import review_context

LOW_CONFIDENCE = 0.5
WIDTH = 520
SAFE_INTEGER = 2**53 - 1  # beyond it, the script's JSON.parse rounds an integer to a neighbour


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
    """A figure for the page: `digits` decimals, or as many significant digits where fewer
    would be left (0.0042 documents per second, not 0.00)."""
    if value is None:
        return "–"
    if isinstance(value, float):
        if value and abs(value) < 10 ** (1 - digits):
            return f"{value:.{digits}g}"
        return f"{value:,.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def number_label(value: float, step: float) -> str:
    """A bin edge as people write numbers: thousands separated, as many decimals as the bin
    width needs, not scientific notation (12,140 and 0.25, not 1.214e+04) up to 10^15; beyond,
    three digits and the exponent (6.39e+18: 25 characters of digits fit no column)."""
    if abs(value) >= 1e15:
        return f"{value:.3g}"
    decimals = 0 if step >= 1 else min(12, -math.floor(math.log10(step)))
    return f"{value:,.{decimals}f}"


FONT = 11  # px of the charts' text (`svg text` in report.css)


def _char_width(char: str) -> float:
    """A character's width in the charts' sans-serif, in ems, estimated on the generous side
    (DejaVu Sans, the widest common one): the page cannot be measured when it is written."""
    if unicodedata.combining(char):
        return 0.0
    if ord(char) > 0xFFFF:
        return 1.25  # emoji and other astral characters
    if unicodedata.east_asian_width(char) in ("W", "F"):
        return 1.0
    if char in "MWmw@":
        return 1.0
    if char in ",.:;!|'` ":
        return 0.4
    if char.isupper() or not (char.isascii() and char.isalnum()):
        return 0.85  # capitals, symbols, other scripts
    return 0.65


def text_width(text: str) -> float:
    """The estimated width in pixels of `text` in the charts' font."""
    return FONT * sum(_char_width(c) for c in text)


def fit_label(label: str, width: float) -> str:
    """`label`, cut and ended with "…" where it would be wider than `width` pixels."""
    if text_width(label) <= width:
        return label
    room, kept = width - text_width("…"), ""
    for char in label:
        room -= text_width(char)
        if room < 0:
            break
        kept += char
    return kept + "…"


def bar_chart(labels: list[str], counts: list[int], title: str) -> dict[str, Any]:
    """Horizontal bars, one per label (cut to the label column's width), with the count at the
    end."""
    top = max(counts) if counts and max(counts) > 0 else 1
    label_w = 170
    bars = [
        {"y": 4 + 22 * i, "w": (WIDTH - label_w - 60) * count / top, "label": label,
         "short": fit_label(label, label_w - 12), "count": count}
        for i, (label, count) in enumerate(zip(labels, counts, strict=True))
    ]  # fmt: skip
    return {"title": title, "width": WIDTH, "height": 22 * len(labels) + 8, "label_w": label_w,
            "bars": bars}  # fmt: skip


def column_chart(labels: list[str], counts: list[int], title: str) -> dict[str, Any]:
    """Vertical columns (histograms), labels under every column when ≤ 10 and they fit, else
    under every k-th, k the fewest columns the widest label fits across (every label is in its
    column's tooltip)."""
    base = 140
    top = max(counts) if counts and max(counts) > 0 else 1
    n = max(len(counts), 1)
    step = (WIDTH - 20) / n
    widest = max((text_width(label) for label in labels), default=0.0) + 6
    every = max(1 if n <= 10 else 2, math.ceil(widest / step))
    columns = [
        {"x": 10 + i * step, "h": (base - 20) * count / top, "label": label, "count": count,
         "labelled": i % every == 0, "label_x": _label_x(10 + (i + 0.5) * step, label)}
        for i, (label, count) in enumerate(zip(labels, counts, strict=True))
    ]  # fmt: skip
    return {"title": title, "width": WIDTH, "height": 170, "base": base, "step": step,
            "columns": columns}  # fmt: skip


def _label_x(centre: float, label: str) -> float:
    """Where a label centred under its column is drawn: moved in from an edge of the chart it
    would run past."""
    half = text_width(label) / 2 + 1
    return max(half, min(centre, WIDTH - half)) if 2 * half < WIDTH else WIDTH / 2


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
    if question.get("confidence_not_finite"):
        line += (f", {question['confidence_not_finite']:,} with a confidence that is not a "
                 "number (left out of the confidence figures)")  # fmt: skip
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


def _unsafe(value: Any) -> bool:
    """Whether the script would not show `value` as it is: it holds an integer JavaScript's
    numbers cannot hold exactly, or a number JSON has not (NaN, an infinity)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return abs(value) > SAFE_INTEGER
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_unsafe(v) for v in value.values())
    if isinstance(value, list):
        return any(_unsafe(v) for v in value)
    return False


def _script_safe(value: Any) -> Any:
    """`value` with NaN and infinities as the strings JavaScript writes them ("NaN",
    "Infinity", "-Infinity"): JSON has no such numbers and `JSON.parse` refuses Python's."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, dict):
        return {k: _script_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_script_safe(v) for v in value]
    return value


def _exact(value: Any) -> str:
    """An answer as the page shows it (a string as it is, anything else as compact JSON)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                           separators=(",", ":"))  # fmt: skip


def page_row(row: dict[str, Any]) -> dict[str, Any]:
    """A sampled row as the page embeds it, shown exactly as report.json and the answers say:
    a doc id beyond 2^53 as its digits (a string); per answer or withheld value that holds such
    an integer or a NaN, its text in `exact` (the script shows it instead of its rounded
    number); NaN and infinite confidences as "NaN", "Infinity" (see `_script_safe`)."""
    row = dict(row)
    if _unsafe(row.get("doc_id")):
        row["doc_id"] = str(row["doc_id"])
    answers = row.get("answers")
    if isinstance(answers, dict):
        exact = {qid: _exact(v) for qid, v in answers.items() if _unsafe(v)}
        if exact:
            row["exact"] = exact
    withheld = row.get("withheld")
    if isinstance(withheld, dict):
        row["withheld"] = {
            qid: {**held, "exact": _exact(held.get("value"))}
            if isinstance(held, dict) and _unsafe(held.get("value")) else held
            for qid, held in withheld.items()
        }  # fmt: skip
    return _script_safe(row)


def undecided_note(status: str, undecided: int, total: int) -> str | None:
    """Why the page counts fewer ok and failed rows than documents: the job stopped (or is still
    running) before deciding them. None when every document was decided."""
    if not undecided:
        return None
    why = {"aborted": "The job was aborted", "running": "The job has not finished (or was killed)"}
    return (
        f"{why.get(status, f'The job is {status}')}: {fmt(undecided)} of the {fmt(total)} "
        "documents were not decided and are in no output part. Rerun the same `decide run` "
        "command with --resume to decide them."
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
    undecided = max(c["total"] - c["ok"] - c["failed"], 0)
    if undecided:
        cards.insert(3, ("not decided", fmt(undecided)))
    reasons = sorted(c["failed_by_reason"].items(), key=lambda kv: -kv[1])
    questions = [{"id": q["id"], "text": q["text"], "chart": _distribution_chart(q),
                  "line": _question_line(q)} for q in report["questions"]]  # fmt: skip
    question_ids = [q["id"] for q in report["questions"]]
    sample = {"rows": [page_row(r) for r in rows], "questions": question_ids,
              "low": LOW_CONFIDENCE}  # fmt: skip
    # Every "<" as its JSON escape: neither "</script" nor "<!--" (which with a "<script" after
    # it keeps the element open past its end tag) can appear in the element's text.
    payload = json.dumps(sample, ensure_ascii=False, default=str, allow_nan=False)
    payload = payload.replace("<", "\\u003c")
    confidence_labels = [f"{i / 10:.1f}" for i in range(10)]
    context = {
        "css": _static("report.css"),
        "script": _static("report.js"),
        "sample": Markup(payload),  # JSON with "<" escaped: it cannot end the script element
        "job": report["job"],
        "generated": report["generated"],
        "cards": cards,
        "undecided": undecided_note(report["job"]["status"], undecided, c["total"]),
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
