"""The report page's review-queue and calibration sections (inline SVG, no network).

Contract. `review_context(report)` gives what `templates/review.html.j2` needs to render the
`calibration` part of report.json (see `decide.report_review`) as two sections, or None for a job
run without `--calibration` and `--review-below`: `#review` (the share of rows sent to review,
the expected accuracy of the auto-accepted answers, or without a calibration their mean raw
confidence, which is not called an accuracy, and the first rows of the queue: failed answers,
then the least confident)
and `#calibration` (a reliability diagram, `svg.reliability`: expected against observed
accuracy per equal-mass bin of the calibration file's fitted data, before and after
calibration, since a run has no gold; and a risk–coverage curve, `svg.risk-coverage`, of this
job's own calibrated confidences). Both are placed first on the page, right after the summary.
Only geometry and numbers are computed here; the template draws and escapes them.
"""

from __future__ import annotations

from typing import Any

SIZE, PAD = 260, 34  # square plot area and its margin


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f} %"


def _num(value: float | None) -> str:
    """A fitted measure; the calibration file writes null where it had nothing to measure."""
    return "–" if value is None else f"{value:.3f}"


def _xy(x: float, y: float) -> tuple[float, float]:
    return PAD + x * SIZE, PAD + (1 - y) * SIZE


def _plot(cls: str, title: str, x_label: str, y_label: str, y_low: float = 0.0) -> dict[str, Any]:
    """A square plot's frame: ticks every 0.2 on both axes (y from `y_low` to 1)."""
    ticks = []
    for i in range(0, 11, 2):
        t = i / 10
        x, _ = _xy(t, 0)
        _, y = _xy(0, t)
        ticks.append({"x": x, "y": y, "x_label": f"{t:.1f}",
                      "y_label": f"{y_low + t * (1 - y_low):.2g}"})  # fmt: skip
    return {"cls": cls, "title": title, "x_label": x_label, "y_label": y_label, "size": SIZE,
            "pad": PAD, "width": SIZE + 2 * PAD + 120, "height": SIZE + 2 * PAD + 10,
            "ticks": ticks, "diagonal": None, "series": [], "legend": []}  # fmt: skip


def reliability_chart(after: list[dict[str, Any]], before: list[dict[str, Any]]) -> dict[str, Any]:
    """Observed accuracy against mean confidence per bin; the diagonal is perfect calibration."""
    plot = _plot("reliability", "reliability diagram",
                 "expected accuracy (mean confidence of the bin)", "observed accuracy")  # fmt: skip
    plot["diagonal"] = (*_xy(0, 0), *_xy(1, 1))
    for bins, color, name in ((before, "#c0392b", "before"), (after, "#2f6fdb", "after")):
        points = []
        for b in bins:
            if b["confidence"] is None or b["accuracy"] is None:
                continue
            x, y = _xy(b["confidence"], b["accuracy"])
            points.append({"x": x, "y": y, "tag": None, "title": (
                f"{name}: {b['count']} answers, confidence {_num(b['low'])}–{_num(b['high'])}, "
                f"expected {_pct(b['confidence'])}, observed {_pct(b['accuracy'])}")})  # fmt: skip
        plot["series"].append({"color": color, "points": points})
        plot["legend"].append({"color": color, "label": name})
    return plot


def risk_coverage_chart(curve: list[dict[str, Any]], calibrated: bool = True) -> dict[str, Any]:
    """Expected accuracy of the accepted answers against the share accepted, per threshold;
    uncalibrated, their mean raw confidence, which is no accuracy (`calibrated` False)."""
    low = 0.5  # the y axis shows 0.5–1
    what = "expected accuracy" if calibrated else "mean confidence (uncalibrated)"
    plot = _plot("risk-coverage", "risk-coverage curve", "coverage (share of answers accepted)",
                 what, y_low=low)  # fmt: skip
    points = []
    for row in curve:
        if row["expected_accuracy"] is None:
            continue
        x, y = _xy(row["coverage"], (max(row["expected_accuracy"], low) - low) / (1 - low))
        points.append({"x": x, "y": y, "tag": f"{row['threshold']:g}", "title": (
            f"confidence ≥ {row['threshold']}: {_pct(row['coverage'])} of answers, "
            f"{what} {_pct(row['expected_accuracy'])}")})  # fmt: skip
    plot["series"].append({"color": "#2f6fdb", "points": points})
    return plot


def review_context(report: dict[str, Any]) -> dict[str, Any] | None:
    info = report.get("calibration")
    if not info:
        return None
    context: dict[str, Any] = {
        "review": info["review"],
        "queue": info["review_queue"],
        "calibrated": info["calibrated"],
        "source": info["source"],
        "forced": info["forced"],
        "risk_coverage": risk_coverage_chart(info["risk_coverage"], info["calibrated"]),
    }
    if info["calibrated"]:
        fitted = info["fitted"] or {}
        before, after = fitted.get("before") or {}, fitted.get("after") or {}
        ece = f"ECE {_num(before.get('ece'))} → {_num(after.get('ece'))}"
        brier = f"Brier {_num(before.get('brier'))} → {_num(after.get('brier'))}"
        context["fitted"] = f"{ece}, {brier}"
        context["reliability"] = reliability_chart(info["reliability"], info["reliability_before"])
    return context
