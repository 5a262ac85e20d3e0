"""The `calibration` part of report.json: reliability, risk–coverage and the review queue.

Contract. `calibration_report(manifest, parts)` returns None for a job run without
`--calibration` or `--review-below`, else a dict matching `report.schema.json`'s `calibration`:
the calibration file's fitted figures (a run has no gold, so the reliability bins are the ones
the file was fitted and measured on, in-sample, copied into the manifest at run time), a
risk–coverage table computed from *this job's* confidences (coverage: share of answers at or
above each threshold; expected accuracy: their mean calibrated confidence, a promise that is only
as good as the calibration), the review summary of the manifest, and the first `QUEUE` rows of
the review queue, least confident first, each computed by one polars streaming query.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

from decide.jobs.calibration import THRESHOLDS
from decide.jobs.manifest import Manifest

from .report_figures import collect

if TYPE_CHECKING:
    from .report_figures import Parts

QUEUE = 100  # review rows listed in report.json (all of them are in review.parquet)


def calibration_report(manifest: Manifest, parts: Parts) -> dict[str, Any] | None:
    entry = manifest.calibration
    if entry is None:
        return None
    long = parts.confidences()
    conf = pl.col("conf")
    kept = collect(long.select(
        pl.len().alias("total"),
        *[(conf >= t).sum().alias(f"n{i}") for i, t in enumerate(THRESHOLDS)],
        *[conf.filter(conf >= t).mean().alias(f"m{i}") for i, t in enumerate(THRESHOLDS)],
    )).row(0, named=True)  # fmt: skip
    total = kept["total"]
    curve = [
        {
            "threshold": t,
            "coverage": kept[f"n{i}"] / total if total else 0.0,
            "expected_accuracy": None if kept[f"m{i}"] is None else float(kept[f"m{i}"]),
        }
        for i, t in enumerate(THRESHOLDS)
    ]
    queue: list[dict[str, Any]] = []
    if "review" in parts.schema:
        # Each flagged row's least confident answer (the first question of equal ones), least
        # confident rows first, ties in doc id order.
        flagged = parts.ok.filter(pl.col("review").fill_null(False)).select("_row", "doc_id")
        lowest = (
            long.join(flagged, on="_row")
            .group_by("_row")
            .agg(conf.min().alias("confidence"),
                 pl.col("question").sort_by(["conf", "_q"]).first(), pl.col("doc_id").first())
            .bottom_k(QUEUE, by=["confidence", "doc_id"])
            .sort(["confidence", "doc_id"])
        )  # fmt: skip
        queue = collect(lowest.select("doc_id", "question", "confidence")).to_dicts()
    return {
        "calibrated": entry.sha256 is not None,
        "source": entry.path,
        "forced": entry.forced,
        "fitted": entry.metrics,
        "reliability": entry.reliability,
        "reliability_before": entry.reliability_before,
        "risk_coverage": curve,
        "review": manifest.review,
        "review_queue": queue,
    }
