"""The output directory: atomic answer parts, the manifest, errors, and resume.

Layout: `answers/part-NNNNN.parquet` (one row per decided `doc_id`), `errors.parquet` (every failed
row, rebuilt at the end of a run), `manifest.json` (fingerprints, counts, parts, timings).

Every file is written to a temporary name in the same directory, flushed and fsynced, then
`os.replace`d into place, so a reader or a resumed run never sees a torn part: a part file either
exists whole or not at all. On `resume`, the doc ids in the existing parts are the committed ones;
temporary files from a killed run are removed; a manifest whose model or spec fingerprint differs
from this run's is refused, because mixing answers of two configurations in one output is never
what a user wants.
"""

from __future__ import annotations

import io
import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

from . import parquet
from .failures import FailureKind

try:
    import fcntl
except ImportError:  # not POSIX: no lock (`OutputDir.lock`)
    fcntl = None  # type: ignore[assignment]
from .manifest import Manifest
from .spec import SpecError

log = logging.getLogger("decide.jobs")

PART_GLOB = "part-*.parquet"
_UMASK = os.umask(0)
os.umask(_UMASK)
FILE_MODE = 0o666 & ~_UMASK  # what a plain open() would have given (mkstemp gives 0600)


class OutputError(OSError):
    """Writing the output failed mid-job (disk full, permissions lost): the run aborts (exit 3)."""


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """Write `path` through a temporary sibling and `os.replace`; fsync file and directory."""
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        write(tmp)
        with tmp.open("rb+") as handle:
            os.fsync(handle.fileno())
        tmp.chmod(FILE_MODE)
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise OutputError(exc.errno, f"could not write {path}: {exc.strerror or exc}") from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def parquet_writer(frame: pl.DataFrame) -> Callable[[Path], None]:
    """`atomic_write`'s writer of `frame` as parquet: encoded in memory, then written by Python,
    so that a failed write (a full disk) is the OSError that aborts the run cleanly; polars
    reports one as its own ComputeError, often without the reason ("Invalid thrift: transport
    error")."""

    def write(tmp: Path) -> None:
        buffer = io.BytesIO()
        frame.write_parquet(buffer)
        tmp.write_bytes(buffer.getbuffer())

    return write


