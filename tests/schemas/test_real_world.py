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
from tokenizers import Tokenizer

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
WORDPIECE = Path(__file__).parents[2] / "decide" / "model" / "tokenizer.json"  # uncased
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
        value = sample(slot, vocab, FILLER, rng)  # decode re-checks with the draft's validator
        assert validator.is_valid(value), (name, value)


def sample(slot, vocab: Vocabulary, filler: int, rng: np.random.Generator) -> object:
    """One value drawn through the slot's masks, position by position (filler 30 % of the time
    where it is allowed), decoded."""
    out = torch.zeros((slot.length, bitmask_width(max(vocab.size, filler + 1))), dtype=torch.int32)
    state = slot.new_constraint(filler, slot.length)
    for p in range(slot.length):
        state.fill_bitmask(out)
        bits = np.unpackbits(out[p].numpy().view(np.uint8), bitorder="little")
        choices = np.nonzero(bits)[0]
        token = filler if filler in choices and rng.random() < 0.3 else rng.choice(choices)
        assert state.commit(p, int(token))
    return state.decode().value


def test_upper_case_schemas_answer_in_their_case_through_an_uncased_vocabulary(results) -> None:
    """With the bundled model's uncased WordPiece vocabulary, schemas whose values hold upper-case
    letters (currency and IATA codes, enums inside objects) are spelled case-folded; values drawn
    through the masks decode in the schema's own case and pass its draft's validator."""
    tokenizer = Tokenizer.from_file(str(WORDPIECE))
    vocab = Vocabulary.from_tokenizer(tokenizer, excluded={tokenizer.get_vocab_size()})
    filler = tokenizer.get_vocab_size()
    rng = np.random.default_rng(0)
    schemas = corpus()
    folded = []
    for name, lang in results.items():
        if isinstance(lang, SchemaError):
            continue
        try:
            slot = compile_slot(schemas[name], vocab)
        except UnsupportedSchema as exc:
            assert exc.keyword == "maxLength", (name, exc)  # whole objects beyond 32 tokens
            continue
        if not (slot.folded or slot.read_as):
            continue
        folded.append(name)
        cls = VALIDATORS[lang.draft]
        validator = cls(schemas[name], format_checker=cls.FORMAT_CHECKER)
        value = sample(slot, vocab, filler, rng)
        assert validator.is_valid(value), (name, value)
    # refused before (upper-case codes, "C"/"F"/"K")
    assert {"openapi-money", "draft04-exclusive-bounds", "draft07-if-then-else"} <= set(folded)
