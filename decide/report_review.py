"""The `calibration` part of report.json: reliability, risk–coverage and the review queue.

Contract. `calibration_report(manifest, parts, read)` returns None for a job run without
`--calibration` or `--review-below`, else a dict matching `report.schema.json`'s `calibration`:
the calibration file's fitted figures (a run has no gold, so the reliability bins are the ones
the file was fitted and measured on, in-sample, copied into the manifest at run time), a
risk–coverage table computed from *this job's* confidences (coverage: share of answers at or
above each threshold; expected accuracy: their mean calibrated confidence, a promise that is only
as good as the calibration), the review summary of the manifest, and the first `QUEUE` rows of
the review queue, least confident first. The parts are read a batch at a time via `read`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from decide.jobs.calibration import THRESHOLDS

QUEUE = 100  # review rows listed in report.json (all of them are in review.parquet)


def calibration_report(
    manifest: dict[str, Any],
    parts: list[Path],
    read: Callable[[list[Path], list[str]], Iterator[pl.DataFrame]],
) -> dict[str, Any] | None:
    entry = manifest.get("calibration")
    if not entry:
        return None
    columns = ["doc_id", "status", "confidence"]
    names = pl.scan_parquet(parts[0]).collect_schema().names()
    review = "review" in names
    counts = np.zeros(len(THRESHOLDS), dtype=np.int64)
    sums = np.zeros(len(THRESHOLDS))
    total = 0
    queue: list[tuple[float, str, Any]] = []
    for frame in read(parts, columns + (["review"] if review else [])):
        ok = frame.filter(pl.col("status") == "ok")
        if not ok.height:
            continue
        conf = ok.select(pl.col("confidence").struct.unnest())
        values = np.concatenate([conf[c].drop_nulls().to_numpy() for c in conf.columns])
        total += len(values)
        for i, t in enumerate(THRESHOLDS):
            kept = values[values >= t]
            counts[i] += len(kept)
            sums[i] += float(kept.sum())
        if review:
            flagged = ok.filter(pl.col("review"))
            for doc_id, row in zip(flagged["doc_id"], flagged["confidence"], strict=True):
                present = {q: v for q, v in row.items() if v is not None}
                lowest = min(present, key=present.__getitem__)
                queue.append((present[lowest], lowest, doc_id))
            queue = sorted(queue, key=lambda x: x[0])[:QUEUE]
    curve = [
        {
            "threshold": t,
            "coverage": int(counts[i]) / total if total else 0.0,
            "expected_accuracy": float(sums[i] / counts[i]) if counts[i] else None,
        }
        for i, t in enumerate(THRESHOLDS)
    ]
    return {
        "calibrated": "sha256" in entry,
        "source": entry.get("path"),
        "forced": bool(entry.get("forced", False)),
        "fitted": entry.get("metrics"),
        "reliability": entry.get("reliability", []),
        "reliability_before": entry.get("reliability_before", []),
        "risk_coverage": curve,
        "review": manifest.get("review"),
        "review_queue": [{"doc_id": d, "question": q, "confidence": c} for c, q, d in queue],
    }
