"""`decide train` on a user's data: a job-format parquet with a gold column.

Rows carry `document`, optionally a per-row `questions` column (as for `decide run`), and the gold
decision object as JSON text or a struct (or map) cell (`jobs.gold`, as `decide calibrate` reads it;
a null cell is a skipped row); rows whose questions are null take the spec's, and an empty list asks
nothing (a skipped row), as `decide run` reads the column. A document too long for the
model is trained on in windows, as `decide run` reads it (`train.windows`); an optional evidence
column (JSON text: per question id a list of `[start, end]` character offsets where the document
states its answer, `0 <= start <= end <= len(document)`; an id no question of the row has, or an
offset outside the document, is refused naming the row) lets a window without the evidence teach
the question's absent value, and fits the learnt evidence ranker (`train.evidence_ranker`, written
with the model as `evidence_ranker.json`; `evidence_ranker=False` does not), which then chooses the
windows training reads, as it chooses those `decide run` reads. With `cut_share`, that share of the
draws of a document read whole is the document with one question's evidence sentences cut out, its
answer the absent value (`train.windows.WindowRows.cut_row`): a model that learns to answer null,
or `absent:`, for what a document does not state. Training draws rows with a seeded generator, so
runs are deterministic and resumable. `--from-scratch` starts from random weights of the given
config instead of the checkpoint's weights (built from the seed, so a resume with no checkpoint
saved yet builds the same ones).

A run writes into a new or empty directory: one that holds anything is refused unless `--resume`
continues the run it holds, and a resume must be the same run: the same options
(`loop.RUN_FIELDS`), --init, --from-scratch, --cut-share, evidence ranker and training rows
(`train_config.json` records a SHA-256 of the rows as read, questions and evidence included).

Before anything is written, every row is checked as training will build it
(`ExampleBuilder.problem`): a row that cannot be taught (a gold answer missing for an asked
question, a gold value its question's schema refuses, one the tokenizer cannot spell, questions
the runner refuses) is skipped, with one line counting the skipped rows by reason; when no row
is usable the run stops (`SpecError`, the reasons with their counts) with nothing written.
Derived questions (`derive:`) are computed from the asked answers, never asked: they need no
gold, and a gold value given for one is ignored (not checked, not trained).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import polars as pl
import torch

from decide.engine.config import ModelConfig
from decide.engine.loader import build_model, load_config
from decide.engine.tokenizer import TokenizerBundle
from decide.jobs import parquet
from decide.jobs.gold import GOLD_OBJECTS, gold_object
from decide.jobs.inputs import _questions_type_ok
from decide.jobs.spec import SpecError, load_spec

from .evidence_ranker import fit as fit_ranker
from .examples import ExampleBuilder, skip_summary
from .loop import STATE_JSON, TrainConfig, check_output, save_checkpoint, train
from .windows import LongRow, WindowRows


def read_rows(
    path: Path,
    gold_column: str,
    spec_questions: list[dict[str, Any]] | None,
    evidence_column: str | None = None,
) -> list[LongRow]:
    try:
        frame = parquet.read(path)
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise SpecError(f"{path}: not a readable parquet file ({exc})") from exc
    for column in ("document", gold_column, *([evidence_column] if evidence_column else [])):
        if column not in frame.columns:
            raise SpecError(f"{path}: no {column!r} column (columns: {', '.join(frame.columns)})")
    gold_type = frame.schema[gold_column]
    if not (gold_type in (pl.String, pl.Null) or isinstance(gold_type, GOLD_OBJECTS)):
        raise SpecError(f"{path}: column {gold_column!r} is {gold_type}, expected JSON text "
                        "(string) or a struct (or map) holding the decision object")  # fmt: skip
    stated = frame.schema.get("questions")
    if stated is not None and stated != pl.Null and not _questions_type_ok(stated):
        raise SpecError(f"{path}: column 'questions' is {stated}, expected list<struct<id: "
                        "string, text: string, schema: string>> (schema as JSON text), as "
                        "`decide run` reads it")  # fmt: skip
    rows = []
    unknown_ids: dict[str, list[Any]] = {}  # evidence id -> [rows, first row, its question ids]
    for index, row in enumerate(frame.iter_rows(named=True)):
        # A row's questions list replaces the spec's, a null one falls back to them, and an
        # empty one asks nothing (a row `check_rows` skips), as `decide run` reads the column.
        questions = row.get("questions")
        if questions is None:
            questions = spec_questions
        if questions is None:
            raise SpecError(f"{path} row {index}: no questions (no questions column, no --spec)")
        gold = _gold(path, index, gold_column, row[gold_column], gold_type)
        evidence: dict[str, list[tuple[int, int]]] = {}
        if evidence_column is not None and row[evidence_column] is not None:
            spans = _json_object(path, index, evidence_column, row[evidence_column])
            for qid, value in spans.items():
                if not isinstance(value, list) or not all(
                    isinstance(v, list) and len(v) == 2 and all(isinstance(x, int) for x in v)
                    for v in value
                ):
                    raise SpecError(f"{path} row {index}: {evidence_column}/{qid} must be a list "
                                    "of [start, end] character offsets")  # fmt: skip
                evidence[qid] = [(a, b) for a, b in value]
        doc_id = row.get("doc_id", index)
        document = row["document"] or ""
        where = f"{path} row {index}" + (f" (doc_id {doc_id})" if "doc_id" in row else "")
        unknown = _check_evidence(where, evidence_column, evidence, questions, len(document))
        if unknown:
            ids = ", ".join(str(q.get("id")) for q in questions)
            for qid in unknown:
                unknown_ids.setdefault(qid, [0, where, ids])[0] += 1
        rows.append(LongRow(str(doc_id), document, list(questions), gold, evidence))  # type: ignore[arg-type]
    if unknown_ids:
        named = "; ".join(f"{qid!r} ({count} row{'' if count == 1 else 's'}, first {where}, "
                          f"whose questions are {ids})"
                          for qid, (count, where, ids) in unknown_ids.items())  # fmt: skip
        raise SpecError(f"{path}: {evidence_column} names ids that are no question's: {named}")
    if not rows:
        raise SpecError(f"{path}: no rows")
    return rows


def _check_evidence(
    where: str,
    column: str | None,
    evidence: dict[str, list[tuple[int, int]]],
    questions: Sequence[dict[str, Any]],
    length: int,
) -> list[str]:
    """The evidence ids the row has no question of (sorted); refuses offsets that are not a
    span of its document (`0 <= start <= end <= length`)."""
    ids = {str(q.get("id")) for q in questions}
    for qid, spans in evidence.items():
        for start, end in spans:
            if start < 0 or start > end:
                raise SpecError(f"{where}: {column}/{qid} span [{start}, {end}] is not "
                                "[start, end] with 0 <= start <= end")  # fmt: skip
            if end > length:
                raise SpecError(f"{where}: {column}/{qid} span [{start}, {end}] ends past the "
                                f"end of the document ({length} characters)")  # fmt: skip
    return sorted(set(evidence) - ids)


def check_rows(
    rows: Sequence[LongRow],
    config: ModelConfig,
    tokenizer: TokenizerBundle,
) -> dict[str, list[Any]]:
    """The rows training cannot teach, by skip reason: `{reason: [count, first doc_id,
    detail]}` (`ExampleBuilder.problem`); empty when every row can be taught."""
    return _tally(rows, row_problems(rows, config, tokenizer))


def _tally(
    rows: Sequence[LongRow], found: Sequence[tuple[str, str] | None]
) -> dict[str, list[Any]]:
    """`row_problems` by reason: `{reason: [count, first doc_id, detail]}`."""
    problems: dict[str, list[Any]] = {}
    for row, problem in zip(rows, found, strict=True):
        if problem is not None:
            reason, detail = problem
            if reason in problems:
                problems[reason][0] += 1
            else:
                problems[reason] = [1, row.doc_id, detail]
    return problems


def row_problems(
    rows: Sequence[LongRow], config: ModelConfig, tokenizer: TokenizerBundle
) -> list[tuple[str, str] | None]:
    """Per row, why training cannot teach it (`(reason, detail)`, `ExampleBuilder.problem`; a
    null gold cell "gold is null", an empty questions list "no questions asked"), None when it
    can."""
    builder = ExampleBuilder(config, tokenizer)
    found: list[tuple[str, str] | None] = []
    for row in rows:
        if row.gold is None:
            found.append(("gold is null", "the row's gold cell is null (not labelled)"))
        elif not row.questions:
            found.append(("no questions asked", "the row's questions list is empty"))
        else:
            found.append(builder.problem(row.questions, row.gold))
    return found


def _gold(
    path: Path, index: int, column: str, value: Any, dtype: pl.DataType
) -> dict[str, Any] | None:
    """A row's gold decision object (JSON text, or a struct or map cell: `jobs.gold`); None for a
    null cell (a row `check_rows` skips)."""
    if value is None:
        return None
    try:
        gold = gold_object(value, dtype)
    except (TypeError, ValueError) as exc:
        raise SpecError(f"{path} row {index}: {column} is not JSON text ({exc})") from exc
    if not isinstance(gold, dict):
        raise SpecError(f"{path} row {index}: {column} must be a JSON object, got "
                        f"{type(gold).__name__}")  # fmt: skip
    for key, answer in gold.items():  # JSON text may escape a lone surrogate ("\ud800")
        try:
            json.dumps(answer, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as exc:
            bad = exc.object[exc.start : exc.end]
            raise SpecError(f"{path} row {index}: {column}/{key} is not valid Unicode text "
                            f"({exc.reason}: {bad!r})") from exc  # fmt: skip
    return gold


def _json_object(path: Path, index: int, column: str, text: Any) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except (TypeError, json.JSONDecodeError) as exc:
        raise SpecError(f"{path} row {index}: {column} is not JSON text ({exc})") from exc
    if not isinstance(value, dict):
        raise SpecError(f"{path} row {index}: {column} must be a JSON object")
    return value


def rows_fingerprint(rows: Sequence[LongRow]) -> dict[str, Any]:
    """The training rows as read (doc id, document, questions, gold, evidence): their count and
    a SHA-256, the same for the same rows whatever file or path they are read from."""
    digest = hashlib.sha256()
    for row in rows:
        fields = [row.doc_id, row.text, row.questions, row.gold, row.evidence]
        digest.update(json.dumps(fields, sort_keys=True, default=str).encode() + b"\n")
    return {"rows": len(rows), "sha256": digest.hexdigest()}


def _refuse_used_output(out: Path) -> None:
    """A run without --resume writes into a new or empty directory (as `decide run` and
    `decide merge`): an earlier run's files would be mixed with this one's, and its saved state
    "resumed" by the next --resume."""
    if out.exists() and not out.is_dir():
        raise SpecError(f"{out}: output path exists and is not a directory")
    if out.is_dir() and any(out.iterdir()):
        held = "a training run" if (out / "train_config.json").is_file() else "files"
        raise SpecError(f"{out}: output directory is not empty (it holds {held}); pass --resume "
                        "to continue the run it holds, or choose another directory")  # fmt: skip


def random_init(config_dir: Path, out: Path, seed: int) -> Path:
    """A checkpoint with random weights for `config_dir`'s config and tokenizer."""
    _, config, _ = load_config(config_dir)
    torch.manual_seed(seed)
    model = build_model(config)
    for name, p in model.named_parameters():
        if p.dim() >= 2:
            torch.nn.init.normal_(p, std=0.02)
        elif "norm" in name and name.endswith("weight"):
            torch.nn.init.ones_(p)
        else:
            torch.nn.init.zeros_(p)
    target = out / "init"
    target.mkdir(parents=True, exist_ok=True)
    save_checkpoint(model, config_dir, target)
    return target


