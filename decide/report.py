"""Decision reports: `report.json` (checked against `report.schema.json`) and `report.html`.

Everything is computed from a job's output directory — the answer parts, `errors.parquet` and
`manifest.json` — so `decide report OUT_DIR` rebuilds both files at any time. Aggregates (counts,
distributions, confidence histograms) are computed with polars a batch of answer parts at a time
and merged, so the memory a report needs follows the batch (or the largest part) and the
distinct answers of one question, not the number of rows. The page embeds only aggregates and
a bounded sample of documents (every failure up to a cap, the least confident documents, then a
seeded random sample), so its size does not grow with the job. Document texts for the sampled
rows are read back from the input files named in the manifest, when they are still there.
"""

from __future__ import annotations

import io
import json
import logging
import math
import random
from collections.abc import Iterator
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import polars as pl

from decide.jobs.failures import FailureKind
from decide.jobs.output import atomic_write
from decide.jobs.spec import SpecError

from .report_review import calibration_report

log = logging.getLogger("decide.report")
REPORT_FORMAT = 1
CONFIDENCE_BINS = 10
HISTOGRAM_BINS = 10  # bins of a numeric answer with many distinct values
LOWEST = 25  # least confident answers listed in report.json
FAILURES = 100  # failures listed in report.json
CATEGORY_LIMIT = 20  # distinct values shown as categories; above, top values or a histogram
SAMPLE_FAILURES, SAMPLE_LOW, SAMPLE_RANDOM = 200, 200, 600  # documents embedded in the page
TEXT_LIMIT = 3000  # characters of each embedded document
ANSWER_COLUMNS = (
    "doc_id",
    "status",
    "error",
    "error_kind",
    "answers",
    "answers_json",
    "confidence",
    "nfe",
)
# Distinct values a question may have while all questions are counted in one pass; one with more
# (free text) is counted again in a pass of its own, so only one such set is held at a time.
DISTINCT_HELD = 50_000
MERGE_ROWS = 100_000  # rows of per-part value counts held before they are merged
BATCH_ROWS = 50_000  # rows read and aggregated at once (more when one part holds more)


class ReportError(SpecError):
    """The directory is not a job output, or a report failed its own schema."""


def report_schema() -> dict[str, Any]:
    text = resources.files("decide.schemas").joinpath("report.schema.json").read_text()
    return json.loads(text)


def validate_report(report: dict[str, Any]) -> None:
    """Raise `ReportError` naming the first field that breaks `report.schema.json`."""
    validator = jsonschema.Draft202012Validator(report_schema())
    errors = sorted(validator.iter_errors(report), key=lambda e: list(e.absolute_path))
    if errors:
        where = "/" + "/".join(str(p) for p in errors[0].absolute_path)
        raise ReportError(
            f"report.json does not match report.schema.json at {where}: {errors[0].message}"
        )


def _load(out: Path) -> tuple[dict[str, Any], list[Path]]:
    manifest_path = out / "manifest.json"
    if not manifest_path.is_file():
        raise ReportError(f"{out}: no manifest.json; not the output directory of a decide job")
    manifest = json.loads(manifest_path.read_text())
    parts = sorted((out / "answers").glob("part-*.parquet"))
    if not parts:
        raise ReportError(f"{out}: no answer parts in {out / 'answers'}")
    return manifest, parts


def _read(parts: list[Path], columns: list[str]) -> Iterator[pl.DataFrame]:
    """The answer parts in order, a few at a time: consecutive parts are read together until
    they hold BATCH_ROWS rows (so a job of many small parts does not pay polars' per-call cost
    per part), and no step of a report holds more than one such batch. The batch keeps one
    chunk per part, as reading all parts at once would."""
    batch: list[pl.DataFrame] = []
    rows = 0
    for part in parts:
        batch.append(pl.read_parquet(part, columns=columns))
        rows += batch[-1].height
        if rows >= BATCH_ROWS:
            yield pl.concat(batch, rechunk=False)
            batch, rows = [], 0
    if batch:
        yield pl.concat(batch, rechunk=False)


def _answer_columns(parts: list[Path]) -> Iterator[pl.DataFrame]:
    """Each part's answers of its ok rows, one column per question."""
    for frame in _read(parts, ["status", "answers"]):
        ok = frame.filter(pl.col("status") == "ok")
        if ok.height:
            yield ok["answers"].struct.unnest()


