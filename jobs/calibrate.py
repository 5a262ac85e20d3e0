"""`decide calibrate` and calibrated runs: gold labels in, `calibration.json` out, and back in.

Contract. `fit_from_job(out_dir, gold)` reads a decided job's answer parts (the engine's own
confidences: `raw_confidence` where the job was itself calibrated, else `confidence`) and a gold
parquet (`doc_id` + `gold`, the JSON text of the decision object, as `decide train` reads it,
or a struct or map column holding it; ids read as the runner reads input ids: a uuid as its text,
a categorical as its values), marks every answer right or wrong (strings case-insensitively,
a key an object leaves out equal to null, everything else exactly), fits the
maps of `jobs.calibration` and returns the calibration document, checked against
`schemas/calibration.schema.json`, carrying the job's model and spec fingerprints. A gold file
with a doc_id on more than one row is refused (`SpecError` naming the ids and rows). Gold ids
match by value, or by text where one side holds integers and the other strings. A per-row
question's schema is the gold row's (`questions` column), else the job's input row's. Gold rows
whose id is null or not in the job, whose job row failed, whose gold is not a JSON object, and
gold values invalid against the question's schema, of a question with no known schema, or whose
job confidence is not in [0, 1] (NaN) are skipped with one message each, never fatal.
`ConfidencePlan` is the run side: it loads a calibration file (refusing one fitted for another
model or spec unless forced), replaces each answer's confidence by its calibrated
probability (answers never change; the engine's value moves to `raw_confidence`), adds the
`review` column for `review_below` (a row with an answer below it, a failed answer or a
confidence that is not a number), and at the end writes `review.parquet` and the review summary
that `manifest.json` and `report.json` carry.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import polars as pl

from decide.schemas.drafts import validator_class

from . import calibration as cal
from . import parquet
from .gold import gold_object as _gold_object
from .inputs import inspect_inputs, scan_read, values_expr
from .manifest import Manifest
from .spec import SpecError, absent_value, parse_questions
from .windows import same_value

log = logging.getLogger("decide.calibrate")
CALIBRATION_FORMAT = 1


def calibration_schema() -> dict[str, Any]:
    text = resources.files("decide.schemas").joinpath("calibration.schema.json").read_text()
    return json.loads(text)


def validate_calibration(document: Any, origin: str = "calibration") -> None:
    """Raise `SpecError` naming the first field that breaks `calibration.schema.json`."""
    validator = jsonschema.Draft202012Validator(calibration_schema())
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
    if errors:
        where = "/" + "/".join(str(p) for p in errors[0].absolute_path)
        raise SpecError(f"{origin}: not a calibration file (at {where}: {errors[0].message})")
    # JSON Schema cannot refuse NaN or infinity (Python's JSON reads and writes them): a map
    # with one would make every confidence NaN, and NaN is below no review threshold.
    for part in ("questions", "kinds"):
        for name, entry in document[part].items():
            for key, value in entry["map"].items():
                if isinstance(value, float) and not math.isfinite(value):
                    raise SpecError(f"{origin}: not a calibration file (at /{part}/{name}/map/"
                                    f"{key}: {value} is not a finite number)")  # fmt: skip


def answers_match(answer: Any, gold: Any) -> bool:
    """Strings case-insensitively (an uncased vocabulary cannot spell upper case), numbers by
    value (3 == 3.0, but booleans are not numbers), containers element by element. In an
    object a key one side leaves out matches the other's null (`{"a": 1}` is `{"a": 1, "b":
    null}`): JSON Schema tells them apart, but gold written by people leaves nulls out, and a
    struct gold column writes every key (null for one left out)."""
    if isinstance(answer, str) and isinstance(gold, str):
        return answer.casefold() == gold.casefold()
    if isinstance(answer, bool) or isinstance(gold, bool):
        return answer is gold
    if isinstance(answer, int | float) and isinstance(gold, int | float):
        return answer == gold
    if isinstance(answer, dict) and isinstance(gold, dict):
        keys = answer.keys() | gold.keys()
        return all(answers_match(answer.get(k), gold.get(k)) for k in keys)
    if isinstance(answer, list) and isinstance(gold, list):
        return len(answer) == len(gold) and all(map(answers_match, answer, gold))
    return answer is None and gold is None


# A labelled answer of a question with an absent value: (the value as decoded, its confidence,
# the gold value, the question's absent value).
Labelled = tuple[Any, float, Any, Any]


@dataclass
class Labels:
    """Per question: the engine's confidences, right/wrong, and the schema kind."""

    confidence: dict[str, list[float]] = field(default_factory=dict)
    correct: dict[str, list[int]] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)
    options: dict[str, int] = field(default_factory=dict)  # K of finite questions
    messages: list[str] = field(default_factory=list)
    rows: int = 0  # gold rows used
    # Questions with an absent value (`absent:`, or null): per answer the value as decoded
    # (before any `absent_below` withheld it), its confidence, the gold value and the absent one.
    decoded: dict[str, list[Labelled]] = field(default_factory=dict)

    def add(self, qid: str, schema: Any, confidence: float, right: bool) -> None:
        self.kinds.setdefault(qid, cal.schema_kind(schema))
        self.options.setdefault(qid, cal.schema_options(schema))
        self.confidence.setdefault(qid, []).append(float(confidence))
        self.correct.setdefault(qid, []).append(int(right))

    def flat(self) -> tuple[np.ndarray, np.ndarray, list[str]]:
        qids = [q for q in self.confidence for _ in self.confidence[q]]
        conf = np.array([c for q in self.confidence for c in self.confidence[q]], float)
        right = np.array([y for q in self.correct for y in self.correct[q]], float)
        return conf, right, qids


DUPLICATES_NAMED = 5  # duplicated gold doc ids an error names; the rest are counted


def refuse_duplicate_ids(gold: pl.DataFrame, gold_path: Path) -> None:
    """Raise `SpecError` when a doc_id has more than one gold row, naming the first few ids and
    their rows (numbered from 0, as the skipped-row messages are): counting such a row twice
    would weigh its answers double, and two different golds for one document are a mistake that
    no choice between them would fix. Null ids are left to be skipped (not in the job)."""
    repeated = (
        gold.select("doc_id")
        .with_row_index("row")
        .drop_nulls("doc_id")
        .group_by("doc_id", maintain_order=True)
        .agg(pl.col("row"))
        .filter(pl.col("row").list.len() > 1)
        .rows()
    )
    if not repeated:
        return
    named = "; ".join(
        f"doc_id {doc_id!r} at rows {', '.join(map(str, where))}"
        for doc_id, where in repeated[:DUPLICATES_NAMED]
    )
    more = len(repeated) - DUPLICATES_NAMED
    named += f"; and {more} more doc_id{'s' if more > 1 else ''}" if more > 0 else ""
    raise SpecError(
        f"{gold_path}: {len(repeated)} doc_id{'s' if len(repeated) > 1 else ''} with more than "
        f"one gold row ({named}); keep one gold row per document"
    )


def _by_text(job_dtype: pl.DataType, gold_dtype: pl.DataType) -> bool:
    """Whether doc ids are matched by their text: one column holds integers and the other
    strings (a gold file written with "1038" for a job's 1038); else they match as they are (by
    Python equality: 1038.0 is 1038)."""
    return (job_dtype.is_integer() and gold_dtype == pl.String) or (
        gold_dtype.is_integer() and job_dtype == pl.String
    )


def _input_questions(manifest: Manifest, wanted: set[Any], by_text: bool) -> tuple[dict, list]:
    """The per-row questions the job's input rows asked, by doc id (as text when `by_text`), for
    the doc ids in `wanted`; and a message per input file that could not be read. A job's answer
    parts do not carry the input's `questions` column, so a gold row without questions of its
    own finds its schemas here (an input moved since the run leaves them unknown)."""
    column, id_column = manifest.spec.input.questions, manifest.spec.input.doc_id
    paths = [Path(p) for p in ([f.path for f in manifest.input_files] or manifest.inputs)]
    found: dict[Any, Any] = {}
    problems = []
    for path in paths:
        try:
            names = parquet.schema(path)
            if column not in names or id_column not in names:
                continue
            # Read as the runner read it: a uuid doc_id as its text, a categorical as its values.
            plan = inspect_inputs([path], manifest.spec.input, need_questions=False)
            if plan.dtype(column) == pl.Null:
                continue
            ids = pl.col(id_column).cast(pl.String) if by_text else pl.col(id_column)
            frame = (
                scan_read(plan, path, [id_column, column])
                .select(ids.alias("doc_id"), pl.col(column).alias("questions"))
                .filter(pl.col("doc_id").is_in(list(wanted)))
                .collect()
            )
        except (OSError, pl.exceptions.PolarsError, SpecError) as exc:
            why = next(iter(str(exc).strip().splitlines()), type(exc).__name__)
            problems.append(f"{path}: cannot read the job's input for its per-row questions "
                            f"({why})")  # fmt: skip
            continue
        for doc_id, asked in frame.iter_rows():
            found.setdefault(doc_id, asked)
    return found, problems


def _usable_confidence(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and 0.0 <= value <= 1.0


def collect_labels(
    out_dir: Path, gold_path: Path, gold_column: str = "gold"
) -> tuple[Labels, dict]:
    """Match the gold parquet against the job in `out_dir`; (labels, fingerprints)."""
    manifest = Manifest.read(out_dir)
    parts = sorted((out_dir / "answers").glob("part-*.parquet"))
    if not parts:
        raise SpecError(f"{out_dir}: no answer parts in {out_dir / 'answers'}")
    try:
        gold = parquet.read(gold_path)
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise SpecError(f"{gold_path}: cannot read the gold parquet ({exc})") from exc
    for column in ("doc_id", gold_column):
        if column not in gold.columns:
            raise SpecError(f"{gold_path}: no {column!r} column (columns: {gold.columns})")
    # Gold ids as the runner reads input ids: a uuid as its text, a categorical as its values.
    ids = values_expr(gold_path, "doc_id", gold.schema["doc_id"])
    if ids is not None:
        gold = gold.with_columns(ids.alias("doc_id"))
    refuse_duplicate_ids(gold, gold_path)
    gold_type = gold.schema[gold_column]
    job_schema = parquet.scan(parts[0]).collect_schema()
    names = job_schema.names()
    conf_col = "raw_confidence" if "raw_confidence" in names else "confidence"
    columns = ["doc_id", "status", "error", "answers_json", conf_col]
    columns += ["withheld_json"] if "withheld_json" in names else []  # jobs before 2026-12-06
    answers = pl.concat([parquet.read(p, columns=columns) for p in parts])
    by_text = _by_text(job_schema["doc_id"], gold.schema["doc_id"])

    def key(value: Any) -> Any:
        return str(value) if by_text and value is not None else value

    by_id = {key(row[0]): row[1:] for row in answers.iter_rows()}
    questions = {q.id: q for q in manifest.spec.questions}
    labels = Labels()
    has_questions = "questions" in gold.columns
    wanted = {key(d) for d in gold["doc_id"].to_list() if d is not None}
    asked_by_input, problems = _input_questions(manifest, wanted, by_text)
    labels.messages += problems
    for i, row in enumerate(gold.iter_rows(named=True)):
        where = f"{gold_path.name} row {i} (doc_id {row['doc_id']!r})"
        if row["doc_id"] is None:
            labels.messages.append(f"{where}: skipped, doc_id is null")
            continue
        doc_id = key(row["doc_id"])
        if doc_id not in by_id:
            labels.messages.append(f"{where}: skipped, doc_id not in the job")
            continue
        status, failure, answers_json, confidence, *rest = by_id[doc_id]
        if status != "ok":
            labels.messages.append(f"{where}: skipped, the job's row failed ({failure})")
            continue
        try:
            truth = _gold_object(row[gold_column], gold_type)
        except (json.JSONDecodeError, TypeError) as exc:
            labels.messages.append(f"{where}: skipped, {gold_column} is not JSON text ({exc})")
            continue
        if not isinstance(truth, dict):
            labels.messages.append(f"{where}: skipped, {gold_column} is not a JSON object")
            continue
        # The row's questions: the gold row's own (`questions` column), else those its input
        # row asked, over the spec's.
        row_questions = dict(questions)
        raw = row["questions"] if has_questions else None
        origin = where
        if raw is None and asked_by_input.get(doc_id) is not None:
            raw, origin = asked_by_input[doc_id], f"{where}, the job's input row"
        if raw is not None:
            try:
                row_questions |= {q.id: q for q in parse_questions(raw, origin)}
            except SpecError as exc:
                labels.messages.append(f"{where}: skipped, {exc}")
                continue
        got = json.loads(answers_json)
        withheld = json.loads(rest[0]) if rest and rest[0] is not None else {}
        used = False
        for qid, value in truth.items():
            if qid not in got or confidence.get(qid) is None:
                labels.messages.append(f"{where}: gold for {qid!r} skipped, the job has no "
                                       "answer to it")  # fmt: skip
                continue
            if not _usable_confidence(confidence[qid]):
                labels.messages.append(f"{where}: gold for {qid!r} skipped, the job's "
                                       f"confidence {confidence[qid]!r} is not a number in "
                                       "[0, 1]")  # fmt: skip
                continue
            question = row_questions.get(qid)
            if question is None:
                labels.messages.append(f"{where}: gold for {qid!r} skipped, its schema is "
                                       "unknown (not a question of the spec, and no per-row "
                                       "questions in the gold or the job's input)")  # fmt: skip
                continue
            schema = question.schema_
            error = validator_class(schema)(schema).iter_errors(value)
            first = next(error, None)
            if first is not None:
                labels.messages.append(f"{where}: gold for {qid!r} skipped, invalid against the "
                                       f"question schema ({first.message})")  # fmt: skip
                continue
            labels.add(qid, schema, confidence[qid],
                       answers_match(got[qid], value))  # fmt: skip
            # `absent_below` withholds decoded answers only: a derived one is never withheld.
            declared, absent = absent_value(schema, question.absent)
            if declared and question.derive is None:
                held = withheld.get(qid)
                decoded = (got[qid], confidence[qid]) if held is None else (
                    held["value"], held["confidence"])  # fmt: skip
                if _usable_confidence(decoded[1]):
                    labels.decoded.setdefault(qid, []).append((*decoded, value, absent))
            used = True
        labels.rows += used
    return labels, dict(manifest.fingerprints)


# The thresholds `choose_absent_below` tries: round numbers, dense near 1 where an engine's
# confidences crowd (a finer grid would fit the labels' noise).
ABSENT_GRID = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 0.999)


def _right_at(items: list[Labelled], threshold: float | None) -> tuple[int, int]:
    """(answers right, answers withheld) when `absent_below` is `threshold`."""
    right = held = 0
    for value, p, gold, absent in items:
        if threshold is not None and p < threshold and not same_value(value, absent):
            value, held = absent, held + 1
        right += answers_match(value, gold)
    return right, held


def choose_absent_below(
    items: list[Labelled], grid: tuple[float, ...] = ABSENT_GRID
) -> float | None:
    """The threshold of `grid` under which withholding (`jobs.withhold`) gets the most of
    `items` right; None when none gets more right than no threshold (the lowest threshold wins
    a tie: the fewest answers changed)."""
    best, chosen = _right_at(items, None)[0], None
    for t in grid:
        right, _ = _right_at(items, t)
        if right > best:
            best, chosen = right, t
    return chosen


def suggest_absent_below(
    decoded: dict[str, list[Labelled]],
    kinds: dict[str, str],
    min_labels: int = cal.MIN_LABELS,
    min_pool: int = cal.MIN_POOL,
) -> dict[str, dict[str, Any]]:
    """Per question, the `absent_below` chosen by `choose_absent_below` on its own labels when
    it has at least `min_labels`, else on every label of its schema kind (`kinds`, all
    questions of the kind pooled) when those are at least `min_pool`, else none: the pooling rule
    of the calibration maps. Each entry counts the question's own labels: `labels`,
    `absent_gold`, `right` as decoded, and `right_at_threshold` and `withheld` under the
    threshold; `fitted_on` says which labels chose it ("question", "kind" or "none")."""
    pools: dict[str, list[Labelled]] = {}
    for qid, items in decoded.items():
        pools.setdefault(kinds[qid], []).extend(items)
    pooled = {kind: choose_absent_below(items) if len(items) >= min_pool else None
              for kind, items in pools.items()}  # fmt: skip
    out = {}
    for qid, items in decoded.items():
        if len(items) >= min_labels:
            fitted_on, threshold = "question", choose_absent_below(items)
        elif len(pools[kinds[qid]]) >= min_pool:
            fitted_on, threshold = "kind", pooled[kinds[qid]]
        else:
            fitted_on, threshold = "none", None
        right_at, withheld = _right_at(items, threshold)
        out[qid] = {
            "labels": len(items),
            "absent_gold": sum(same_value(gold, absent) for _, _, gold, absent in items),
            "right": _right_at(items, None)[0],
            "threshold": threshold,
            "right_at_threshold": right_at,
            "withheld": withheld,
            "fitted_on": fitted_on,
        }
    return out


def build_document(
    labels: Labels,
    fingerprints: dict[str, str],
    *,
    job: str,
    gold: str,
    min_labels: int = cal.MIN_LABELS,
    min_pool: int = cal.MIN_POOL,
) -> dict[str, Any]:
    """The calibration document for `labels` (validated)."""
    if not labels.confidence:
        raise SpecError(f"{gold}: no usable gold answers to fit a calibration on")
    fitted = cal.fit_maps({q: (labels.confidence[q], labels.correct[q]) for q in labels.confidence},
                          labels.kinds, labels.options, min_labels=min_labels,
                          min_pool=min_pool)  # fmt: skip
    conf, right, qids = labels.flat()
    after = apply_maps(fitted, conf, qids, labels.kinds, labels.options)
    document = {
        "format": CALIBRATION_FORMAT,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "model_fingerprint": fingerprints.get("model", ""),
        "spec_fingerprint": fingerprints.get("spec", ""),
        "job": job,
        "gold": gold,
        "rule": {"min_labels": min_labels, "min_pool": min_pool, "bins": cal.BINS},
        "gold_rows": labels.rows,
        "skipped": len(labels.messages),
        "questions": fitted.questions,
        "kinds": fitted.kinds,
        "metrics": {"before": _clean(cal.measures(conf, right)),
                    "after": _clean(cal.measures(after, right))},
        "reliability": {"before": cal.reliability(conf, right),
                        "after": cal.reliability(after, right)},
        "risk_coverage": [_clean(r) for r in cal.risk_coverage(after, right)],
    }  # fmt: skip
    # Questions with an absent value: the `absent_below` that gets the most of their labelled
    # answers right (in-sample; the spec sets it, docs/calibration.md).
    suggested = suggest_absent_below(labels.decoded, labels.kinds, min_labels, min_pool)
    if suggested:
        document["absent_below"] = suggested
    validate_calibration(document)
    return document


def _clean(row: dict[str, Any]) -> dict[str, Any]:
    return {k: None if isinstance(v, float) and v != v else v for k, v in row.items()}


def apply_maps(
    fitted: cal.Fitted,
    confidence: np.ndarray,
    qids: list[str],
    kinds: dict[str, str],
    options: dict[str, int],
) -> np.ndarray:
    """Each confidence through the map of its question (`qids`, one per confidence)."""
    out = np.empty_like(confidence)
    for qid in dict.fromkeys(qids):
        where = np.array([q == qid for q in qids])
        out[where] = fitted.map_for(qid, kinds.get(qid), options.get(qid))(confidence[where])
    return out


def load_calibration(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise SpecError(f"{path}: cannot read the calibration ({exc.strerror})") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SpecError(f"{path}: not JSON ({exc})") from exc
    validate_calibration(document, str(path))
    return document


class ConfidencePlan:
    """What a run does to confidences: calibrate them (optional) and flag rows for review."""

    def __init__(
        self,
        calibration_path: str | Path | None,
        review_below: float | None,
        fingerprints: dict[str, str],
        schemas: dict[str, Any],
        *,
        force: bool = False,
    ) -> None:
        self.path = None if calibration_path is None else Path(calibration_path)
        self.review_below = review_below
        self.kinds = {qid: cal.schema_kind(s) for qid, s in schemas.items()}
        self.options = {qid: cal.schema_options(s) for qid, s in schemas.items()}
        self.document: dict[str, Any] | None = None
        self.forced = False
        if self.path is not None:
            self.document = load_calibration(self.path)
            what = {"model": "model (its weights or configuration differ)",
                    "spec": "spec (its questions, rules, decoding settings or absent_below "
                            "differ)"}  # fmt: skip
            for key in ("model", "spec"):
                fitted, now = self.document[f"{key}_fingerprint"], fingerprints[key]
                if fitted == now:
                    continue
                if not force:
                    job = self.document.get("job")
                    on = f", fitted on the job in {job}" if job else ""
                    raise SpecError(
                        f"{self.path}: fitted for another {what[key]}: fingerprint {fitted}{on}, "
                        f"this run {now}; decide labelled rows with this {key} and refit with "
                        "`decide calibrate`, or pass --force-calibration to use it anyway"
                    )
                log.warning("%s: fitted for another %s (%s, this run %s); used anyway "
                            "(--force-calibration)", self.path, key, fitted, now)  # fmt: skip
                self.forced = True
            self.fitted = cal.Fitted(self.document["questions"], self.document["kinds"])
            self.digest = hashlib.sha256(self.path.read_bytes()).hexdigest()[:16]

    @property
    def active(self) -> bool:
        return self.document is not None or self.review_below is not None

    def map(self, qid: str, schema: Any = None) -> Callable[[Any], np.ndarray]:
        """Question `qid`'s map; a question the job's schemas lack is typed by `schema`."""
        kind = self.kinds.get(qid, cal.schema_kind(schema) if schema is not None else None)
        options = self.options.get(qid, cal.schema_options(schema) if schema is not None else None)
        return self.fitted.map_for(qid, kind, options)

    def decision(self, decision: Any, schemas: dict[str, Any]) -> None:
        """`frame`'s work on one `Decision` (the Python API, `Decider.from_spec`): calibrated
        `confidence` (the engine's kept in `raw_confidence`) and `review`, by the same rule
        (a partial row, a confidence that is not finite, or one below `review_below`)."""
        if not decision.ok or decision.confidence is None:
            return
        if self.document is not None:
            raw = dict(decision.confidence)
            decision.raw_confidence = raw
            decision.confidence = {
                qid: p if p is None else float(self.map(qid, schemas.get(qid))(np.array([p]))[0])
                for qid, p in raw.items()
            }
        if self.review_below is not None:
            low = self.review_below
            values = [p for p in decision.confidence.values() if p is not None]
            doubtful = any(not math.isfinite(p) or p < low for p in values)
            decision.review = bool(decision.partial or doubtful)

    def frame(self, frame: pl.DataFrame) -> pl.DataFrame:
        """Calibrated `confidence` (engine's in `raw_confidence`) and the `review` column."""
        if self.document is not None:
            raw = frame["confidence"]
            columns = []
            for qid in raw.struct.fields:
                values = raw.struct.field(qid).cast(pl.Float64)
                mapped = self.map(qid)(values.fill_null(0.5).to_numpy())
                columns.append(pl.Series(qid, mapped).set(values.is_null(), None))  # type: ignore[arg-type]
            new = pl.struct(columns, eager=True) if columns else raw
            frame = frame.with_columns(new.alias("confidence"), raw.alias("raw_confidence"))
            failed = pl.col("raw_confidence").is_null()  # error rows keep a null struct
            kept = pl.when(~failed).then(pl.col("confidence"))
            frame = frame.with_columns(kept.alias("confidence"))
        if self.review_below is not None:  # the rule `decision` applies to one decision
            fields = frame["confidence"].struct.fields
            values = [pl.col("confidence").struct.field(f) for f in fields]
            # A partial row (an answer that failed: no confidence) needs a person as much as a
            # doubtful one: it was auto-accepted, counted among the accepted answers.
            doubtful = pl.col("partial").fill_null(False)
            if values:
                low = pl.min_horizontal(values)  # NaN is passed over: not below anything
                unknown = pl.any_horizontal(~v.is_finite() for v in values)  # NaN, inf
                doubtful = (
                    doubtful | (low < self.review_below).fill_null(False) | unknown.fill_null(False)
                )
            frame = frame.with_columns(((pl.col("status") == "ok") & doubtful)
                                       .fill_null(False).alias("review"))  # fmt: skip
        return frame

    def manifest_entry(self, prior: dict[str, Any]) -> dict[str, Any]:
        """The manifest's `calibration` entry (also when only `review_below` is set); a resume
        (`prior`: the earlier manifest) must use the same file contents and threshold."""
        entry: dict[str, Any] = {"review_below": self.review_below}
        if self.document is not None:
            doc = self.document
            entry |= {"path": str(self.path), "sha256": self.digest, "forced": self.forced,
                      "model_fingerprint": doc["model_fingerprint"],
                      "spec_fingerprint": doc["spec_fingerprint"], "metrics": doc["metrics"],
                      "reliability": doc["reliability"]["after"],
                      "reliability_before": doc["reliability"]["before"]}  # fmt: skip
        if prior:
            old = prior.get("calibration") or {}
            if old.get("sha256") != entry.get("sha256"):
                raise SpecError(f"the earlier run of this directory used {_file(old)}, this run "
                                f"{_file(entry)}; resume with the same calibration file "
                                "(--calibration)")  # fmt: skip
            if old.get("review_below") != entry.get("review_below"):
                raise SpecError(f"the earlier run of this directory used another review_below "
                                f"({_threshold(old.get('review_below'))}, this run "
                                f"{_threshold(entry.get('review_below'))}); resume with the "
                                "same one (--review-below)")  # fmt: skip
        return entry

    def finish(self, out_dir: Path) -> dict[str, Any] | None:
        """Write `review.parquet` (the rows to review) and return the review summary."""
        if self.review_below is None:
            return None
        return write_review(out_dir, self.review_below, calibrated=self.document is not None)


def _file(entry: dict[str, Any]) -> str:
    """A manifest calibration entry's file, for a message: its path and the start of its hash."""
    if entry.get("sha256") is None:
        return "no calibration file"
    return f"calibration file {entry.get('path')} (sha256 {entry['sha256']})"


def _threshold(value: Any) -> str:
    return "none" if value is None else f"{value:g}"


def write_review(out_dir: Path, below: float, *, calibrated: bool) -> dict[str, Any]:
    from .output import atomic_write, parquet_writer

    parts = sorted((out_dir / "answers").glob("part-*.parquet"))
    if not parts:  # every input row lacked a doc_id: nothing decided, nothing to review
        return {"below": below, "calibrated": calibrated, "rows": 0, "ok_rows": 0, "share": 0.0,
                "accepted_answers": 0, "expected_accuracy_accepted": None}  # fmt: skip
    scan = parquet.scan(parts).filter(pl.col("status") == "ok")
    queue = scan.filter(pl.col("review")).collect()
    atomic_write(out_dir / "review.parquet", parquet_writer(queue))
    fields = parquet.scan(parts[0]).collect_schema()["confidence"].to_schema()
    accepted = pl.Series("c", [], pl.Float64)
    if fields:
        accepted = scan.filter(~pl.col("review")).select(
            pl.concat_list([pl.col("confidence").struct.field(f) for f in fields]).alias("c")
        ).explode("c").filter(pl.col("c").is_finite()).collect()["c"]  # fmt: skip
    ok = scan.select(pl.len()).collect().item()
    return {
        "below": below,
        "calibrated": calibrated,
        "rows": queue.height,
        "ok_rows": ok,
        "share": queue.height / ok if ok else 0.0,
        "accepted_answers": accepted.len(),
        "expected_accuracy_accepted": float(accepted.mean()) if accepted.len() else None,
    }
