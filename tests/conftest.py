"""Shared fixtures: tokenizers and tiny random checkpoints of every supported model type, written
once per test session in the real on-disk format.

`tiny_checkpoint(model_type, vocab="gpt2")` uses the repository's GPT-2 tokenizer (50,257 tokens:
realistic vocabulary sizes for the engine and kernels); `vocab="small"` a byte-level BPE of 1,000
tokens trained once on synthetic decision documents (tests/data/small-bpe), for end-to-end tests
whose cost would otherwise be dominated by 50k-wide softmaxes of random models.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from decide.engine.random_checkpoint import write_random_checkpoint

# `python3 -m pytest` (the README's command) puts the working directory first on sys.path. At the
# repository root that makes its `kernels/` directory (installed as `decide.kernels`) shadow
# Hugging Face's `kernels` package, which transformers >= 5.25, the tests' oracle, imports:
# "cannot import name 'CUDAProperties' from 'kernels'". decide is installed, so the tests need
# the root on the path for nothing; drop it before any test imports transformers.
_ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if Path(p or os.curdir).resolve() != _ROOT]

DATA = Path(__file__).parent / "data"
GPT2_TOKENIZER = DATA / "gpt2" / "tokenizer.json"
SMALL_TOKENIZER = DATA / "small-bpe" / "tokenizer.json"
MODEL_TYPES = (
    *("llada", "Dream", "sdar", "Fast_dLLM_Qwen", "bert", "qwen3_next"),
    *("llada2_moe", "sdar_moe", "lladamoe"),
)

# The suite runs in parallel workers (pytest-xdist, `-n` in pyproject's addopts): each gets an
# equal share of the cores, and so do the `decide` processes its tests start (they inherit
# OMP_NUM_THREADS). Workers that each spun up every core's worth of threads on a 2-core machine
# ran several times slower than one process alone.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
_THREADS = max(1, min(2, (os.cpu_count() or 1) // _WORKERS))
os.environ["OMP_NUM_THREADS"] = str(_THREADS)
torch.set_num_threads(_THREADS)


@pytest.fixture(scope="session")
def gpt2_tokenizer_json() -> Path:
    return GPT2_TOKENIZER


@pytest.fixture(scope="session")
def small_tokenizer_json() -> Path:
    """A 1,000-token BPE vocabulary trained once on generator text and frozen in a file
    (tests/data/small-bpe/README.md): generator changes do not re-deal random test models."""
    return SMALL_TOKENIZER


@pytest.fixture(scope="session")
def tiny_checkpoint(
    tmp_path_factory: pytest.TempPathFactory, small_tokenizer_json: Path
) -> Callable[..., Path]:
    """`tiny_checkpoint(model_type, vocab="gpt2", **options)` → a random checkpoint (cached)."""
    made: dict[tuple, Path] = {}
    tokenizers = {"gpt2": GPT2_TOKENIZER, "small": small_tokenizer_json}

    def make(model_type: str, vocab: str = "gpt2", **options: object) -> Path:
        key = (model_type, vocab, *sorted(options.items()))
        if key not in made:
            where = tmp_path_factory.mktemp(f"ckpt-{model_type}")
            made[key] = write_random_checkpoint(
                where, model_type, tokenizer_json=tokenizers[vocab], **options
            )
        return made[key]

    return make
