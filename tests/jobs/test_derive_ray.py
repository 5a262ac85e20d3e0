"""The Ray runner carries derived answers, partial rows and failure kinds exactly as the local
runner writes them (same answers, `partial`, `errors` and `kind` per doc id)."""

from __future__ import annotations

import polars as pl
import pytest
from helpers.jobdata import write_docs

from decide.jobs.runner import run_job
from decide.jobs.spec import parse_spec

ray = pytest.importorskip("ray", reason="Ray is the optional `ray` extra (also in `dev`)")
pytestmark = pytest.mark.timeout(600)

QUESTIONS = [
    {"id": "amount", "text": "How many dollars?", "extract": True,
     "schema": {"type": "integer", "minimum": 0, "maximum": 100000}},
    {"id": "city", "text": "Which city?", "extract": True,
     "schema": {"type": "string", "pattern": "ton$", "maxLength": 12}},
    {"id": "active", "text": "Active?", "schema": {"type": "boolean"}},
    {"id": "big", "text": "Big?", "derive": "active && amount > 1500", "schema": {"type": "boolean"}},
]  # fmt: skip


def test_ray_runner_derives_and_keeps_partial_rows(tiny_checkpoint, tmp_path) -> None:
    from decide.jobs.ray_runner import run_job_ray

    path = write_docs(tmp_path / "in.parquet", 12, seed=5)
    frame = pl.read_parquet(path)
    amounts = pl.Series([f" Total ${1000 + 97 * i:,} claimed." for i in range(frame.height)])
    frame = frame.with_columns(pl.col("document") + amounts)
    pl.concat([frame, frame.head(1)]).write_parquet(path)  # one duplicated id
    model = tiny_checkpoint("bert", vocab="small", init_std=0.2)
    spec = parse_spec({"questions": QUESTIONS})
    run_job(spec, [path], tmp_path / "local", model=model, batch_size=4, progress=False)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    try:
        run_job_ray(spec, [path], tmp_path / "ray", model=model, batch_size=4, progress=False)
    finally:
        ray.shutdown()
    cols = ["doc_id", "status", "error_kind", "answers_json", "partial", "errors"]
    local, remote = (pl.read_parquet(tmp_path / name / "answers" / "*.parquet").sort("doc_id")
                     for name in ("local", "ray"))  # fmt: skip
    assert local.select(cols).to_dicts() == remote.select(cols).to_dicts()
    assert local["error_kind"].to_list().count("duplicate_doc_id") == 1
    assert local["partial"].sum() >= 1  # documents without "...ton" keep their other answers
    assert local.filter(pl.col("status") == "ok")["answers"].struct.field("big").null_count() == 0
