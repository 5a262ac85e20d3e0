"""`decide train` on gold and questions in the forms a user's parquet holds them: a struct gold
column (as `decide calibrate` takes), a null gold cell, a per-row questions column that is not
the job format or an empty list, and a long document (read in windows) whose gold lacks an
answer. Each trains on what it can, or exits 2 naming the column, with nothing written."""

from __future__ import annotations

import json

import polars as pl
import pytest
from click.testing import CliRunner
from helpers.claim_rows import KINDS, QUESTIONS

from decide.cli import main
from decide.train.data import read_rows, rows_fingerprint


@pytest.fixture(scope="module")
def base(tiny_checkpoint):
    return tiny_checkpoint("bert", vocab="small", init_std=0.1)


def _documents(n: int, filler: int = 0) -> list[str]:
    return [f"My {KINDS[i % 4]} claim, number {i}. The policy is "
            f"{'active' if i % 2 else 'lapsed'}." + " Nothing else to say here." * filler
            for i in range(n)]  # fmt: skip


def _gold(n: int) -> list[dict]:
    return [{"claim_type": KINDS[i % 4], "policy_active": bool(i % 2)} for i in range(n)]


def _spec(tmp_path, questions=QUESTIONS):
    spec = tmp_path / "job.yaml"
    spec.write_text(json.dumps({"questions": questions}))
    return spec


def _train(base, data, spec, out, *extra):
    return CliRunner().invoke(main, [
        "train", str(data), "--init", str(base), "-o", str(out), "--spec", str(spec),
        "--steps", "2", "--batch-size", "2", "--no-progress", *extra])  # fmt: skip


