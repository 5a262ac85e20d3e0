"""Decision reports: `report.json` (checked against `report.schema.json`) and `report.html`.

Contract. Everything is computed from a job's output directory — the answer parts and
`manifest.json` (read through `decide.jobs.manifest.Manifest`) — so `decide report OUT_DIR`
rebuilds both files at any time, and a resumed job reports what an uninterrupted one would: every
count, forward pass and answer token comes from the rows of the parts, never from one run's
totals. The figures are polars queries run by its streaming engine (`report_figures`), so memory
follows the distinct answers of one question, not the number of rows. The page embeds only
aggregates and a bounded sample of documents (failures first, then the least confident
documents, then a seeded random sample), so its size does not grow with the job; the texts of the
sampled documents are read back from the input files named in the manifest, when they are still
there (a missing one is warned of on stderr, naming it); of a document read in windows the page
also embeds the window each answer was kept from (its evidence), so clicking the answer shows
where it was read; of a document read whole, clicking an extract answer marks the span it was
copied from. "Answer tokens" are the tokens of the answers' values; the filler positions that
pad answer slots are counted apart. The job's `seconds` and `started` cover every run of the
directory (a resume adds its seconds and keeps the first start), so documents per second is
every decided row over them. Importing this module does not import torch or the engine.
"""

from __future__ import annotations

import bisect
import json
import logging
import math
import re
from collections.abc import Callable
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import polars as pl

from decide.jobs import inputs, parquet
from decide.jobs.manifest import Manifest, ManifestError
from decide.jobs.output import atomic_write
from decide.jobs.spec import SpecError

from . import report_figures as figures
from .report_figures import Parts, collect
from .report_review import calibration_report

log = logging.getLogger("decide.report")
REPORT_FORMAT = 1
LOWEST = 25  # least confident answers listed in report.json
FAILURES = 100  # failures listed in report.json
SAMPLE_FAILURES, SAMPLE_LOW, SAMPLE_RANDOM = 200, 200, 600  # documents embedded in the page
TEXT_LIMIT = 3000  # characters of each embedded document
EVIDENCE_LIMIT = 4000  # characters embedded of one evidence window (around its span)
NULL_DOC_ID = "null_doc_id"  # failure kind of input rows without a doc_id (errors.parquet only)
SAMPLE_COLUMNS = ["doc_id", "status", "error", "answers_json", "confidence", "nfe"]


class ReportError(SpecError):
    """The directory is not a job output, or a report failed its own schema."""


def report_schema() -> dict[str, Any]:
    text = resources.files("decide.schemas").joinpath("report.schema.json").read_text()
    return json.loads(text)


def validate_report(report: dict[str, Any]) -> None:
    """Raise `ReportError` naming the first field that breaks `report.schema.json`, or the first
    number that is NaN or infinite (JSON has none: Python would write `NaN`, which JSON parsers
    refuse, and JSON Schema's bounds cannot refuse it)."""
    validator = jsonschema.Draft202012Validator(report_schema())
    errors = sorted(validator.iter_errors(report), key=lambda e: list(e.absolute_path))
    if errors:
        where = "/" + "/".join(str(p) for p in errors[0].absolute_path)
        raise ReportError(
            f"report.json does not match report.schema.json at {where}: {errors[0].message}"
        )
    where = _not_finite(report)
    if where is not None:
        raise ReportError(f"report.json holds a number that is not finite at {where}")


def _not_finite(value: Any, where: str = "") -> str | None:
    """The JSON pointer of the first float in `value` that is NaN or infinite, else None."""
    if isinstance(value, float):
        return None if math.isfinite(value) else where or "/"
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        found = _not_finite(item, f"{where}/{key}")
        if found is not None:
            return found
    return None


def _load(out: Path) -> tuple[Manifest, Parts]:
    try:
        manifest = Manifest.read(out)
    except ManifestError as exc:
        raise ReportError(str(exc)) from exc
    paths = sorted((out / "answers").glob("part-*.parquet"))
    if not paths:
        raise ReportError(f"{out}: no answer parts in {out / 'answers'} (the job wrote none)")
    # Footers only. A resume refuses other ids (since 2026-12-07) and other answer types, so
    # parts that disagree were not written by one job: a part copied in from another, say.
    types: dict[str, dict[str, Path]] = {}
    for path in paths:
        try:
            schema = parquet.schema(path)
        except (pl.exceptions.PolarsError, OSError) as exc:
            raise ReportError(f"{path}: unreadable answer part ({exc})") from exc
        for column, dtype in schema.items():
            types.setdefault(column, {}).setdefault(str(dtype), path)
    for column in sorted(types, key=lambda c: (c != "doc_id", c)):
        if len(types[column]) > 1:
            found = ", ".join(f"{t} ({p.name} and after)" for t, p in types[column].items())
            raise ReportError(f"{out}: its answer parts hold {column} of different types: "
                              f"{found}; they cannot be read as one table")  # fmt: skip
    return manifest, Parts(paths)


