"""Inputs are streamed: the runner never holds more than a chunk of input rows at once.

The peak-memory figure for 10,000 vs 100,000 rows is `benchmarks/memory.py` (too slow for the
suite); this checks the mechanism it relies on, on a real multi-file parquet input whose row
groups are larger than a chunk."""

from __future__ import annotations

import polars as pl

from decide.jobs.inputs import FILE, ROW, inspect_inputs, stream
from decide.jobs.spec import InputColumns


def test_stream_yields_bounded_chunks_of_every_row_in_order(tmp_path) -> None:
    paths = []
    for f, rows in enumerate((2_500, 1_001)):
        path = tmp_path / f"in-{f}.parquet"
        pl.DataFrame({
            "doc_id": [f"{f}-{i}" for i in range(rows)],
            "document": [f"text {i} " * 20 for i in range(rows)],
        }).write_parquet(path, row_group_size=2_000)  # fmt: skip
        paths.append(path)
    plan = inspect_inputs(paths, InputColumns(), need_questions=False)
    chunks = list(stream(plan, chunk_rows=300))
    assert max(c.height for c in chunks) <= 300
    seen = pl.concat(chunks)
    assert seen["doc_id"].to_list() == [f"{f}-{i}" for f, n in ((0, 2_500), (1, 1_001))
                                        for i in range(n)]  # fmt: skip
    assert seen[FILE].to_list() == [str(paths[0])] * 2_500 + [str(paths[1])] * 1_001
    assert seen[ROW].to_list() == list(range(2_500)) + list(range(1_001))
