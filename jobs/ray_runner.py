"""Scale out on Ray Data: the same job spec, one model per actor, the same output guarantees.

The driver does what needs no model: it checks the inputs and the spec (compiling every question
against the model's tokenizer, so usage errors still exit 2 before anything runs), surveys the
ids, and owns the output directory. `ray.data.read_parquet` streams the rows to a pool of
stateful actors, each loading the model once and deciding its batches with the same
`DecisionEngine` (continuous batching included) as the local runner; decided rows stream back
and the driver writes them through the same atomic part writer and manifest, so resume, one row
per doc id and error rows work exactly as locally. We do not use Ray Data's own write path or
checkpointing: its parquet writer is not atomic per file and it has no notion of our manifest
fingerprints, so a crash could leave torn files and a resume could mix configurations.

Rows already committed (resume), duplicated ids and null ids are filtered out before the data
reaches the actors; the driver emits the duplicate and null-id errors itself. Actors are created
with unlimited restarts and task retries, so an actor that dies (killed, out of memory, node
lost) is replaced and its batch decided again; since only the driver writes, a retried batch
cannot produce a second row.
"""

from __future__ import annotations

import inspect
import json
import logging
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl

from decide.engine.loader import load_config

from .decisions import Decision, DecisionEngine
from .evidence import Evidence
from .failures import FailureKind
from .inputs import CARRIED, InputPlan, inspect_inputs, read_arrow, stream
from .models import resolve_model_path
from .output import OutputDir
from .pack import Packer
from .questionset import QuestionBook
from .runner import (
    JobResult,
    JobSetup,
    RowItems,
    check_dtype,
    check_questions,
    prepare,
    resumed_dtype,
    write_decisions,
)
from .spec import JobSpec, SpecError

OUT_COLUMNS = ("doc_id", "status", "error", "answers_json", "confidence_json", "nfe",
               "answer_tokens", "value_tokens", "truncated", "narrowed_json", "error_kind",
               "partial", "errors_json", "windows", "evidence_json", "withheld_json")  # fmt: skip


def _ray():
    try:
        import ray
        import ray.data  # the Data library is a separate extra of ray
    except ImportError as exc:
        raise SpecError(
            '--engine ray needs Ray Data, which is not installed: pip install "decide[ray]"'
        ) from exc
    return ray


def _zero_cpus(read: Any) -> dict[str, Any]:
    """A read task that takes no CPU slot, said as this Ray version wants it (`ray_remote_args`
    is deprecated where `num_cpus` is a parameter of its own)."""
    if "num_cpus" in inspect.signature(read).parameters:
        return {"num_cpus": 0}
    return {"ray_remote_args": {"num_cpus": 0}}


def _restarts(ray: Any) -> dict[str, Any]:
    """A lost actor is restarted and its batch retried. Ray Data does that by default since 2.60
    (where passing them is a deprecated `ray_remote_args`); older versions are told."""
    major, minor = (int(x) for x in ray.__version__.split(".")[:2])
    return {} if (major, minor) >= (2, 60) else {"max_restarts": -1, "max_task_retries": -1}


def quiet_ray_data(context: Any) -> None:
    """Ray Data's own progress bars and INFO lines (execution plans, progress logged every 10 s
    when stderr is no terminal) are not the job's: `decide` shows its own progress (or none, with
    --no-progress). Warnings and errors still reach the console; Ray's log files keep the rest."""
    from ray.util.debug import log_once

    context.enable_progress_bars = False
    log_once("ray_data_progress_manager_disabled")  # its "Progress bars disabled" warning
    if hasattr(context, "print_on_execution_start"):
        context.print_on_execution_start = False
    for handler in logging.getLogger("ray.data").handlers:
        if not isinstance(handler, logging.FileHandler):
            handler.setLevel(max(handler.level, logging.WARNING))


