"""The figures of `report.json`, computed by polars queries over a job's answer parts.

Contract. `Parts(out)` opens the answer parts of an output directory as one `pl.LazyFrame`
(`scan_parquet`; a column that only some parts have, e.g. `value_tokens` in parts written before
it existed, is null in the others) with a `_row` index in part order. Every figure is one query
run by polars' streaming engine, so memory follows the distinct answers of a question and the
bounded lists (least confident, failures, samples), not the number of rows. No figure is built by
a Python loop over rows, and failures are classified by their `error_kind` column (a
`FailureKind` value; "unknown" for error rows of parts written before the column), never by
their message. Ties are broken by values (question order, doc id, answer value), never by the
order rows were written in, so a resumed job reports what an uninterrupted one does and a figure
does not depend on how polars schedules a query.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import polars as pl

from decide.jobs import parquet

CONFIDENCE_BINS = 10
HISTOGRAM_BINS = 10  # bins of a numeric answer with many distinct values
CATEGORY_LIMIT = 20  # distinct values shown as categories; above, top values or a histogram
RULE_KINDS = ("answer_invalid", "rule_violated")  # a decision object or a CEL rule failed
UNCLASSIFIED = "unknown"


def collect(frame: pl.LazyFrame) -> pl.DataFrame:
    return frame.collect(engine="streaming")


class Parts:
    """The answer parts of one output directory, scanned lazily."""

    def __init__(self, paths: list[Path]) -> None:
        schema: dict[str, pl.DataType] = {}
        for path in paths:  # footers only: the union of the parts' columns
            for name, dtype in parquet.schema(path).items():
                schema.setdefault(name, dtype)
        self.paths, self.schema = paths, schema
        self.frame = parquet.scan(paths, schema=schema, missing_columns="insert")
        self.frame = self.frame.with_row_index("_row")
        answers = schema.get("answers")
        self.questions: list[str] = list(answers.to_schema()) if answers is not None else []
        self.ok = self.frame.filter(pl.col("status") == "ok")

    def answer(self, qid: str) -> pl.Expr:
        """A question's answers; objects and arrays as their compact JSON text, read from
        `answers_json`: the typed struct column cannot tell a key the answer left out from one it
        gave as null, and would show `{"first":"","age":null}` for `{"first":""}`."""
        dtype = self.schema["answers"].to_schema()[qid]
        raw = pl.col("answers").struct.field(qid)
        if not isinstance(dtype, pl.Struct | pl.List | pl.Array):
            return raw.alias(qid)
        text = pl.col("answers_json").str.json_path_match(f"$.{qid}")
        return pl.when(raw.is_not_null()).then(text).alias(qid)

    def written(self, qid: str) -> pl.Expr:
        """A question's answers as `answers_json` writes them, where its typed column may not:
        a Float column (per-row questions that share one, say) holds `117.0` for an answer
        `117`. Null for other columns."""
        dtype = self.schema["answers"].to_schema()[qid]
        if not dtype.is_float():
            return pl.lit(None, pl.String).alias(qid)
        return pl.col("answers_json").str.json_path_match(f"$.{qid}").alias(qid)

    def numeric(self, qid: str) -> bool:
        dtype = self.schema["answers"].to_schema()[qid]
        return dtype.is_numeric() and dtype != pl.Boolean

    def confidences(self) -> pl.LazyFrame:
        """The long table of answer confidences: `_q` (question's place), `question`, `_row`,
        `conf`, `answered` (the answer is not null), nulls dropped."""
        fields = list(self.schema["confidence"].to_schema()) if "confidence" in self.schema else []
        frames = [
            self.ok.select(
                pl.lit(i, pl.Int64).alias("_q"), pl.lit(qid).alias("question"), "_row",
                pl.col("confidence").struct.field(qid).alias("conf"),
                (self.answer(qid).is_not_null() if qid in self.questions else pl.lit(False))
                .alias("answered"),
            )
            for i, qid in enumerate(fields)
        ]  # fmt: skip
        if not frames:
            return pl.LazyFrame(schema={"_q": pl.Int64, "question": pl.String, "_row": pl.UInt32,
                                        "conf": pl.Float64, "answered": pl.Boolean})  # fmt: skip
        return pl.concat(frames).drop_nulls("conf")


def _mean(value: Any) -> float | None:
    return None if value is None else float(value)


def _finite(value: Any) -> float | None:
    """A mean of answers, None where the sum overflowed (numbers near the largest double)."""
    mean = _mean(value)
    return mean if mean is not None and math.isfinite(mean) else None


def totals(parts: Parts) -> dict[str, Any]:
    """Rows, outcomes, forward passes and answer tokens over every part."""
    columns = [
        pl.len().alias("decided"),
        (pl.col("status") == "ok").sum().alias("ok"),
        (pl.col("status") == "error").sum().alias("failed"),
        pl.col("nfe").sum().alias("nfe"),
    ]
    recorded = "value_tokens" in parts.schema and "filler_tokens" in parts.schema
    if recorded:
        columns += [pl.col("value_tokens").sum(), pl.col("filler_tokens").sum(),
                    pl.col("value_tokens").null_count().alias("unrecorded")]  # fmt: skip
    row = collect(parts.frame.select(columns)).row(0, named=True)
    # Token counts are a total of every row or nothing: parts written before they were recorded
    # would make a partial sum look like a figure.
    recorded = recorded and row["unrecorded"] == 0
    return {
        "decided": int(row["decided"]),
        "ok": int(row["ok"] or 0),
        "failed": int(row["failed"] or 0),
        "nfe": int(row["nfe"] or 0),
        "value_tokens": int(row["value_tokens"] or 0) if recorded else None,
        "filler_tokens": int(row["filler_tokens"] or 0) if recorded else None,
    }


def failures(parts: Parts, limit: int) -> tuple[dict[str, int], list[dict[str, Any]]]:
    """Error rows by failure kind (most first, ties by kind), and the `limit` error rows of the
    smallest doc ids."""
    failed = parts.frame.filter(pl.col("status") == "error")
    kind = pl.col("error_kind") if "error_kind" in parts.schema else pl.lit(None, pl.String)
    by_kind = collect(
        failed.group_by(kind.fill_null(UNCLASSIFIED).alias("kind"))
        .len("n")
        .sort(["n", "kind"], descending=[True, False])
    )
    first = collect(failed.select("doc_id", "error").bottom_k(limit, by="doc_id").sort("doc_id"))
    return (
        {k: int(n) for k, n in by_kind.iter_rows()},
        [{"doc_id": d, "error": e} for d, e in first.iter_rows()],
    )


def rule_violations(parts: Parts) -> int:
    if "error_kind" not in parts.schema:
        return 0
    return int(collect(parts.frame.select(pl.col("error_kind").is_in(RULE_KINDS).sum())).item())


def _confidence_bins(values: pl.Expr) -> pl.Expr:
    index = (values.clip(0.0, 1.0) * CONFIDENCE_BINS).floor().clip(0, CONFIDENCE_BINS - 1)
    return index.cast(pl.Int64).alias("bin")


def confidence_figures(parts: Parts) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """Per question and over all answers: a confidence histogram (bins of width
    1/CONFIDENCE_BINS) and the mean, plus per question the mean over its non-null answers and
    `not_finite`, how many of its confidences are NaN or infinite (no probability: left out of
    the histograms and means, as the review queue sends them to a person whatever the
    threshold)."""
    every = parts.confidences()
    long = every.filter(pl.col("conf").is_finite())
    bins = collect(long.group_by("question", _confidence_bins(pl.col("conf"))).len())
    conf, finite = pl.col("conf").clip(0.0, 1.0), pl.col("conf").is_finite()
    means = collect(every.group_by("question").agg(
        conf.filter(finite).mean().alias("mean"),
        conf.filter(pl.col("answered") & finite).mean().alias("answered"),
        (~finite).sum().alias("not_finite"),
    ))  # fmt: skip
    overall = collect(long.select(conf.mean())).item()

    def histogram(rows: pl.DataFrame) -> list[int]:
        counts = dict(rows.select("bin", "len").iter_rows())
        return [int(counts.get(i, 0)) for i in range(CONFIDENCE_BINS)]

    per_question = {
        qid: {"counts": histogram(bins.filter(pl.col("question") == qid)), "mean": _mean(mean),
              "answered_mean": _mean(answered), "not_finite": int(not_finite)}
        for qid, mean, answered, not_finite in means.iter_rows()
    }  # fmt: skip
    all_bins = bins.group_by("bin").agg(pl.col("len").sum())
    total = {"counts": histogram(all_bins), "mean": _mean(overall)}
    return per_question, total


def _as_written(value: Any, text: str | None) -> Any:
    """A category's value as one of its answers wrote it (`written`), when that is the same
    number: `117` for a Float column's 117.0."""
    if text is None or not isinstance(value, float):
        return value
    try:
        found = json.loads(text)
    except ValueError:
        return value
    return (
        found
        if isinstance(found, int | float) and not isinstance(found, bool) and found == value
        else value
    )


def _distribution(parts: Parts, qid: str, stats: dict[str, Any]) -> dict[str, Any]:
    """Categories (few distinct values, or values that are not numbers: the most frequent
    CATEGORY_LIMIT, ties in value order) or a histogram over the numbers' range."""
    answered, distinct = stats["answered"], stats["distinct"]
    value = parts.answer(qid)
    if distinct <= CATEGORY_LIMIT or not parts.numeric(qid):
        written = parts.written(qid)
        top = collect(
            parts.ok.select(value.alias("value"), written.alias("written"))
            .drop_nulls("value").group_by("value")
            .agg(pl.len().alias("count"), pl.col("written").first())
            .sort(["count", "value"], descending=[True, False]).head(CATEGORY_LIMIT)
        )  # fmt: skip
        rows = top.select("value", "count", "written").iter_rows()
        values = [{"value": _as_written(v, text), "count": int(n)} for v, n, text in rows]
        kind = "categories" if distinct <= CATEGORY_LIMIT else "top"
        other = answered - sum(v["count"] for v in values)
        return {"type": kind, "values": values, "other": other, "distinct": distinct}
    low, high = float(stats["min"]), float(stats["max"])
    width = (high - low) / HISTOGRAM_BINS if high > low else 1.0
    edges = [low + i * width for i in range(HISTOGRAM_BINS + 1)]
    if not math.isfinite(width):  # a range beyond the largest double (-1e308 to 1e308)
        width = high / HISTOGRAM_BINS - low / HISTOGRAM_BINS
        edges = [low / HISTOGRAM_BINS * (HISTOGRAM_BINS - i) + high / HISTOGRAM_BINS * i
                 for i in range(HISTOGRAM_BINS + 1)]  # fmt: skip
    # (an answer minus `low` may still overflow: infinity, clipped into the last bin)
    index = ((value.cast(pl.Float64) - low) / width).floor().clip(0, HISTOGRAM_BINS - 1)
    counts = dict(collect(
        parts.ok.select(index.cast(pl.Int64).alias("bin")).drop_nulls().group_by("bin").len()
    ).iter_rows())  # fmt: skip
    return {
        "type": "histogram",
        "bins": [{"low": edges[i], "high": edges[i + 1], "count": int(counts.get(i, 0))}
                 for i in range(HISTOGRAM_BINS)],
        "min": low, "max": high, "mean": _finite(stats["mean"]),
    }  # fmt: skip


def answer_figures(parts: Parts) -> dict[str, dict[str, Any]]:
    """Per question: how many ok rows answered it (not null), how many answered null, how many
    rows its answer failed in (`partial` rows: no answer at all), and the distribution of its
    answers. A null answer has a confidence; a row that was not asked the question (per-row
    questions) or whose answer failed has none, and is neither answered nor null."""
    columns = []
    fields = set(parts.schema["confidence"].to_schema()) if "confidence" in parts.schema else set()
    errors = set(parts.schema["errors"].to_schema()) if "errors" in parts.schema else set()
    for qid in parts.questions:
        value = parts.answer(qid)
        given = (
            pl.col("confidence").struct.field(qid).is_not_null() if qid in fields else pl.lit(True)
        )
        failed = (
            pl.col("errors").struct.field(qid).is_not_null() if qid in errors else pl.lit(False)
        )
        columns += [value.count().alias(f"{qid}\0answered"),
                    (value.is_null() & given).sum().alias(f"{qid}\0nulls"),
                    failed.sum().alias(f"{qid}\0failed"),
                    value.drop_nulls().n_unique().alias(f"{qid}\0distinct")]  # fmt: skip
        if parts.numeric(qid):
            number = value.cast(pl.Float64)
            columns += [number.min().alias(f"{qid}\0min"), number.max().alias(f"{qid}\0max"),
                        number.mean().alias(f"{qid}\0mean")]  # fmt: skip
    row = collect(parts.ok.select(columns)).row(0, named=True) if columns else {}
    figures = {}
    for qid in parts.questions:
        stats = {key.split("\0")[1]: v for key, v in row.items() if key.split("\0")[0] == qid}
        stats = {k: (int(v or 0) if k in ("answered", "nulls", "failed", "distinct") else v)
                 for k, v in stats.items()}  # fmt: skip
        figures[qid] = {"answered": stats["answered"], "nulls": stats["nulls"],
                        "failed": stats["failed"],
                        "distribution": _distribution(parts, qid, stats)}  # fmt: skip
    return figures


def withheld_counts(parts: Parts) -> dict[str, int]:
    """Per question: the ok rows whose answer `absent_below` withheld (`withheld_json`; 0 for a
    job written before the column)."""
    if "withheld_json" not in parts.schema or not parts.questions:
        return {qid: 0 for qid in parts.questions}
    held = pl.col("withheld_json")
    columns = [held.str.json_path_match(f"$.{qid}.confidence").is_not_null().sum().alias(qid)
               for qid in parts.questions]  # fmt: skip
    row = collect(parts.ok.select(columns)).row(0, named=True)
    return {qid: int(row[qid] or 0) for qid in parts.questions}


def unread_counts(parts: Parts) -> dict[str, int]:
    """Per question: the ok rows read in windows whose answer no window was asked (the learnt
    evidence ranker judged none likely to hold it, so it was given its absent value unread):
    such an answer has a confidence but no evidence and was not withheld."""
    needed = ("windows", "evidence", "confidence")
    if not parts.questions or any(c not in parts.schema for c in needed):
        return {qid: 0 for qid in parts.questions}
    evidence = parts.schema["evidence"]
    confidence = parts.schema["confidence"]
    if not isinstance(evidence, pl.Struct) or not isinstance(confidence, pl.Struct):
        return {qid: 0 for qid in parts.questions}
    held = pl.col("withheld_json") if "withheld_json" in parts.schema else pl.lit(None, pl.String)
    columns = []
    for qid in parts.questions:
        if qid not in evidence.to_schema() or qid not in confidence.to_schema():
            columns.append(pl.lit(0).alias(qid))
            continue
        unread = (
            (pl.col("windows") > 0)
            & pl.col("evidence").struct.field(qid).is_null()
            & pl.col("confidence").struct.field(qid).is_not_null()
            & held.str.json_path_match(f"$.{qid}.confidence").is_null()
        )
        columns.append(unread.fill_null(False).sum().alias(qid))
    row = collect(parts.ok.select(columns)).row(0, named=True)
    return {qid: int(row[qid] or 0) for qid in parts.questions}


def least_confident(parts: Parts, limit: int) -> pl.DataFrame:
    """The `limit` least confident (document, question) answers: `conf`, `question`, `doc_id`,
    `answers_json`; ties in question order, then doc id order. Confidences that are not finite
    numbers are left out (`confidence_figures` counts them)."""
    order = ["conf", "_q", "doc_id"]
    ids = parts.ok.select("_row", "doc_id")
    scored = parts.confidences().filter(pl.col("conf").is_finite())
    lowest = collect(scored.join(ids, on="_row").bottom_k(limit, by=order).sort(order))
    found = rows_by_index(parts, lowest["_row"], ["answers_json"])
    return lowest.join(found, on="_row", how="left", maintain_order="left")


def rows_by_index(parts: Parts, rows: pl.Series, columns: list[str]) -> pl.DataFrame:
    """The given `_row`s of the parts (a few), with `columns`."""
    wanted = rows.unique().implode()
    return collect(parts.frame.filter(pl.col("_row").is_in(wanted)).select("_row", *columns))
