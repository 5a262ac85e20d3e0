"""Errors raised while loading a model directory.

Every message names the file, the config field or the tensor at fault, with the actual value, so a
user can fix the directory without reading our code. The CLI maps `ModelLoadError` to exit code 2.
"""

from __future__ import annotations


class ModelLoadError(ValueError):
    """A model directory (config, weights, tokenizer or chat template) cannot be used."""


class UnsafeTemplateError(ModelLoadError):
    """A chat template tried to reach Python internals; the sandbox refused it."""
