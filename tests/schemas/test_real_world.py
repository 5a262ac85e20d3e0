"""The real-world-shaped corpus (`tests/data/real-world-schemas`, see its README): at least 90 % of
it compiles at the language level (`compile_language`, before any tokenizer: the bundled model's
vocabulary is uncased, so token-level results depend on the model), every refusal is one that
docs/schemas.md justifies, and answers sampled through the masks of a byte-level vocabulary are
accepted by the validator of the schema's own draft."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from decide.engine.constraints import bitmask_width
from decide.schemas import (
    SchemaError,
    UnsupportedSchema,
    Vocabulary,
    compile_language,
    compile_slot,
)
from decide.schemas.drafts import VALIDATORS
from decide.schemas.language import empty_refusal

CORPUS = Path(__file__).parents[1] / "data" / "real-world-schemas"
# Refusals docs/schemas.md justifies ("Real-world corpus"), by schema: the keyword refused.
JUSTIFIED = {"only-undeclared-keys": "additionalProperties"}
FILLER = 256


def corpus() -> dict[str, object]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(CORPUS.glob("*.json"))}


def compiled() -> dict[str, object]:
    out: dict[str, object] = {}
    for name, schema in corpus().items():
        try:
            lang = compile_language(schema)
            refusal = empty_refusal(lang)
            out[name] = refusal if refusal is not None else lang
        except SchemaError as exc:
            out[name] = exc
    return out


@pytest.fixture(scope="module")
def results() -> dict[str, object]:
    return compiled()


def test_corpus_compiles_at_language_level(results) -> None:
    assert len(results) >= 50
    refused = {name: r for name, r in results.items() if isinstance(r, SchemaError)}
    rate = 1 - len(refused) / len(results)
    assert rate >= 0.9, {n: str(r) for n, r in refused.items()}
    unexplained = {n: str(r) for n, r in refused.items() if JUSTIFIED.get(n) != r.keyword}
    assert not unexplained, "refusal not justified in docs/schemas.md"


def test_corpus_answers_validate_with_their_draft(results) -> None:
    vocab = Vocabulary.from_bytes([bytes([b]) for b in range(256)] + [b"<pad>"], [FILLER])
    rng = np.random.default_rng(0)
    schemas = corpus()
    for name, lang in results.items():
        if isinstance(lang, SchemaError):
            continue
        schema = schemas[name]
        try:
            slot = compile_slot(schema, vocab, max_tokens=96)
        except UnsupportedSchema as exc:
            assert exc.keyword == "maxLength", exc  # every value is longer than the slot
            continue
        cls = VALIDATORS[lang.draft]
        validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
        out = torch.zeros((slot.length, bitmask_width(vocab.size)), dtype=torch.int32)
        for _ in range(1):
            state = slot.new_constraint(FILLER)
            for p in range(slot.length):
                state.fill_bitmask(out)
                bits = np.unpackbits(out[p].numpy().view(np.uint8), bitorder="little")
                choices = np.nonzero(bits)[0]
                token = FILLER if FILLER in choices and rng.random() < 0.3 else rng.choice(choices)
                assert state.commit(p, int(token))
            value = state.decode().value  # decode re-checks with the draft's validator
            assert validator.is_valid(value), (name, value)
