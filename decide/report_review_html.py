"""The report page's review-queue and calibration sections (inline SVG, no network).

Contract. `review_section(report)` renders the `calibration` part of report.json (see
`decide.report_review`) as two sections, or "" for a job run without `--calibration` and
`--review-below`: `#review` (the share of rows sent to review, the expected accuracy of the
auto-accepted answers, and the least confident rows of the queue) and `#calibration` (a
reliability diagram, `svg.reliability`: expected against observed accuracy per equal-mass bin of
the calibration file's fitted data, before and after calibration, since a run has no gold; and a
risk–coverage curve, `svg.risk-coverage`, of this job's own calibrated confidences). Both are
placed first on the page, right after the summary.
"""

from __future__ import annotations

import html
from typing import Any

SIZE, PAD = 260, 34  # square plot area and its margin


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _pct(value: Any) -> str:
    return "–" if value is None else f"{100 * value:.1f} %"


def _xy(x: float, y: float) -> tuple[float, float]:
    return PAD + x * SIZE, PAD + (1 - y) * SIZE


def _frame(x_label: str, y_label: str, y_low: float = 0.0) -> str:
    parts = [f'<rect x="{PAD}" y="{PAD}" width="{SIZE}" height="{SIZE}" fill="none" '
             'stroke="#dde1e7"/>']  # fmt: skip
    for i in range(0, 11, 2):
        t = i / 10
        x, _ = _xy(t, 0)
        _, y = _xy(0, t)
        parts.append(f'<text x="{x:.1f}" y="{PAD + SIZE + 14}" text-anchor="middle">{t:.1f}</text>')
        value = y_low + t * (1 - y_low)
        parts.append(f'<text x="{PAD - 4}" y="{y + 4:.1f}" text-anchor="end">{value:.2g}</text>')
    parts.append(f'<text x="{PAD + SIZE / 2}" y="{PAD + SIZE + 28}" '
                 f'text-anchor="middle">{_e(x_label)}</text>')  # fmt: skip
    parts.append(f'<text x="10" y="{PAD + SIZE / 2}" text-anchor="middle" '
                 f'transform="rotate(-90 10 {PAD + SIZE / 2})">{_e(y_label)}</text>')  # fmt: skip
    return "".join(parts)


def _svg(cls: str, title: str, body: str) -> str:
    w, h = SIZE + 2 * PAD + 120, SIZE + 2 * PAD + 10
    return (f'<svg class="{cls}" role="img" aria-label="{_e(title)}" width="{w}" height="{h}" '
            f'viewBox="0 0 {w} {h}">{body}</svg>')  # fmt: skip


def _legend(items: list[tuple[str, str]]) -> str:
    out = []
    for i, (color, label) in enumerate(items):
        y = PAD + 10 + 18 * i
        out.append(
            f'<rect x="{PAD + SIZE + 12}" y="{y - 9}" width="10" height="10" '
            f'fill="{color}"/><text x="{PAD + SIZE + 26}" y="{y}">{_e(label)}</text>'
        )
    return "".join(out)


def reliability_chart(after: list[dict[str, Any]], before: list[dict[str, Any]]) -> str:
    """Observed accuracy against mean confidence per bin; the diagonal is perfect calibration."""
    x0, y0 = _xy(0, 0)
    x1, y1 = _xy(1, 1)
    body = [_frame("expected accuracy (mean confidence of the bin)", "observed accuracy"),
            f'<line x1="{x0}" y1="{y0}" x2="{x1}" y2="{y1}" stroke="#9aa3af" '
            'stroke-dasharray="4 3"/>']  # fmt: skip
    for bins, color, name in ((before, "#c0392b", "before"), (after, "#2f6fdb", "after")):
        points = []
        for b in bins:
            if b["confidence"] is None or b["accuracy"] is None:
                continue
            x, y = _xy(b["confidence"], b["accuracy"])
            points.append(f"{x:.1f},{y:.1f}")
            body.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{color}"><title>'
                        f'{name}: {b["count"]} answers, confidence {b["low"]:.3f}–{b["high"]:.3f},'
                        f' expected {_pct(b["confidence"])}, observed {_pct(b["accuracy"])}'
                        "</title></circle>")  # fmt: skip
        if points:
            body.append(f'<polyline points="{" ".join(points)}" fill="none" stroke="{color}"/>')
    body.append(_legend([("#c0392b", "before"), ("#2f6fdb", "after")]))
    return _svg("reliability", "reliability diagram", "".join(body))


