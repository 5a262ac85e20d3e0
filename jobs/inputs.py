"""Reading the input parquet files: checked up front, then streamed in chunks with polars.

`inspect_inputs` reads only file footers and fails with a message naming the file and column when
a file is not parquet, lacks a required column or has one of the wrong type, or when the files
disagree on their columns. `survey` reads only the id column (and the per-row questions column, if
any) to find duplicate and null ids before any document is decided, since one output row per
`doc_id` can only be promised knowing them. `stream` yields chunks of rows with their file and row
number, so memory stays bounded whatever the input size.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from . import parquet
from .spec import InputColumns, SpecError

ROW = "__decide_row"
FILE = "__decide_file"
CARRIED = "__decide_carried"  # a row's carried columns: (its chunk's carried frame, its index)
# Every column decide writes into an answers part (`runner._frame`, and `raw_confidence` /
# `review` of a calibrated run, `calibrate.ConfidencePlan.frame`): an input column of one of these
# names is refused rather than overwritten (tests/jobs/test_output_columns.py checks the list).
OUTPUT_COLUMNS = (
    "doc_id", "status", "error", "answers", "answers_json", "confidence", "nfe", "value_tokens",
    "filler_tokens", "truncated", "model_fingerprint", "spec_fingerprint", "error_kind",
    "partial", "errors", "windows", "evidence", "withheld_json", "raw_confidence", "review",
)  # fmt: skip


@dataclass(frozen=True)
class InputPlan:
    files: list[Path]
    columns: InputColumns
    doc_id_type: pl.DataType
    has_questions: bool
    carried: list[str]  # input columns copied to the output untouched
    carried_schema: dict[str, pl.DataType] = field(default_factory=dict)


SPEC_SUFFIXES = (".yaml", ".yml", ".json")


def _schema(path: Path) -> pl.Schema:
    if not path.exists():
        raise SpecError(f"{path}: no such input file")
    if path.is_dir():
        raise SpecError(f"{path}: is a directory; pass the parquet files inside it")
    try:
        return parquet.schema(path)
    except (pl.exceptions.PolarsError, OSError) as exc:
        hint = "; a job spec is passed with --spec" if path.suffix in SPEC_SUFFIXES else ""
        raise SpecError(f"{path}: not a readable parquet file ({exc}){hint}") from exc
    except pl.exceptions.PanicException as exc:  # polars panics on some Arrow types
        raise SpecError(
            f"{path}: polars cannot read its columns ({exc}){_unreadable(path)}"
        ) from exc


def _unreadable(path: Path) -> str:
    """The columns polars is known to refuse (a time zone written as a fixed offset, `+05:30`,
    as pandas writes `pd.to_datetime('...+05:30')`), named for the error message."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        fields = pq.read_schema(path)
    except (pa.ArrowException, OSError):
        return ""
    offsets = [f"{f.name} ({f.type})" for f in fields
               if pa.types.is_timestamp(f.type) and f.type.tz and f.type.tz[0] in "+-"]  # fmt: skip
    if not offsets:
        return ""
    return (f": {', '.join(offsets)} has a time zone written as a fixed offset; write it in UTC "
            "or a named zone (Asia/Kolkata)")  # fmt: skip


def _questions_type_ok(dtype: pl.DataType) -> bool:
    if not isinstance(dtype, pl.List) or not isinstance(dtype.inner, pl.Struct):
        return False
    fields = {f.name: f.dtype for f in dtype.inner.fields}
    return all(fields.get(k) == pl.String for k in ("id", "text", "schema"))


