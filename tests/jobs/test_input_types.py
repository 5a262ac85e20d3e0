"""Input columns of the types other tools write: a pandas `category` (a dictionary-encoded
column, polars' Categorical or Enum) doc_id or document used to be refused ("is Categorical,
expected string or integer") and is read as its values; an Arrow `uuid` doc_id is read as its
text; a raw binary doc_id is refused naming the column and its Arrow type; a column a small file
stores as all-null type (what polars and pandas write when it has no value) no longer refuses
the whole job; files may order their columns differently; carried columns keep their types."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from helpers.jobdata import QUESTIONS, read_answers

from decide import run_job
from decide.cli import main
from decide.jobs.inputs import FILE, ROW, inspect_inputs, stream, survey
from decide.jobs.spec import InputColumns, SpecError, parse_spec

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

TEXTS = ["A car claim in Boston for 300 dollars.", "Water damage at home.", "A fire in Denver."]
UUIDS = [uuid.UUID(int=7 << 100 | i) for i in range(3)]


@pytest.fixture(scope="module")
def model(tiny_checkpoint) -> Path:
    return tiny_checkpoint("bert", vocab="small", init_std=0.2)


def _plan(*paths: Path):
    return inspect_inputs(list(paths), InputColumns(), need_questions=False)


def _rows(*paths: Path) -> pl.DataFrame:
    plan = _plan(*paths)
    chunks = list(stream(plan, chunk_rows=2))
    assert len({tuple(c.schema.items()) for c in chunks}) == 1  # one layout, whatever the file
    return pl.concat(chunks, how="vertical")


def _decide(model: Path, tmp_path: Path, *paths: Path, **options) -> pl.DataFrame:
    out = tmp_path / "out"
    result = run_job(parse_spec({"questions": QUESTIONS[:2]}), list(paths), out, model=model,
                     batch_size=4, progress=False, report=False, **options)  # fmt: skip
    assert result.total == sum(pq.read_metadata(p).num_rows for p in paths)
    return read_answers(out)


def test_pandas_categories_are_read_as_their_values(model, tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"doc_id": ["c-1", "c-2", "c-3"], "document": TEXTS,
                          "team": ["claims", "fraud", "claims"]})  # fmt: skip
    frame = frame.astype({"doc_id": "category", "document": "category", "team": "category"})
    path = tmp_path / "pandas.parquet"
    frame.to_parquet(path)
    assert pa.types.is_dictionary(pq.read_schema(path).field("doc_id").type)
    plan = _plan(path)
    assert plan.doc_id_type == pl.String
    assert isinstance(plan.carried_schema["team"], pl.Categorical)
    out = _decide(model, tmp_path, path)  # through the Python API, as `decide run`
    assert out.schema["doc_id"] == pl.String
    assert out["doc_id"].to_list() == ["c-1", "c-2", "c-3"]
    assert (out["status"] == "ok").all(), out["error"].to_list()
    assert isinstance(out.schema["team"], pl.Categorical)  # a carried category stays one
    assert out["team"].cast(pl.String).to_list() == ["claims", "fraud", "claims"]


def test_polars_enum_and_arrow_dictionary_columns_are_read_as_their_values(
    model, tmp_path: Path
) -> None:
    enum = tmp_path / "enum.parquet"
    pl.DataFrame({"doc_id": ["e-1", "e-2"], "document": TEXTS[:2]}).with_columns(
        pl.col("doc_id").cast(pl.Enum(["e-1", "e-2"])), pl.col("document").cast(pl.Categorical)
    ).write_parquet(enum)
    dictionary = tmp_path / "dictionary.parquet"
    pq.write_table(pa.table({"doc_id": pa.array(["d-1"]).dictionary_encode(),
                             "document": pa.array(TEXTS[2:]).dictionary_encode()}),
                   dictionary)  # fmt: skip
    rows = _rows(enum, dictionary)  # a categorical file beside a dictionary one: one job
    assert rows["doc_id"].to_list() == ["e-1", "e-2", "d-1"]
    assert rows["document"].to_list() == TEXTS
    assert rows.schema["doc_id"] == rows.schema["document"] == pl.String
    (tmp_path / "job.json").write_text(json.dumps({"questions": QUESTIONS[:2]}))
    result = CliRunner().invoke(main, [
        "run", str(enum), str(dictionary), "-o", str(tmp_path / "out"), "--spec",
        str(tmp_path / "job.json"), "--model", str(model), "--no-progress",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert read_answers(tmp_path / "out")["doc_id"].to_list() == ["d-1", "e-1", "e-2"]


def test_a_uuid_doc_id_is_read_as_its_text(model, tmp_path: Path) -> None:
    ids = pa.array([u.bytes for u in UUIDS] + [UUIDS[0].bytes, None], pa.uuid())
    refs = pa.array([u.bytes for u in reversed(UUIDS)] + [None, None], pa.uuid())
    path = tmp_path / "uuid.parquet"
    pq.write_table(pa.table({"doc_id": ids, "document": [*TEXTS, "again", "no id"],
                             "ref": refs}), path)  # fmt: skip
    plan = _plan(path)
    assert plan.doc_id_type == pl.String
    assert _rows(path)["doc_id"].to_list() == [*map(str, UUIDS), str(UUIDS[0]), None]
    found = survey(plan)
    assert list(found.duplicates) == [str(UUIDS[0])]  # named by its text in the error row
    assert found.null_ids == [(str(path), 4)]
    out = _decide(model, tmp_path, path).sort("doc_id")
    assert out["doc_id"].to_list() == sorted(map(str, UUIDS))
    assert [uuid.UUID(i) for i in out["doc_id"]] == sorted(UUIDS, key=str)  # exactly back
    error = out.filter(pl.col("doc_id") == str(UUIDS[0]))["error"].item()
    assert error.startswith("duplicate doc_id (at uuid.parquet row 0, uuid.parquet row 3)")
    # A carried uuid column keeps every value's 16 bytes (as binary: polars has no uuid type).
    kept = dict(zip(out["doc_id"], out["ref"], strict=True))
    assert kept[str(UUIDS[1])] == UUIDS[1].bytes and kept[str(UUIDS[0])] == UUIDS[2].bytes


@pytest.mark.parametrize(
    ("column", "arrow_type", "expected"),
    [
        ("doc_id", pa.binary(16), "fixed_size_binary[16]"),
        ("doc_id", pa.binary(), "binary"),
        ("document", pa.binary(), "decode the bytes to text"),
    ],
)
def test_raw_bytes_are_refused_naming_the_column(
    tmp_path: Path, column: str, arrow_type, expected: str
) -> None:
    columns = {"doc_id": pa.array(["a", "b"]), "document": pa.array(TEXTS[:2])}
    columns[column] = pa.array([u.bytes for u in UUIDS[:2]], arrow_type)
    path = tmp_path / "bytes.parquet"
    pq.write_table(pa.table(columns), path)
    with pytest.raises(SpecError, match=rf"bytes.parquet: column '{column}' is Binary") as caught:
        _plan(path)
    assert expected in str(caught.value)


def test_a_column_one_file_stores_as_all_null_takes_the_other_files_type(
    model, tmp_path: Path
) -> None:
    typed = tmp_path / "a.parquet"
    pl.DataFrame({"doc_id": ["a-1"], "document": TEXTS[:1], "score": [1.5]}).write_parquet(typed)
    empty = tmp_path / "b.parquet"  # polars writes a column without a value as null type
    pl.DataFrame({"doc_id": ["b-1", "b-2"], "document": [None, None],
                  "score": [None, None]}).write_parquet(empty)  # fmt: skip
    assert pl.read_parquet_schema(empty)["document"] == pl.Null
    plan = _plan(empty, typed)
    assert plan.carried_schema == {"score": pl.Float64}
    rows = _rows(empty, typed)
    assert rows.schema["document"] == pl.String and rows.schema["score"] == pl.Float64
    out = _decide(model, tmp_path, empty, typed, part_rows=1)
    assert out.schema["score"] == pl.Float64
    assert dict(zip(out["doc_id"], out["error"], strict=True)) == {
        "a-1": None, "b-1": "document is null", "b-2": "document is null"
    }  # fmt: skip
    no_ids = tmp_path / "c.parquet"
    pl.DataFrame({"doc_id": [None], "document": ["x"], "score": [2.0]}).write_parquet(no_ids)
    assert _plan(no_ids).doc_id_type == pl.String  # every row is invalid, none stops the job
    assert survey(_plan(no_ids)).null_ids == [(str(no_ids), 0)]


def test_an_all_null_questions_column_falls_back_to_the_spec(tmp_path: Path) -> None:
    path = tmp_path / "q.parquet"
    pl.DataFrame({"doc_id": ["a"], "document": ["x"], "questions": [None]}).write_parquet(path)
    plan = _plan(path)
    assert plan.has_questions
    assert survey(plan).question_schemas == {}
    assert _rows(path)["questions"].to_list() == [None]
    with pytest.raises(SpecError, match=r"no questions: the spec has none and column "
                       r"'questions' is null in every row"):  # fmt: skip
        inspect_inputs([path], InputColumns(), need_questions=True)


def test_files_may_order_their_columns_differently(tmp_path: Path) -> None:
    first = tmp_path / "first.parquet"
    pl.DataFrame({"doc_id": [1], "document": ["x"], "n": [1]}).write_parquet(first)
    second = tmp_path / "second.parquet"
    pl.DataFrame({"n": [2], "document": ["y"], "doc_id": [2]}).write_parquet(second)
    assert _rows(first, second).select("doc_id", "n").rows() == [(1, 1), (2, 2)]


@pytest.mark.parametrize(
    ("other", "message"),
    [
        ({"doc_id": [2], "document": ["y"]}, r"other.parquet: its columns differ from those of "
         r".*first.parquet \(it lacks 'n'\)"),
        ({"doc_id": [2], "document": ["y"], "n": [1], "m": [1]}, r"first.parquet lacks 'm'"),
        ({"doc_id": [2], "document": ["y"], "n": ["1"]},
         r"other.parquet: column 'n' is String, but Int64 in .*first.parquet"),
        ({"doc_id": ["2"], "document": ["y"], "n": [1]},
         r"other.parquet: column 'doc_id' is String, but Int64 in .*first.parquet"),
    ],
)  # fmt: skip
def test_files_that_disagree_name_the_columns(tmp_path: Path, other: dict, message: str) -> None:
    first = tmp_path / "first.parquet"
    pl.DataFrame({"doc_id": [1], "document": ["x"], "n": [1]}).write_parquet(first)
    pl.DataFrame(other).write_parquet(tmp_path / "other.parquet")
    with pytest.raises(SpecError, match=message):
        _plan(first, tmp_path / "other.parquet")


def test_duplicates_across_files_and_row_groups_name_each_place(tmp_path: Path) -> None:
    many = tmp_path / "many.parquet"
    ids = [f"m-{i}" for i in range(9)] + ["shared"]
    pl.DataFrame({"doc_id": ids, "document": ["x"] * 10}).write_parquet(many, row_group_size=3)
    assert pq.ParquetFile(many).num_row_groups == 4
    small = [tmp_path / f"small-{i}.parquet" for i in range(40)]
    for i, path in enumerate(small):
        pl.DataFrame({"doc_id": [f"s-{i}", "shared" if i == 17 else f"t-{i}"],
                      "document": ["y", "z"]}).write_parquet(path)  # fmt: skip
    found = survey(_plan(many, *small))
    assert found.rows == 90
    assert found.duplicates == {"shared": [(str(many), 9), (str(small[17]), 1)]}


def test_arrow_batches_as_ray_reads_them_are_read_as_stream_reads_them(tmp_path: Path) -> None:
    """`read_arrow` (the Ray runner's reading of a batch) gives what `stream` gives."""
    from decide.jobs.inputs import read_arrow

    category = tmp_path / "category.parquet"
    pq.write_table(pa.table({"doc_id": pa.array(["a", "b"]).dictionary_encode(),
                             "document": pa.array(TEXTS[:2]).dictionary_encode(),
                             "n": pa.array([1, 2])}), category)  # fmt: skip
    ids = tmp_path / "uuid.parquet"
    pq.write_table(pa.table({"doc_id": pa.array([UUIDS[0].bytes, None], pa.uuid()),
                             "document": pa.array([None, None], pa.null()),
                             "n": pa.array([None, None], pa.null())}), ids)  # fmt: skip
    plan = _plan(category, ids)
    rows = pl.concat(list(stream(plan, chunk_rows=2)))
    for path in (category, ids):
        read = pl.from_arrow(read_arrow(pq.read_table(path), plan))
        assert isinstance(read, pl.DataFrame)
        streamed = rows.filter(pl.col(FILE) == str(path)).drop(ROW, FILE)
        assert read.schema == streamed.schema
        assert read.rows() == streamed.rows()
    plain = pa.table({"doc_id": ["x"], "document": ["y"], "n": [3]})
    assert read_arrow(plain, plan) is plain  # nothing to read otherwise: the same batch
