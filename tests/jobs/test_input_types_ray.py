"""`--engine ray` reads the input types `decide run` reads (tests/jobs/test_input_types.py): a
categorical or uuid doc_id and an all-null column made its batch filter fail ("Array type
doesn't match type of values set") and the run abort with exit 3, where the local runner
decides them."""

from __future__ import annotations

import uuid
from pathlib import Path

import polars as pl
import pytest
from helpers.jobdata import QUESTIONS, read_answers

from decide.jobs.ray_runner import run_job_ray
from decide.jobs.runner import run_job
from decide.jobs.spec import parse_spec

ray = pytest.importorskip("ray", reason="Ray is the optional `ray` extra (also in `dev`)")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pytestmark = pytest.mark.timeout(600)


def test_ray_decides_categorical_uuid_and_all_null_columns(
    cluster, tiny_checkpoint, tmp_path: Path
) -> None:
    model = tiny_checkpoint("bert", vocab="small", init_std=0.2)
    category = tmp_path / "category.parquet"
    pq.write_table(pa.table({"doc_id": pa.array(["a", "b", "a"]).dictionary_encode(),
                             "document": pa.array(["A car claim.", "Fire.", "Again."]),
                             "n": pa.array([1, 2, 3])}), category)  # fmt: skip
    ids = tmp_path / "uuid.parquet"
    key = uuid.UUID(int=12345)
    pq.write_table(pa.table({"doc_id": pa.array([key.bytes], pa.uuid()),
                             "document": pa.array([None], pa.null()),
                             "n": pa.array([None], pa.null())}), ids)  # fmt: skip
    spec = parse_spec({"questions": QUESTIONS[:2]})
    options = {"model": model, "batch_size": 4, "progress": False}
    local = run_job(spec, [category, ids], tmp_path / "local", **options)
    remote = run_job_ray(spec, [category, ids], tmp_path / "ray", actors=1, **options)
    assert (remote.ok, remote.failed) == (local.ok, local.failed) == (1, 2)
    columns = ["doc_id", "status", "error", "n"]
    got = read_answers(tmp_path / "ray").select(columns)
    assert got.rows() == read_answers(tmp_path / "local").select(columns).rows()
    assert got.schema["n"] == pl.Int64
    assert got["doc_id"].to_list() == sorted(["a", "b", str(key)])
