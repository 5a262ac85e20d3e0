"""The report reads the job's input files as the runner does (`jobs.inputs`): an Arrow `uuid`
doc_id as its text, categorical doc_id, document and per-row question columns as their values,
files mixing categorical and string columns or an all-null-typed column and a typed one. Each
shows the documents' texts (and per-row questions' wordings) without a warning. And a Float64
answers column shared by per-row questions shows each answer as it was written (`117`, not
`117.0`)."""

from __future__ import annotations

import json
import logging
import uuid
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from decide.report import build_report, sample_documents

UUIDS = [uuid.UUID(int=7 << 100 | i) for i in range(3)]
IDS = [str(u) for u in UUIDS]
TEXTS = ["A claim from Reno.", "A claim from Oslo.", "A claim from Lima."]
QUESTION = {"id": "n", "text": "How many?", "schema": {"type": ["integer", "null"]}}
ROW_QUESTIONS = [{"id": "n", "text": "How many, per row?", "schema": '{"type": "integer"}'}]


def _output(out: Path, inputs: list[Path], answers: list[dict[str, Any]], *, per_row=False,
            dtype: pl.DataType = pl.Int64) -> Path:  # fmt: skip
    """One answer part of string doc ids `IDS` (as the runner writes uuid or categorical ids)
    answering `n` (typed `dtype`), and a manifest naming `inputs`."""
    written = [{"doc_id": doc_id, "status": "ok", "error": None,
                "answers": {"n": a["n"]}, "answers_json": json.dumps(a),
                "confidence": {"n": 0.5}, "nfe": 2, "value_tokens": 1, "filler_tokens": 0,
                "error_kind": None, "partial": False}
               for doc_id, a in zip(IDS, answers, strict=True)]  # fmt: skip
    schema = {"doc_id": pl.String, "status": pl.String, "error": pl.String,
              "answers": pl.Struct({"n": dtype}), "answers_json": pl.String,
              "confidence": pl.Struct({"n": pl.Float64}), "nfe": pl.Int32,
              "value_tokens": pl.Int32, "filler_tokens": pl.Int32, "error_kind": pl.String,
              "partial": pl.Boolean}  # fmt: skip
    (out / "answers").mkdir(parents=True)
    pl.DataFrame(written, schema=schema, orient="row").write_parquet(
        out / "answers" / "part-00000.parquet"
    )
    manifest = {
        "status": "complete",
        "fingerprints": {"model": "0123456789abcdef", "spec": "fedcba9876543210"},
        "model": "bundled", "model_type": "bert", "inputs": [str(p) for p in inputs],
        "spec": {"questions": [] if per_row else [QUESTION]},
        "counts": {"total": len(IDS), "invalid_rows": 0}, "seconds": 1.0,
    }  # fmt: skip
    (out / "manifest.json").write_text(json.dumps(manifest))
    return out


def _texts(out: Path, caplog) -> dict[str, Any]:
    with caplog.at_level(logging.WARNING, logger="decide.report"):
        texts = {r["doc_id"]: r["text"] for r in sample_documents(out, build_report(out))}
    assert not caplog.records, [r.getMessage() for r in caplog.records]
    return texts


def test_uuid_doc_ids_show_their_documents(tmp_path: Path, caplog) -> None:
    path = tmp_path / "uuid.parquet"
    pq.write_table(pa.table({"doc_id": pa.array([u.bytes for u in UUIDS], pa.uuid()),
                             "document": TEXTS}), path)  # fmt: skip
    out = _output(tmp_path / "out", [path], [{"n": i} for i in range(3)])
    assert _texts(out, caplog) == dict(zip(IDS, TEXTS, strict=True))


def test_categorical_and_string_files_show_their_documents(tmp_path: Path, caplog) -> None:
    first, second = tmp_path / "a.parquet", tmp_path / "b.parquet"
    pl.DataFrame({"doc_id": IDS[:2], "document": TEXTS[:2]},
                 schema={"doc_id": pl.Categorical, "document": pl.Categorical}).write_parquet(first)  # fmt: skip
    pl.DataFrame({"doc_id": IDS[2:], "document": TEXTS[2:]}).write_parquet(second)
    out = _output(tmp_path / "out", [first, second], [{"n": i} for i in range(3)])
    assert _texts(out, caplog) == dict(zip(IDS, TEXTS, strict=True))


def test_a_null_typed_column_takes_the_other_files_type(tmp_path: Path, caplog) -> None:
    """Per-row questions in one file and none (a null-typed column) in the other; their
    wording is read from the first."""
    first, second = tmp_path / "a.parquet", tmp_path / "b.parquet"
    pl.DataFrame({"doc_id": IDS[:2], "document": TEXTS[:2],
                  "questions": [ROW_QUESTIONS, ROW_QUESTIONS]}).write_parquet(first)  # fmt: skip
    pl.DataFrame({"doc_id": IDS[2:], "document": TEXTS[2:], "questions": [None]},
                 schema={"doc_id": pl.String, "document": pl.String,
                         "questions": pl.Null}).write_parquet(second)  # fmt: skip
    out = _output(tmp_path / "out", [second, first], [{"n": i} for i in range(3)], per_row=True)
    assert _texts(out, caplog) == dict(zip(IDS, TEXTS, strict=True))
    assert build_report(out)["questions"][0]["text"] == "How many, per row?"


def test_inputs_changed_since_the_run_warn_and_keep_the_answers(tmp_path: Path, caplog) -> None:
    """Files that no longer agree (a column of another type): a one-line warning naming the
    file, no query plan, and the answers without their text."""
    first, second = tmp_path / "a.parquet", tmp_path / "b.parquet"
    pl.DataFrame({"doc_id": IDS[:2], "document": TEXTS[:2]}).write_parquet(first)
    pl.DataFrame({"doc_id": [1], "document": TEXTS[2:]}).write_parquet(second)
    out = _output(tmp_path / "out", [first, second], [{"n": i} for i in range(3)])
    with caplog.at_level(logging.WARNING, logger="decide.report"):
        texts = {r["doc_id"]: r["text"] for r in sample_documents(out, build_report(out))}
    assert set(texts.values()) == {None}
    messages = [r.getMessage() for r in caplog.records]
    assert any(str(second) in m for m in messages), messages
    assert all("\n" not in m for m in messages), messages


@pytest.mark.parametrize(
    ("answers", "shown"),
    [([117, 117, 2.5], [117, 2.5]), ([117.0, 117.0, 3], [117.0, 3])],
)
def test_float_answers_column_shows_numbers_as_written(tmp_path: Path, answers, shown) -> None:
    """Per-row questions that share a Float64 column: `117` stays `117` (and `117.0` as the
    answer wrote it)."""
    path = tmp_path / "in.parquet"
    pl.DataFrame({"doc_id": IDS, "document": TEXTS}).write_parquet(path)
    out = _output(tmp_path / "out", [path], [{"n": a} for a in answers], dtype=pl.Float64)
    dist = build_report(out)["questions"][0]["distribution"]
    values = [v["value"] for v in dist["values"]]
    assert values == shown and [type(v) for v in values] == [type(v) for v in shown]
    assert [v["count"] for v in dist["values"]] == [2, 1]
