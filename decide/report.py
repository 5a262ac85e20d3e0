"""Decision reports: `report.json` (checked against `report.schema.json`) and `report.html`.

Everything is computed from a job's output directory — the answer parts, `errors.parquet` and
`manifest.json` — so `decide report OUT_DIR` rebuilds both files at any time. Aggregates (counts,
distributions, confidence histograms) are computed with polars over all rows; the page embeds
only aggregates and a bounded sample of documents (every failure up to a cap, the least
confident documents, then a seeded random sample), so its size does not grow with the job.
Document texts for the sampled rows are read back from the input files named in the manifest,
when they are still there.
"""

from __future__ import annotations

import json
import logging
import math
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import polars as pl

from decide.jobs.decisions import failure_reason
from decide.jobs.output import atomic_write
from decide.jobs.spec import SpecError

log = logging.getLogger("decide.report")
REPORT_FORMAT = 1
CONFIDENCE_BINS = 10
LOWEST = 25  # least confident answers listed in report.json
FAILURES = 100  # failures listed in report.json
CATEGORY_LIMIT = 20  # distinct values shown as categories; above, top values or a histogram
SAMPLE_FAILURES, SAMPLE_LOW, SAMPLE_RANDOM = 200, 200, 600  # documents embedded in the page
TEXT_LIMIT = 3000  # characters of each embedded document


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


def _load(out: Path) -> tuple[dict[str, Any], pl.LazyFrame]:
    manifest_path = out / "manifest.json"
    if not manifest_path.is_file():
        raise ReportError(f"{out}: no manifest.json; not the output directory of a decide job")
    manifest = json.loads(manifest_path.read_text())
    parts = sorted((out / "answers").glob("part-*.parquet"))
    if not parts:
        raise ReportError(f"{out}: no answer parts in {out / 'answers'}")
    return manifest, pl.scan_parquet(parts)


def _float(x: Any) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def _histogram(values: pl.Series, bins: int = 10) -> dict[str, Any]:
    values = values.drop_nulls().cast(pl.Float64)
    low, high = values.min(), values.max()
    if low is None:
        return {"type": "histogram", "bins": [], "min": None, "max": None, "mean": None}
    width = (high - low) / bins if high > low else 1.0
    index = ((values - low) / width).floor().clip(0, bins - 1).cast(pl.Int64)
    counts = index.value_counts().sort(index.name)
    by_bin = dict(zip(counts[index.name].to_list(), counts["count"].to_list(), strict=True))
    edges = [low + i * width for i in range(bins + 1)]
    return {
        "type": "histogram",
        "bins": [{"low": edges[i], "high": edges[i + 1], "count": by_bin.get(i, 0)}
                 for i in range(bins)],
        "min": float(low),
        "max": float(high),
        "mean": float(values.mean()),
    }  # fmt: skip


def _distribution(column: pl.Series) -> dict[str, Any]:
    present = column.drop_nulls()
    if present.dtype in (pl.Struct, pl.List) or isinstance(present.dtype, pl.Struct | pl.List):
        present = pl.Series([json.dumps(v, separators=(",", ":")) for v in present.to_list()])
    distinct = present.n_unique()
    numeric = present.dtype.is_numeric() and present.dtype != pl.Boolean
    if distinct <= CATEGORY_LIMIT or not numeric:
        counts = present.value_counts(sort=True)
        top = counts.head(CATEGORY_LIMIT)
        values = [
            {"value": v, "count": int(n)}
            for v, n in zip(top[present.name].to_list(), top["count"].to_list(), strict=True)
        ]
        shown = sum(v["count"] for v in values)
        kind = "categories" if distinct <= CATEGORY_LIMIT else "top"
        return {"type": kind, "values": values, "other": int(present.len() - shown),
                "distinct": int(distinct)}  # fmt: skip
    return _histogram(present)


def _confidence_histogram(values: pl.Series) -> dict[str, Any]:
    values = values.drop_nulls().clip(0.0, 1.0)
    index = (values * CONFIDENCE_BINS).floor().clip(0, CONFIDENCE_BINS - 1).cast(pl.Int64)
    counts = dict(index.value_counts().iter_rows())
    return {
        "counts": [int(counts.get(i, 0)) for i in range(CONFIDENCE_BINS)],
        "mean": _float(values.mean()),
    }


