"""The hybrid GDN + attention family (`qwen3_next` checkpoints) against `transformers`' Qwen3-Next on
the same files, and its cache against recomputation.

The oracle reads the checkpoint itself (`Qwen3NextForCausalLM.from_pretrained`, which also turns the
per-expert tensors into its fused layout), so weight names, the per-key-head grouping of
`in_proj_qkvz`, partial RoPE and the (1 + w) norms are checked independently of our loader. Causal
logits come from loading our model with block size 1 (block-causal with blocks of one token is
causal); block-causal logits from handing `transformers` a block-causal mask for its attention
layers and none for its GDN layers, which stay causal.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers.constraints import ListConstraint
from helpers.oracle import float_mask, max_rel_error

from decide.engine import ModelLoadError, load_model
from decide.engine.hybrid_cache import HybridCache
from decide.engine.requests import Block, DecodeRequest, Slot
from decide.engine.sampler import Sampler, SamplerConfig

# Four layers alternating GDN and attention, 8 experts (2 per token): the tiny model of the issue,
# with GPT-2's 50,257-token vocabulary. The second case adds a dense layer, attention biases, a tied
# head, unnormalised top-k weights, more GDN than attention layers and odd head dims.
CASES = {
    "alternating": dict(
        num_layers=4, hidden_size=64, num_heads=4, num_kv_heads=2, head_dim=16, init_std=0.2
    ),
    "mixed": dict(
        num_layers=5,
        hidden_size=48,
        num_heads=6,
        num_kv_heads=3,
        head_dim=24,
        attention_bias=True,
        tie_word_embeddings=True,
        init_std=0.2,
        extra_config=(  # pairs, so that the fixture can cache by them
            (
                "layer_types",
                ("linear_attention",) * 2
                + ("full_attention", "linear_attention", "full_attention"),
            ),
            ("mlp_only_layers", (1,)),
            ("norm_topk_prob", False),
            ("linear_num_key_heads", 1),
            ("linear_num_value_heads", 3),
            ("linear_key_head_dim", 24),
            ("linear_value_head_dim", 40),
            ("num_experts", 5),
            ("num_experts_per_tok", 3),
        ),
    ),
}
LENGTHS = [40, 23, 31]


def checkpoint(tiny_checkpoint, case: str) -> Path:
    return tiny_checkpoint("qwen3_next", **CASES[case])


def _ids(lengths: list[int], vocab: int, mask_id: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (len(lengths), max(lengths)), generator=g)
    ids[:, 3::5] = mask_id  # diffusion inputs are full of mask tokens
    return ids


def _oracle(model_dir: Path):
    from transformers import Qwen3NextForCausalLM

    model, info = Qwen3NextForCausalLM.from_pretrained(
        model_dir, dtype=torch.float32, output_loading_info=True
    )
    assert not any(info.values()), info  # every tensor read, none left over
    return model.eval()


def _block_causal(length: int, block: int) -> torch.Tensor:
    pos = torch.arange(length)
    return (pos[None, :] // block) <= (pos[:, None] // block)  # [L, L]


@pytest.mark.parametrize("case", list(CASES))
def test_causal_logits_match_transformers(case: str, tiny_checkpoint) -> None:
    model_dir = checkpoint(tiny_checkpoint, case)
    loaded = load_model(model_dir, dtype="float32", block_size=1)  # blocks of one: causal
    config = loaded.config
    assert config.family == "hybrid_gdn" and config.embedding_size >= 50_000
    ids = _ids(LENGTHS, loaded.tokenizer.vocab_size, config.mask_token_id, seed=0)
    with torch.no_grad():
        hidden = loaded.model(ids, loaded.model.new_cache(3), window_lens=torch.tensor(LENGTHS))
        ours = loaded.model.logits(hidden)
        oracle = _oracle(model_dir)
        for row, n in enumerate(LENGTHS):
            theirs = oracle(input_ids=ids[row : row + 1, :n]).logits[0]
            assert max_rel_error(ours[row, :n], theirs) <= 1e-4, (case, row)


@pytest.mark.parametrize("case", list(CASES))
def test_block_causal_logits_match_transformers(case: str, tiny_checkpoint) -> None:
    model_dir = checkpoint(tiny_checkpoint, case)
    loaded = load_model(model_dir, dtype="float32")
    block = loaded.config.block_size
    assert block == 4  # from config.json `block_size`
    ids = _ids(LENGTHS, loaded.tokenizer.vocab_size, loaded.config.mask_token_id, seed=1)
    with torch.no_grad():
        ours = loaded.model.logits(loaded.model(ids, window_lens=torch.tensor(LENGTHS)))
        oracle = _oracle(model_dir)
        for row, n in enumerate(LENGTHS):
            masks = {
                "full_attention": float_mask(_block_causal(n, block)[None]),
                "linear_attention": None,  # GDN layers are causal whatever the mask
            }
            theirs = oracle(input_ids=ids[row : row + 1, :n], attention_mask=masks).logits[0]
            assert max_rel_error(ours[row, :n], theirs) <= 1e-4, (case, row)
            causal = oracle(input_ids=ids[row : row + 1, :n]).logits[0]
            assert max_rel_error(ours[row, :n], causal) > 1e-3  # the mask matters


@pytest.mark.parametrize("window", [4, 8, 3])
def test_block_forward_from_cached_prefix_equals_recompute(window: int, tiny_checkpoint) -> None:
    """Prefill ragged whole-block prefixes (24, 4, 12 tokens), then run a window of one block, two
    blocks or a partial block, twice, the first time with other tokens: equal to the uncached
    forward of prefix + window."""
    loaded = load_model(checkpoint(tiny_checkpoint, "alternating"))
    model, bs = loaded.model, loaded.config.block_size
    prefixes = [6 * bs, bs, 3 * bs]
    full_lens = [p + window for p in prefixes]
    ids = _ids(full_lens, loaded.tokenizer.vocab_size, loaded.config.mask_token_id, seed=2)
    with torch.no_grad():
        full = model(ids, window_lens=torch.tensor(full_lens))
        cache = model.new_cache(3)
        prompt = torch.zeros(3, max(prefixes), dtype=torch.long)
        block = torch.zeros(3, window, dtype=torch.long)
        for row, p in enumerate(prefixes):
            prompt[row, :p] = ids[row, :p]
            block[row] = ids[row, p : p + window]
        lens = torch.tensor(prefixes)
        model(prompt, cache, window_lens=lens, commit=lens)
        assert cache.lengths.tolist() == prefixes
        snapshot = [t.clone() for t in cache.conv + cache.state]
        model(block.flip(1), cache)  # a denoising pass that commits nothing...
        assert all(
            torch.equal(a, b) for a, b in zip(snapshot, cache.conv + cache.state, strict=True)
        )
        cached = model(block, cache)  # ...leaves the next pass exact
    for row, p in enumerate(prefixes):
        assert max_rel_error(cached[row], full[row, p : p + window]) <= 1e-5


def test_ragged_commits_advance_the_state_exactly(tiny_checkpoint) -> None:
    """Causal blocks of one token, so any count is a legal commit: four forwards commit different
    counts per row (0 included, part of a window, a whole window) and the last window equals the
    full forward; the committed conv and recurrent states equal those of a fresh prefill of the
    committed tokens."""
    loaded = load_model(checkpoint(tiny_checkpoint, "alternating"), block_size=1)
    model = loaded.model
    total = 30
    ids = _ids([total] * 3, loaded.tokenizer.vocab_size, loaded.config.mask_token_id, seed=3)
    steps = [([5, 1, 9], [3, 0, 9]), ([7, 6, 2], [7, 1, 0]), ([4, 9, 8], [0, 9, 8])]
    with torch.no_grad():
        full = model(ids)
        cache = model.new_cache(3)
        pos = [0, 0, 0]
        for lens, counts in steps:
            window = torch.zeros(3, max(lens), dtype=torch.long)
            for row, n in enumerate(lens):
                window[row, :n] = ids[row, pos[row] : pos[row] + n]
            out = model(window, cache, window_lens=torch.tensor(lens), commit=torch.tensor(counts))
            for row, n in enumerate(lens):  # every pass is exact, committing or not
                assert max_rel_error(out[row, :n], full[row, pos[row] : pos[row] + n]) <= 1e-5
            pos = [p + c for p, c in zip(pos, counts, strict=True)]
        assert cache.lengths.tolist() == pos == [10, 10, 17]
        for row, p in enumerate(pos):
            fresh = model.new_cache(1)
            model(ids[row : row + 1, :p], fresh, commit=p)
            for mine, theirs in zip(
                cache.conv + cache.state, fresh.conv + fresh.state, strict=True
            ):
                assert max_rel_error(mine[row], theirs[0]) <= 1e-5


def test_commit_must_come_from_the_forward(tiny_checkpoint) -> None:
    loaded = load_model(checkpoint(tiny_checkpoint, "alternating"))
    cache = loaded.model.new_cache(2)
    with torch.no_grad():
        loaded.model(torch.zeros(2, 8, dtype=torch.long), cache)  # commits nothing
    with pytest.raises(RuntimeError, match=r"staged for None \(0 of 2 layers\)"):
        cache.commit(torch.tensor([4, 4]))
    # Block-causal: committed prefixes must stay whole blocks.
    with pytest.raises(ValueError, match="whole blocks"), torch.no_grad():
        loaded.model(torch.zeros(2, 8, dtype=torch.long), cache, commit=6)
        loaded.model(torch.zeros(2, 4, dtype=torch.long), cache)


def test_view_clear_select_and_move_rows(tiny_checkpoint) -> None:
    """The sampler's row operations: a view of some lanes shares storage (its commits land in the
    parent), clear empties lanes a document used before (GDN state included), select copies,
    move_row compacts; each row keeps decoding exactly."""
    loaded = load_model(checkpoint(tiny_checkpoint, "alternating"))
    model, bs = loaded.model, loaded.config.block_size
    ids = _ids([5 * bs] * 3, loaded.tokenizer.vocab_size, loaded.config.mask_token_id, seed=4)
    with torch.no_grad():
        full = model(ids)
        main = model.new_cache(4)
        main.reserve(4 * bs)
        model(ids[[0, 1, 2, 0], :bs].flip(1), main, commit=bs)  # earlier documents in every lane
        main.view(3, start=1).clear()
        model(ids[:, : 2 * bs], main.view(3, start=1), commit=2 * bs)  # a prefill on lanes 1-3
        main.move_row(3, 0)  # row 2's state now also in lane 0
        lanes = main.view(3)
        assert isinstance(lanes, HybridCache)
        model(torch.stack([ids[2], ids[0], ids[1]])[:, 2 * bs : 3 * bs], lanes, commit=bs)
        assert main.lengths.tolist() == [3 * bs, 3 * bs, 3 * bs, 2 * bs]
        picked = main.select(torch.tensor([2, 0]))  # rows 1 and 2 of `ids`
        out = model(ids[[1, 2], 3 * bs : 4 * bs], picked)
    for i, row in enumerate([1, 2]):
        assert max_rel_error(out[i], full[row, 3 * bs : 4 * bs]) <= 1e-5


def test_sharded_checkpoint_loads_the_same(tiny_checkpoint) -> None:
    """Per-expert tensors spread over three shards are gathered and stacked like a single file."""
    one = load_model(checkpoint(tiny_checkpoint, "alternating"))
    three = load_model(tiny_checkpoint("qwen3_next", **CASES["alternating"], shards=3))
    ids = _ids([11], one.tokenizer.vocab_size, one.config.mask_token_id, seed=9)
    with torch.no_grad():
        assert torch.equal(one.model(ids), three.model(ids))


def test_token_logits_match_full_logits(tiny_checkpoint) -> None:
    loaded = load_model(checkpoint(tiny_checkpoint, "alternating"))
    ids = _ids([9], loaded.tokenizer.vocab_size, loaded.config.mask_token_id, seed=5)
    with torch.no_grad():
        hidden = loaded.model(ids, loaded.model.new_cache(1))[0]  # [L, H]
        full = loaded.model.logits(hidden)
        rows = torch.tensor([0, 3, 3, 8, 5])
        tokens = torch.tensor([5, 17, 50000, 0, loaded.config.mask_token_id])
        picked = loaded.model.token_logits(hidden, rows, tokens)
    assert max_rel_error(picked, full[rows, tokens]) <= 1e-5


def test_bf16_load_tracks_fp32(tiny_checkpoint) -> None:
    """bf16 weights with fp32 GDN state: no further from fp32 than `transformers` in bf16 is from
    its fp32 (random weights at this scale lose ~5% in bf16 either way). Every token is routed to
    all 8 experts, because with top-2 of random routers a rounding-size change flips some tokens'
    expert choice, a legitimate, discontinuous difference that would drown the comparison."""
    from transformers import Qwen3NextForCausalLM

    options = CASES["alternating"] | {"extra_config": (("num_experts_per_tok", 8),)}
    model_dir = tiny_checkpoint("qwen3_next", **options)
    ref = load_model(model_dir, dtype="float32", block_size=1)
    low = load_model(model_dir, dtype="bfloat16", block_size=1)
    ids = _ids([12], ref.tokenizer.vocab_size, ref.config.mask_token_id, seed=6)
    with torch.no_grad():
        a = ref.model.logits(ref.model(ids, ref.model.new_cache(1)))
        b = low.model.logits(low.model(ids, low.model.new_cache(1)))
        theirs = {
            dtype: Qwen3NextForCausalLM.from_pretrained(model_dir, dtype=dtype).eval()(ids).logits
            for dtype in (torch.float32, torch.bfloat16)
        }
    assert b.dtype == torch.bfloat16 and low.model.new_cache(1).state[0].dtype == torch.float32
    baseline = max_rel_error(theirs[torch.bfloat16].float(), theirs[torch.float32])
    assert max_rel_error(b.float(), a) <= max(1.5 * baseline, 1e-2)
    assert max_rel_error(b.float(), theirs[torch.bfloat16].float()) <= baseline


def _requests(seed: int, count: int, vocab: int) -> list[DecodeRequest]:
    """Documents of 1–3 blocks with 1–3 list-constrained slots each (as tests/engine/test_sampler)."""
    rng = random.Random(seed)
    requests = []
    for key in range(count):
        blocks = []
        for _ in range(rng.randint(1, 3)):
            tokens: list[int] = []
            slots = []
            for _ in range(rng.randint(1, 3)):
                tokens += [rng.randrange(0, vocab) for _ in range(rng.randint(1, 4))]
                length = rng.randint(1, 3)
                language = {tuple(rng.randrange(0, vocab) for _ in range(length)) for _ in range(4)}
                finite = rng.random() < 0.5
                slots.append(Slot(len(tokens), ListConstraint(sorted(language), finite=finite)))
                tokens += [0] * length
            tokens.append(rng.randrange(0, vocab))
            blocks.append(Block(tokens, slots))
        prompt = [rng.randrange(0, vocab) for _ in range(rng.randint(3, 30))]
        requests.append(DecodeRequest(prompt=prompt, blocks=blocks, key=key, seed=key))
    return requests


def test_sampler_cached_equals_recomputed(tiny_checkpoint) -> None:
    """The unchanged sampler on this family: continuous batching on the hybrid cache (prefill,
    on free lanes, views, swap-removal) decides exactly the tokens of recomputing everything. A small
    vocabulary keeps the exact path's many full recomputations cheap."""
    options = CASES["alternating"] | {"vocab": "small"}
    loaded = load_model(tiny_checkpoint("qwen3_next", **options))
    vocab = loaded.tokenizer.vocab_size - 4  # below the special tokens
    results = {}
    for cache in (False, True):
        sampler = Sampler(loaded.model, SamplerConfig(cache=cache, batch_size=3, threshold=0.5))
        requests = _requests(seed=7, count=7, vocab=vocab)
        results[cache] = {r.request.key: r for r in sampler.decode(requests)}
    assert sorted(results[False]) == sorted(results[True]) == list(range(7))
    cached = results[True].values()  # blocks took several passes over the same committed prefix
    assert sum(r.nfe for r in cached) > sum(len(r.request.blocks) for r in cached)
    for key, exact in results[False].items():
        assert exact.error is None, exact.error
        for block, slots in zip(exact.request.blocks, exact.slots, strict=True):
            for slot, got in zip(block.slots, slots, strict=True):
                assert tuple(got.tokens) in slot.constraint.sequences
        assert results[True][key].blocks == exact.blocks


