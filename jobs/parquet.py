"""Reading parquet files by their exact names: polars treats a path as a glob pattern unless told
not to, so `data[1].parquet` read `data1.parquet` and `report [final].parquet` matched nothing.
Every read of a job's inputs, parts and errors goes through these."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl


def schema(path: str | Path) -> pl.Schema:
    """The schema of the parquet file named `path` (`read_parquet_schema` has no `glob` switch:
    it is given the open file)."""
    with open(path, "rb") as handle:
        return pl.read_parquet_schema(handle)


def scan(paths: str | Path | Sequence[str | Path], **options: Any) -> pl.LazyFrame:
    """`pl.scan_parquet` over exactly the named files."""
    return pl.scan_parquet(_named(paths), glob=False, **options)


def read(path: str | Path, **options: Any) -> pl.DataFrame:
    """`pl.read_parquet` of exactly the named file."""
    return pl.read_parquet(path, glob=False, **options)


def _named(paths: str | Path | Sequence[str | Path]) -> Any:
    return paths if isinstance(paths, str | Path) else [Path(p) for p in paths]
