"""The `decide` command line.

Exit codes (DESIGN.md): 0 all rows ok; 1 finished with failed rows; 2 usage or configuration
error; 3 aborted.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click

# Torch-free at import (the model code is imported by the commands that load one), so that
# `decide report` and `--help` do not load torch.
from decide.engine.errors import ModelLoadError

EXIT_OK, EXIT_ROWS_FAILED, EXIT_USAGE, EXIT_ABORTED = 0, 1, 2, 3


def _fail(message: str, code: int = EXIT_USAGE) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def log_warnings() -> None:
    """Warnings and errors of every logger to stderr, nothing below: the handler filters too,
    since a library may set its own logger to DEBUG (bm25s does, at import) and its records
    would pass a root logger's level. Leaves logging alone where handlers are set already."""
    root = logging.getLogger()
    if root.handlers:
        return
    handler = logging.StreamHandler()
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(logging.WARNING)


class Terminated(KeyboardInterrupt):
    """SIGTERM (what `kill`, container runtimes and batch schedulers send), raised where the
    process is, as Ctrl-C raises `KeyboardInterrupt`: the same clean abort."""


@contextlib.contextmanager
def _stop_signals() -> Iterator[None]:
    """While a command runs: SIGTERM stops it as Ctrl-C does (the job records `aborted` and keeps
    the decisions made, exit 3); a second SIGINT or SIGTERM while that abort is saving exits at
    once with exit 3 (parts and manifest are written atomically, so what is on disk stays
    readable) instead of a traceback from wherever the second one landed."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread
        return
    received = []

    def stop(signum: int, frame: object) -> None:
        received.append(signum)
        if len(received) > 1:
            sys.stderr.write(
                "error: interrupted again; exiting now (parts written so far are intact, rerun "
                "with --resume)\n"
            )
            sys.stderr.flush()
            os._exit(EXIT_ABORTED)
        raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


class _Commands(click.Group):
    """Click's group with Ctrl-C (and SIGTERM, `_stop_signals`) as an abort (exit 3) wherever it
    lands: a command handles it where it can say more (`run`: the parts written are intact);
    elsewhere (while torch is imported, a model loads) click would print "Aborted!" and exit 1,
    the code of a job that finished with failed rows."""

    def invoke(self, ctx: click.Context) -> Any:
        with _stop_signals(), _reader_may_leave():
            try:
                return super().invoke(ctx)
            except KeyboardInterrupt as exc:
                _fail(_stopped(exc), EXIT_ABORTED)


class _ReaderMayLeave:
    """A text stream that outlives its reader: once a write finds the pipe closed (`decide run
    ... | head -1`), the rest of the output is dropped instead of raising `BrokenPipeError`,
    which click turns into exit 1 ("finished with failed rows") wherever it lands, a job's own
    exit code lost and, on stderr, a job stopped mid-run."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.gone = False

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._leave()
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._leave()

    def _leave(self) -> None:
        self.gone = True
        # What the stream still buffers goes nowhere: its flush at exit must not fail again.
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def _reader_may_leave() -> Iterator[None]:
    """While a command runs, stdout and stderr as `_ReaderMayLeave` streams."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _ReaderMayLeave(sys.stdout), _ReaderMayLeave(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def _stopped(exc: KeyboardInterrupt) -> str:
    return "terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted"


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="decide")
def main() -> None:
    """Answer batches of related decision questions about documents with diffusion LMs."""


def _rope(config: Any) -> str:
    if not config.rope_theta:
        return "-"
    return f"{config.rope_theta:g} (from {config.rope_theta_source})"


def _unread_tensors(family: Any, model_dir: Path) -> Callable[[str], bool]:
    """The stored tensors the model never reads, as `load_model` skips them: those its family
    ignores, and a tied config's head (the weight map of the same config untied names it), whose
    stored copy is the embedding again."""
    from decide.engine.loader import read_config

    fields = family.parse(read_config(model_dir))
    head: set[str] = set()
    if fields.get("tie_word_embeddings"):
        untied = family.weight_names({**fields, "tie_word_embeddings": False})
        head = set(untied) - set(family.weight_names(fields))
    return lambda name: family.ignore(name) or name in head


@main.command()
@click.argument("model_dir", type=click.Path(path_type=Path), required=False)
def inspect(model_dir: Path | None) -> None:
    """Describe a model directory (the bundled model when none is given) without loading its
    weights: each value a checkpoint can spell in several places is shown with the file and field
    it came from.

    \b
    Example:
      decide inspect ./models/sdar-1.7b-chat
    """
    import torch

    from decide.engine import load_config, resolution
    from decide.engine.checkpoint import describe_weights
    from decide.jobs.models import resolve_model_path
    from decide.jobs.spec import SpecError

    try:
        model_dir = resolve_model_path(model_dir)
        family, config, tokenizer = load_config(model_dir)
        params, by_dtype, files = describe_weights(
            model_dir, _unread_tensors(family, model_dir), family.rename
        )
    except (ModelLoadError, SpecError) as exc:
        _fail(str(exc))
        return
    dtypes = ", ".join(f"{d} ({n:,})" for d, n in sorted(by_dtype.items()))
    try:
        cpu, why = resolution.resolve_dtype("auto", model_dir, torch.device("cpu"))
        auto = f"{str(cpu).removeprefix('torch.')} on this CPU ({why})"
    except ModelLoadError as exc:  # mixed matrices: inspect still describes the directory
        auto = f"refused: {exc}"

    def token(token_id: int) -> str:
        return f"{token_id} {tokenizer.tokenizer.id_to_token(token_id)}"

    specials = ", ".join(
        f"{key.removesuffix('_token')} {text} ({tokenizer.special_sources[key]})"
        for key, text in tokenizer.special_tokens.items()
    )
    ends = config.end_of_turn_ids
    rows = [
        ("family", family.name),
        ("model type", config.model_type),
        ("attention", config.attention),
        ("logits", "shifted by one" if config.logits_shift else "position i predicts token i"),
        ("layers", config.num_layers),
        ("hidden size", config.hidden_size),
        ("heads", f"{config.num_heads} query / {config.num_kv_heads} key-value"),
        ("head dim", config.head_dim),
        ("rope theta", _rope(config)),
        ("intermediate size", config.intermediate_size),
        ("vocab", f"{tokenizer.vocab_size} tokens, {config.embedding_size} embedding rows"),
        ("tokenizer", tokenizer.source),
        ("special tokens", specials or "-"),
        ("mask id", f"{token(config.mask_token_id)} (from {config.mask_token_source})"),
        (
            "end of turn",
            f"{token(ends[0])} (from {config.end_of_turn_source})" if ends else "-",
        ),
        ("stop ids", ", ".join(token(i) for i in ends) or "-"),
        ("context", f"{config.context_length} tokens (from {config.context_source})"),
        (
            "block size",
            f"{config.block_size} (from {config.block_size_source})" if config.block_size else "-",
        ),
        ("parameters", f"{params:,}"),
        ("stored dtype", dtypes),
        ("dtype auto", auto),
        ("weights", ", ".join(f.name for f in files)),
        ("chat template", tokenizer.chat_template.origin if tokenizer.chat_template else "no"),
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        click.echo(f"{key:<{width}}  {value}")


RUN_EXAMPLES = """
\b
Examples:
  decide run examples/claims.parquet -o out/claims --spec examples/claims.yaml
  decide run data/part-*.parquet -o out/ --spec job.yaml --model ./models/sdar --device cuda
  decide run data/*.parquet -o out/ --spec job.yaml --resume      # continue a killed run
  decide run s3-mirror/*.parquet -o out/ --spec job.yaml --engine ray --actors 8 --gpus-per-actor 1

\b
Exit codes: 0 every row decided, 1 finished with failed rows, 2 usage or configuration error
(an output that cannot be created is one), 3 aborted (interrupted, or the output failed mid-run).
"""


@main.command(epilog=RUN_EXAMPLES)
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Output directory.")
@click.option("--spec", "spec_path", type=click.Path(path_type=Path), help="Job spec (YAML/JSON).")
@click.option(
    "--model", type=click.Path(path_type=Path), help="Model directory (default: bundled)."
)
@click.option("--resume", is_flag=True, help="Continue a job in OUTPUT, skipping committed rows.")
@click.option("--threshold", type=float, help="Commit confidence threshold (default 0.9).")
@click.option(
    "--max-steps",
    type=click.IntRange(min=0),
    help="Denoising steps per block (per model block on block-causal models) before the rest "
    "is filled greedily (default 2, or the cap a resumed job started with; 0: no cap).",
)
@click.option("--seed", type=int, help="Seed for sampling at temperature > 0.")
@click.option("--batch-size", type=int, default=16, show_default=True, help="Documents per batch.")
@click.option(
    "--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True
)
@click.option(
    "--dtype",
    type=click.Choice(["auto", "float32", "bfloat16", "float16"]),
    default="auto",
    show_default=True,
    help="Weights and activations; auto: the checkpoint's where the device computes it fast "
    "(a bf16 checkpoint stays bf16 on a CPU with fast bf16), else float32 on CPU; a resumed job "
    "keeps the dtype it started with.",
)
@click.option("--truncate", is_flag=True, help="Keep head and tail of too-long documents.")
@click.option(
    "--part-rows",
    type=int,
    default=1000,
    show_default=True,
    help="Decided rows per output part file.",
)
@click.option(
    "--engine",
    "runner",
    type=click.Choice(["local", "ray"]),
    default="local",
    show_default=True,
    help="Run here, or on a Ray cluster (pip install decide[ray]).",
)
@click.option("--address", help="Ray cluster address (default: a local cluster).")
@click.option("--actors", type=int, default=1, show_default=True, help="Ray actors (models).")
@click.option("--gpus-per-actor", type=float, default=0.0, show_default=True)
@click.option("--progress/--no-progress", default=None, help="Progress on stderr (default: tty).")
@click.option(
    "--calibration",
    type=click.Path(path_type=Path),
    help="calibration.json from `decide calibrate`: confidences become calibrated.",
)
@click.option(
    "--force-calibration",
    is_flag=True,
    help="Use --calibration even if fitted for another model or spec fingerprint.",
)
@click.option(
    "--review-below",
    type=float,
    help="Rows with an answer's confidence below this go to review.parquet.",
)
@click.option(
    "--absent-below",
    type=float,
    help="Answer the absent value (null, or a question's `absent:`) instead of a value decoded "
    "with a confidence below this; the value goes to the withheld_json column.",
)
def run(
    inputs: tuple[Path, ...],
    output: Path | None,
    spec_path: Path | None,
    model: Path | None,
    resume: bool,
    threshold: float | None,
    max_steps: int | None,
    seed: int | None,
    batch_size: int,
    device: str,
    dtype: str,
    truncate: bool,
    part_rows: int,
    runner: str,
    address: str | None,
    actors: int,
    gpus_per_actor: float,
    progress: bool | None,
    calibration: Path | None,
    force_calibration: bool,
    review_below: float | None,
    absent_below: float | None,
) -> None:
    """Decide every document of the INPUT parquet files."""
    from decide.jobs.output import OutputError
    from decide.jobs.runner import run_job
    from decide.jobs.spec import SpecError, load_spec, parse_spec
    from decide.report import write_report

    log_warnings()
    try:
        spec = load_spec(spec_path) if spec_path else parse_spec({}, "defaults")
        changes = {}
        decoding = {"threshold": threshold, "max_steps": max_steps, "seed": seed,
                    "absent_below": absent_below}  # fmt: skip
        decoding = {k: v for k, v in decoding.items() if v is not None}
        if max_steps == 0:
            decoding["max_steps"] = None  # no cap
        if decoding:
            changes["decoding"] = spec.decoding.model_dump(exclude_unset=True) | decoding
        if truncate:
            changes["long_documents"] = "truncate"
        if calibration is not None:
            changes["calibration"] = str(calibration)
        if review_below is not None:
            changes["review_below"] = review_below
        if changes:
            spec = parse_spec(
                spec.model_dump(by_alias=True, exclude_unset=True) | changes, "command line"
            )
        out = output or (Path(spec.output) if spec.output else None)
        if out is None:
            raise SpecError("no output directory: pass -o/--output or set `output:` in the spec")
        if batch_size < 1 or part_rows < 1:
            raise SpecError("--batch-size and --part-rows must be at least 1")
        ray_only = {"--address": address is not None, "--actors": actors != 1,
                    "--gpus-per-actor": gpus_per_actor != 0.0}  # fmt: skip
        if runner != "ray" and any(ray_only.values()):
            given = ", ".join(flag for flag, set_ in ray_only.items() if set_)
            raise SpecError(f"{given}: Ray options, with --engine local; add --engine ray")
        common = dict(model=model, resume=resume, batch_size=batch_size, device=device,
                      dtype=dtype, part_rows=part_rows, progress=progress,
                      force_calibration=force_calibration)  # fmt: skip
        if runner == "ray":
            from decide.jobs.ray_runner import run_job_ray

            result = run_job_ray(spec, list(inputs), out, address=address, actors=actors,
                                 gpus_per_actor=gpus_per_actor, **common)  # fmt: skip
        else:
            result = run_job(spec, list(inputs), out, **common)
        write_report(out)
    except (SpecError, ModelLoadError) as exc:
        _fail(str(exc), EXIT_USAGE)
        return
    except OutputError as exc:
        _fail(f"{exc}; parts written so far are intact, rerun with --resume", EXIT_ABORTED)
        return
    except KeyboardInterrupt as exc:
        _fail(
            f"{_stopped(exc)}; parts written so far are intact, rerun with --resume", EXIT_ABORTED
        )
        return
    except Exception:  # report any bug with its traceback, then exit 3
        traceback.print_exc()
        _fail("aborted by an unexpected error (above); rerun with --resume", EXIT_ABORTED)
        return
    decided = result.ok + result.failed
    click.echo(
        f"decided {decided} of {result.total} documents ({result.ok} ok, {result.failed} failed"
        + (
            f", {result.invalid} row{'s' * (result.invalid != 1)} without doc_id"
            if result.invalid
            else ""
        )
        + (f", {result.skipped} from an earlier run" if result.skipped else "")
        + f") in {result.seconds:.1f}s"
    )
    click.echo(f"answers: {out / 'answers'}")
    click.echo(f"errors:  {out / 'errors.parquet'}")
    click.echo(f"report:  {out / 'report.html'} (and report.json)")
    if spec.review_below is not None:
        click.echo(f"review:  {out / 'review.parquet'}")
    sys.exit(result.exit_code)


@main.command()
@click.argument("spec_path", metavar="SPEC", type=click.Path(path_type=Path))
@click.option(
    "--model", type=click.Path(path_type=Path), help="Model directory (default: bundled)."
)
@click.option("--strict", is_flag=True, help="Refuse unknown keywords instead of ignoring them.")
def validate(spec_path: Path, model: Path | None, strict: bool) -> None:
    """Compile every question of a job spec against the model's tokenizer.

    Prints, per question, whether its schema is supported (the draft its `$schema` names, the slot
    length in tokens, unknown keywords ignored as annotations, depth limits) or refused (JSON
    pointer and keyword). Exits 2 when anything is refused.

    \b
    Example:
      decide validate examples/claims.yaml
    """
    from decide.engine import load_config
    from decide.jobs.models import resolve_model_path
    from decide.jobs.pack import Packer
    from decide.jobs.questionset import QuestionBook, QuestionsRefused, spec_refusal
    from decide.jobs.runner import check_questions
    from decide.jobs.spec import SpecError, load_spec
    from decide.schemas import check_questions as check_schemas
    from decide.schemas import render_table

    try:
        spec = load_spec(spec_path)
        path = resolve_model_path(model if model is not None else spec.model)
        _, config, tokenizer = load_config(path)
        book = QuestionBook.for_spec(config, tokenizer, spec)
    except (SpecError, ModelLoadError) as exc:
        _fail(str(exc))
        return
    if not spec.questions:
        _fail(f"{spec_path}: the spec has no questions (per-row questions are checked by `run`)")
    asked = [q for q in spec.questions if q.derive is None]
    vocabulary = book.compiler.vocabulary
    reports = check_schemas(
        [(q.id, q.schema_) for q in asked],
        vocabulary,
        extract=[q.id for q in asked if q.extract],
        strict=strict,
        units={q.id: q.unit for q in asked if q.unit is not None},
    )
    click.echo(f"model: {path} ({config.model_type}, {vocabulary.size} tokens)")
    click.echo(render_table(reports))
    refused = [r.question_id for r in reports if not r.supported]
    if refused:
        _fail(f"{len(refused)} of {len(reports)} questions refused: {', '.join(refused)}")
    click.echo("the question is supported" if len(reports) == 1
               else f"all {len(reports)} questions supported")  # fmt: skip
    packer = Packer.for_model(config, tokenizer, book.filler_id, instruction=spec.instruction,
                              long_documents=spec.long_documents)  # fmt: skip
    try:
        check_questions(spec, book, packer)  # `run`'s own checks: its refusals, word for word
        qset = book.build(spec.questions)
    except (SpecError, QuestionsRefused) as exc:
        _fail(spec_refusal(exc) if isinstance(exc, QuestionsRefused) else str(exc))
        return
    _echo_long_documents(spec, config, tokenizer, book, qset, path)
    for d in qset.plan.order:
        click.echo(
            f"derived: {d.id} = {d.expression} ({d.result}), computed after decoding from "
            + ", ".join(d.inputs)
        )
    _echo_absent_below(spec.decoding.absent_below, qset.asked)
    why_not: dict[int, str] = {}
    if qset.checks is not None:
        finite = {q.id: 0 if q.extract else len(q.slot.values or ()) for q in qset.asked}
        why_not = qset.checks.enforcement(finite)[1]
    from decide.jobs.checks import rule_ids as cel_ids
    from decide.jobs.runner import rule_ids

    own = {q.id for q in spec.questions}
    for i, r in enumerate(spec.cel_rules):
        absent = [qid for qid in cel_ids([(r.rule, r.message)]) if qid not in own]
        if absent:
            names = ", ".join(repr(a) for a in absent)
            click.echo(f"warning: rule /rules/{i}: {r.rule} reads {names}, no question of this "
                       "spec: it applies only to rows that ask them (per-row questions), and "
                       "`decide run` refuses it when no row does")  # fmt: skip
            continue
        if i in why_not:
            how = (f"checked after decoding: it {why_not[i]}; a row violating it takes other "
                   "options of the finite answers it depends on, else fails with")  # fmt: skip
        else:
            how = "enforced while decoding over its questions' joint values; else fails with"
        click.echo(f"rule /rules/{i}: {r.rule} (CEL, {how} {r.message!r})")
    if qset.ruleset is not None and not spec.cel_rules:
        ruleset = qset.ruleset
        click.echo(
            f"rules: {len(ruleset.rules)} enforced while decoding, over "
            + ", ".join(f"{qid} ({len(ruleset.cells[qid])} cases)" for qid in ruleset.cells)
        )
    for qid, pointer in rule_ids(spec).items() if spec.schema_rules is not None else ():
        if qid not in own:
            click.echo(f"warning: rules {pointer} names {qid!r}, no question of this "
                       "spec: `decide run` refuses it unless a row asks it")  # fmt: skip
    if qset.ruleset is not None and spec.long_documents == "windows":
        from decide.jobs.window_plan import linked_by_rules

        size = spec.windows.questions
        split = [ids for ids in linked_by_rules(qset) if len(ids) > size]
        if split:
            click.echo(
                "rules and longer documents: the rules link "
                + "; ".join(", ".join(ids) for ids in split)
                + f", more questions than a window's block holds ({size}): windows decide them "
                "block by block under the rules, each block keeping to the answers kept for the "
                "blocks before it (a later block cannot change those), and the combined answers "
                "are checked again (a row breaking them takes other answers its windows gave, "
                "else fails)"
            )


def _echo_absent_below(default: float | None, asked: list) -> None:
    """Which answers `absent_below` may give as absent, and below what (docs/jobs.md)."""
    from decide.jobs.window_plan import absent_of
    from decide.jobs.withhold import threshold_of

    for q in asked:
        below = threshold_of(q, default)
        if below is None:
            continue
        declared, absent = absent_of(q)
        whose = "" if q.absent_below is not None else " (the job's absent_below)"
        click.echo(
            f"absent_below: {q.id} answers {json.dumps(absent)} when decoded less sure than "
            f"{below:g}{whose}"
            if declared
            else f"absent_below: {q.id} has no absent value (no `absent:`, no null): answered as "
            "decoded"
        )


def _echo_long_documents(
    spec: Any, config: Any, tokenizer: Any, book: Any, qset: Any, model: Path
) -> None:
    """What happens to a document too long for the model with this spec."""
    from decide.jobs.evidence_ranker import EvidenceRanker
    from decide.jobs.pack import Packer
    from decide.jobs.window_plan import NoRoom, WindowPlanner, linked_by_rules

    asked = qset.asked
    if not asked:
        return
    packer = Packer.for_model(config, tokenizer, book.filler_id, instruction=spec.instruction,
                              long_documents=spec.long_documents)  # fmt: skip
    ranker = EvidenceRanker.load(model) if spec.windows.evidence_ranker else None
    planner = WindowPlanner(packer, spec.windows, ranker)
    whole = packer.max_length - len(planner.prompt("", asked, {})) - packer.answer_length(asked)
    if whole > 0:
        click.echo(f"documents of up to {whole} tokens are read whole")
    else:
        click.echo("no document fits with all the questions at once")
    if spec.long_documents == "truncate":
        click.echo("longer documents keep their head and tail (long_documents: truncate)")
        return
    if spec.long_documents == "error":
        click.echo("longer documents are error rows (long_documents: error)")
        return
    groups = planner.groups(asked, linked_by_rules(qset))
    for k, group in enumerate(groups, start=1):
        try:
            _, _, budget = planner.room(group, label=f"block {k}")
        except NoRoom as exc:
            click.echo(f"longer documents cannot be read: {exc}")
            return
        top = "" if spec.windows.top_k is None else f", the {spec.windows.top_k} BM25 ranks first"
        learnt = [q.id for q in group if planner.learnt(q)]
        if learnt:
            some = "" if len(learnt) == len(group) else f" for {', '.join(learnt)}"
            k_best = "" if spec.windows.top_k is None else f"the {spec.windows.top_k} best of "
            reach = f"evidence probability reaches {planner.min_evidence:g}"
            top = f", {k_best}those whose {reach} (the model's learnt evidence ranker){some}"
        windows = f"windows of up to {budget} document tokens{top}"
        if len(groups) == 1:
            click.echo(f"longer documents: {windows}")
            continue
        ids = group[0].id if len(group) == 1 else f"{group[0].id} .. {group[-1].id}"
        click.echo(f"longer documents, block {k} ({ids}): {windows} (later blocks' prompts also "
                   "hold earlier answers)")  # fmt: skip


@main.command()
@click.argument("a", type=click.Path(path_type=Path))
@click.argument("b", type=click.Path(path_type=Path))
@click.option("-o", "--output", required=True, type=click.Path(path_type=Path), help="New model.")
@click.option(
    "--weight",
    type=click.FloatRange(0.0, 1.0),
    default=0.5,
    show_default=True,
    help="Share of B: OUTPUT = (1 - weight)*A + weight*B.",
)
def merge(a: Path, b: Path, output: Path, weight: float) -> None:
    """Interpolate the weights of two checkpoints of the same model.

    A and B must share config.json, tokenizer.json and tensor shapes (two fine-tunes from one
    ancestor); OUTPUT gets A's tokenizer and other files. The bundled model is such a merge.

    \b
    Example:
      decide merge build/stage7 build/stage9a -o build/stage9 --weight 0.5
    """
    from decide.train.merge import merge_checkpoints

    try:
        merge_checkpoints(a, b, weight, output)
    except (ModelLoadError, FileExistsError) as exc:
        _fail(str(exc))
        return
    click.echo(f"model written to {output} ({1 - weight:g} x {a} + {weight:g} x {b})")


@main.command()
@click.argument("out_dir", metavar="OUT_DIR", type=click.Path(path_type=Path))
def report(out_dir: Path) -> None:
    """Rebuild report.json and report.html from a job's output directory.

    \b
    Example:
      decide report out/claims
    """
    from decide.report import ReportError, write_report

    if not out_dir.exists():
        _fail(f"{out_dir}: no such directory; pass the -o directory of a `decide run`")
    if not out_dir.is_dir():
        _fail(f"{out_dir}: not a directory; pass the -o directory of a `decide run`")
    try:
        built = write_report(out_dir)
    except ReportError as exc:
        _fail(str(exc))
        return
    counts = built["counts"]
    click.echo(f"{counts['decided']} documents ({counts['ok']} ok, {counts['failed']} failed)")
    undecided = counts["total"] - counts["ok"] - counts["failed"]
    if undecided > 0:
        status = built["job"]["status"]
        click.echo(
            f"{undecided} of {counts['total']} documents not decided (job {status}): rerun the "
            "same `decide run` command with --resume to decide them"
        )
    click.echo(f"report: {out_dir / 'report.html'} (and report.json)")


from decide.cli_calibrate import calibrate  # noqa: E402
from decide.cli_train import train  # noqa: E402

main.add_command(calibrate)
main.add_command(train)