def test_decisions_end_to_end_are_schema_valid(tiny_checkpoint, tmp_path) -> None:
    """Parquet in, decisions out through the job runner on a small-vocabulary hybrid checkpoint:
    every answer validates against its schema (the checks of tests/jobs/test_runner.py)."""
    import jsonschema
    import polars as pl
    from helpers.jobdata import QUESTIONS, write_docs

    from decide.jobs.runner import run_job
    from decide.jobs.spec import parse_spec

    model = tiny_checkpoint("qwen3_next", vocab="small", init_std=0.2, block_size=8)
    docs = write_docs(tmp_path / "in.parquet", 12, seed=1)
    result = run_job(
        parse_spec({"questions": QUESTIONS}), [docs], tmp_path / "out", model=model,
        batch_size=4, progress=False,
    )  # fmt: skip
    frame = pl.read_parquet(tmp_path / "out" / "answers" / "*.parquet")
    assert result.ok == frame.height == 12
    schemas = {q["id"]: q["schema"] for q in QUESTIONS}
    for row in frame.iter_rows(named=True):
        assert row["status"] == "ok", row["error"]
        for qid, value in json.loads(row["answers_json"]).items():
            jsonschema.validate(value, schemas[qid], format_checker=jsonschema.FormatChecker())


def test_config_variants_and_refusals(tiny_checkpoint, tmp_path) -> None:
    """A transformers-4 style config (top-level rope fields, `full_attention_interval` instead of
    `layer_types`) parses the same; bad layer types and RoPE scaling are refused by name; MTP
    tensors are ignored."""
    from safetensors.torch import load_file, save_file

    source = checkpoint(tiny_checkpoint, "alternating")
    target = tmp_path / "v4"
    target.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (target / name).write_bytes((source / name).read_bytes())
    raw = json.loads((source / "config.json").read_text())
    rope = raw.pop("rope_parameters")
    raw |= {"rope_theta": rope["rope_theta"], "partial_rotary_factor": 0.25}
    raw |= {"full_attention_interval": 2, "rope_scaling": None}
    del raw["layer_types"]
    (target / "config.json").write_text(json.dumps(raw))
    tensors = load_file(str(source / "model.safetensors"))
    tensors["mtp.fc.weight"] = torch.zeros(2, 2)
    save_file(tensors, str(target / "model.safetensors"))
    a, b = load_model(source), load_model(target)
    assert a.config.hybrid == b.config.hybrid and a.config.rope_theta == b.config.rope_theta
    ids = _ids([10], a.tokenizer.vocab_size, a.config.mask_token_id, seed=8)
    with torch.no_grad():
        assert torch.equal(a.model(ids), b.model(ids))

    for change, message in (
        (
            {"layer_types": ["linear_attention", "sliding_attention"] * 2},
            r"`layer_types` must list 4",
        ),
        ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, r"`rope_scaling`.*not supported"),
        ({"linear_num_value_heads": 3}, r"multiple of linear_num_key_heads"),
    ):
        (target / "config.json").write_text(json.dumps(raw | change))
        with pytest.raises(ModelLoadError, match=message):
            load_model(target)