def build_report(out: Path) -> dict[str, Any]:
    """The report of the job in `out` (not written; see `write_report`)."""
    manifest, lazy = _load(out)
    wanted = ("doc_id", "status", "error", "answers", "answers_json", "confidence", "nfe")
    frame = lazy.select([c for c in wanted if c in lazy.collect_schema()]).collect()
    ok = frame.filter(pl.col("status") == "ok")
    failed = frame.filter(pl.col("status") == "error")
    counts = manifest.get("counts", {})
    invalid = int(counts.get("invalid_rows", 0))
    reasons: dict[str, int] = {}
    for error in failed["error"].to_list():
        reason = failure_reason(error or "")
        reasons[reason] = reasons.get(reason, 0) + 1
    if invalid:
        reasons["doc_id is null"] = reasons.get("doc_id is null", 0) + invalid

    spec = manifest.get("spec", {})
    texts = {q["id"]: q["text"] for q in spec.get("questions", [])}
    answers = ok["answers"].struct.unnest() if ok.height else pl.DataFrame()
    confidence = ok["confidence"].struct.unnest() if ok.height else pl.DataFrame()
    questions = []
    for qid in frame.schema["answers"].to_schema() if "answers" in frame.schema else []:
        column = answers[qid] if qid in answers.columns else pl.Series(qid, [])
        conf = confidence[qid] if qid in confidence.columns else pl.Series(qid, [], pl.Float64)
        questions.append({
            "id": qid,
            "text": texts.get(qid, ""),
            "answered": int(column.drop_nulls().len()),
            "distribution": _distribution(column.rename(qid)),
            "confidence": _confidence_histogram(conf),
        })  # fmt: skip

    # One row per (document, question): the answers' JSON joins only the few lowest, so the
    # long table does not copy every document's answers once per question.
    long = (
        ok.select("doc_id", pl.col("confidence").struct.unnest())
        .unpivot(index="doc_id", variable_name="question", value_name="conf")
        .drop_nulls("conf")
    )
    least = long.sort("conf", maintain_order=True).head(LOWEST)
    least = least.join(ok.select("doc_id", "answers_json"), on="doc_id", how="left").sort(
        "conf", maintain_order=True
    )
    lowest = []
    for row in least.iter_rows(named=True):
        lowest.append({
            "doc_id": row["doc_id"],
            "question": row["question"],
            "answer": json.loads(row["answers_json"]).get(row["question"]),
            "confidence": float(row["conf"]),
        })  # fmt: skip
    seconds = _float(manifest.get("seconds")) or 0.0
    nfe = int(frame["nfe"].sum() or 0)
    tokens = int(manifest.get("throughput", {}).get("answer_tokens", 0))
    decided_now = int(manifest.get("throughput", {}).get("documents", frame.height))
    spec_rules = spec.get("rules")
    report = {
        "format": REPORT_FORMAT,
        "generated": datetime.now(UTC).isoformat(timespec="seconds"),
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
            "total": int(counts.get("total", frame.height + invalid)),
            "decided": frame.height,
            "ok": ok.height,
            "failed": failed.height + invalid,
            "invalid_rows": invalid,
            "failed_by_reason": reasons,
        },
        "throughput": {
            "documents_per_second": decided_now / seconds if seconds > 0 else None,
            "forward_passes": nfe,
            "forward_passes_per_document": nfe / frame.height if frame.height else None,
            "answer_tokens": tokens,
            "answer_tokens_per_forward_pass": tokens / nfe if nfe and tokens else None,
        },
        "questions": questions,
        "confidence": _confidence_histogram(long["conf"]),
        "lowest_confidence": lowest,
        "failures": [{"doc_id": d, "error": e}
                     for d, e in failed.select("doc_id", "error").head(FAILURES).iter_rows()],
        "rules": {"declared": spec_rules is not None,
                  "violations": sum(n for r, n in reasons.items()
                                    if r.startswith("answer fails validation")),
                  "narrowed": manifest.get("rules", {}).get("narrowed", {})},
    }  # fmt: skip
    return report


def sample_documents(out: Path, report: dict[str, Any], seed: int = 0) -> list[dict[str, Any]]:
    """The rows the page embeds: failures, the least confident documents, a random sample; with
    their document text when the input files are still readable."""
    manifest, lazy = _load(out)
    frame = lazy.select("doc_id", "status", "error", "answers_json", "confidence", "nfe").collect()
    failed = frame.filter(pl.col("status") == "error").head(SAMPLE_FAILURES)
    ok = frame.filter(pl.col("status") == "ok")
    if ok.height:
        ok = ok.with_columns(pl.min_horizontal(pl.col("confidence").struct.unnest()).alias("_min"))
        low = ok.sort("_min").head(SAMPLE_LOW)
        rest = ok.filter(~pl.col("doc_id").is_in(low["doc_id"].implode()))
        sample = rest.sample(min(SAMPLE_RANDOM, rest.height), seed=seed) if rest.height else rest
        chosen = pl.concat([low.drop("_min"), sample.drop("_min")])
    else:
        chosen = ok
    rows = pl.concat([failed, chosen]) if failed.height else chosen
    texts = _document_texts(manifest, rows["doc_id"].to_list())
    out_rows = []
    for row in rows.iter_rows(named=True):
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
