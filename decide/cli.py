"""The `decide` command line.

Exit codes (DESIGN.md): 0 all rows ok; 1 finished with failed rows; 2 usage or configuration
error; 3 aborted.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from decide.engine import ModelLoadError, load_config
from decide.engine.checkpoint import describe_weights

EXIT_OK, EXIT_ROWS_FAILED, EXIT_USAGE, EXIT_ABORTED = 0, 1, 2, 3


def _fail(message: str, code: int = EXIT_USAGE) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="decide")
def main() -> None:
    """Answer batches of related decision questions about documents with diffusion LMs."""


@main.command()
@click.argument("model_dir", type=click.Path(path_type=Path))
def inspect(model_dir: Path) -> None:
    """Describe a model directory without loading its weights.

    \b
    Example:
      decide inspect ./models/sdar-1.7b-chat
    """
    try:
        family, config, tokenizer = load_config(model_dir)
        params, by_dtype, files = describe_weights(model_dir)
    except ModelLoadError as exc:
        _fail(str(exc))
        return
    dtypes = ", ".join(f"{d} ({n:,})" for d, n in sorted(by_dtype.items()))
    rows = [
        ("family", family.name),
        ("model type", config.model_type),
        ("attention", config.attention),
        ("logits", "shifted by one" if config.logits_shift else "position i predicts token i"),
        ("layers", config.num_layers),
        ("hidden size", config.hidden_size),
        ("heads", f"{config.num_heads} query / {config.num_kv_heads} key-value"),
        ("head dim", config.head_dim),
        ("intermediate size", config.intermediate_size),
        ("vocab", f"{tokenizer.vocab_size} tokens, {config.embedding_size} embedding rows"),
        ("mask id", f"{config.mask_token_id} (from {config.mask_token_source})"),
        ("block size", config.block_size if config.block_size else "-"),
        ("parameters", f"{params:,}"),
        ("dtype", dtypes),
        ("weights", ", ".join(f.name for f in files)),
        ("chat template", "yes" if tokenizer.chat_template else "no"),
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        click.echo(f"{key:<{width}}  {value}")
