"""Reading the input parquet files: checked up front, then streamed in chunks with polars.

`inspect_inputs` reads only file footers and fails with a message naming the file and column when
a file is not parquet, lacks a required column or has one of the wrong type, or when the files
disagree on their columns. `survey` reads only the id column (and the per-row questions column, if
any) to find duplicate and null ids before any document is decided, since one output row per
`doc_id` can only be promised knowing them. `stream` yields chunks of rows with their file and row
number, so memory stays bounded whatever the input size.

Some columns are read as other than they are stored (`InputPlan.reads`, applied by `survey` and
`stream` through `read_exprs`): a categorical (dictionary-encoded, Enum) `doc_id` or `document`
as its values, a `doc_id` of Arrow's `uuid` type (Parquet's UUID) as its text
(`123e4567-e89b-12d3-a456-426614174000`), and a column a file stores as all-null type (polars and
pandas write one for a column with no value) as the type the other files give it. Files may order
their columns differently. Carried columns are read as stored (a categorical stays categorical).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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


QUESTIONS_TYPE = pl.List(pl.Struct({"id": pl.String, "text": pl.String, "schema": pl.String}))
UUID = "uuid"  # `InputPlan.reads`: an Arrow uuid (16 bytes) read as its canonical text
CAST = "cast"  # `InputPlan.reads`: cast to the column's type in the plan (`InputPlan.dtype`)


@dataclass(frozen=True)
class InputPlan:
    files: list[Path]
    columns: InputColumns
    doc_id_type: pl.DataType
    has_questions: bool
    carried: list[str]  # input columns copied to the output untouched
    carried_schema: dict[str, pl.DataType] = field(default_factory=dict)
    # str(file) -> {column: UUID or CAST}: the columns of a file not read as stored (`read_exprs`)
    reads: dict[str, dict[str, str]] = field(default_factory=dict)
    questions_type: pl.DataType = QUESTIONS_TYPE

    def dtype(self, name: str) -> pl.DataType:
        """The type column `name` is read as, in every file."""
        if name == self.columns.doc_id:
            return self.doc_id_type
        if name == self.columns.document:
            return pl.String
        if name == self.columns.questions and self.has_questions:
            return self.questions_type
        return self.carried_schema[name]


def read_exprs(plan: InputPlan, path: Path) -> list[pl.Expr]:
    """The expressions that read the columns of `path` stored otherwise than the plan reads
    them (for `with_columns`); none for most files."""
    exprs = []
    for name, how in plan.reads.get(str(path), {}).items():
        expr = _uuid_text(name) if how == UUID else pl.col(name).cast(plan.dtype(name))
        exprs.append(expr.alias(name))
    return exprs


def read_arrow(batch: Any, plan: InputPlan) -> Any:
    """`batch`, a pyarrow Table of input rows as Ray Data reads them (`jobs.ray_runner`), with
    the columns some file stores otherwise than the plan reads them (`reads`) read as `stream`
    reads them: a categorical doc_id or document as its values, a uuid doc_id as its text, an
    all-null column as the plan's type. Other columns are left as they are."""
    names = {n for how in plan.reads.values() for n in how if n in batch.column_names}
    frame = pl.from_arrow(batch.select(sorted(names))) if names else None
    if not isinstance(frame, pl.DataFrame):
        return batch
    exprs = []
    for name, dtype in frame.schema.items():
        want = plan.dtype(name)
        if dtype == want:
            continue
        uuid = dtype == pl.Binary and name == plan.columns.doc_id
        exprs.append((_uuid_text(name) if uuid else pl.col(name).cast(want)).alias(name))
    if not exprs:
        return batch
    read = frame.with_columns(exprs).to_arrow()
    for name in read.column_names:
        batch = batch.set_column(batch.column_names.index(name), name, read[name])
    return batch


def scan_read(plan: InputPlan, path: Path, columns: list[str]) -> pl.LazyFrame:
    """Columns `columns` of input file `path` (one of `plan.files`) as `survey` and `stream`
    read them (`read_exprs`): the scans of every file, so read, concatenate as one table."""
    return parquet.scan(path).with_columns(read_exprs(plan, path)).select(columns)


def values_expr(path: Path, name: str, dtype: pl.DataType) -> pl.Expr | None:
    """How a doc_id column `name` of `path` that is not an input file (a gold file, say), stored
    as `dtype`, is read as the runner reads an input's: a categorical as its values, an Arrow
    uuid as its text; None when it is read as stored."""
    if _categorical(dtype):
        return pl.col(name).cast(pl.String)
    if dtype == pl.Binary and _is_uuid(_arrow_type(path, name)):
        return _uuid_text(name)
    return None