def _rate(numerator: float | None, denominator: float) -> float | None:
    return numerator / denominator if numerator is not None and denominator > 0 else None


def build_report(out: Path) -> dict[str, Any]:
    """The report of the job in `out` (not written; see `write_report`)."""
    manifest, parts = _load(out)
    totals = figures.totals(parts)
    reasons, failures = figures.failures(parts, FAILURES)
    invalid = manifest.counts.invalid_rows
    if invalid:
        reasons[NULL_DOC_ID] = reasons.get(NULL_DOC_ID, 0) + invalid
    answers = figures.answer_figures(parts)
    confidence, overall = figures.confidence_figures(parts)
    empty = {"counts": [0] * figures.CONFIDENCE_BINS, "mean": None, "answered_mean": None,
             "not_finite": 0}  # fmt: skip
    texts = {q.id: q.text for q in manifest.spec.questions}
    texts.update(_row_question_texts(out, manifest, [q for q in answers if q not in texts]))
    withheld = figures.withheld_counts(parts)
    unread = figures.unread_counts(parts)
    questions = []
    for qid, tally in answers.items():
        conf = confidence.get(qid, empty)
        questions.append({
            "id": qid, "text": texts.get(qid, ""), "answered": tally["answered"],
            "nulls": tally["nulls"], "failed": tally["failed"],
            "distribution": tally["distribution"],
            "confidence": {"counts": conf["counts"], "mean": conf["mean"]},
            "answered_confidence": conf["answered_mean"],
            "confidence_not_finite": conf["not_finite"],
            "withheld": withheld.get(qid, 0),
            "unread": unread.get(qid, 0),
        })  # fmt: skip
    lowest = [
        {"doc_id": doc_id, "question": question,
         "answer": json.loads(answers_json).get(question), "confidence": float(conf)}
        for conf, question, doc_id, answers_json in figures.least_confident(parts, LOWEST)
        .select("conf", "question", "doc_id", "answers_json").iter_rows()
    ]  # fmt: skip
    seconds = manifest.seconds or 0.0
    nfe, decided = totals["nfe"], totals["decided"]
    _check_rows(out, manifest, decided)
    tokens, filler = totals["value_tokens"], totals["filler_tokens"]
    job = {
        "status": manifest.status, "model": manifest.model, "model_type": manifest.model_type,
        "fingerprints": manifest.fingerprints, "inputs": manifest.inputs,
        "decoding": manifest.spec.decoding, "batch_size": manifest.batch_size,
        "device": manifest.device, "started": manifest.started, "finished": manifest.finished,
        "seconds": seconds,
    }  # fmt: skip
    return {
        "format": REPORT_FORMAT,
        "generated": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "job": job,
        "counts": {
            "total": manifest.counts.total or decided + invalid,
            "decided": decided,
            "ok": totals["ok"],
            "failed": totals["failed"] + invalid,
            "invalid_rows": invalid,
            "failed_by_reason": reasons,
        },
        "throughput": {
            # `seconds` sums every run of the directory, as the rows of the parts do.
            "documents_per_second": _rate(decided, seconds),
            "forward_passes": nfe,
            "forward_passes_per_document": _rate(nfe, decided),
            "answer_tokens": tokens,
            "answer_tokens_per_forward_pass": _rate(tokens, nfe),
            "filler_tokens": filler,
        },
        "questions": questions,
        "confidence": overall,
        "lowest_confidence": lowest,
        "failures": failures,
        "rules": {
            "declared": manifest.spec.rules is not None,
            # answers that fail their own schema are no rule's violations
            "violations": figures.rule_violations(parts) if manifest.spec.rules is not None else 0,
            "narrowed": manifest.rules.narrowed,
        },
        "calibration": calibration_report(manifest, parts),
    }


def _check_rows(out: Path, manifest: Manifest, rows: int) -> None:
    """Warn (on stderr) when the parts hold another number of rows than the manifest counts
    decided: a part removed from `answers/`, or one copied in (its rows then count twice)."""
    counts = manifest.counts
    if not {"ok", "error"} & counts.model_fields_set:
        return  # a manifest that does not count them
    recorded = counts.ok + counts.error
    if recorded != rows:
        log.warning("%s: the answer parts hold %d rows, the manifest counts %d decided: parts "
                    "were removed from or added to %s since the job wrote them; the report "
                    "counts the rows of the parts",
                    out, rows, recorded, out / "answers")  # fmt: skip


