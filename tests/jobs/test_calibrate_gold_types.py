"""`decide calibrate` reads gold and input ids as the runner reads input ids (an Arrow `uuid` as
its text, a categorical as its values), takes a struct (or map) gold column as the decision
object itself, and counts an object answer that writes `null` for a key the gold leaves out as
right. Built on a hand-written job output (no model)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from click.testing import CliRunner

from decide.cli import main
from decide.jobs.calibrate import answers_match, collect_labels

UUIDS = [uuid.UUID(int=5 << 100 | i) for i in range(4)]
IDS = [str(u) for u in UUIDS]
AMOUNT = {"type": "object", "required": ["value"],
          "properties": {"value": {"type": "integer"},
                         "currency": {"type": ["string", "null"]}}}  # fmt: skip
QUESTIONS = [{"id": "ok", "text": "Valid?", "schema": {"type": "boolean"}},
             {"id": "amount", "text": "How much?", "schema": AMOUNT}]  # fmt: skip
ROW_QUESTIONS = [{"id": "tier", "text": "Which tier?",
                  "schema": json.dumps({"enum": ["gold", "silver"]})}]  # fmt: skip
# The job's answers: every amount with an explicit null currency.
ANSWERS = [{"ok": i % 2 == 0, "amount": {"value": 10 * i, "currency": None}, "tier": "gold"}
           for i in range(4)]  # fmt: skip
GOLD = [{"ok": i % 2 == 0, "amount": {"value": 10 * i}, "tier": "gold"} for i in range(4)]


def _job(where: Path) -> Path:
    """A job output of uuid ids (as text, as the runner writes them) whose input file holds
    them as Arrow uuids, with a per-row question `tier`."""
    inputs = where / "in.parquet"
    questions = pa.array([ROW_QUESTIONS] * 4, pa.list_(pa.struct(
        [("id", pa.string()), ("text", pa.string()), ("schema", pa.string())])))  # fmt: skip
    pq.write_table(pa.table({"doc_id": pa.array([u.bytes for u in UUIDS], pa.uuid()),
                             "document": ["text"] * 4, "questions": questions}), inputs)  # fmt: skip
    out = where / "out"
    (out / "answers").mkdir(parents=True)
    pl.DataFrame(
        {"doc_id": IDS, "status": ["ok"] * 4, "error": [None] * 4,
         "answers_json": [json.dumps(a) for a in ANSWERS],
         "confidence": [{"ok": 0.9, "amount": 0.8, "tier": 0.7}] * 4},
        schema={"doc_id": pl.String, "status": pl.String, "error": pl.String,
                "answers_json": pl.String,
                "confidence": pl.Struct({"ok": pl.Float64, "amount": pl.Float64,
                                         "tier": pl.Float64})},
    ).write_parquet(out / "answers" / "part-00000.parquet")  # fmt: skip
    manifest = {
        "status": "complete",
        "fingerprints": {"model": "0123456789abcdef", "spec": "fedcba9876543210"},
        "model": "bundled", "model_type": "bert", "inputs": [str(inputs)],
        # as the runner writes them (`JobSpec.model_dump`): every field of a question
        "spec": {"questions": [{**q, "absent": None, "derive": None} for q in QUESTIONS]}, "counts": {"total": 4, "invalid_rows": 0},
        "seconds": 1.0,
    }  # fmt: skip
    (out / "manifest.json").write_text(json.dumps(manifest))
    return out


def _right(labels: Any) -> dict[str, list[int]]:
    return {qid: labels.correct[qid] for qid in sorted(labels.correct)}


def test_uuid_gold_ids_match_and_per_row_schemas_come_from_a_uuid_input(tmp_path: Path) -> None:
    out = _job(tmp_path)
    gold = tmp_path / "gold.parquet"
    pq.write_table(pa.table({"doc_id": pa.array([u.bytes for u in UUIDS], pa.uuid()),
                             "gold": [json.dumps(g) for g in GOLD]}), gold)  # fmt: skip
    labels, _ = collect_labels(out, gold)
    assert labels.messages == [] and labels.rows == 4
    # tier's schema from the input's per-row questions; the amounts right without `currency`.
    assert _right(labels) == {"amount": [1] * 4, "ok": [1] * 4, "tier": [1] * 4}
    assert labels.kinds["tier"] == "enum"


def test_categorical_gold_ids_match(tmp_path: Path) -> None:
    out = _job(tmp_path)
    gold = tmp_path / "gold.parquet"
    pl.DataFrame({"doc_id": IDS, "gold": [json.dumps(g) for g in GOLD]},
                 schema={"doc_id": pl.Categorical, "gold": pl.String}).write_parquet(gold)  # fmt: skip
    labels, _ = collect_labels(out, gold)
    assert labels.messages == [] and labels.rows == 4


def test_a_struct_gold_column_is_the_decision_object(tmp_path: Path) -> None:
    """polars writes the dicts as a struct: the left-out `currency` is a null field."""
    out = _job(tmp_path)
    gold = tmp_path / "gold.parquet"
    wrong = [{**g, "ok": not g["ok"]} if i == 0 else g for i, g in enumerate(GOLD)]
    pl.DataFrame({"doc_id": IDS, "gold": wrong}).write_parquet(gold)
    assert isinstance(pl.read_parquet_schema(gold)["gold"], pl.Struct)
    labels, _ = collect_labels(out, gold)
    assert labels.messages == [] and labels.rows == 4
    assert _right(labels) == {"amount": [1] * 4, "ok": [0, 1, 1, 1], "tier": [1] * 4}
    result = CliRunner().invoke(main, ["calibrate", str(out), str(gold), "-o",
                                       str(tmp_path / "cal.json"), "--min-labels", "2"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "not JSON text" not in result.output


def test_a_map_gold_column_is_the_decision_object(tmp_path: Path) -> None:
    out = _job(tmp_path)
    gold = tmp_path / "gold.parquet"
    pq.write_table(pa.table({"doc_id": IDS, "gold": pa.array(
        [[("ok", g["ok"])] for g in GOLD], pa.map_(pa.string(), pa.bool_()))}), gold)  # fmt: skip
    labels, _ = collect_labels(out, gold)
    assert labels.messages == [] and labels.rows == 4 and _right(labels) == {"ok": [1] * 4}


def test_a_left_out_key_matches_null_only() -> None:
    assert answers_match({"value": 3, "currency": None}, {"value": 3})
    assert answers_match({"value": 3}, {"value": 3, "currency": None})
    assert not answers_match({"value": 3, "currency": "EUR"}, {"value": 3})
    assert not answers_match({"value": 3}, {"value": 3, "currency": "EUR"})
    assert answers_match([{"a": None}], [{}]) and not answers_match({"a": None}, None)
