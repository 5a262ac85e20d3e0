"""A block-causal prefill reads a long prefix in leading chunks (`Sampler._read_ahead`): the same
tokens as one forward over the whole prefix, with forwards whose width is bounded by the chunk."""

from __future__ import annotations

import random

import pytest
from helpers.constraints import ListConstraint

from decide.engine import load_model
from decide.engine import sampler as sampler_module
from decide.engine.requests import Block, DecodeRequest, Slot
from decide.engine.sampler import Sampler, SamplerConfig

FILLER = 50259  # <|pad|> in the tiny checkpoints' tokenizer
BLOCK_CAUSAL = ("sdar", "Fast_dLLM_Qwen", "qwen3_next", "llada2_moe")


def _requests(seed: int, prompt_lengths: list[int]) -> list[DecodeRequest]:
    """Documents with prompts of the given lengths and one or two blocks of small slots."""
    rng = random.Random(seed)
    out = []
    for key, length in enumerate(prompt_lengths):
        blocks = []
        for _ in range(rng.randint(1, 2)):
            tokens: list[int] = [rng.randrange(0, 50000) for _ in range(rng.randint(1, 3))]
            slots = []
            for _ in range(rng.randint(1, 3)):
                size = rng.randint(1, 3)
                words = {
                    tuple(rng.randrange(0, 50000) for _ in range(rng.randint(1, size)))
                    for _ in range(4)
                }
                language = sorted(w + (FILLER,) * (size - len(w)) for w in words)
                slots.append(Slot(len(tokens), ListConstraint(language, finite=False)))
                tokens += [0] * size + [rng.randrange(0, 50000)]
            blocks.append(Block(tokens, slots))
        prompt = [rng.randrange(0, 50000) for _ in range(length)]
        out.append(DecodeRequest(prompt=prompt, blocks=blocks, key=key, seed=key))
    return out


def _decode(loaded, requests, widths: list[int] | None = None):
    model = loaded.model
    if widths is not None:
        forward = type(model).forward

        def recording(self, input_ids, *args, **kwargs):
            widths.append(input_ids.shape[1])
            return forward(self, input_ids, *args, **kwargs)

        model.forward = recording.__get__(model)
    try:
        results = Sampler(model, SamplerConfig(batch_size=3, threshold=0.6)).decode(requests)
        return {r.request.key: r for r in results}
    finally:
        model.__dict__.pop("forward", None)


@pytest.mark.parametrize("model_type", BLOCK_CAUSAL)
def test_chunked_prefill_equals_one_forward(model_type, tiny_checkpoint, monkeypatch) -> None:
    loaded = load_model(tiny_checkpoint(model_type, init_std=0.2))
    block = loaded.config.block_size
    lengths = [150, 7, 93, 41, 260, 12]  # long and short prompts share prefill groups
    whole = _decode(loaded, _requests(5, lengths))
    monkeypatch.setattr(sampler_module, "PREFILL_CHUNK", 4 * block)
    widths: list[int] = []
    chunked = _decode(loaded, _requests(5, lengths), widths)
    extra = 0
    for key, result in whole.items():
        other = chunked[key]
        assert result.error is None and other.error is None, (result.error, other.error)
        assert other.blocks == result.blocks
        for a, b in zip(result.slots, other.slots, strict=True):
            for x, y in zip(a, b, strict=True):
                assert y.confidence == pytest.approx(x.confidence, rel=1e-4, abs=1e-6)
        extra += sum(other_nfe - nfe for nfe, other_nfe in
                     zip((s.nfe for s in result.stats), (s.nfe for s in other.stats), strict=True))  # fmt: skip
    assert extra > 0  # the long prompts did take leading chunks
    longest_unit = max(len(b.tokens) for r in _requests(5, lengths) for b in r.blocks)
    assert max(widths) <= 4 * block + longest_unit + 2 * block  # never the whole 260-token prompt


def test_bidirectional_families_read_their_prompt_whole(tiny_checkpoint, monkeypatch) -> None:
    """Chunking a bidirectional prompt would change what its tokens see: not done."""
    loaded = load_model(tiny_checkpoint("llada", init_std=0.2))
    monkeypatch.setattr(sampler_module, "PREFILL_CHUNK", 16)
    widths: list[int] = []
    results = _decode(loaded, _requests(5, [120]), widths)
    assert results[0].error is None
    assert max(widths) >= 120