def risk_coverage_chart(curve: list[dict[str, Any]]) -> str:
    """Expected accuracy of the accepted answers against the share accepted, per threshold."""
    points, marks = [], []
    low = 0.5  # the y axis shows 0.5–1
    for row in curve:
        if row["expected_accuracy"] is None:
            continue
        y_value = (max(row["expected_accuracy"], low) - low) / (1 - low)
        x, y = _xy(row["coverage"], y_value)
        points.append(f"{x:.1f},{y:.1f}")
        marks.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="#2f6fdb"><title>'
            f"confidence ≥ {row['threshold']}: {_pct(row['coverage'])} of answers, "
            f"expected accuracy {_pct(row['expected_accuracy'])}</title></circle>"
            f'<text x="{x + 5:.1f}" y="{y - 5:.1f}">{row["threshold"]:g}</text>'
        )
    body = _frame("coverage (share of answers accepted)", "expected accuracy", y_low=low)
    if points:
        body += f'<polyline points="{" ".join(points)}" fill="none" stroke="#2f6fdb"/>'
    return _svg("risk-coverage", "risk-coverage curve", body + "".join(marks))


def review_section(report: dict[str, Any]) -> str:
    info = report.get("calibration")
    if not info:
        return ""
    review = info.get("review")
    if review is None:
        queue_html = '<p class="muted">No review threshold set (<code>review_below</code>).</p>'
    else:
        rows = "".join(
            f"<tr><td>{_e(r['doc_id'])}</td><td>{_e(r['question'])}</td>"
            f'<td class="low">{r["confidence"]:.3f}</td></tr>'
            for r in info["review_queue"]
        )
        kind = "calibrated" if review["calibrated"] else "uncalibrated (no --calibration)"
        queue_html = (
            f'<div class="cards"><div class="card"><span class="muted">sent to review</span>'
            f"<b>{review['rows']:,} rows ({_pct(review['share'])})</b></div>"
            f'<div class="card"><span class="muted">expected accuracy, auto-accepted answers'
            f"</span><b>{_pct(review['expected_accuracy_accepted'])}</b></div></div>"
            f'<p class="muted">A row goes to review when any answer\'s {kind} confidence is below '
            f"{review['below']}; all of them are in <code>review.parquet</code>. Least confident "
            f"first ({len(info['review_queue'])} shown):</p>"
            f'<div class="scroll"><table id="review-table"><tr><th>doc_id</th>'
            f"<th>least confident question</th><th>confidence</th></tr>{rows}</table></div>"
        )
    if info["calibrated"]:
        fitted = info.get("fitted") or {}
        before, after = fitted.get("before", {}), fitted.get("after", {})
        figures = (f"ECE {before.get('ece', 0):.3f} → {after.get('ece', 0):.3f}, Brier "
                   f"{before.get('brier', 0):.3f} → {after.get('brier', 0):.3f}")  # fmt: skip
        calibration_html = (
            f'<p class="muted">Confidences are calibrated by <code>{_e(info["source"])}</code>'
            f"{' (forced: fitted for another model or spec)' if info['forced'] else ''}. The "
            "reliability diagram shows the bins that file was fitted on (this run has no gold "
            f"labels; in-sample: {figures}).</p>"
            f"{reliability_chart(info['reliability'], info['reliability_before'])}"
        )
    else:
        calibration_html = (
            '<p class="muted">Not calibrated: confidences are the model\'s own; '
            "fit a calibration with <code>decide calibrate</code>.</p>"
        )
    return (
        f'<section id="review"><h2>Review queue</h2>{queue_html}</section>'
        f'<section id="calibration"><h2>Calibration</h2>{calibration_html}'
        '<h3>Risk–coverage</h3><p class="muted">This job\'s answers accepted at each confidence '
        "threshold: the share accepted and their expected accuracy (mean confidence).</p>"
        f"{risk_coverage_chart(info['risk_coverage'])}</section>"
    )