def _uuid_text(name: str) -> pl.Expr:
    """A uuid's 16 bytes as its canonical text, `8-4-4-4-12` lowercase hex digits (as Python's
    `str(uuid.UUID(bytes=...))`); null stays null."""
    hexed = pl.col(name).bin.encode("hex").str.to_lowercase()
    parts = [hexed.str.slice(start, length) for start, length in UUID_GROUPS]
    return pl.concat_str(parts, separator="-")


UUID_GROUPS = ((0, 8), (8, 4), (12, 4), (16, 4), (20, 12))


SPEC_SUFFIXES = (".yaml", ".yml", ".json")
# Tables people pass instead of parquet, and the polars reader of each.
TABLE_READERS = {".csv": "read_csv", ".tsv": "read_csv", ".jsonl": "read_ndjson",
                 ".ndjson": "read_ndjson", ".arrow": "read_ipc", ".feather": "read_ipc",
                 ".xlsx": "read_excel"}  # fmt: skip


def _schema(path: Path) -> pl.Schema:
    if not path.exists():
        raise SpecError(f"{path}: no such input file")
    if path.is_dir():
        raise SpecError(f"{path}: is a directory; pass the parquet files inside it")
    try:
        return parquet.schema(path)
    except (pl.exceptions.PolarsError, OSError) as exc:
        hint = "; a job spec is passed with --spec" if path.suffix in SPEC_SUFFIXES else ""
        reader = TABLE_READERS.get(path.suffix.lower())
        if reader is not None and not hint:
            hint = (f"; decide reads parquet only: convert it first, e.g. "
                    f"python -c \"import polars as pl; pl.{reader}('{path}')"
                    f".write_parquet('{path.with_suffix('.parquet')}')\"")  # fmt: skip
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


def _categorical(dtype: pl.DataType) -> bool:
    """pandas' category, a dictionary-encoded string column, polars' Categorical or Enum."""
    return isinstance(dtype, (pl.Categorical, pl.Enum))


