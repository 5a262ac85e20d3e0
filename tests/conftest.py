"""Shared fixtures: the GPT-2 tokenizer in the repository and tiny random checkpoints of every
supported model type, written once per test session in the real on-disk format."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from decide.engine.synthetic import write_random_checkpoint

DATA = Path(__file__).parent / "data"
GPT2_TOKENIZER = DATA / "gpt2" / "tokenizer.json"
MODEL_TYPES = ("llada", "Dream", "sdar", "Fast_dLLM_Qwen")

torch.set_num_threads(max(1, min(2, torch.get_num_threads())))


@pytest.fixture(scope="session")
def gpt2_tokenizer_json() -> Path:
    return GPT2_TOKENIZER


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """`tiny_checkpoint(model_type, **options)` → directory of a random checkpoint (cached)."""
    made: dict[tuple, Path] = {}

    def make(model_type: str, **options: object) -> Path:
        key = (model_type, *sorted(options.items()))
        if key not in made:
            where = tmp_path_factory.mktemp(f"ckpt-{model_type}")
            made[key] = write_random_checkpoint(
                where, model_type, tokenizer_json=GPT2_TOKENIZER, **options
            )
        return made[key]

    return make