def _own(frame: pl.DataFrame) -> pl.DataFrame:
    """A copy of a few kept rows that owns its data. Filtered, sorted or sliced rows keep their
    strings as views into the buffers of the part they came from, so a kept row would keep its
    whole part in memory; an IPC round trip copies just the rows."""
    buffer = io.BytesIO()
    frame.write_ipc(buffer)
    buffer.seek(0)
    return pl.read_ipc(buffer)


def _float(x: Any) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def _chunk_sums(values: pl.Series) -> list[float]:
    return [chunk.sum() for chunk in values.get_chunks()]


def _mean(sums: list[float], n: int) -> float | None:
    # Sums of one chunk per part added in part order: what polars does for a column read from
    # all parts at once, so a mean is the float that one pass over all rows gives.
    total = 0.0
    for s in sums:
        total += s
    return total / n if n else None


class _Confidence:
    """A confidence histogram (bins of width 1/CONFIDENCE_BINS and the mean), part by part."""

    def __init__(self) -> None:
        self.counts = [0] * CONFIDENCE_BINS
        self.sums: list[float] = []  # one per part (chunk)
        self.n = 0

    def add(self, values: pl.Series) -> None:
        values = values.drop_nulls().clip(0.0, 1.0)
        if not values.len():
            return
        index = (values * CONFIDENCE_BINS).floor().clip(0, CONFIDENCE_BINS - 1).cast(pl.Int64)
        for i, n in index.value_counts().iter_rows():
            self.counts[i] += n
        self.sums += _chunk_sums(values)
        self.n += values.len()

    def result(self) -> dict[str, Any]:
        return {"counts": list(self.counts), "mean": _float(_mean(self.sums, self.n))}


def _present(column: pl.Series) -> pl.Series:
    """A question's answers without nulls; structs and lists as their compact JSON text."""
    present = column.drop_nulls()
    if present.dtype in (pl.Struct, pl.List) or isinstance(present.dtype, pl.Struct | pl.List):
        present = pl.Series([json.dumps(v, separators=(",", ":")) for v in present.to_list()])
    return present


class _Answers:
    """One question's answers, part by part: how many there are, their value counts (while the
    distinct values are few, or are not numbers), and for numbers the range and sums a histogram
    needs. A histogram's bins take a second pass (`add_bins`) once the range is known; a
    question with more than DISTINCT_HELD distinct values is counted again alone (`count`)."""

    def __init__(self) -> None:
        self.answered = 0
        self.numeric = False
        self.histogram = False  # numbers with more than CATEGORY_LIMIT distinct values
        self.deferred = False  # too many distinct values to count beside the other questions
        self.held: pl.DataFrame | None = None  # value, count; in order of first occurrence
        self.pending: list[pl.DataFrame] = []  # per-part value counts not merged yet
        self.low: float | None = None
        self.high: float | None = None
        self.sums: list[float] = []  # one per part (chunk), for a histogram's mean
        self.bins = [0] * HISTOGRAM_BINS

    def add(self, column: pl.Series) -> None:
        present = _present(column)
        if not present.len():
            return
        self.answered += present.len()
        self.numeric = present.dtype.is_numeric() and present.dtype != pl.Boolean
        if self.numeric:
            values = present.cast(pl.Float64)
            low, high = values.min(), values.max()
            self.low = low if self.low is None else min(self.low, low)
            self.high = high if self.high is None else max(self.high, high)
            self.sums += _chunk_sums(values)
        if not (self.histogram or self.deferred):
            self.count(present)

    def count(self, present: pl.Series, *, alone: bool = False) -> None:
        counts = present.rename("value").to_frame().group_by("value", maintain_order=True)
        self.pending.append(_own(counts.len("count")))
        if self.numeric:
            self._merge()
            if self.held is not None and self.held.height > CATEGORY_LIMIT:
                self.histogram, self.held = True, None
        elif sum(f.height for f in self.pending) >= max(
            MERGE_ROWS, 0 if self.held is None else self.held.height
        ):
            self._merge()
            if not alone and self.held is not None and self.held.height > DISTINCT_HELD:
                self.deferred, self.held = True, None

    def recount(self) -> None:
        """Forget the value counts: `count` is fed this question's values again from the start."""
        self.held, self.pending = None, []

    def _merge(self) -> None:
        frames = ([] if self.held is None else [self.held]) + self.pending
        self.pending = []
        if frames:
            # Group order is first occurrence over the concatenation: earlier parts first.
            merged = pl.concat(frames).group_by("value", maintain_order=True)
            self.held = _own(merged.agg(pl.col("count").sum()))

    def _width(self) -> float:
        assert self.low is not None and self.high is not None
        if self.high > self.low:
            return (self.high - self.low) / HISTOGRAM_BINS
        return 1.0

    def add_bins(self, column: pl.Series) -> None:
        values = column.drop_nulls().cast(pl.Float64)
        index = ((values - self.low) / self._width()).floor().clip(0, HISTOGRAM_BINS - 1)
        for i, n in index.cast(pl.Int64).value_counts().iter_rows():
            self.bins[i] += n

    def distribution(self) -> dict[str, Any]:
        if self.histogram:
            assert self.low is not None and self.high is not None
            width = self._width()
            edges = [self.low + i * width for i in range(HISTOGRAM_BINS + 1)]
            return {
                "type": "histogram",
                "bins": [{"low": edges[i], "high": edges[i + 1], "count": self.bins[i]}
                         for i in range(HISTOGRAM_BINS)],
                "min": float(self.low),
                "max": float(self.high),
                "mean": _mean(self.sums, self.answered),
            }  # fmt: skip
        self._merge()
        if self.held is None:
            return {"type": "categories", "values": [], "other": 0, "distinct": 0}
        # Most frequent first, ties in order of first occurrence: what value_counts(sort=True)
        # gives over all rows at once.
        counts = self.held.sort("count", descending=True, maintain_order=True)
        values = [{"value": v, "count": int(n)} for v, n in counts.head(CATEGORY_LIMIT).iter_rows()]
        shown = sum(v["count"] for v in values)
        distinct = counts.height
        kind = "categories" if distinct <= CATEGORY_LIMIT else "top"
        return {"type": kind, "values": values, "other": self.answered - shown,
                "distinct": distinct}  # fmt: skip


