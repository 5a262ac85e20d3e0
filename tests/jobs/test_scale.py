"""Scale: a thousand documents end to end on tiny random checkpoints of every model type, every
answer valid. Kept apart from test_runner.py so that parallel test workers (one file each) share
the suite's longest tests.

Decoded with a budget of 8 steps per block: a random model is never confident, so at the default
threshold it commits about one token per forward (30-35 forwards per document for LLaDA and
Dream, the two longest tests of the suite); with the budget every block commits several tokens
per step under its masks, as a trained model does (the bundled model commits 16 per forward),
in half the time. Threshold decoding at one token per step is covered by test_runner.py."""

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
        parse_spec(spec(decoding={"max_steps": 8})),
        [docs],
        tmp_path / "out",
        model=models[model_type],
        batch_size=32,
        progress=False,
    )
    check_output(tmp_path / "out", {f"doc-{i:05d}" for i in range(1000)})
    assert result.ok == 1000