class OutputDir:
    def __init__(self, path: Path, *, resume: bool) -> None:
        self.path = path
        self.answers = path / "answers"
        self.manifest_path = path / "manifest.json"
        self.resume = resume
        self.next_part = 0
        self._lock: int | None = None
        if path.exists() and not path.is_dir():
            raise SpecError(f"{path}: output path exists and is not a directory")
        existing = path.is_dir() and any(
            not (entry.name == "answers" and entry.is_dir()) or any(entry.iterdir())
            for entry in path.iterdir()
        )  # an empty answers/ is what a run stopped by a usage error used to leave: not a job
        if existing and not resume:
            raise SpecError(
                f"{path}: output directory is not empty; pass --resume to continue the job it "
                "holds, or choose another directory"
            )
        if resume and not self.manifest_path.is_file():
            # A mistyped path would otherwise decide every row again without a word.
            log.warning("--resume: %s holds no job (no manifest.json): deciding every row", path)
        # Nothing is created until the job writes its first file (`create`), so a usage error
        # found after this point leaves the file system as it was; writability is probed in the
        # nearest directory that exists.
        probe_dir = next(p for p in (path, *path.parents) if p.exists())
        try:
            tempfile.TemporaryFile(dir=probe_dir).close()
        except OSError as exc:
            raise SpecError(
                f"{path}: output directory is not writable ({exc.strerror or exc})"
            ) from exc

    def create(self) -> None:
        """Create the directory and `answers/` (the job is about to write), and hold it."""
        try:
            self.answers.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            where = f"could not create {self.answers}: {exc.strerror}"
            raise OutputError(exc.errno, where) from exc
        self.lock()

    def lock(self) -> None:
        """Hold the directory for this job (an exclusive `flock` on it, released by `unlock` or
        when the process ends, however it ends): a second `decide run` on the same directory (a
        retry started while the first still runs) would read the same done ids and write the
        same rows twice. Taken before the done ids are read; no-op where there is no `fcntl`."""
        if self._lock is not None or fcntl is None or not self.path.is_dir():
            return
        fd = os.open(self.path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise SpecError(
                f"{self.path}: another decide run is writing to this directory; wait for it to "
                "finish (or stop it) before resuming"
            ) from None
        self._lock = fd

    def unlock(self) -> None:
        if self._lock is not None:
            os.close(self._lock)  # closing the descriptor releases the lock
            self._lock = None

    def previous_manifest(self) -> Manifest | None:
        if not self.manifest_path.is_file():
            return None
        return Manifest.read(self.path)

    def recorded_decoding(self) -> dict[str, Any] | None:
        """The decoding settings the job in this directory started with (None: no job yet)."""
        manifest = self.previous_manifest()
        return None if manifest is None else manifest.spec.decoding

    def check_fingerprints(self, fingerprints: dict[str, str]) -> None:
        manifest = self.previous_manifest()
        if manifest is not None:
            recorded: dict[str, str | None] = dict(manifest.fingerprints)
        else:  # only what the parts hold is known
            recorded = self._part_fingerprints()
            fingerprints = {k: v for k, v in fingerprints.items() if k in recorded}
        for key, value in fingerprints.items():
            old = recorded.get(key)
            if old != value:
                raise SpecError(
                    f"{self.path}: holds results of another {key} (fingerprint {old}, this run "
                    f"{value}); resume only with the same model and spec, or use a new directory"
                )

    def _part_fingerprints(self) -> dict[str, str | None]:
        """Without a manifest (deleted, or parts copied in by hand) the fingerprints the parts
        were written with, each part's own, so that a resume still refuses another spec's rows."""
        found: dict[str, str | None] = {}
        for part in self.parts():
            try:
                names = [f"{k}_fingerprint" for k in ("model", "spec")]
                names = [n for n in names if n in parquet.schema(part)]
                frame = parquet.read(part, columns=names)
            except (pl.exceptions.PolarsError, OSError) as exc:
                raise SpecError(f"{part}: unreadable answer part ({exc})") from exc
            for key in ("model", "spec"):
                if f"{key}_fingerprint" not in frame.columns:
                    continue
                for value in frame[f"{key}_fingerprint"].unique().to_list():
                    if found.setdefault(key, value) != value:
                        found[key] = None  # parts of two jobs: matches no run
        return found

    def parts(self) -> list[Path]:
        return sorted(self.answers.glob(PART_GLOB))

    def committed(self) -> tuple[set[object], dict[str, int]]:
        """Doc ids already written (resume), and counts by status; removes stale temp files."""
        for stale in self.answers.glob(".part-*.tmp"):
            stale.unlink()
        for stale in self.path.glob(".*.tmp"):
            stale.unlink()
        done: set[object] = set()
        counts = {"ok": 0, "error": 0}
        for part in self.parts():
            frame = parquet.read(part, columns=["doc_id", "status"])
            done.update(frame["doc_id"].to_list())
            for status, n in frame["status"].value_counts().iter_rows():
                counts[status] = counts.get(status, 0) + n
            self.next_part = max(self.next_part, int(part.stem.split("-")[1]) + 1)
        return done, counts

    def write_part(self, frame: pl.DataFrame) -> Path:
        path = self.answers / f"part-{self.next_part:05d}.parquet"
        atomic_write(path, parquet_writer(frame))
        self.next_part += 1
        return path

    def write_manifest(self, manifest: Manifest) -> None:
        text = manifest.dump()
        atomic_write(self.manifest_path, lambda tmp: tmp.write_text(text, encoding="utf-8"))

    def write_errors(self, invalid: pl.DataFrame) -> int:
        """Rebuild `errors.parquet` (`doc_id`, `error`, `error_kind`: a `FailureKind` value)
        from the error rows of every part plus `invalid` (input rows that cannot have an output
        row: a null doc_id). Returns the number of rows."""
        frames = []
        for part in self.parts():
            scan = parquet.scan(part)
            # Parts written before the column existed have no kind to give.
            kind = "error_kind" if "error_kind" in scan.collect_schema().names() else None
            frames.append(
                scan.filter(pl.col("status") == "error").select(
                    "doc_id", "error", pl.col(kind) if kind else pl.lit(None, pl.String)
                    .alias("error_kind")
                )
            )  # fmt: skip
        errors = (
            pl.concat([f.collect() for f in frames], how="vertical_relaxed") if frames else None
        )
        # `doc_id` keeps the job's id type (a null id fits any): errors join to answers on it.
        id_type = invalid.schema["doc_id"] if errors is None else errors.schema["doc_id"]
        if invalid.height:
            extra = invalid.select(
                pl.col("doc_id").cast(id_type), "error",
                pl.lit(FailureKind.null_doc_id.value).alias("error_kind"),
            )  # fmt: skip
            errors = extra if errors is None else pl.concat([errors, extra])
        if errors is None:
            errors = pl.DataFrame(
                {"doc_id": [], "error": [], "error_kind": []},
                schema={"doc_id": id_type, "error": pl.String, "error_kind": pl.String},
            )
        atomic_write(self.path / "errors.parquet", parquet_writer(errors))
        return errors.height