@pytest.mark.slow
def test_triton_kernels_in_the_engine(tiny_checkpoint) -> None:
    """The whole model with every kernel forced to Triton (interpreted on CPU) gives the torch
    backends' hidden states, cached block included. Runs in a fresh interpreter because
    TRITON_INTERPRET must be set before the kernels are imported."""
    model_dir = checkpoint(tiny_checkpoint, "alternating")
    script = f"""
import logging, os, torch
from decide.engine import load_model
from decide.kernels import dispatch
logging.basicConfig(level=logging.INFO)
m = load_model({str(model_dir)!r}).model
ids = torch.randint(0, 50000, (2, 90), generator=torch.Generator().manual_seed(0))
def run():
    cache = m.new_cache(2)
    lens = torch.tensor([64, 32])
    prefill = m(ids[:, :64], cache, window_lens=lens, commit=lens)  # chunked, whole windows
    ragged = m(ids[:, 64:72], cache, commit=torch.tensor([4, 0]))  # recurrent, ragged commit
    return prefill, ragged, m(ids[:, 72:78], cache)
with torch.no_grad():
    torch_out = run()
    os.environ["DECIDE_KERNELS"] = "triton"
    with dispatch.poison_scratch():
        triton_out = run()
for a, b in zip(torch_out, triton_out):
    err = ((a - b).abs().max() / b.abs().max()).item()
    assert err <= 1e-5, err
print("ok")
"""
    env = os.environ | {"TRITON_INTERPRET": "1"}
    env.pop("DECIDE_KERNELS", None)
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("ok")
    for kernel in ("gated_delta_rule", "moe_experts"):
        assert f"{kernel}: using the triton backend" in done.stderr


