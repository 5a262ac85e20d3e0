"""`decide train` on a user's data: a job-format parquet with a gold column.

Rows carry `document`, optionally a per-row `questions` column (as for `decide run`), and the gold
decision object as JSON text; rows without questions take the spec's. A document too long for the
model is trained on in windows, as `decide run` reads it (`train.windows`); an optional evidence
column (JSON text: per question id a list of `[start, end]` character offsets where the document
states its answer) lets a window without the evidence teach the question's absent value, and fits
the learnt evidence ranker (`train.evidence_ranker`, written with the model as
`evidence_ranker.json`; `evidence_ranker=False` does not), which then chooses the windows
training reads, as it chooses those `decide run` reads. With `cut_share`, that share of the
draws of a document read whole is the document with one question's evidence sentences cut out,
its answer the absent value (`train.windows.WindowRows.cut_row`): a model that learns to answer
null, or `absent:`, for what a document does not state. Training
draws rows with a seeded generator, so runs are deterministic and resumable. `--from-scratch`
starts from random weights of the given config instead of the checkpoint's weights.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from typing import Any

import polars as pl
import torch

from decide.engine.loader import build_model, load_config
from decide.jobs.spec import SpecError, load_spec

from .evidence_ranker import fit as fit_ranker
from .loop import TrainConfig, save_checkpoint, train
from .windows import LongRow, WindowRows


def read_rows(
    path: Path,
    gold_column: str,
    spec_questions: list[dict[str, Any]] | None,
    evidence_column: str | None = None,
) -> list[LongRow]:
    try:
        frame = pl.read_parquet(path)
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise SpecError(f"{path}: not a readable parquet file ({exc})") from exc
    for column in ("document", gold_column, *([evidence_column] if evidence_column else [])):
        if column not in frame.columns:
            raise SpecError(f"{path}: no {column!r} column (columns: {', '.join(frame.columns)})")
    rows = []
    for index, row in enumerate(frame.iter_rows(named=True)):
        questions = row.get("questions") or spec_questions
        if not questions:
            raise SpecError(f"{path} row {index}: no questions (no questions column, no --spec)")
        gold = _json_object(path, index, gold_column, row[gold_column])
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
        rows.append(LongRow(str(doc_id), row["document"] or "", list(questions), gold, evidence))
    if not rows:
        raise SpecError(f"{path}: no rows")
    return rows


def _json_object(path: Path, index: int, column: str, text: Any) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except (TypeError, json.JSONDecodeError) as exc:
        raise SpecError(f"{path} row {index}: {column} is not JSON text ({exc})") from exc
    if not isinstance(value, dict):
        raise SpecError(f"{path} row {index}: {column} must be a JSON object")
    return value


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
) -> dict[str, Any]:
    spec_questions = None
    if spec_path is not None:
        spec_questions = [q.as_dict() for q in load_spec(spec_path).questions]
    rows = read_rows(data, gold_column, spec_questions, evidence_column)
    if cut_share and evidence_column is None:
        raise SpecError("--cut-share needs --evidence-column: the evidence says which sentences "
                        "state an answer, so cutting them makes it absent")  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    if from_scratch and not resume:
        init = random_init(init, out / "scratch", config.seed)
    _, model_config, tokenizer = load_config(init)
    ranker = None
    if evidence_ranker and any(spans for row in rows for spans in row.evidence.values()):
        if importlib.util.find_spec("sklearn") is None:
            raise SpecError(
                "--evidence-column fits the learnt evidence ranker, which needs scikit-learn: "
                "pip install 'decide[train]', or pass --no-evidence-ranker"
            )
        ranker = fit_ranker(rows)  # before training: windows are read as it will read them
    windows = WindowRows(model_config, tokenizer, rows, ranker=ranker, cut_share=cut_share)
    summary = train(init, windows.draw, out, config, resume=resume, progress=progress)
    shutil.rmtree(out / "scratch", ignore_errors=True)
    if ranker is not None:
        ranker.save(out)
        summary["evidence_ranker"] = ranker.about | {"threshold": ranker.threshold}
    return summary


__all__ = ["read_rows", "train_from_parquet"]