class DeciderActor:
    """A Ray actor: loads the model once, then decides batches of input rows."""

    def __init__(self, model_path: str, spec: dict[str, Any], plan: InputPlan, batch_size: int,
                 device: str, dtype: str = "auto") -> None:  # fmt: skip
        from decide.engine import load_model
        from decide.jobs.models import resolve_device
        from decide.jobs.spec import parse_spec

        self.spec = parse_spec(spec, "spec")
        loaded = load_model(model_path, device=resolve_device(device), dtype=dtype)
        self.engine = DecisionEngine.for_spec(loaded, self.spec, batch_size=batch_size)
        self.rows = RowItems(self.spec, plan, self.engine.book)
        self.plan = plan

    def __call__(self, batch: Any) -> Any:
        import pyarrow as pa

        from .inputs import FILE, ROW

        carried = self.plan.carried
        # The carried columns go back as the Arrow columns they came in (the output rows are the
        # batch's, in its order): never through Python objects.
        rows = batch.drop_columns(carried).to_pylist()
        for row in rows:  # Ray reads no row numbers: messages name the file and the doc id
            row[FILE] = row.pop("path", "input")
            row[ROW] = None
        decided = {d.doc_id: d for d in self.engine.decide(self.rows.item(r) for r in rows)}
        out: dict[str, list[Any]] = {name: [] for name in OUT_COLUMNS}
        for row in rows:
            d = decided[row[self.plan.columns.doc_id]]
            out["doc_id"].append(d.doc_id)
            out["status"].append(d.status)
            out["error"].append(d.error)
            out["answers_json"].append(d.answers_json)
            confidence = None if d.confidence is None else json.dumps(d.confidence)
            out["confidence_json"].append(confidence)
            out["nfe"].append(d.nfe)
            out["answer_tokens"].append(d.answer_tokens)
            out["value_tokens"].append(d.value_tokens)
            out["truncated"].append(d.truncated)
            out["narrowed_json"].append(json.dumps(d.narrowed))
            out["error_kind"].append(None if d.kind is None else d.kind.value)
            out["partial"].append(d.partial)
            out["errors_json"].append(None if d.errors is None else json.dumps(d.errors))
            out["windows"].append(d.windows)
            evidence = None
            if d.evidence is not None:
                evidence = {q: e.as_dict() if e else None for q, e in d.evidence.items()}
            out["evidence_json"].append(None if evidence is None else json.dumps(evidence))
            withheld = None if not d.withheld else json.dumps(d.withheld, ensure_ascii=False)
            out["withheld_json"].append(withheld)
        table = pa.table(out)
        for name in carried:
            table = table.append_column(name, batch.column(name))
        return table


def _decision(row: dict[str, Any], carried: Any = None) -> Decision:
    """A decision an actor made, its carried columns `carried` ((frame, index), or None)."""
    return Decision(
        doc_id=row["doc_id"],
        status=row["status"],
        answers=None if row["answers_json"] is None else json.loads(row["answers_json"]),
        answers_json=row["answers_json"],
        confidence=None if row["confidence_json"] is None else json.loads(row["confidence_json"]),
        error=row["error"],
        nfe=int(row["nfe"]),
        answer_tokens=int(row["answer_tokens"]),
        value_tokens=int(row["value_tokens"]),
        truncated=bool(row["truncated"]),
        narrowed=json.loads(row["narrowed_json"]),
        extra={} if carried is None else {CARRIED: carried},
        kind=None if row["error_kind"] is None else FailureKind(row["error_kind"]),
        partial=bool(row["partial"]),
        errors=None if row["errors_json"] is None else json.loads(row["errors_json"]),
        windows=int(row["windows"]),
        evidence=None
        if row["evidence_json"] is None
        else {q: Evidence(**e) if e else None for q, e in json.loads(row["evidence_json"]).items()},
        withheld=None if row["withheld_json"] is None else json.loads(row["withheld_json"]),
    )


def _decisions(
    setup: JobSetup,
    rows: RowItems,
    model_path: Path,
    *,
    actors: int,
    gpus_per_actor: float,
    batch_size: int,
    device: str,
    dtype: str,
) -> Iterator[Decision]:
    ray = _ray()
    plan = setup.plan
    id_col = plan.columns.doc_id
    # The driver settles duplicated ids (one error row each); actors never see them.
    chunks = stream(plan, chunk_rows=10_000)
    for row, error in rows.rows(chunks, setup.committed, setup.found.duplicates):
        if error is not None:
            extra = {CARRIED: row[CARRIED]} if CARRIED in row else {}
            yield Decision(row[id_col], "error", error=error, kind=FailureKind.duplicate_doc_id,
                           extra=extra)  # fmt: skip
    skip = set(setup.committed) | set(setup.found.duplicates)
    skip_ref = ray.put(skip)

    def keep(batch):
        import pyarrow.compute as pc

        batch = read_arrow(batch, plan)  # categorical, uuid and all-null columns as `stream`
        ids = batch.column(id_col)
        excluded = ray.get(skip_ref)
        mask = pc.and_(pc.invert(pc.is_null(ids)),
                       pc.invert(pc.is_in(ids, value_set=_array(excluded, ids.type))))  # fmt: skip
        return batch.filter(mask)

    columns = [id_col, plan.columns.document, *plan.carried]
    if plan.has_questions:
        columns.append(plan.columns.questions)
    # Reading and filtering are light and take no CPU slot: with one actor per CPU (the default
    # on CPU machines) the actors would otherwise hold every slot and starve the read. Ray Data's
    # newer parquet path adds a file-listing task that ignores `ray_remote_args` (1 CPU, so the
    # same starvation): the classic path is used where that switch exists.
    context = ray.data.DataContext.get_current()
    if hasattr(context, "use_datasource_v2"):
        context.use_datasource_v2 = False
    quiet_ray_data(context)
    ds = ray.data.read_parquet([str(p) for p in plan.files], columns=columns, include_paths=True,
                               **_zero_cpus(ray.data.read_parquet))  # fmt: skip
    ds = ds.map_batches(keep, batch_format="pyarrow", num_cpus=0)
    ds = ds.map_batches(
        DeciderActor,
        fn_constructor_kwargs={
            "model_path": str(model_path),
            "spec": setup.spec.model_dump(by_alias=True, mode="json"),
            "plan": plan,
            "batch_size": batch_size,
            "device": device,
            "dtype": dtype,
        },
        batch_format="pyarrow",
        batch_size=max(8 * batch_size, 64),
        compute=ray.data.ActorPoolStrategy(size=actors),
        num_gpus=gpus_per_actor or None,
        num_cpus=1 if not gpus_per_actor else None,
        **_restarts(ray),
    )
    for batch in ds.iter_batches(batch_format="pyarrow", batch_size=None):
        carried = pl.from_arrow(batch.select(plan.carried)) if plan.carried else None
        for i, row in enumerate(batch.select(list(OUT_COLUMNS)).to_pylist()):
            yield _decision(row, None if carried is None else (carried, i))