def sample_documents(out: Path, report: dict[str, Any], seed: int = 0) -> list[dict[str, Any]]:
    """The rows the page embeds: failures, the least confident documents, a random sample; with
    their document text when the input files are still readable.

    In this order: the first SAMPLE_FAILURES error rows in part order; the SAMPLE_LOW ok rows with
    the lowest minimum confidence (ties in part order); and SAMPLE_RANDOM of the other ok rows,
    uniformly at random: each ok row's key is a hash of its position and `seed` (the same seed
    gives the same sample), and the rows with the smallest keys are kept.
    """
    manifest, parts = _load(out)
    failed = collect(parts.frame.filter(pl.col("status") == "error").select("_row")
                     .bottom_k(SAMPLE_FAILURES, by="_row").sort("_row"))["_row"]  # fmt: skip
    conf = parts.schema.get("confidence")
    low = pl.Series("_row", [], pl.UInt32)
    sample = low
    if isinstance(conf, pl.Struct) and conf.fields:
        minimum = pl.min_horizontal(pl.col("confidence").struct.unnest()).alias("_min")
        low = collect(parts.ok.select("_row", minimum).bottom_k(SAMPLE_LOW, by=["_min", "_row"])
                      .sort(["_min", "_row"], nulls_last=True))["_row"]  # fmt: skip
        key = pl.col("_row").hash(seed).alias("_key")
        sample = collect(
            parts.ok.filter(~pl.col("_row").is_in(low.implode())).select("_row", key)
            .bottom_k(SAMPLE_RANDOM, by=["_key", "_row"]).sort(["_key", "_row"])
        )["_row"]  # fmt: skip
    order = pl.concat([failed, low, sample]).cast(pl.UInt32)
    optional = ("evidence", "withheld_json", "errors")
    columns = SAMPLE_COLUMNS + [c for c in optional if c in parts.schema]
    found = figures.rows_by_index(parts, order, columns)
    chosen = order.to_frame("_row").join(found, on="_row", how="left", maintain_order="left")
    texts = _document_texts(out, manifest, chosen["doc_id"].to_list())
    rows = []
    for row in chosen.iter_rows(named=True):
        text = texts.get(row["doc_id"])
        evidence = row.get("evidence") if row["status"] == "ok" else None
        pieces, marks = _evidence_pieces(text, evidence)
        rows.append({
            "doc_id": row["doc_id"],
            "status": row["status"],
            "error": row["error"],
            "answers": json.loads(row["answers_json"]) if row["answers_json"] else None,
            "confidence": row["confidence"] if row["status"] == "ok" else None,
            "nfe": row["nfe"],
            "text": None if text is None else text[:TEXT_LIMIT],
            "text_cut": text is not None and len(text) > TEXT_LIMIT,
            "pieces": pieces,
            "length": None if text is None else len(text.encode("utf-16-le")) // 2,
            "evidence": marks,
            "withheld": json.loads(row["withheld_json"]) if row.get("withheld_json") else None,
            "errors": _answer_errors(row),
        })  # fmt: skip
    return rows


def _answer_errors(row: dict[str, Any]) -> dict[str, str] | None:
    """Why each failed answer of a partial row is missing (`errors`, per question), or None."""
    errors = row.get("errors") if row["status"] == "ok" else None
    if not isinstance(errors, dict):
        return None
    failed = {qid: str(why) for qid, why in errors.items() if why is not None}
    return failed or None


ASTRAL = re.compile("[\U00010000-\U0010ffff]")  # two UTF-16 units each


def _utf16(text: str) -> Callable[[int], int]:
    """Python string offsets of `text` as the page's script counts them (UTF-16 code units):
    one more per character beyond the basic plane before the offset."""
    astral = [m.start() for m in ASTRAL.finditer(text)]
    return lambda index: index + bisect.bisect_left(astral, index)


