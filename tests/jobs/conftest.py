"""The jobs tests' models: tiny random checkpoints of every dense model type with the small
vocabulary (fast); `test_gpt2_vocabulary_end_to_end` covers 50k tokens."""

from __future__ import annotations

import pytest
from helpers.jobdata import MODEL_TYPES


@pytest.fixture(scope="module")
def models(tiny_checkpoint):
    return {t: tiny_checkpoint(t, vocab="small", init_std=0.2) for t in MODEL_TYPES}


@pytest.fixture(scope="module")
def cluster():
    """A local Ray cluster for one test module (Ray is the optional `ray` extra)."""
    ray = pytest.importorskip("ray", reason="Ray is the optional `ray` extra (also in `dev`)")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             ignore_reinit_error=True)  # fmt: skip
    yield
    ray.shutdown()