def _array(values: set[Any], dtype: Any):
    import pyarrow as pa

    return pa.array(sorted(values, key=repr), type=dtype) if values else pa.array([], type=dtype)


CONNECT_SECONDS = 10.0  # how long a cluster's address may take to accept a connection


def check_reachable(address: str | None, timeout: float = CONNECT_SECONDS) -> None:
    """`SpecError` (exit 2) when `address` names a host and port (`HOST:PORT`, `ray://HOST:PORT`)
    that accepts no TCP connection within `timeout` seconds: `ray.init` retries such an address
    for minutes with only its own C++ warnings. `auto`, `local` and no address are left to Ray."""
    if not address or address in ("auto", "local"):
        return
    hostport = address.removeprefix("ray://")
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        raise SpecError(f"--address {address!r}: expected HOST:PORT, ray://HOST:PORT or auto")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        raise SpecError(
            f"--address {address}: no Ray cluster answers there ({exc.strerror or exc}); start "
            "one (`ray start --head`) or leave --address out for a local one"
        ) from exc


def run_job_ray(
    spec: JobSpec,
    inputs: list[Path],
    output: Path,
    *,
    model: str | Path | None = None,
    resume: bool = False,
    batch_size: int = 16,
    address: str | None = None,
    actors: int = 1,
    gpus_per_actor: float = 0.0,
    device: str = "auto",
    dtype: str = "auto",
    part_rows: int = 1000,
    part_seconds: float = 60.0,
    progress: bool | None = None,
    force_calibration: bool = False,
) -> JobResult:
    """`run_job` on a Ray cluster (`address`, default: the current or a new local one)."""
    ray = _ray()
    if actors < 1 or gpus_per_actor < 0:
        raise SpecError("--actors must be at least 1 and --gpus-per-actor not negative")
    plan = inspect_inputs(inputs, spec.input, need_questions=not spec.questions)
    out = OutputDir(output, resume=resume)
    spec = spec.continuing(out.recorded_decoding())  # a resumed job keeps its step cap
    dtype = resumed_dtype(out, dtype)  # the actors resolve "auto" on their own machines
    check_dtype(out, dtype, output)
    model_path = resolve_model_path(model if model is not None else spec.model)
    _, config, tokenizer = load_config(model_path)
    book = QuestionBook.for_spec(config, tokenizer, spec)
    packer = Packer.for_model(config, tokenizer, book.filler_id, instruction=spec.instruction,
                              long_documents=spec.long_documents)  # fmt: skip
    check_questions(spec, book, packer)
    if not ray.is_initialized():
        check_reachable(address)
        # Ray's own INFO lines (cluster start, dashboard) are not the job's: warnings only.
        ray.init(address=address, ignore_reinit_error=True, log_to_driver=False,
                 logging_level=logging.WARNING)  # fmt: skip
    try:
        setup = prepare(
            spec, plan, out, output, model_path=model_path, model_type=config.model_type,
            batch_size=batch_size, device=f"{actors} Ray actor(s), {gpus_per_actor} GPU each",
            dtype=dtype, engine="ray", force_calibration=force_calibration,
        )  # fmt: skip
        rows = RowItems(spec, plan, book)
        decisions = _decisions(setup, rows, model_path, actors=actors,
                               gpus_per_actor=gpus_per_actor, batch_size=batch_size,
                               device=device, dtype=dtype)  # fmt: skip
        return write_decisions(setup, decisions, part_rows=part_rows, part_seconds=part_seconds,
                               progress=progress)  # fmt: skip
    finally:
        out.unlock()