def _evidence_pieces(
    text: str | None, evidence: dict[str, Any] | None
) -> tuple[list[list[Any]] | None, dict[str, Any] | None]:
    """What the page shows of a document with evidence: `pieces`, the head and every
    evidence window (at most `EVIDENCE_LIMIT` characters of each, around its span), merged and
    in order, each `[start, text]`; and per answer its evidence, `{"window": [start, end],
    "span": [start, end] | null, "index": n, "characters": [start, end]}`. For a document read
    whole `index` is null and the window is the span. Offsets in UTF-16 units of the whole
    document, as the script indexes strings, but `characters`: the window's offsets as the
    answers' `evidence` gives them (characters), which the page shows. (None, None) for a
    document without evidence or without its text."""
    if text is None or not evidence:
        return None, None
    ranges = [(0, min(len(text), TEXT_LIMIT))]
    marks: dict[str, Any] = {}
    units = _utf16(text)
    for qid, ev in evidence.items():
        if ev is None:
            continue
        if ev["window"] is None:  # read whole: the evidence is the span alone
            ev = {**ev, "start": ev["span_start"], "end": ev["span_end"]}
        start, end = ev["start"], min(ev["end"], len(text))
        if end - start > EVIDENCE_LIMIT:
            centre = ev["span_start"] if ev["span_start"] is not None else start
            start = max(start, min(centre - EVIDENCE_LIMIT // 2, end - EVIDENCE_LIMIT))
            end = start + EVIDENCE_LIMIT
        ranges.append((start, end))
        span = None
        if ev["span_start"] is not None:
            span = [units(ev["span_start"]), units(ev["span_end"])]
        marks[qid] = {"window": [units(ev["start"]), units(ev["end"])],
                      "span": span, "index": ev["window"],
                      "characters": [ev["start"], ev["end"]]}  # fmt: skip
    merged: list[list[int]] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [[units(a), text[a:b]] for a, b in merged], marks


def input_paths(out: Path, manifest: Manifest) -> list[Path]:
    """The job's input files that are still there, warning (on stderr) of each that is not.

    Manifests record resolved paths since 2026-12-07; an earlier one's relative path is looked
    for from the current directory (as before), then from the output directory's parent (where
    `decide run in.parquet -o out` was run)."""
    found = []
    for name in manifest.inputs:
        path = Path(name)
        tried = [path] if path.is_absolute() else [path, out.absolute().parent / path]
        here = next((p for p in tried if p.is_file()), None)
        if here is None:
            where = " or ".join(dict.fromkeys(str(p.absolute()) for p in tried))
            log.warning("input file %s is not there (%s): the report shows its documents' "
                        "answers without their text", name, where)  # fmt: skip
        else:
            found.append(here)
    return found


def _read_inputs(out: Path, manifest: Manifest, what: str) -> tuple[Any, list[Path]]:
    """The plan reading the job's input files that are still there as the runner read them
    (`jobs.inputs.inspect_inputs`: a uuid doc_id as its text, categorical columns as their
    values, an all-null-typed column as the other files' type), and those files; (None, [])
    when none is there or they no longer agree (a warning on stderr names the file)."""
    paths = input_paths(out, manifest)
    if not paths:
        return None, []
    try:
        plan = inputs.inspect_inputs(paths, manifest.spec.input, need_questions=False)
    except SpecError as exc:
        log.warning("%s not available for the report: %s", what, exc)
        return None, []
    return plan, paths


def _first_line(exc: Exception) -> str:
    """A polars error's message without the query plan it appends."""
    return next(iter(str(exc).strip().splitlines()), type(exc).__name__)


def _row_question_texts(out: Path, manifest: Manifest, ids: list[str]) -> dict[str, str]:
    """The wording of questions only the input rows ask (per-row questions): the one most rows
    use, with how many other wordings there are."""
    column = manifest.spec.input.questions
    what = "per-row question texts"
    plan, paths = _read_inputs(out, manifest, what) if ids else (None, [])
    if plan is None or not plan.has_questions or plan.dtype(column) == pl.Null:
        return {}
    try:
        found = collect(
            pl.concat([inputs.scan_read(plan, path, [column]) for path in paths])
            .select(pl.col(column).explode().struct.field("id", "text"))
            .filter(pl.col("id").is_in(pl.Series(ids, dtype=pl.String).implode()))
            .group_by("id", "text")
            .len()
            .sort("len", "text", descending=[True, False])
        )
    except (pl.exceptions.PolarsError, OSError) as exc:
        log.warning("%s not available for the report: %s", what, _first_line(exc))
        return {}
    texts: dict[str, str] = {}
    for qid, group in found.group_by("id", maintain_order=True):
        others = group.height - 1
        more = f" (and {others} other wording{'s' if others > 1 else ''})" if others else ""
        texts[str(qid[0])] = f"{group['text'][0]}{more}"
    return texts


def _document_texts(out: Path, manifest: Manifest, ids: list[Any]) -> dict[Any, str]:
    columns = manifest.spec.input
    what, wanted = "document texts", [columns.doc_id, columns.document]
    plan, paths = _read_inputs(out, manifest, what) if ids else (None, [])
    if plan is None:
        return {}
    try:
        found = collect(
            pl.concat([inputs.scan_read(plan, path, wanted) for path in paths])
            .select(pl.col(columns.doc_id).alias("doc_id"), pl.col(columns.document).alias("text"))
            .filter(pl.col("doc_id").is_in(pl.Series(ids).implode()))
            .unique("doc_id", keep="first")
        )
    except (pl.exceptions.PolarsError, OSError) as exc:
        # Inputs changed since the run: the page shows the answers without the text.
        log.warning("%s not available for the report: %s", what, _first_line(exc))
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