def _least_confident(ok: pl.DataFrame, offset: int) -> pl.DataFrame:
    """The LOWEST least confident (document, question) answers of one part's ok rows. `_q` (the
    question's place in the confidence struct) and `_row` (the row's place among all ok rows
    before it, `offset` in earlier parts) order ties as one stable sort of the table of every
    part's answers, question by question, would."""
    n = ok.height
    long = (
        ok.select(pl.col("confidence").struct.unnest())
        .unpivot(variable_name="question", value_name="conf")
        .with_row_index("_pos")
        .drop_nulls("conf")
        .sort("conf", maintain_order=True)
        .head(LOWEST)
    )
    row = long["_pos"] % n
    return pl.DataFrame({
        "conf": long["conf"],
        "_q": (long["_pos"] // n).cast(pl.Int64),
        "_row": row.cast(pl.Int64) + offset,
        "question": long["question"],
        "doc_id": ok["doc_id"].gather(row),
        "answers_json": ok["answers_json"].gather(row),
    })  # fmt: skip


def _keep(held: pl.DataFrame | None, frame: pl.DataFrame, by: list[str], k: int) -> pl.DataFrame:
    """The first `k` rows by `by` (a total order) of `held` and `frame` together, owning their
    data."""
    best = frame.sort(by).head(k)
    return _own(best if held is None else pl.concat([held, best]).sort(by).head(k))


class _Aggregates:
    """What `report.json` needs from the answer parts, fed a batch of parts at a time, in order."""

    def __init__(self, questions: list[str]) -> None:
        self.decided = self.ok = self.failed = self.nfe = 0
        self.reasons: dict[str, int] = {}  # in order of first occurrence
        self.failures: list[tuple[Any, Any]] = []
        self.answers = {qid: _Answers() for qid in questions}
        self.confidence: dict[str, _Confidence] = {}  # by confidence field, in struct order
        self.lowest: pl.DataFrame | None = None

    def add(self, frame: pl.DataFrame) -> None:
        ok = frame.filter(pl.col("status") == "ok")
        failed = frame.filter(pl.col("status") == "error")
        offset = self.ok
        self.decided += frame.height
        self.ok += ok.height
        self.failed += failed.height
        self.nfe += int(frame["nfe"].sum() or 0)
        # Parts written before failure kinds existed have no error_kind: counted as unknown.
        by = pl.col("error_kind") if "error_kind" in frame.columns else pl.lit(None, pl.String)
        for kind, n in failed.group_by(by.alias("k"), maintain_order=True).len().iter_rows():
            reason = kind or "unknown"
            self.reasons[reason] = self.reasons.get(reason, 0) + n
        room = FAILURES - len(self.failures)
        if room > 0:
            self.failures += failed.select("doc_id", "error").head(room).iter_rows()
        if not ok.height:
            return
        if self.answers:
            answers = ok["answers"].struct.unnest()
            for qid, tally in self.answers.items():
                if qid in answers.columns:
                    tally.add(answers[qid])
        confidence = ok.select(pl.col("confidence").struct.unnest())
        for name in confidence.columns:
            self.confidence.setdefault(name, _Confidence()).add(confidence[name])
        least = _least_confident(ok, offset)
        self.lowest = _keep(self.lowest, least, ["conf", "_q", "_row"], LOWEST)

    def finish(self, parts: list[Path]) -> None:
        """The passes that need the first one done: histogram bins over the numbers' range, and
        the value counts of questions with too many distinct values, one question at a time."""
        histograms = {qid: t for qid, t in self.answers.items() if t.histogram}
        if histograms:
            for answers in _answer_columns(parts):
                for qid, tally in histograms.items():
                    if qid in answers.columns:
                        tally.add_bins(answers[qid])
        for qid, tally in self.answers.items():
            if tally.deferred:
                tally.recount()
                for answers in _answer_columns(parts):
                    if qid in answers.columns:
                        tally.count(_present(answers[qid]), alone=True)

    def overall_confidence(self) -> dict[str, Any]:
        merged = _Confidence()
        for tally in self.confidence.values():
            merged.counts = [a + b for a, b in zip(merged.counts, tally.counts, strict=True)]
            # Question by question, as the long table of all answers orders them; that table was
            # one chunk, summed pairwise, so this mean can differ from it in the last bits.
            merged.sums += tally.sums
            merged.n += tally.n
        return merged.result()


def build_report(out: Path) -> dict[str, Any]:
    """The report of the job in `out` (not written; see `write_report`)."""
    manifest, parts = _load(out)
    schema = pl.scan_parquet(parts[0]).collect_schema()
    questions = list(schema["answers"].to_schema()) if "answers" in schema else []
    tally = _Aggregates(questions)
    for frame in _read(parts, [c for c in ANSWER_COLUMNS if c in schema]):
        tally.add(frame)
    tally.finish(parts)

    counts = manifest.get("counts", {})
    invalid = int(counts.get("invalid_rows", 0))
    reasons = dict(tally.reasons)
    if invalid:
        reasons["null_doc_id"] = reasons.get("null_doc_id", 0) + invalid
    spec = manifest.get("spec", {})
    texts = {q["id"]: q["text"] for q in spec.get("questions", [])}
    empty = _Confidence()
    question_reports = [
        {
            "id": qid,
            "text": texts.get(qid, ""),
            "answered": answers.answered,
            "distribution": answers.distribution(),
            "confidence": tally.confidence.get(qid, empty).result(),
        }
        for qid, answers in tally.answers.items()
    ]
    lowest = []
    for row in [] if tally.lowest is None else tally.lowest.iter_rows(named=True):
        lowest.append({
            "doc_id": row["doc_id"],
            "question": row["question"],
            "answer": json.loads(row["answers_json"]).get(row["question"]),
            "confidence": float(row["conf"]),
        })  # fmt: skip
    seconds = _float(manifest.get("seconds")) or 0.0
    nfe, decided = tally.nfe, tally.decided
    tokens = int(manifest.get("throughput", {}).get("answer_tokens", 0))
    decided_now = int(manifest.get("throughput", {}).get("documents", decided))
    spec_rules = spec.get("rules")
    report = {
        "format": REPORT_FORMAT,
        "generated": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "job": {
            "status": manifest.get("status", "unknown"),
            "model": manifest.get("model"),
            "model_type": manifest.get("model_type"),
            "fingerprints": manifest.get("fingerprints", {}),
            "inputs": manifest.get("inputs", []),
            "decoding": spec.get("decoding", {}),
            "batch_size": manifest.get("batch_size"),
            "device": manifest.get("device"),
            "started": manifest.get("started"),
            "finished": manifest.get("finished"),
            "seconds": seconds,
        },
        "counts": {
            "total": int(counts.get("total", decided + invalid)),
            "decided": decided,
            "ok": tally.ok,
            "failed": tally.failed + invalid,
            "invalid_rows": invalid,
            "failed_by_reason": reasons,
        },
        "throughput": {
            "documents_per_second": decided_now / seconds if seconds > 0 else None,
            "forward_passes": nfe,
            "forward_passes_per_document": nfe / decided if decided else None,
            "answer_tokens": tokens,
            "answer_tokens_per_forward_pass": tokens / nfe if nfe and tokens else None,
        },
        "questions": question_reports,
        "confidence": tally.overall_confidence(),
        "lowest_confidence": lowest,
        "failures": [{"doc_id": d, "error": e} for d, e in tally.failures],
        "rules": {"declared": spec_rules is not None,
                  "violations": reasons.get(FailureKind.answer_invalid.value, 0),
                  "narrowed": manifest.get("rules", {}).get("narrowed", {})},
        "calibration": calibration_report(manifest, parts, _read),
    }  # fmt: skip
    return report


def sample_documents(out: Path, report: dict[str, Any], seed: int = 0) -> list[dict[str, Any]]:
    """The rows the page embeds: failures, the least confident documents, a random sample; with
    their document text when the input files are still readable.

    The parts are read a batch at a time: the first failures in part order; the SAMPLE_LOW ok
    documents with the lowest minimum confidence (ties in part order); and SAMPLE_RANDOM of the
    other ok documents, uniformly at random: every ok row draws a key from `random.Random(seed)`
    in part order, and the rows with the smallest keys that are not among the least confident
    are kept.
    """
    manifest, parts = _load(out)
    columns = ["doc_id", "status", "error", "answers_json", "confidence", "nfe"]
    rng = random.Random(seed)
    failed: list[pl.DataFrame] = []
    room = SAMPLE_FAILURES
    low: pl.DataFrame | None = None
    candidates: pl.DataFrame | None = None
    offset = 0
    for frame in _read(parts, columns):
        if room > 0:
            failed.append(_own(frame.filter(pl.col("status") == "error").head(room)))
            room -= failed[-1].height
        ok = frame.filter(pl.col("status") == "ok")
        if not ok.height:
            continue
        ok = ok.with_columns(
            pl.min_horizontal(pl.col("confidence").struct.unnest()).alias("_min"),
            pl.Series("_key", [rng.random() for _ in range(ok.height)], pl.Float64),
            pl.int_range(offset, offset + ok.height, dtype=pl.Int64).alias("_row"),
        )
        offset += ok.height
        low = _keep(low, ok, ["_min", "_row"], SAMPLE_LOW)
        # Enough smallest keys that SAMPLE_RANDOM remain once the least confident are taken out.
        candidates = _keep(candidates, ok, ["_key", "_row"], SAMPLE_LOW + SAMPLE_RANDOM)
    chosen = list(failed)
    if low is not None and candidates is not None:
        rest = candidates.filter(~pl.col("doc_id").is_in(low["doc_id"].implode()))
        chosen += [low.select(columns), rest.head(SAMPLE_RANDOM).select(columns)]
    rows = [row for frame in chosen for row in frame.iter_rows(named=True)]
    texts = _document_texts(manifest, [row["doc_id"] for row in rows])
    out_rows = []
    for row in rows:
        text = texts.get(row["doc_id"])
        out_rows.append({
            "doc_id": row["doc_id"],
            "status": row["status"],
            "error": row["error"],
            "answers": json.loads(row["answers_json"]) if row["answers_json"] else None,
            "confidence": row["confidence"] if row["status"] == "ok" else None,
            "nfe": row["nfe"],
            "text": None if text is None else text[:TEXT_LIMIT],
            "text_cut": text is not None and len(text) > TEXT_LIMIT,
        })  # fmt: skip
    return out_rows


def _document_texts(manifest: dict[str, Any], ids: list[Any]) -> dict[Any, str]:
    columns = manifest.get("spec", {}).get("input", {})
    id_col, doc_col = columns.get("doc_id", "doc_id"), columns.get("document", "document")
    paths = [Path(p) for p in manifest.get("inputs", []) if Path(p).is_file()]
    if not paths or not ids:
        return {}
    try:
        found = (
            pl.scan_parquet(paths)
            .select(pl.col(id_col).alias("doc_id"), pl.col(doc_col).alias("text"))
            .filter(pl.col("doc_id").is_in(pl.Series(ids).implode()))
            .unique("doc_id", keep="first")
            .collect()
        )
    except (pl.exceptions.PolarsError, OSError) as exc:
        # Inputs moved or changed since the run: the page shows the answers without the text.
        log.warning("document texts not available for the report: %s", exc)
        return {}
    return dict(found.iter_rows())


def write_report(out: Path) -> dict[str, Any]:
    """Build, validate and write `report.json` and `report.html` into `out`."""
    from .report_html import render_html

    report = build_report(out)
    validate_report(report)
    text = json.dumps(report, indent=2, ensure_ascii=False) + "\n"
    atomic_write(out / "report.json", lambda tmp: tmp.write_text(text, encoding="utf-8"))
    html = render_html(report, sample_documents(out, report))
    atomic_write(out / "report.html", lambda tmp: tmp.write_text(html, encoding="utf-8"))
    return report
