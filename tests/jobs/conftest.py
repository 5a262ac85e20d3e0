"""The jobs tests' models: tiny random checkpoints of every dense model type with the small
vocabulary (fast); `test_gpt2_vocabulary_end_to_end` covers 50k tokens."""

from __future__ import annotations

import pytest
from helpers.jobdata import MODEL_TYPES


@pytest.fixture(scope="module")
def models(tiny_checkpoint):
    return {t: tiny_checkpoint(t, vocab="small", init_std=0.2) for t in MODEL_TYPES}