def _arrow_type(path: Path, name: str) -> Any:
    """The Arrow type pyarrow (when installed) reads column `name` of `path` as, else None:
    polars reads Arrow's uuid type, fixed-size binaries and binaries alike as Binary."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return None
    try:
        return pq.read_schema(path).field(name).type
    except (pa.ArrowException, OSError, KeyError):
        return None


def _is_uuid(arrow_type: Any) -> bool:
    return getattr(arrow_type, "extension_name", None) == "arrow.uuid"


def _role_read(path: Path, role: str, name: str, dtype: pl.DataType) -> tuple[str | None, Any]:
    """(how column `name` of `path`, the job's `role` column, is read: None as stored, else UUID
    or CAST; the type it is read as, None for an all-null column that takes the other files'
    type); refuses a type the role cannot have, naming the file and column."""
    if dtype == pl.Null:
        return CAST, None
    if role == "questions":
        if _questions_type_ok(dtype):
            return None, dtype
        raise SpecError(f"{path}: column {name!r} is {dtype}, expected "
                        "list<struct<id: string, text: string, schema: string>>")  # fmt: skip
    if _categorical(dtype):
        return CAST, pl.String  # read as its values (pandas' category, a dictionary column)
    if dtype == pl.String or (role == "doc_id" and dtype.is_integer()):
        return None, dtype
    arrow = _arrow_type(path, name) if dtype == pl.Binary else None
    if role == "doc_id" and _is_uuid(arrow):
        return UUID, pl.String
    stored = f"{dtype}" if arrow is None else f"{dtype} ({arrow})"
    if role == "doc_id":
        hint = ""
        if dtype == pl.Binary:
            hint = (
                "; raw bytes make no doc_id: cast the column to string, or write UUIDs as "
                "Arrow's uuid type (pyarrow's pa.uuid()), which is read as their text"
            )
            if importlib.util.find_spec("pyarrow") is None:
                hint += " (telling that type apart needs pyarrow, which is not installed)"
        raise SpecError(f"{path}: column {name!r} is {stored}, expected string or integer{hint}")
    hint = "; decode the bytes to text (UTF-8) when writing the file" if dtype == pl.Binary else ""
    raise SpecError(f"{path}: column {name!r} is {stored}, expected string{hint}")


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
    roles = {columns.doc_id: "doc_id", columns.document: "document"}
    if columns.questions not in roles:
        roles[columns.questions] = "questions"
    # Per file, the type each column is read as (None: all null, the other files' type).
    read_as: list[tuple[Path, dict[str, Any]]] = []
    reads: dict[str, dict[str, str]] = {}
    for path, schema in schemas:
        for role, name in (("doc_id", columns.doc_id), ("document", columns.document)):
            if name not in schema:
                raise SpecError(
                    f"{path}: no {role} column {name!r} (columns: {', '.join(schema.names())}); "
                    f"set input.{role} in the spec if it is named differently"
                )
        types: dict[str, Any] = {}
        for name, dtype in schema.items():
            how, types[name] = (
                _role_read(path, roles[name], name, dtype)
                if name in roles
                else ((CAST, None) if dtype == pl.Null else (None, dtype))
            )
            if how is not None:
                reads.setdefault(str(path), {})[name] = how
        read_as.append((path, types))
    final = _agree(read_as, first_path)
    has_questions = columns.questions in first
    if need_questions and not has_questions:
        raise SpecError(
            f"no questions: the spec has none and {first_path} has no {columns.questions!r} column"
        )
    if need_questions and final[columns.questions] is None:
        raise SpecError(f"no questions: the spec has none and column {columns.questions!r} is "
                        "null in every row of every input file")  # fmt: skip
    carried = [n for n in first.names() if n not in roles]
    clash = [n for n in carried if n in OUTPUT_COLUMNS or n in (ROW, FILE)]
    if clash:
        raise SpecError(
            f"{first_path}: input column(s) {', '.join(clash)} would collide with output columns "
            "of the same name (or the reader's own row and file columns); rename them"
        )
    defaults = {columns.doc_id: pl.String, columns.document: pl.String,
                columns.questions: QUESTIONS_TYPE}  # fmt: skip
    typed = {n: t if t is not None else defaults.get(n, pl.Null) for n, t in final.items()}
    # A column all null in every file keeps its null type: nothing to read it as.
    reads = {
        file: kept
        for file, how in reads.items()
        if (kept := {n: h for n, h in how.items() if h == UUID or typed[n] != pl.Null})
    }
    return InputPlan(
        files=list(paths),
        columns=columns,
        doc_id_type=typed[columns.doc_id],
        has_questions=has_questions,
        carried=carried,
        carried_schema={n: typed[n] for n in carried},
        reads=reads,
    )


def _agree(read_as: list[tuple[Path, dict[str, Any]]], first_path: Path) -> dict[str, Any]:
    """The type each column is read as in every file (None: all null in every file); refuses
    files whose columns differ in name or type, naming the columns."""
    first = read_as[0][1]
    final = dict(first)
    for path, types in read_as[1:]:
        missing = [n for n in first if n not in types]
        extra = [n for n in types if n not in first]
        if missing or extra:
            what = "; ".join(
                f"{label} {', '.join(repr(n) for n in names)}"
                for label, names in (("it lacks", missing), (f"{first_path} lacks", extra))
                if names
            )
            raise SpecError(f"{path}: its columns differ from those of {first_path} ({what}); "
                            "all input files of a job need the same columns")  # fmt: skip
        for name, dtype in types.items():
            if dtype is None:
                continue
            if final[name] is None:
                final[name] = dtype
            elif dtype != final[name]:
                where = next(p for p, t in read_as if t[name] is not None)
                raise SpecError(
                    f"{path}: column {name!r} is {dtype}, but {final[name]} in {where}; all "
                    "input files of a job need the same columns, of the same types"
                )
    return final


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
                .with_columns(read_exprs(plan, path))
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
                    .with_columns(read_exprs(plan, path))
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
    """Chunks of input rows with `__decide_file` and `__decide_row` columns, every chunk with
    the same columns in the same order and of the same types, whichever file it comes from."""
    cols = plan.columns
    roles = [cols.doc_id, cols.document, *([cols.questions] if plan.has_questions else [])]
    for path in plan.files:
        lazy = (
            parquet.scan(path)
            .with_row_index(ROW)
            .with_columns(*read_exprs(plan, path), pl.lit(str(path)).alias(FILE))
            .select(ROW, *roles, *plan.carried, FILE)
        )
        with _readable(path):  # the footer was fine (checked up front), a data page may not be
            yield from lazy.collect_batches(chunk_size=chunk_rows)