def test_a_struct_gold_column_is_the_decision_object(base, tmp_path) -> None:
    """A gold column of structs (what `df.write_parquet` makes of dicts; `decide calibrate`
    takes it) is read as the object it holds, the same rows as its JSON text. Before: exit 2,
    "gold is not JSON text (the JSON object must be str ... not dict)"."""
    ids = [f"d{i}" for i in range(4)]
    as_text = pl.DataFrame({"doc_id": ids, "document": _documents(4),
                            "gold": [json.dumps(g) for g in _gold(4)]})  # fmt: skip
    as_struct = as_text.with_columns(pl.Series("gold", _gold(4)))
    assert isinstance(as_struct.schema["gold"], pl.Struct)
    as_text.write_parquet(tmp_path / "text.parquet")
    as_struct.write_parquet(tmp_path / "struct.parquet")
    text_rows = read_rows(tmp_path / "text.parquet", "gold", QUESTIONS)
    struct_rows = read_rows(tmp_path / "struct.parquet", "gold", QUESTIONS)
    assert rows_fingerprint(struct_rows) == rows_fingerprint(text_rows)

    result = _train(base, tmp_path / "struct.parquet", _spec(tmp_path), tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert "skipping" not in result.output


def test_a_gold_column_of_another_type_is_refused_naming_it(base, tmp_path) -> None:
    pl.DataFrame({"doc_id": ["a"], "document": ["text"], "gold": [3]}).write_parquet(
        tmp_path / "data.parquet"
    )
    result = _train(base, tmp_path / "data.parquet", _spec(tmp_path), tmp_path / "out")
    assert result.exit_code == 2, result.output
    assert "column 'gold' is Int64" in result.output
    assert not (tmp_path / "out").exists()


def test_a_null_gold_cell_is_a_skipped_row(base, tmp_path) -> None:
    """A row not labelled yet (null gold) is skipped and counted, the line naming it; before,
    the whole run was refused as "gold is not JSON text (... not NoneType)"."""
    gold = [json.dumps(g) for g in _gold(4)]
    gold[1] = None
    pl.DataFrame({"doc_id": [f"d{i}" for i in range(4)], "document": _documents(4),
                  "gold": gold}).write_parquet(tmp_path / "data.parquet")  # fmt: skip
    result = _train(base, tmp_path / "data.parquet", _spec(tmp_path), tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert "skipping 1 of 4 rows that cannot be taught: gold is null: 1 row" in result.output
    assert "doc_id d1" in result.output
    summary = json.loads((tmp_path / "out" / "train_summary.json").read_text())
    assert summary["rows_unusable"] == {"gold is null": 1}


def test_the_skip_line_names_the_first_row_of_each_reason(base, tmp_path) -> None:
    gold = _gold(4)
    del gold[2]["policy_active"]
    pl.DataFrame({"doc_id": [f"d{i}" for i in range(4)], "document": _documents(4),
                  "gold": [json.dumps(g) for g in gold]}).write_parquet(tmp_path / "data.parquet")  # fmt: skip
    result = _train(base, tmp_path / "data.parquet", _spec(tmp_path), tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert "gold answer missing for policy_active: 1 row (first of each: doc_id d2:" in (
        result.output
    )


def test_a_questions_column_not_in_the_job_format_is_refused(base, tmp_path) -> None:
    """Questions as JSON text (or schemas as structs) are not the job format `decide run`
    reads: exit 2 naming the column and the type expected, nothing written. Before: a
    traceback (AttributeError: 'str' object has no attribute 'get')."""
    pl.DataFrame({"doc_id": ["a", "b"], "document": _documents(2),
                  "gold": [json.dumps(g) for g in _gold(2)],
                  "questions": [json.dumps(QUESTIONS)] * 2}).write_parquet(
        tmp_path / "data.parquet")  # fmt: skip
    result = _train(base, tmp_path / "data.parquet", _spec(tmp_path), tmp_path / "out")
    assert result.exit_code == 2, result.output
    assert "column 'questions' is String, expected list<struct<id: string" in result.output
    assert not (tmp_path / "out").exists()


def test_an_empty_questions_list_asks_nothing(base, tmp_path) -> None:
    """A row's empty questions list asks nothing, as in `decide run` (a `no_questions` row):
    skipped, not trained on the spec's questions as a null list would be."""
    job = [{"id": q["id"], "text": q["text"], "schema": json.dumps(q["schema"])}
           for q in QUESTIONS]  # fmt: skip
    questions_type = pl.List(pl.Struct({"id": pl.String, "text": pl.String,
                                        "schema": pl.String}))  # fmt: skip
    pl.DataFrame({"doc_id": [f"d{i}" for i in range(4)], "document": _documents(4),
                  "gold": [json.dumps(g) for g in _gold(4)],
                  "questions": [job, [], None, job]},
                 schema_overrides={"questions": questions_type}).write_parquet(
        tmp_path / "data.parquet")  # fmt: skip
    rows = read_rows(tmp_path / "data.parquet", "gold", QUESTIONS)
    assert [len(row.questions) for row in rows] == [2, 0, 2, 2]
    result = _train(base, tmp_path / "data.parquet", _spec(tmp_path), tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert "skipping 1 of 4 rows that cannot be taught: no questions asked: 1 row" in (
        result.output
    )


def test_a_long_document_missing_a_gold_answer_is_skipped_not_a_crash(base, tmp_path) -> None:
    """A document read in windows whose gold lacks an answer: counted as skipped before the run
    and never drawn. Before: skipped in the count, then drawn, and a window of it raised
    KeyError mid-run, leaving a half-written output directory."""
    questions = QUESTIONS + [{"id": f"q{k}", "text": f"Question {k}?",
                              "schema": {"type": "boolean"}} for k in range(8)]  # fmt: skip
    gold = [g | {f"q{k}": True for k in range(8)} for g in _gold(4)]
    for g in gold[1:]:
        del g["claim_type"]
    pl.DataFrame({"doc_id": [f"d{i}" for i in range(4)], "document": _documents(4, 300),
                  "gold": [json.dumps(g) for g in gold]}).write_parquet(tmp_path / "data.parquet")  # fmt: skip
    result = _train(base, tmp_path / "data.parquet", _spec(tmp_path, questions),
                    tmp_path / "out", "--steps", "4")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "gold answer missing for claim_type: 3 rows" in result.output
    summary = json.loads((tmp_path / "out" / "train_summary.json").read_text())
    assert summary["rows_unusable"] == {"gold answer missing for claim_type": 3}


def test_gold_that_is_not_valid_unicode_is_refused_naming_row_and_field(base, tmp_path) -> None:
    """JSON text escaping a lone surrogate parses to a string no tokenizer can encode: exit 2
    naming the row and the answer, nothing written. Before: a UnicodeEncodeError traceback."""
    gold = [json.dumps(g) for g in _gold(3)]
    gold[1] = '{"claim_type": "\\ud800", "policy_active": true}'
    pl.DataFrame({"doc_id": ["a", "b", "c"], "document": _documents(3),
                  "gold": gold}).write_parquet(tmp_path / "data.parquet")  # fmt: skip
    result = _train(base, tmp_path / "data.parquet", _spec(tmp_path), tmp_path / "out")
    assert result.exit_code == 2, result.output
    assert "row 1: gold/claim_type is not valid Unicode text" in result.output
    assert not (tmp_path / "out").exists()