def train_from_parquet(
    data: Path,
    init: Path,
    out: Path,
    config: TrainConfig,
    *,
    spec_path: Path | None = None,
    gold_column: str = "gold",
    evidence_column: str | None = None,
    evidence_ranker: bool = True,
    from_scratch: bool = False,
    resume: bool = False,
    progress: bool | None = None,
    cut_share: float = 0.0,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    check_output(init, out, config, resume=resume)  # -o is --init, or a file
    if not resume:
        _refuse_used_output(out)
    spec_questions = None
    if spec_path is not None:
        spec_questions = [q.as_dict() for q in load_spec(spec_path).questions]
    rows = read_rows(data, gold_column, spec_questions, evidence_column)
    if cut_share and evidence_column is None:
        raise SpecError("--cut-share needs --evidence-column: the evidence says which sentences "
                        "state an answer, so cutting them makes it absent")  # fmt: skip
    # The tokenizer and config are those of a --from-scratch start too (its random weights
    # are built from this config): check the rows before anything is written.
    _, model_config, tokenizer = load_config(init)
    found = row_problems(rows, model_config, tokenizer)
    problems = _tally(rows, found)
    unusable = sum(count for count, _, _ in problems.values())
    if problems:
        counts = skip_summary({reason: count for reason, (count, _, _) in problems.items()})
        first = "; ".join(f"doc_id {doc_id}: {reason}: {detail}"
                          for reason, (_, doc_id, detail) in problems.items())  # fmt: skip
        if unusable == len(rows):
            raise SpecError(f"{data}: no training row is usable ({counts}; first of each: "
                            f"{first})")  # fmt: skip
        log(
            f"skipping {unusable} of {len(rows)} rows that cannot be taught: {counts} (first "
            f"of each: {first})"
        )
    ranker = None
    if evidence_ranker and any(spans for row in rows for spans in row.evidence.values()):
        if importlib.util.find_spec("sklearn") is None:
            raise SpecError(
                "--evidence-column fits the learnt evidence ranker, which needs scikit-learn: "
                "pip install 'decide[train]', or pass --no-evidence-ranker"
            )
        ranker = fit_ranker(rows)  # before training: windows are read as it will read them
    about = {
        "init": str(init.resolve()),
        "from_scratch": from_scratch,
        "data": rows_fingerprint(rows) | {"path": str(data.resolve())},  # path: not compared
        "cut_share": cut_share,
        "evidence_ranker": ranker is not None,
    }
    check_output(init, out, config, resume=resume, about=about)
    start = init
    if from_scratch and not (resume and (out / STATE_JSON).is_file()):
        # No saved state to continue: the random start of the run, rebuilt from the same seed
        # when resuming a run stopped before its first checkpoint.
        start = random_init(init, out / "scratch", config.seed)
    # Only the rows that can be taught are drawn: a skipped row's missing or null gold would
    # otherwise fail a window of it mid-run (`WindowRows.window_gold`).
    taught = [row for row, problem in zip(rows, found, strict=True) if problem is None]
    windows = WindowRows(model_config, tokenizer, taught, ranker=ranker, cut_share=cut_share)
    summary = train(start, windows.draw, out, config, resume=resume, progress=progress, log=log,
                    about=about)  # fmt: skip
    summary["rows_unusable"] = {reason: count for reason, (count, _, _) in problems.items()}
    shutil.rmtree(out / "scratch", ignore_errors=True)
    if ranker is not None:
        ranker.save(out)
        summary["evidence_ranker"] = ranker.about | {"threshold": ranker.threshold}
    (out / "train_summary.json").write_text(json.dumps(summary, indent=2))
    return summary


__all__ = ["read_rows", "train_from_parquet"]
