"""Scale: a thousand documents end to end on tiny random checkpoints of every model type, every
answer valid. Kept apart from test_runner.py so that parallel test workers (one file each) share
the suite's longest tests."""

from __future__ import annotations

import pytest
from helpers.jobdata import MODEL_TYPES, check_output, spec, write_docs

from decide.jobs.runner import run_job
from decide.jobs.spec import parse_spec


@pytest.mark.slow
@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_a_thousand_documents_all_valid(model_type, models, tmp_path) -> None:
    docs = write_docs(tmp_path / "in.parquet", 1000, seed=2)
    result = run_job(
        parse_spec(spec()),
        [docs],
        tmp_path / "out",
        model=models[model_type],
        batch_size=32,
        progress=False,
    )
    check_output(tmp_path / "out", {f"doc-{i:05d}" for i in range(1000)})
    assert result.ok == 1000