def inspect_inputs(paths: list[Path], columns: InputColumns, need_questions: bool) -> InputPlan:
    """Check every input file's columns; `need_questions` when the spec has no questions."""
    if not paths:
        raise SpecError("no input files given")
    seen: dict[Path, Path] = {}
    for path in paths:
        same = seen.setdefault(path.resolve(), path)
        if same is not path:
            raise SpecError(f"{path}: given twice ({same}); each input file is read once")
    schemas = [(p, _schema(p)) for p in paths]
    first_path, first = schemas[0]
    for path, schema in schemas:
        for role, name in (("doc_id", columns.doc_id), ("document", columns.document)):
            if name not in schema:
                raise SpecError(
                    f"{path}: no {role} column {name!r} (columns: {', '.join(schema.names())}); "
                    f"set input.{role} in the spec if it is named differently"
                )
        id_type = schema[columns.doc_id]
        if not (id_type == pl.String or id_type.is_integer()):
            raise SpecError(
                f"{path}: column {columns.doc_id!r} is {id_type}, expected string or integer"
            )
        if schema[columns.document] != pl.String:
            raise SpecError(
                f"{path}: column {columns.document!r} is {schema[columns.document]}, "
                "expected string"
            )
        if columns.questions in schema and not _questions_type_ok(schema[columns.questions]):
            raise SpecError(
                f"{path}: column {columns.questions!r} is {schema[columns.questions]}, expected "
                "list<struct<id: string, text: string, schema: string>>"
            )
        if schema != first:
            raise SpecError(
                f"{path}: its columns ({schema}) differ from those of {first_path} ({first}); "
                "all input files of a job need the same columns"
            )
    has_questions = columns.questions in first
    if need_questions and not has_questions:
        raise SpecError(
            f"no questions: the spec has none and {first_path} has no {columns.questions!r} column"
        )
    roles = {columns.doc_id, columns.document, columns.questions}
    carried = [n for n in first.names() if n not in roles]
    clash = [n for n in carried if n in OUTPUT_COLUMNS or n in (ROW, FILE)]
    if clash:
        raise SpecError(
            f"{first_path}: input column(s) {', '.join(clash)} would collide with output columns "
            "of the same name (or the reader's own row and file columns); rename them"
        )
    return InputPlan(
        files=list(paths),
        columns=columns,
        doc_id_type=first[columns.doc_id],
        has_questions=has_questions,
        carried=carried,
        carried_schema={n: first[n] for n in carried},
    )


@dataclass
class Survey:
    rows: int = 0
    null_ids: list[tuple[str, int]] = field(default_factory=list)  # (file, row)
    duplicates: dict[object, list[tuple[str, int]]] = field(default_factory=dict)
    question_schemas: dict[str, set[str]] = field(default_factory=dict)  # id -> schema texts


def survey(plan: InputPlan) -> Survey:
    """Count rows, find null and duplicate ids, collect per-row question ids and schemas."""
    out = Survey()
    id_col = plan.columns.doc_id
    frames = []
    for path in plan.files:
        with _readable(path):
            frame = (
                parquet.scan(path)
                .select(pl.col(id_col).alias("id"))
                .with_row_index(ROW)
                .with_columns(pl.lit(str(path)).alias(FILE))
                .collect()
            )
        out.rows += frame.height
        frames.append(frame)
    ids = pl.concat(frames) if frames else pl.DataFrame()
    if ids.height:
        nulls = ids.filter(pl.col("id").is_null())
        out.null_ids = list(zip(nulls[FILE].to_list(), nulls[ROW].to_list(), strict=True))
        dup = ids.filter(pl.col("id").is_not_null() & pl.col("id").is_duplicated())
        for doc_id, file, row in dup.select("id", FILE, ROW).iter_rows():
            out.duplicates.setdefault(doc_id, []).append((file, row))
    if plan.has_questions:
        q = plan.columns.questions
        for path in plan.files:
            with _readable(path):
                pairs = (
                    parquet.scan(path)
                    .select(pl.col(q).explode().struct.unnest())
                    .drop_nulls("id")
                    .select("id", "schema")
                    .unique()
                    .collect()
                )
            for qid, schema in pairs.iter_rows():
                out.question_schemas.setdefault(qid, set()).add(schema)
    return out


@contextmanager
def _readable(path: Path) -> Iterator[None]:
    """Turn a failed read of a file whose footer was fine into a usage error naming it."""
    try:
        yield
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise SpecError(f"{path}: unreadable parquet data ({exc})") from exc


def stream(plan: InputPlan, chunk_rows: int) -> Iterator[pl.DataFrame]:
    """Chunks of input rows with `__decide_file` and `__decide_row` columns."""
    for path in plan.files:
        lazy = parquet.scan(path).with_row_index(ROW).with_columns(pl.lit(str(path)).alias(FILE))
        with _readable(path):  # the footer was fine (checked up front), a data page may not be
            yield from lazy.collect_batches(chunk_size=chunk_rows)
