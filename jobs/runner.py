"""The local job runner: parquet in, checked decisions out, resumable.

Order of work: check the inputs' columns and the spec (usage errors exit 2 before any model is
loaded), load the model, compile the questions, survey the ids (duplicates, nulls, per-row
question schemas), open the output directory (refusing a foreign or non-empty one unless resuming),
then stream the input in chunks through the `DecisionEngine`, writing answer parts atomically as
decisions complete. Committed doc ids are skipped on `--resume`, which must name the job's
own input files, unchanged, with ids of the parts' type (`check_resume`). The manifest
(`jobs.manifest`) is rewritten after every part, so a killed run leaves a directory a rerun
continues from. Nothing is created before the first write, so a usage error leaves no trace; a
job with no rows to decide writes one empty part. The report is written by the caller
(`decide.report`), not here.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import polars as pl

from decide.engine import load_model, model_fingerprint
from decide.engine.loader import LoadedModel
from decide.schemas import SchemaError
from decide.schemas.rules import rule_question_ids
from decide.schemas.validate import check_questions as check_schemas

from . import parquet
from .calibrate import ConfidencePlan
from .checks import rule_ids as cel_rule_ids
from .checks import unknown_rule_id
from .columns import JSON, Field, answer_fields, answers_dtype
from .decisions import Decision, DecisionEngine, Item
from .derive import DeriveError
from .evidence import evidence_dtype
from .failures import FailureKind
from .inputs import CARRIED, FILE, ROW, InputPlan, inspect_inputs, stream, survey
from .manifest import CalibrationEntry, Counts, InputFile, Manifest, RulesEntry, Throughput
from .models import resolve_device, resolve_model_path
from .output import OutputDir
from .pack import DocumentTooLong, Packer
from .progress import Progress
from .questionset import QuestionBook, QuestionSet, QuestionsRefused, row_refusal, spec_refusal
from .spec import QUESTION_ID, JobSpec, SpecError, parse_questions
from .window_plan import WindowPlanner

log = logging.getLogger("decide.jobs")


@dataclass
class JobResult:
    output: Path
    total: int = 0  # input rows
    ok: int = 0
    failed: int = 0  # error rows written (this run and resumed ones)
    invalid: int = 0  # input rows with no usable doc_id (in errors.parquet only)
    skipped: int = 0  # rows already committed by an earlier run
    seconds: float = 0.0
    nfe: int = 0
    answer_tokens: int = 0  # slot positions, filler included (this run)
    value_tokens: int = 0  # tokens of the answers' values (this run)
    failures: dict[str, int] = field(default_factory=dict)  # failure kind -> count (this run)

    @property
    def exit_code(self) -> int:
        return 0 if self.failed == 0 and self.invalid == 0 else 1


class RowItems:
    """Input rows → `Item`s: skips committed ids, turns duplicated ids into one error item,
    builds each row's `QuestionSet` (the spec's, or its per-row questions', cached by
    fingerprint)."""

    def __init__(self, spec: JobSpec, plan: InputPlan, book: QuestionBook) -> None:
        self.spec, self.plan, self.book = spec, plan, book
        self.global_questions: QuestionSet | None = (
            book.build(spec.questions) if spec.questions else None
        )

    def rows(
        self, chunks: Iterator[pl.DataFrame], skip: set[Any], dupes: dict
    ) -> Iterator[tuple[dict[str, Any], str | None]]:
        """(row, None) for every row to decide, or (row, error) for a duplicated id (once)."""
        cols = self.plan.columns
        seen_dupes: set[Any] = set()
        for chunk in chunks:
            # Carried columns stay columnar (Python objects would cut nanoseconds and refuse
            # dates past year 9999): each row holds its chunk's carried frame and its index.
            carried = chunk.select(self.plan.carried) if self.plan.carried else None
            plain = chunk.drop(self.plan.carried) if carried is not None else chunk
            for i, row in enumerate(plain.iter_rows(named=True)):
                if carried is not None:
                    row[CARRIED] = (carried, i)
                doc_id = row[cols.doc_id]
                if doc_id is None or doc_id in skip:
                    continue
                if doc_id in dupes:
                    if doc_id not in seen_dupes:
                        seen_dupes.add(doc_id)
                        where = ", ".join(f"{Path(f).name} row {r}" for f, r in dupes[doc_id])
                        yield row, f"duplicate doc_id (at {where})"
                    continue
                yield row, None

    def item(self, row: dict[str, Any], error: str | None = None) -> Item:
        cols = self.plan.columns
        extra = {CARRIED: row[CARRIED]} if CARRIED in row else {}
        if error is not None:
            kind = FailureKind.duplicate_doc_id
            return Item(row[cols.doc_id], None, [], error=error, extra=extra, kind=kind)
        questions: QuestionSet | list = self.global_questions or []
        kind = None
        if self.plan.has_questions and row[cols.questions] is not None:
            where = (
                f"row {row[ROW]}" if row.get(ROW) is not None else f"doc_id {row[cols.doc_id]!r}"
            )
            origin = f"{Path(row[FILE]).name} {where}, column {cols.questions!r}"
            try:
                questions = self.book.build(parse_questions(row[cols.questions], origin))
            except SpecError as exc:
                error, kind = f"invalid questions: {exc}", FailureKind.invalid_questions
            except QuestionsRefused as exc:
                error, kind = row_refusal(exc, origin), exc.kind
        return Item(row[cols.doc_id], row[cols.document], questions, error=error, extra=extra,
                    kind=kind)  # fmt: skip


def _frame(
    decisions: list[Decision],
    plan: InputPlan,
    fields: dict[str, Field],
    fingerprints: dict[str, str],
) -> pl.DataFrame:
    conf_dtype = pl.Struct({qid: pl.Float64 for qid in fields})
    errors_dtype = pl.Struct({qid: pl.String for qid in fields})
    schema: dict[str, pl.DataType] = {
        "doc_id": plan.doc_id_type,
        "status": pl.String,
        "error": pl.String,
        "answers": answers_dtype(fields),
        "answers_json": pl.String,
        "confidence": conf_dtype,
        "nfe": pl.Int32,
        "value_tokens": pl.Int32,
        "filler_tokens": pl.Int32,
        "truncated": pl.Boolean,
        "model_fingerprint": pl.String,
        "spec_fingerprint": pl.String,
        "error_kind": pl.String,
        "partial": pl.Boolean,
        "errors": errors_dtype,
        "windows": pl.Int32,  # windows a too-long document was cut into (0: read whole)
        "evidence": evidence_dtype(list(fields)),
        # answers given absent under `absent_below`: {question: {value, confidence}} as JSON
        "withheld_json": pl.String,
    }
    rows = []
    for d in decisions:
        answers = None
        if d.answers is not None:
            answers = {qid: f.cell(d.answers.get(qid)) for qid, f in fields.items()}
        rows.append(
            {
                "doc_id": d.doc_id,
                "status": d.status,
                "error": d.error,
                "answers": answers,
                "answers_json": d.answers_json,
                "confidence": d.confidence,
                "nfe": d.nfe,
                "value_tokens": d.value_tokens,
                "filler_tokens": d.answer_tokens - d.value_tokens,
                "truncated": d.truncated,
                "model_fingerprint": fingerprints["model"],
                "spec_fingerprint": fingerprints["spec"],
                "error_kind": None if d.kind is None else d.kind.value,
                "partial": d.partial,
                "errors": None if d.errors is None else {q: d.errors.get(q) for q in fields},
                "windows": d.windows,
                "evidence": None
                if d.evidence is None
                else {q: e.as_dict() if (e := d.evidence.get(q)) else None for q in fields},
                "withheld_json": None
                if not d.withheld
                else json.dumps(d.withheld, ensure_ascii=False),
            }
        )
    frame = pl.DataFrame(rows, schema=schema, orient="row" if not rows else None)
    return frame.hstack(carried_columns(decisions, plan)) if plan.carried else frame


def carried_columns(decisions: list[Decision], plan: InputPlan) -> pl.DataFrame:
    """The input columns carried to the output, for `decisions` in order, gathered from the
    chunks they were read in (`Decision.extra[CARRIED]`: the chunk's carried frame and the row's
    index in it), so every value keeps its exact type and precision."""
    pieces: list[pl.DataFrame] = []
    source: pl.DataFrame | None = None
    picked: list[int] = []

    def flush() -> None:
        if source is not None and picked:
            pieces.append(source[picked])

    for d in decisions:
        ref = d.extra.get(CARRIED)
        if ref is None:  # no input row behind it: nulls
            flush()
            source, picked = None, []
            pieces.append(pl.DataFrame([pl.Series(n, [None], t) for n, t in
                                        plan.carried_schema.items()]))  # fmt: skip
            continue
        frame, index = ref
        if frame is not source:
            flush()
            source, picked = frame, []
        picked.append(index)
    flush()
    if not pieces:
        return pl.DataFrame([pl.Series(n, [], t) for n, t in plan.carried_schema.items()])
    return pl.concat(pieces, how="vertical_relaxed")


def fit_columns(d: Decision, fields: dict[str, Field], partial_rows: str) -> None:
    """An answer its column cannot hold fails on its own (the row partial, or an error row with
    `partial_rows: error`); `answers_json` keeps the value."""
    if d.answers is None:
        return
    for qid, f in fields.items():
        why = f.overflow(d.answers.get(qid))
        if why is None:
            continue
        if partial_rows == "error":
            d.status, d.kind = "error", FailureKind.answer_invalid
            d.error = f"question {qid!r}: {why}"
            d.answers = d.answers_json = d.confidence = d.errors = None
            d.partial = False
            return
        d.answers = {k: v for k, v in d.answers.items() if k != qid}
        d.confidence = {k: v for k, v in (d.confidence or {}).items() if k != qid}
        d.errors = {**(d.errors or {}), qid: f"{why}; answers_json holds it"}
        d.partial = True


@dataclass
class JobSetup:
    """Everything known before the first document is decided."""

    spec: JobSpec
    plan: InputPlan
    out: OutputDir
    output: Path
    fingerprints: dict[str, str]
    found: Any  # inputs.Survey
    fields: dict[str, Field]
    committed: set[Any]
    previous: dict[str, int]
    prior: Manifest | None  # of an earlier run of this directory (resume)
    manifest: Manifest
    started: float
    confidence: ConfidencePlan | None = None  # calibration and review queue, when asked for
    earlier_seconds: float = 0.0  # the seconds earlier runs of this directory took (resume)


def input_file(path: Path) -> InputFile:
    """`path` as the manifest records it: resolved, with its size and its parquet footer's hash
    (the footer holds every row group's row count, column statistics and offsets, so a file
    rewritten with other rows differs; reading it costs one seek, whatever the file's size)."""
    resolved = path.resolve()
    try:
        size = resolved.stat().st_size
        with resolved.open("rb") as handle:
            handle.seek(max(size - 8, 0))
            tail = handle.read(8)
            length = int.from_bytes(tail[:4], "little") if len(tail) == 8 else 0
            handle.seek(max(size - 8 - length, 0))
            footer = handle.read(length + 8)
    except OSError as exc:
        raise SpecError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    return InputFile(path=str(resolved), bytes=size,
                     footer_sha256=hashlib.sha256(footer).hexdigest())  # fmt: skip


def _recorded_inputs(prior: Manifest) -> dict[Path, tuple[str, InputFile]]:
    """The input files a job started with, by resolved path, with the name the manifest gives.
    Manifests written before 2026-12-07 hold the paths as given, with no sizes: a relative one
    is read from the current directory (where a resume is normally run, as the job was)."""
    if prior.input_files:
        return {Path(f.path): (f.path, f) for f in prior.input_files}
    recorded = {}
    for name in prior.inputs:
        path = Path(name).resolve()
        shown = name if Path(name).is_absolute() else f"{name} (read as {path})"
        recorded[path] = (shown, InputFile(path=str(path)))
    return recorded


def typed_like_parts(fields: dict[str, Field], out: OutputDir, output: Path) -> dict[str, Field]:
    """A resumed job writes its answers with the types of the parts already written, so that
    they still read together: a column an earlier version of `decide` wrote as JSON text (an
    `allOf` integer or a Pydantic model before 2026-12-07) stays JSON text. Any other difference
    is refused."""
    parts = out.parts()
    if not parts:
        return fields
    try:
        written = parquet.schema(parts[0]).get("answers")
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise SpecError(f"{parts[0]}: unreadable answer part ({exc})") from exc
    if not isinstance(written, pl.Struct):
        return fields
    before = {f.name: f.dtype for f in written.fields}
    kept = dict(fields)
    for qid, now in fields.items():
        if qid not in before or before[qid] == now.dtype:
            continue
        if before[qid] == pl.String:
            kept[qid] = JSON
            continue
        raise SpecError(
            f"{output}: cannot resume: the answers of {qid!r} were written as {before[qid]} and "
            f"would now be {now.dtype}; decide these into a new output directory"
        )
    return kept


def check_resume(out: OutputDir, plan: InputPlan, output: Path) -> None:
    """Refuse (`SpecError`, exit 2, before any work) a resume that would mix its rows with the
    earlier ones: ids of another type than the parts' (their parts could not be read together),
    or other input files than the job started with (counts, duplicate ids and the report's
    document texts are of the job's inputs)."""
    id_column = plan.columns.doc_id
    for part in out.parts():
        try:
            part_type = parquet.schema(part).get("doc_id")
        except (pl.exceptions.PolarsError, OSError) as exc:
            raise SpecError(f"{part}: unreadable answer part ({exc})") from exc
        if part_type is not None and part_type != plan.doc_id_type:
            raise SpecError(
                f"{output}: cannot resume: column {id_column!r} of {plan.files[0]} is "
                f"{plan.doc_id_type}, but the job's answers ({part.relative_to(output)}) hold "
                f"doc_id as {part_type}; resume with the inputs the job started with, or decide "
                "these into a new output directory"
            )
    prior = out.previous_manifest()
    if prior is None or not (prior.input_files or prior.inputs):
        return
    recorded = _recorded_inputs(prior)
    named: dict[Path, tuple[Path, InputFile]] = {}
    for given in plan.files:
        now = input_file(given)
        named[Path(now.path)] = (given, now)
    problems = []
    for path, (given, now) in named.items():
        before = recorded.get(path, (None, None))[1]
        if before is None:
            problems.append(f"{given} is not one of them")
        elif before.bytes is not None and (before.bytes, before.footer_sha256) != (
            now.bytes, now.footer_sha256,
        ):  # fmt: skip
            size = f"{before.bytes} bytes then, {now.bytes} now"
            problems.append(f"{given} has changed since the job started ({size})")
    missing = [shown for path, (shown, _) in recorded.items() if path not in named]
    if missing:
        problems.append(f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not named")
    if problems:
        started = ", ".join(shown for shown, _ in recorded.values())
        raise SpecError(
            f"{output}: cannot resume: a resume must name the same, unchanged input files as the "
            f"job it continues (manifest.json: {started}); {'; '.join(problems)}. Name exactly "
            "those files, or decide other inputs into a new output directory"
        )


def prepare(
    spec: JobSpec,
    plan: InputPlan,
    out: OutputDir,
    output: Path,
    *,
    model_path: Path,
    model_type: str,
    batch_size: int,
    device: str,
    dtype: str | None = None,
    engine: str = "local",
    force_calibration: bool = False,
) -> JobSetup:
    """Fingerprints, resume state, id survey and answer typing (nothing written yet)."""
    started = time.monotonic()
    fingerprints = {"model": model_fingerprint(model_path), "spec": spec.fingerprint()}
    out.lock()  # before the done ids are read: one run at a time writes a directory
    out.check_fingerprints(fingerprints)
    check_resume(out, plan, output)
    prior = out.previous_manifest()
    committed, previous = out.committed()
    found = survey(plan)
    # Every id a rule reads must be one some row may ask (the spec's or a per-row question): a
    # rule over an id a row does not ask does not apply to it, so a typo would apply to none.
    asked = {q.id for q in spec.questions} | set(found.question_schemas)
    unknown = unknown_rule_id(rule_ids(spec), asked, "this job")
    if unknown is not None:
        raise SpecError(unknown)
    schemas: dict[str, list[Any]] = {q.id: [q.schema_] for q in spec.questions}
    for qid, texts in found.question_schemas.items():
        # Only what a row can ask types a column: a refused question (a bad id, a schema that
        # does not compile) fails its row and neither names nor types the answers.
        usable = [schema for t in texts if (schema := _askable(qid, t)) is not None]
        if usable:
            schemas.setdefault(qid, []).extend(usable)
    if not schemas:  # every row would fail, and the answers would have no column to go in
        some = " (those the rows list do not compile)" if found.question_schemas else ""
        raise SpecError(f"no question to ask: the spec has none and no row of the input asks "
                        f"one{some}; give the spec questions or the rows a questions column "
                        "that lists some")  # fmt: skip
    files = [input_file(p) for p in plan.files]
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    manifest = Manifest.parse({
        "status": "running",
        # A resume keeps the first run's start, and adds its own seconds to the earlier ones.
        "started": prior.started if prior is not None and prior.started else now,
        "fingerprints": fingerprints,
        "model": str(model_path),
        "model_type": model_type,
        "inputs": [f.path for f in files],
        "input_files": [f.model_dump() for f in files],
        "spec": spec.model_dump(by_alias=True, mode="json"),
        "engine": engine,
        "batch_size": batch_size,
        "device": device,
        "dtype": dtype,
    })  # fmt: skip
    confidence = None
    if spec.calibration is not None or spec.review_below is not None:
        confidence = ConfidencePlan(
            spec.calibration, spec.review_below, fingerprints,
            {qid: s[0] for qid, s in schemas.items() if s}, force=force_calibration,
        )  # fmt: skip
        entry = confidence.manifest_entry(prior.model_dump() if prior is not None else {})
        manifest.calibration = CalibrationEntry.model_validate(entry)
    elif prior is not None and (prior.calibration or prior.review):
        raise SpecError(f"{output}: the earlier run used a calibration or review queue; resume "
                        "with the same --calibration and --review-below")  # fmt: skip
    earlier = (prior.seconds or 0.0) if prior is not None else 0.0
    fields = typed_like_parts(answer_fields(schemas), out, output)
    return JobSetup(
        spec, plan, out, output, fingerprints, found, fields, committed,
        previous, prior, manifest, started, confidence, earlier,
    )  # fmt: skip


def to_decide(setup: JobSetup) -> int:
    """Rows this run still has to decide (one per doc id, resumed ones excluded)."""
    found, committed = setup.found, setup.committed
    todo = found.rows - len(committed) - len(found.null_ids)
    todo -= sum(len(v) - 1 for k, v in found.duplicates.items() if k not in committed)
    return max(todo, 0)


def write_decisions(
    setup: JobSetup,
    decisions: Iterator[Decision],
    *,
    part_rows: int = 1000,
    part_seconds: float = 60.0,
    progress: bool | None = None,
) -> JobResult:
    """Write decisions as they come: atomic parts, manifest after each, errors at the end (the
    caller writes the report: `decide.report`). On any exception the manifest records `aborted`
    and what was decided is kept."""
    out, plan, manifest, found = setup.out, setup.plan, setup.manifest, setup.found
    previous = setup.previous
    result = JobResult(output=setup.output, total=found.rows, skipped=len(setup.committed))
    result.ok, result.failed = previous.get("ok", 0), previous.get("error", 0)
    invalid = pl.DataFrame(
        {
            "doc_id": [None] * len(found.null_ids),
            "error": [f"{Path(f).name} row {r}: doc_id is null" for f, r in found.null_ids],
        },
        schema={"doc_id": plan.doc_id_type, "error": pl.String},
    )
    result.invalid = invalid.height

    def counts() -> Counts:
        return Counts(total=result.total, ok=result.ok, error=result.failed,
                      invalid_rows=result.invalid, resumed=result.skipped,
                      failures=dict(result.failures))  # fmt: skip

    manifest.counts = counts()
    narrowed = dict(setup.prior.rules.narrowed) if setup.prior is not None else {}
    manifest.rules = RulesEntry(declared=setup.spec.rules is not None, narrowed=narrowed)
    out.create()
    out.write_manifest(manifest)
    pending: list[Decision] = []
    last_flush = time.monotonic()
    bar = Progress(total=to_decide(setup), enabled=progress)

    def flush() -> None:
        nonlocal pending, last_flush
        if pending:
            # Taken off the list before writing: an interrupt after the part is in place must
            # not write the same rows again (a failed write loses them to the resume instead).
            batch, pending = pending, []
            frame = _frame(batch, plan, setup.fields, setup.fingerprints)
            if setup.confidence is not None:
                frame = setup.confidence.frame(frame)
            out.write_part(frame)
        last_flush = time.monotonic()
        manifest.counts = counts()
        manifest.rules.narrowed = dict(narrowed)
        manifest.seconds = round(setup.earlier_seconds + time.monotonic() - setup.started, 3)
        out.write_manifest(manifest)

    try:
        for decision in decisions:
            fit_columns(decision, setup.fields, setup.spec.partial_rows)
            pending.append(decision)
            result.nfe += decision.nfe
            result.answer_tokens += decision.answer_tokens
            result.value_tokens += decision.value_tokens
            for pointer, n in decision.narrowed.items():
                narrowed[pointer] = narrowed.get(pointer, 0) + n
            if decision.ok:
                result.ok += 1
            else:
                result.failed += 1
                reason = (decision.kind or FailureKind.internal_error).value
                result.failures[reason] = result.failures.get(reason, 0) + 1
            bar.advance(1)
            if len(pending) >= part_rows or time.monotonic() - last_flush >= part_seconds:
                flush()
        flush()
    except BaseException:
        manifest.status = "aborted"
        bar.close()
        try:
            flush()  # decisions already made are worth keeping; the resume skips them
        except OSError as exc:
            log.error("could not save the last decisions or record the abort: %s", exc)
        raise
    bar.close()
    if not out.parts():  # nothing to decide: an empty part keeps the output readable and typed
        frame = _frame([], plan, setup.fields, setup.fingerprints)
        if setup.confidence is not None:  # with the review and raw confidence columns
            frame = setup.confidence.frame(frame)
        out.write_part(frame)
    out.write_errors(invalid)
    if setup.confidence is not None and setup.spec.review_below is not None:
        manifest.review = setup.confidence.finish(setup.output)
    result.seconds = time.monotonic() - setup.started
    decided_now = result.ok + result.failed - previous.get("ok", 0) - previous.get("error", 0)
    manifest.status = "complete"
    manifest.finished = datetime.now(timezone.utc).isoformat(timespec="seconds")
    manifest.seconds = round(setup.earlier_seconds + result.seconds, 3)
    manifest.counts = counts()
    manifest.throughput = Throughput(documents=decided_now, nfe=result.nfe,
                                     answer_tokens=result.answer_tokens,
                                     value_tokens=result.value_tokens)  # fmt: skip
    out.write_manifest(manifest)
    return result


def rule_ids(spec: JobSpec) -> dict[str, str]:
    """Every question id the spec's rules (JSON Schema or CEL) read, with a pointer; a rule that
    does not parse is a `SpecError`."""
    if spec.schema_rules is not None:
        try:
            return rule_question_ids(spec.schema_rules)
        except SchemaError as exc:
            raise SpecError(f"rules refused: {exc}") from exc
    if not spec.cel_rules:
        return {}
    try:
        return cel_rule_ids([(r.rule, r.message) for r in spec.cel_rules])
    except DeriveError as exc:
        raise SpecError(f"rules: {exc}") from exc


def check_questions(spec: JobSpec, book: QuestionBook, packer: Packer) -> None:
    """Compile the spec's questions (and its rules against them) up front, and check that they
    fit the model with a one-word document: a refusal is a usage error, not one error row per
    document."""
    rule_ids(spec)  # malformed rules, even with per-row questions
    if not spec.questions:
        return
    try:
        qset = book.build(spec.questions)
    except QuestionsRefused as exc:
        raise SpecError(spec_refusal(exc)) from exc
    if qset.asked:
        from .pack import QuestionsDoNotFit
        from .window_plan import NoRoom, linked_by_rules

        planner = WindowPlanner(packer, spec.windows)
        linked = linked_by_rules(qset)
        try:
            packer.prompt("x", qset.asked)
        except DocumentTooLong as exc:
            # With windows each block is asked on its own (`jobs.longdocs`).
            if packer.long_documents == "windows" and planner.fits(qset.asked, linked):
                return
            if isinstance(exc, QuestionsDoNotFit):  # truncate: says no truncation can help
                why = str(exc)
            else:  # a one-word document does not fit: --truncate would not help either
                fixed = len(planner.prompt("", qset.asked, {})) + packer.answer_length(qset.asked)
                why = (f"the questions and answers alone need {fixed} tokens, the model takes "
                       f"{packer.max_length}")  # fmt: skip
                if packer.long_documents == "windows":
                    for k, group in enumerate(planner.groups(qset.asked, linked), start=1):
                        try:
                            planner.room(group, label=f"block {k}")
                        except NoRoom as no_room:
                            why += f"; read in windows, {no_room}"
                            break
                why += "; no truncation of the document can make it fit"
            raise SpecError(
                f"the spec's {len(qset)} questions do not fit the model, whatever the "
                f"document: {why}"
            ) from exc


def run_job(
    spec: JobSpec,
    inputs: list[Path],
    output: Path,
    *,
    model: LoadedModel | str | Path | None = None,
    resume: bool = False,
    batch_size: int = 16,
    device: str = "auto",
    dtype: str = "auto",
    part_rows: int = 1000,
    part_seconds: float = 60.0,
    progress: bool | None = None,
    force_calibration: bool = False,
) -> JobResult:
    """Decide every row of `inputs` into `output`. Usage errors raise `SpecError` (or
    `ModelLoadError`) before anything is written; write failures raise `OutputError`."""
    plan = inspect_inputs(inputs, spec.input, need_questions=not spec.questions)
    out = OutputDir(output, resume=resume)
    check_resume(out, plan, output)  # before the model is loaded (`prepare` checks it again)
    spec = spec.continuing(out.recorded_decoding())  # a resumed job keeps its step cap
    dtype = resumed_dtype(out, dtype)
    if isinstance(model, LoadedModel):
        loaded = model
    else:
        path = resolve_model_path(model if model is not None else spec.model)
        loaded = load_model(path, device=resolve_device(device), dtype=dtype)
    check_dtype(out, dtype_name(loaded.dtype), output)
    engine = DecisionEngine.for_spec(loaded, spec, batch_size=batch_size)
    check_questions(spec, engine.book, engine.packer)
    try:
        setup = prepare(
            spec, plan, out, output, model_path=loaded.path, model_type=loaded.config.model_type,
            batch_size=batch_size, device=str(loaded.model.device),
            dtype=dtype_name(loaded.dtype), force_calibration=force_calibration,
        )  # fmt: skip
        rows = RowItems(spec, plan, engine.book)
        chunks = stream(plan, chunk_rows=max(256, 8 * batch_size))
        found = rows.rows(chunks, setup.committed, setup.found.duplicates)
        items = (rows.item(row, error) for row, error in found)
        return write_decisions(
            setup, engine.decide(items), part_rows=part_rows, part_seconds=part_seconds,
            progress=progress,
        )  # fmt: skip
    finally:
        out.unlock()


def dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def resumed_dtype(out: OutputDir, dtype: str) -> str:
    """The dtype to decide in: a resumed job keeps the one it started with (bf16 and fp32 can
    flip close answers, so one output would mix both) unless another is named explicitly, which
    `check_dtype` refuses."""
    prior = out.previous_manifest() if out.resume else None
    if prior is None or prior.dtype is None or dtype != "auto":
        return dtype
    return prior.dtype


def check_dtype(out: OutputDir, dtype: str, output: Path) -> None:
    prior = out.previous_manifest() if out.resume else None
    if prior is not None and prior.dtype not in (None, "auto") and prior.dtype != dtype:
        raise SpecError(
            f"{output}: cannot resume in {dtype}: the job decided its rows in {prior.dtype} "
            f"(close answers can differ between the two); resume with --dtype {prior.dtype}, or "
            "decide into a new output directory"
        )


def _askable(qid: Any, text: Any) -> Any:
    """A per-row question's schema (parsed) when its id and schema could be asked, else None."""
    if not isinstance(qid, str) or re.fullmatch(QUESTION_ID, qid) is None:
        return None
    try:
        schema = json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return None
    return schema if check_schemas([(qid, schema)])[0].supported else None
