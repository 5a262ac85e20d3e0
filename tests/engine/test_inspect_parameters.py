"""`decide inspect` counts the parameters the model reads: a tied head that an exporter stored
beside the embedding it shares used to be counted a second time (a 1.7B tied model shown as 2B),
and so were tensors the loader skips (BERT's pooler and next-sentence head)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from safetensors.torch import load_file, save_file

from decide.cli import main
from decide.engine import load_model
from decide.jobs.models import resolve_model_path


def _parameters(model_dir: Path) -> int:
    result = CliRunner().invoke(main, ["inspect", str(model_dir)])
    assert result.exit_code == 0, result.output
    line = next(x for x in result.output.splitlines() if x.startswith("parameters "))
    return int(line.split()[-1].replace(",", ""))


def _stored_dtype_total(model_dir: Path) -> int:
    result = CliRunner().invoke(main, ["inspect", str(model_dir)])
    line = next(x for x in result.output.splitlines() if x.startswith("stored dtype "))
    return sum(int(part.split("(")[1].rstrip("),").replace(",", ""))
               for part in line.split("  ", 1)[1].split(", "))  # fmt: skip


def _with_tensors(source: Path, target: Path, extra: dict[str, str]) -> Path:
    """A copy of `source` whose weights also hold `extra` (new name → copy of this tensor)."""
    copy = Path(shutil.copytree(source, target))
    tensors = load_file(str(copy / "model.safetensors"))
    for name, like in extra.items():
        tensors[name] = tensors[like].clone()
    save_file(tensors, str(copy / "model.safetensors"), metadata={"format": "pt"})
    return copy


FAMILIES = ("llada", "Dream", "sdar", "Fast_dLLM_Qwen", "qwen3_next", "llada2_moe", "sdar_moe")
EMBEDDINGS = (
    "model.embed_tokens.weight",
    "model.word_embeddings.weight",
    "model.transformer.wte.weight",
)


@pytest.mark.parametrize("model_type", FAMILIES)
def test_a_stored_copy_of_a_tied_head_counts_once(
    tiny_checkpoint, tmp_path: Path, model_type: str
) -> None:
    tied = tiny_checkpoint(model_type, vocab="small", tie_word_embeddings=True)
    untied = tiny_checkpoint(model_type, vocab="small", tie_word_embeddings=False)
    # The head an untied checkpoint stores, and the embedding a tied one reads in its place.
    (head,) = set(load_file(str(untied / "model.safetensors"))) - set(
        load_file(str(tied / "model.safetensors"))
    )
    (embedding,) = set(load_file(str(tied / "model.safetensors"))) & set(EMBEDDINGS)
    loaded = load_model(tied).parameter_count()
    assert _parameters(tied) == loaded
    both = _with_tensors(tied, tmp_path / "both", {head: embedding})
    assert load_model(both).parameter_count() == loaded  # the loader reads the embedding only
    assert _parameters(both) == loaded
    assert _stored_dtype_total(both) == loaded


@pytest.mark.parametrize("model_type", FAMILIES)
def test_an_untied_head_still_counts(tiny_checkpoint, model_type: str) -> None:
    untied = tiny_checkpoint(model_type, vocab="small", tie_word_embeddings=False)
    tied = tiny_checkpoint(model_type, vocab="small", tie_word_embeddings=True)
    assert _parameters(untied) == load_model(untied).parameter_count()
    stored = load_file(str(untied / "model.safetensors"))
    (head,) = set(stored) - set(load_file(str(tied / "model.safetensors")))
    assert _parameters(untied) == _parameters(tied) + stored[head].numel()


def test_the_bundled_bert_with_an_exported_decoder_counts_what_it_reads(tmp_path: Path) -> None:
    bundled = resolve_model_path(None)
    loaded = load_model(bundled).parameter_count()
    assert _parameters(bundled) == loaded
    # What Hugging Face exports of BertForMaskedLM may hold beside the tied decoder: its copy of
    # the word embeddings and of the output bias, the pooler and the next-sentence head.
    exported = _with_tensors(
        bundled,
        tmp_path / "exported",
        {
            "cls.predictions.decoder.weight": "bert.embeddings.word_embeddings.weight",
            "cls.predictions.decoder.bias": "cls.predictions.bias",
            "bert.pooler.dense.weight": "cls.predictions.transform.dense.weight",
            "bert.pooler.dense.bias": "cls.predictions.transform.dense.bias",
        },
    )
    assert load_model(exported).parameter_count() == loaded
    assert _parameters(exported) == loaded