def test_a_long_document_is_read_whole_in_chunks(tiny_checkpoint, tmp_path, monkeypatch) -> None:
    """A document far beyond one prefill chunk, on a hybrid whose context holds it, is read in
    one pass (no windows) with its prompt committed in chunks: the same answers as one forward,
    a few more forward passes."""
    import polars as pl
    from helpers.jobdata import QUESTIONS, WORDS

    from decide.engine import sampler as sampler_module
    from decide.jobs.runner import run_job
    from decide.jobs.spec import parse_spec

    model = tiny_checkpoint("qwen3_next", vocab="small", init_std=0.2, block_size=8,
                            extra_config=(("max_position_embeddings", 8192),))  # fmt: skip
    rng = random.Random(3)
    docs = [" ".join(rng.choice(WORDS) for _ in range(n)) for n in (1500, 12, 700)]
    inputs = tmp_path / "in.parquet"
    pl.DataFrame({"doc_id": ["long", "short", "middle"], "document": docs}).write_parquet(inputs)
    frames = {}
    for chunk in (1_000_000, 128):
        monkeypatch.setattr(sampler_module, "PREFILL_CHUNK", chunk)
        out = tmp_path / f"out-{chunk}"
        # At the defaults (`grow_slots`): a slot that grows rewinds its row's lane to the block's
        # start (`Sampler._rewind`) instead of reading the prefix again, chunks and all.
        spec = parse_spec({"questions": QUESTIONS})
        run_job(spec, [inputs], out, model=model, batch_size=3, progress=False)
        frames[chunk] = pl.read_parquet(out / "answers" / "*.parquet").sort("doc_id")
    whole, chunked = frames[1_000_000], frames[128]
    assert chunked["status"].to_list() == ["ok"] * 3
    assert chunked["windows"].to_list() == [0, 0, 0]  # read whole, not in windows
    assert chunked["answers_json"].to_list() == whole["answers_json"].to_list()
    extra = dict(zip(chunked["doc_id"], (chunked["nfe"] - whole["nfe"]).to_list(), strict=True))
    assert extra["long"] > extra["middle"] > extra["short"] >= 0
