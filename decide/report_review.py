"""The `calibration` part of report.json: reliability, risk–coverage and the review queue.

Contract. `calibration_report(manifest, parts)` returns None for a job run without
`--calibration` or `--review-below`, else a dict matching `report.schema.json`'s `calibration`:
the calibration file's fitted figures (a run has no gold, so the reliability bins are the ones
the file was fitted and measured on, in-sample, copied into the manifest at run time), a
risk–coverage table computed from *this job's* confidences (coverage: share of answers at or
above each threshold; expected accuracy: their mean calibrated confidence, a promise that is only
as good as the calibration; confidences that are not finite numbers are left out), the review
summary of the manifest, and the first `QUEUE` rows of the review queue, each computed by one
polars streaming query. A queue entry names the row's reason to be there: its first failed
answer (`error`, confidence null: an ok row with a missing answer, or an answer whose confidence
is not a number, goes to review whatever the threshold), else its least confident answer; rows
with a failed answer come first, then the least confident.
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
    finite = long.filter(conf.is_finite())
    kept = collect(finite.select(
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
    queue = review_queue(parts, long) if "review" in parts.schema else []
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


def review_queue(parts: Parts, long: pl.LazyFrame) -> list[dict[str, Any]]:
    """The first `QUEUE` rows sent to review: per row its first failed answer (with the reason,
    confidence null), else its least confident answer (the first question of equal ones); rows
    with a failed answer first, then the least confident, ties in doc id order."""
    conf = pl.col("conf")
    flagged = parts.ok.filter(pl.col("review").fill_null(False)).select("_row", "doc_id")
    nan = pl.lit("its confidence is not a number").alias("error")
    failed = [long.filter(conf.is_nan()).select("_row", "_q", "question", nan)]
    errors = parts.schema.get("errors")
    if isinstance(errors, pl.Struct):
        failed += [
            parts.ok.select("_row", pl.lit(i, pl.Int64).alias("_q"), pl.lit(qid).alias("question"),
                            pl.col("errors").struct.field(qid).cast(pl.String).alias("error"))
            .drop_nulls("error")
            for i, qid in enumerate(errors.to_schema())
        ]  # fmt: skip
    first_failed = (
        pl.concat(failed)
        .join(flagged.select("_row"), on="_row")
        .group_by("_row")
        .agg(pl.col("question").sort_by("_q").first().alias("failed"),
             pl.col("error").sort_by("_q").first())
    )  # fmt: skip
    lowest = (
        long.filter(conf.is_finite())
        .join(flagged.select("_row"), on="_row")
        .group_by("_row")
        .agg(conf.min().alias("confidence"), pl.col("question").sort_by(["conf", "_q"]).first())
    )  # fmt: skip
    rows = (
        flagged.join(first_failed, on="_row", how="left")
        .join(lowest, on="_row", how="left")
        .select(
            "doc_id",
            pl.coalesce("failed", "question", pl.lit("")).alias("question"),
            pl.when(pl.col("error").is_null()).then(pl.col("confidence")).alias("confidence"),
            "error",
        )
        .sort(["confidence", "doc_id"], nulls_last=False)
        .head(QUEUE)
    )
    return collect(rows).to_dicts()
