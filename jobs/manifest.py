"""`manifest.json`: what a job's output directory holds, as one typed pydantic model.

Contract. The runners build a `Manifest` when a job starts, update its fields as parts are
written and write it with `OutputDir.write_manifest` (`Manifest.dump`); `decide report`, `decide
calibrate` and a resumed run read it back with `Manifest.read`, never as a raw dict. Fields a
newer or older writer added that this class does not name are kept (`extra="allow"`) and written
back unchanged. Every manifest written since the format had `fingerprints` loads; a file that is
not JSON, or whose fields have the wrong types, raises `ManifestError` naming the file and the
JSON pointer of the first bad field. This module imports neither torch nor the engine.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .spec import SpecError

MANIFEST = "manifest.json"


class ManifestError(SpecError):
    """manifest.json is missing, is not JSON, or holds a field of the wrong type."""


class _Part(BaseModel):
    model_config = ConfigDict(extra="allow")


class QuestionEntry(_Part):
    """A question of the spec as the report shows it (the rest of its fields are kept)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    id: str
    text: str = ""
    schema_: Any = Field(default=True, alias="schema")


class InputColumns(_Part):
    doc_id: str = "doc_id"
    document: str = "document"
    questions: str = "questions"


class SpecEntry(_Part):
    """The job's spec as `JobSpec.model_dump(by_alias=True)` wrote it."""

    questions: list[QuestionEntry] = Field(default_factory=list)
    decoding: dict[str, Any] = Field(default_factory=dict)
    rules: Any = None
    input: InputColumns = Field(default_factory=InputColumns)


class InputFile(_Part):
    """One input file of the job as it was when the job started: its resolved path, its size and
    a hash of its parquet footer (row counts, column statistics and offsets), so that a resume
    can tell a changed file from the one the answers were decided from."""

    path: str
    bytes: int | None = None
    footer_sha256: str | None = None


class Counts(_Part):
    """Rows by outcome, over every run of the directory (resumed rows included)."""

    total: int = 0
    ok: int = 0
    error: int = 0
    invalid_rows: int = 0  # input rows without a doc_id (in errors.parquet only)
    resumed: int = 0
    failures: dict[str, int] = Field(default_factory=dict)  # this run, by failure kind


class RulesEntry(_Part):
    declared: bool = False
    narrowed: dict[str, int] = Field(default_factory=dict)  # rule pointer -> slots narrowed


class Throughput(_Part):
    """This run's work (a resumed run counts only what it decided itself)."""

    documents: int | None = None
    nfe: int | None = None
    answer_tokens: int | None = None  # slot positions, filler included
    value_tokens: int | None = None  # tokens of the answers' values


class CalibrationEntry(_Part):
    """What `--calibration` / `--review-below` ran with (see `jobs.calibrate`)."""

    review_below: float | None = None
    path: str | None = None
    sha256: str | None = None
    forced: bool = False
    model_fingerprint: str | None = None
    spec_fingerprint: str | None = None
    metrics: dict[str, Any] | None = None
    reliability: list[dict[str, Any]] = Field(default_factory=list)
    reliability_before: list[dict[str, Any]] = Field(default_factory=list)


class Manifest(_Part):
    """The contents of manifest.json."""

    status: Literal["running", "aborted", "complete"] = "running"
    started: str | None = None  # the first run's start (a resume keeps it)
    finished: str | None = None
    fingerprints: dict[str, str] = Field(default_factory=dict)
    model: str | None = None
    model_type: str | None = None
    inputs: list[str] = Field(default_factory=list)  # resolved paths (as given before 2026-12-07)
    input_files: list[InputFile] = Field(default_factory=list)  # with sizes (since 2026-12-07)
    spec: SpecEntry = Field(default_factory=SpecEntry)
    engine: str = "local"
    batch_size: int | None = None
    device: str | None = None
    dtype: str | None = None  # the weights' dtype decisions were made in (since 2026-12-07)
    counts: Counts = Field(default_factory=Counts)
    rules: RulesEntry = Field(default_factory=RulesEntry)
    seconds: float | None = None  # summed over every run of the directory (resumes included)
    throughput: Throughput | None = None
    calibration: CalibrationEntry | None = None
    review: dict[str, Any] | None = None  # the review queue's summary (`jobs.calibration`)

    @classmethod
    def read(cls, out_dir: Path) -> Manifest:
        """The manifest of the job in `out_dir`; `ManifestError` if there is none or it is bad."""
        path = out_dir / MANIFEST
        if not path.is_file():
            raise ManifestError(
                f"{out_dir}: no {MANIFEST}; not the output directory of a decide job"
            )
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ManifestError(f"{path}: unreadable manifest ({exc})") from exc
        return cls.parse(data, str(path))

    @classmethod
    def parse(cls, data: Any, where: str = MANIFEST) -> Manifest:
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            pointer = "/" + "/".join(str(p) for p in first["loc"])
            raise ManifestError(f"{where}: {pointer}: {first['msg']}") from exc

    def dump(self) -> str:
        """The JSON text written to manifest.json."""
        data = self.model_dump(mode="json", by_alias=True)
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
