"""The attention + MoE families (`llada2_moe`, `sdar_moe`, LLaDA-MoE) against independent oracles on
tiny random checkpoints in the published format, and the engine's own invariants.

Oracles: `transformers`' `Qwen3MoeForCausalLM.from_pretrained` on the same directory for SDAR-MoE
(its loader checks our tensor names and fuses the per-expert tensors itself) with an explicit 4D
block-causal mask; for LLaDA2.0 and LLaDA-MoE, which `transformers` does not ship, `_reference`
below: a float64 loop written from the published modeling code's description (token-by-token
routing with Python sorting, per-expert SwiGLU, explicit softmax attention, rotate-half RoPE on the
leading rotary dims), reading the checkpoint's tensors by their real names.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from helpers.oracle import allowed_keys, max_rel_error, oracle_logits
from safetensors.torch import load_file

from decide.engine import ModelLoadError, load_model
from decide.engine.config import ModelConfig
from decide.engine.families import family_for
from decide.engine.moe import MoeLM, route

REAL = Path(__file__).parents[1] / "data" / "real-checkpoints"

# Awkward on purpose: head dims 20 and 24 (partial rotary 10 of 20), GQA, dense first layers,
# tied heads with biases, ragged groups.
CASES = {
    "llada2_moe": dict(
        num_layers=3, hidden_size=64, num_heads=4, num_kv_heads=2, head_dim=20,
        intermediate_size=96, block_size=4, init_std=0.2,
    ),
    "llada2_moe-bias-tied": dict(
        num_layers=2, hidden_size=48, num_heads=6, num_kv_heads=3, head_dim=16,
        intermediate_size=80, block_size=4, init_std=0.2, attention_bias=True,
        tie_word_embeddings=True,
        extra_config=(
            ("use_bias", True), ("num_shared_experts", 2), ("n_group", 2), ("topk_group", 1),
            ("num_experts_per_tok", 2), ("routed_scaling_factor", 1.5),
        ),
    ),
    "sdar_moe": dict(
        num_layers=3, hidden_size=64, num_heads=4, num_kv_heads=2, head_dim=24,
        intermediate_size=96, block_size=4, init_std=0.2,
        extra_config=(("mlp_only_layers", (1,)),),
    ),
    "lladamoe": dict(
        num_layers=3, hidden_size=64, num_heads=4, num_kv_heads=2, intermediate_size=96,
        init_std=0.2,
        extra_config=(
            ("moe_layer_freq", (0, 1, 1)), ("moe_router_enable_expert_bias", True),
            ("shared_expert_intermediate_size", 48), ("partial_rotary_factor", 0.5),
        ),
    ),
}  # fmt: skip
LENGTHS = [13, 9, 16]
BLOCK_CAUSAL = {"llada2_moe": True, "sdar_moe": True, "lladamoe": False}


def _model_type(case: str) -> str:
    return case.split("-")[0]


def _ids(lengths: list[int], vocab: int, mask_id: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (len(lengths), max(lengths)), generator=g)
    ids[:, 3::5] = mask_id  # diffusion inputs are full of mask tokens
    return ids


# --- the float64 reference of LLaDA2.0 and LLaDA-MoE ---------------------------------------------


def _rms(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w


def _rope(x: torch.Tensor, rot: int, theta: float) -> torch.Tensor:
    """Rotate-half RoPE of `x` [L, H, D] on its first `rot` dims, position = row index."""
    out = x.clone()
    half = rot // 2
    for p in range(x.shape[0]):
        for j in range(half):
            angle = p * theta ** (-2.0 * j / rot)
            a, b = x[p, :, j], x[p, :, j + half]
            out[p, :, j] = a * math.cos(angle) - b * math.sin(angle)
            out[p, :, j + half] = b * math.cos(angle) + a * math.sin(angle)
    return out


def _swiglu(t: dict, prefix: str, x: torch.Tensor) -> torch.Tensor:
    gate, up = t[prefix + "gate_proj.weight"] @ x, t[prefix + "up_proj.weight"] @ x
    return t[prefix + "down_proj.weight"] @ (gate / (1 + torch.exp(-gate)) * up)


def _route_llada2(raw: dict, logits: list[float], bias: list[float]) -> list[tuple[int, float]]:
    scores = [1 / (1 + math.exp(-v)) for v in logits]
    choice = [s + b for s, b in zip(scores, bias, strict=True)]
    groups, k = raw["n_group"], raw["num_experts_per_tok"]
    size = len(scores) // groups
    group_score = [sum(sorted(choice[g * size : (g + 1) * size])[-2:]) for g in range(groups)]
    kept = sorted(range(groups), key=lambda g: -group_score[g])[: raw["topk_group"]]
    chosen = sorted((e for e in range(len(scores)) if e // size in kept), key=lambda e: -choice[e])
    weights = [scores[e] for e in chosen[:k]]
    if k > 1:
        weights = [w / (sum(weights) + 1e-20) for w in weights]
    return [(e, w * raw["routed_scaling_factor"]) for e, w in zip(chosen[:k], weights, strict=True)]


def _route_llada_moe(raw: dict, logits: list[float], bias: list[float]) -> list[tuple[int, float]]:
    top = max(logits)
    exp = [math.exp(v - top) for v in logits]
    choice = [e / sum(exp) + b for e, b in zip(exp, bias, strict=True)]
    chosen = sorted(range(len(logits)), key=lambda e: -choice[e])[: raw["num_experts_per_tok"]]
    return [(e, choice[e]) for e in chosen]  # the biased values, never renormalised


def _reference(model_dir: Path, ids: list[int], allowed: torch.Tensor) -> torch.Tensor:
    """Logits [L, V] of one row; `allowed` [L, L] says which keys each query sees."""
    raw = json.loads((model_dir / "config.json").read_text())
    t = {k: v.double() for k, v in load_file(str(model_dir / "model.safetensors")).items()}
    llada2 = raw["model_type"] == "llada2_moe"
    hq, hkv = raw["num_attention_heads"], raw["num_key_value_heads"]
    d = raw.get("head_dim") or raw["hidden_size"] // hq
    rot = int(d * raw["partial_rotary_factor"])
    eps, n = raw["rms_norm_eps"], len(ids)
    embed = t["model.word_embeddings.weight" if llada2 else "model.embed_tokens.weight"]
    x = embed[ids]
    for i in range(raw["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = _rms(x, t[p + "input_layernorm.weight"], eps)
        if llada2:
            qkv = h @ t[p + "attention.query_key_value.weight"].T
            if raw["use_qkv_bias"]:
                qkv = qkv + t[p + "attention.query_key_value.bias"]
            qkv = qkv.view(n, hq + 2 * hkv, d)
            q, k, v = qkv[:, :hq], qkv[:, hq : hq + hkv], qkv[:, hq + hkv :]
            q = _rms(q, t[p + "attention.query_layernorm.weight"], eps)
            k = _rms(k, t[p + "attention.key_layernorm.weight"], eps)
        else:
            proj = {c: h @ t[f"{p}self_attn.{c}_proj.weight"].T for c in "qkv"}
            if raw["attention_bias"]:
                proj = {c: proj[c] + t[f"{p}self_attn.{c}_proj.bias"] for c in "qkv"}
            q, k, v = proj["q"].view(n, hq, d), proj["k"].view(n, hkv, d), proj["v"].view(n, hkv, d)
            q = _rms(q, t[p + "self_attn.q_norm.weight"], eps)
            k = _rms(k, t[p + "self_attn.k_norm.weight"], eps)
        q, k = _rope(q, rot, raw["rope_theta"]), _rope(k, rot, raw["rope_theta"])
        heads = []
        for head in range(hq):
            kv = head // (hq // hkv)
            scores = (q[:, head] @ k[:, kv].T) / math.sqrt(d)
            scores = scores.masked_fill(~allowed, float("-inf"))
            heads.append(torch.softmax(scores, dim=-1) @ v[:, kv])
        attn = torch.cat(heads, dim=-1)
        out_name = "attention.dense" if llada2 else "self_attn.o_proj"
        attn = attn @ t[f"{p}{out_name}.weight"].T
        if f"{p}{out_name}.bias" in t:
            attn = attn + t[f"{p}{out_name}.bias"]
        x = x + attn
        h = _rms(x, t[p + "post_attention_layernorm.weight"], eps)
        if p + "mlp.gate_proj.weight" in t:  # dense layer
            x = x + torch.stack([_swiglu(t, p + "mlp.", h[j]) for j in range(n)])
            continue
        bias_name = p + ("mlp.gate.expert_bias" if llada2 else "mlp.expert_bias")
        bias = t[bias_name].tolist() if bias_name in t else [0.0] * raw["num_experts"]
        shared = p + ("mlp.shared_experts." if llada2 else "shared_expert.")
        rows = []
        for j in range(n):  # one token at a time
            logits = (t[p + "mlp.gate.weight"] @ h[j]).tolist()
            chosen = (_route_llada2 if llada2 else _route_llada_moe)(raw, logits, bias)
            y = sum(w * _swiglu(t, f"{p}mlp.experts.{e}.", h[j]) for e, w in chosen)
            if shared + "gate_proj.weight" in t:
                y = y + _swiglu(t, shared, h[j])
            rows.append(y)
        x = x + torch.stack(rows)
    x = _rms(x, t["model.norm.weight"], eps)
    return x @ t.get("lm_head.weight", embed).T


def _their_logits(model_dir: Path, ids: torch.Tensor, block: int | None) -> list[torch.Tensor]:
    raw = json.loads((model_dir / "config.json").read_text())
    if raw["model_type"] == "sdar_moe":
        from transformers import Qwen3MoeForCausalLM

        # transformers fuses per-expert tensors by model_type: the same weights (linked, not
        # copied) beside the same config renamed `qwen3_moe`.
        twin = model_dir.parent / (model_dir.name + "-as-qwen3_moe")
        if not twin.exists():
            twin.mkdir()
            (twin / "config.json").write_text(json.dumps(raw | {"model_type": "qwen3_moe"}))
            (twin / "model.safetensors").symlink_to(model_dir / "model.safetensors")
        model, info = Qwen3MoeForCausalLM.from_pretrained(
            twin, dtype=torch.float32, attn_implementation="eager", output_loading_info=True
        )
        assert not any(info.values()), info  # every tensor read, none left over
        logits = oracle_logits(model.eval(), ids, LENGTHS, block)
        return [logits[row, :n] for row, n in enumerate(LENGTHS)]
    allowed = allowed_keys(LENGTHS, ids.shape[1], block)
    return [
        _reference(model_dir, ids[row, :n].tolist(), allowed[row, :n, :n])
        for row, n in enumerate(LENGTHS)
    ]


@pytest.mark.parametrize("case", list(CASES))
def test_logits_match_oracle(case: str, tiny_checkpoint) -> None:
    model_dir = tiny_checkpoint(_model_type(case), **CASES[case])
    loaded = load_model(model_dir, dtype="float32")
    config = loaded.config
    assert config.architecture == "moe" and config.embedding_size >= 50_000
    assert (config.attention == "block_causal") == BLOCK_CAUSAL[_model_type(case)]
    ids = _ids(LENGTHS, loaded.tokenizer.vocab_size, config.mask_token_id)
    with torch.no_grad():
        hidden = loaded.model(ids, loaded.model.new_cache(3), window_lens=torch.tensor(LENGTHS))
        ours = loaded.model.logits(hidden)
    block = config.block_size if BLOCK_CAUSAL[_model_type(case)] else None
    errors = []
    for row, theirs in enumerate(_their_logits(model_dir, ids, block)):
        errors.append(max_rel_error(ours[row, : LENGTHS[row]], theirs))
    print(case, "max relative error", max(errors))
    assert max(errors) <= 1e-4, (case, errors)
    if block is not None:  # the mask matters: bidirectional logits differ
        full = _reference_free_bidirectional(loaded, ids)
        assert max_rel_error(full[0, : LENGTHS[0]], ours[0, : LENGTHS[0]]) > 1e-3


def _reference_free_bidirectional(loaded, ids: torch.Tensor) -> torch.Tensor:
    """Our own model rerun with the attention bidirectional (block bigger than the window)."""
    from dataclasses import replace

    model = MoeLM(replace(loaded.config, block_size=1024))
    model.load_state_dict(loaded.model.state_dict())
    with torch.no_grad():
        return model.logits(model(ids, window_lens=torch.tensor(LENGTHS)))


@pytest.mark.parametrize("case", list(CASES))
def test_ragged_batch_equals_one_row_at_a_time(case: str, tiny_checkpoint) -> None:
    loaded = load_model(tiny_checkpoint(_model_type(case), **CASES[case]))
    ids = _ids(LENGTHS, loaded.tokenizer.vocab_size, loaded.config.mask_token_id, seed=1)
    with torch.no_grad():
        batch = loaded.model(ids, loaded.model.new_cache(3), window_lens=torch.tensor(LENGTHS))
        uncached = loaded.model(ids, None, window_lens=torch.tensor(LENGTHS))
        for row, n in enumerate(LENGTHS):
            assert max_rel_error(uncached[row, :n], batch[row, :n]) <= 1e-6
            alone = loaded.model(ids[row : row + 1, :n], loaded.model.new_cache(1))
            assert max_rel_error(batch[row, :n], alone[0]) <= 1e-5


@pytest.mark.parametrize("model_type", ["llada2_moe", "sdar_moe"])
@pytest.mark.parametrize("window", [4, 8, 3])
def test_block_causal_cached_equals_full_recompute(model_type: str, window: int, tiny_checkpoint):
    """Prefill ragged whole-block prefixes, then run one block, two blocks or a partial block,
    twice (the first time with other tokens): equal to the uncached block-causal forward."""
    loaded = load_model(tiny_checkpoint(model_type, **CASES[model_type]))
    model, bs = loaded.model, loaded.config.block_size
    prefixes = [2 * bs, bs, 3 * bs]
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
        model(block.flip(1), cache)
        cached = model(block, cache)
    for row, p in enumerate(prefixes):
        assert max_rel_error(cached[row], full[row, p : p + window]) <= 1e-5


def test_llada_moe_prefix_cache_rerun_is_exact(tiny_checkpoint) -> None:
    """Bidirectional: prompt + block committed once, the unchanged block rerun over the cached
    prefix reproduces the exact forward (the prefix-cache mode of LLaDA)."""
    loaded = load_model(tiny_checkpoint("lladamoe", **CASES["lladamoe"]))
    model = loaded.model
    prefixes, window = [10, 6], 5
    lens = [p + window for p in prefixes]
    ids = _ids(lens, loaded.tokenizer.vocab_size, loaded.config.mask_token_id, seed=4)
    with torch.no_grad():
        cache = model.new_cache(2)
        exact = model(ids, cache, window_lens=torch.tensor(lens), commit=torch.tensor(prefixes))
        again = model(torch.stack([ids[r, p : p + window] for r, p in enumerate(prefixes)]), cache)
    for row, p in enumerate(prefixes):
        assert max_rel_error(again[row], exact[row, p : p + window]) <= 1e-5


def test_routing_features_are_exercised(tiny_checkpoint) -> None:
    """On the tiny LLaDA2 checkpoint's real router inputs: the expert bias and the group limit
    each change some tokens' experts, the first layer is dense and a shared expert is present;
    `route` gives the reference routing for LLaDA2 and LLaDA-MoE specs."""
    loaded = load_model(tiny_checkpoint("llada2_moe", **CASES["llada2_moe"]))
    spec = loaded.config.moe
    assert spec.mlp_kinds == ("dense", "moe", "moe") and spec.shared_intermediate_size == 32
    assert (spec.score, spec.n_group, spec.topk_group, spec.routed_scaling) == (
        "sigmoid",
        4,
        2,
        2.5,
    )
    block = loaded.model.layers[1].mlp
    ids = _ids([40], loaded.tokenizer.vocab_size, loaded.config.mask_token_id, seed=5)
    with torch.no_grad():
        x = loaded.model.embed(ids)[0]  # router inputs of a plausible spread
        logits = x @ block.router.weight.T
    from dataclasses import replace

    base = route(logits, spec, block.expert_bias)[0].sort(-1).values
    unbiased = route(logits, spec, None)[0].sort(-1).values
    ungrouped = route(logits, replace(spec, n_group=1, topk_group=1), block.expert_bias)[0]
    assert (base != unbiased).any(dim=-1).sum() > 0
    assert (base != ungrouped.sort(-1).values).any(dim=-1).sum() > 0
    raw = json.loads(
        (tiny_checkpoint("llada2_moe", **CASES["llada2_moe"]) / "config.json").read_text()
    )
    got_ids, got_w = route(logits, spec, block.expert_bias)
    for j in range(logits.shape[0]):
        want = _route_llada2(raw, logits[j].double().tolist(), block.expert_bias.double().tolist())
        assert sorted(got_ids[j].tolist()) == sorted(e for e, _ in want)
        mine = dict(zip(got_ids[j].tolist(), got_w[j].tolist(), strict=True))
        assert all(abs(mine[e] - w) <= 1e-6 for e, w in want)
    other = load_model(tiny_checkpoint("lladamoe", **CASES["lladamoe"])).config.moe
    raw = {"num_experts_per_tok": other.top_k}
    bias = torch.linspace(-0.1, 0.1, other.num_experts)
    got_ids, got_w = route(logits[:, : other.num_experts], other, bias)
    for j in range(logits.shape[0]):
        want = _route_llada_moe(raw, logits[j, : other.num_experts].tolist(), bias.tolist())
        mine = dict(zip(got_ids[j].tolist(), got_w[j].tolist(), strict=True))
        assert sorted(mine) == sorted(e for e, _ in want)
        assert all(abs(mine[e] - w) <= 1e-6 for e, w in want)


# --- published configs and refusals --------------------------------------------------------------

PUBLISHED = {  # directory: family, total parameters (billions) as the model cards state them
    "LLaDA2.0-mini": ("llada2_moe", 16.3),
    "LLaDA2.0-flash": ("llada2_moe", 103.0),
    "SDAR-30B-A3B-Chat": ("sdar_moe", 30.5),
    "LLaDA-MoE-7B-A1B-Instruct": ("llada_moe", 7.3),
}


@pytest.mark.parametrize("name", list(PUBLISHED))
def test_published_configs_parse(name: str) -> None:
    raw = json.loads((REAL / name / "config.json").read_text())
    family = family_for(raw["model_type"], raw)
    assert family.name == PUBLISHED[name][0]
    fields = family.parse(raw)
    names = family.weight_names(fields)
    listed = [
        line.strip()
        for line in (REAL / name / "weight_names.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert set(listed) <= set(names), sorted(set(listed) - set(names))
    config = ModelConfig(
        family=family.name, model_type=raw["model_type"], attention=family.attention,
        block_size=family.default_block_size, logits_shift=False,
        mask_token_id=family.default_mask_token_id, mask_token_source="default", **fields,
    )  # fmt: skip
    with torch.device("meta"):
        model = MoeLM(config)
    state = model.state_dict()
    assert set(state) == set(names.values())
    billions = sum(t.numel() for t in state.values()) / 1e9
    assert abs(billions - PUBLISHED[name][1]) / PUBLISHED[name][1] < 0.05, billions


def test_refusals_name_the_field() -> None:
    llada2 = json.loads((REAL / "LLaDA2.0-flash" / "config.json").read_text())
    moe = json.loads((REAL / "LLaDA-MoE-7B-A1B-Instruct" / "config.json").read_text())
    for raw, change, message in (
        (llada2, {"score_function": "softmax"}, "`score_function`"),
        (llada2, {"norm_head": True}, "`norm_head`"),
        (llada2, {"norm_topk_prob": False}, "`norm_topk_prob`"),
        (llada2, {"rotary_dim": 32}, "`rotary_dim`"),
        (llada2, {"n_group": 3}, "n_group"),
        (llada2, {"rope_scaling": {"type": "yarn"}}, "`rope_scaling`"),
        (moe, {"clip_qkv": 8.0}, "`clip_qkv`"),
        (moe, {"router_num_group": 4}, "`router_num_group`"),
        (moe, {"routed_scaling_factor": 2.5}, "`routed_scaling_factor`"),
        (moe, {"moe_router_score_function": "sigmoid"}, "`moe_router_score_function`"),
        (moe, {"moe_layer_freq": [1] * 3}, "`moe_layer_freq`"),
    ):
        changed = raw | change
        with pytest.raises(ModelLoadError, match=message):
            family_for(changed["model_type"], changed).parse(changed)
    # Plain LLaDA keeps its family; dllm's renamed LLaDA-MoE config is the MoE family too.
    assert family_for("llada", {"model_type": "llada", "d_model": 4096}).name == "llada"
    assert family_for("llada").name == "llada"
    assert family_for("lladamoe", moe | {"model_type": "lladamoe"}).name == "llada_moe"


@pytest.mark.parametrize("model_type", ["llada2_moe", "lladamoe"])
def test_decisions_end_to_end_are_schema_valid(model_type: str, tiny_checkpoint, tmp_path) -> None:
    """Parquet in, decisions out through the job runner on a small-vocabulary checkpoint of the
    family: every answer validates against its schema (as tests/engine/test_hybrid.py)."""
    import jsonschema
    import polars as pl
    from helpers.jobdata import QUESTIONS, write_docs

    from decide.jobs.runner import run_job
    from decide.jobs.spec import parse_spec

    model = tiny_checkpoint(model_type, vocab="small", init_std=0.2, block_size=8)
    docs = write_docs(tmp_path / "in.parquet", 8, seed=1)
    result = run_job(
        parse_spec({"questions": QUESTIONS}), [docs], tmp_path / "out", model=model,
        batch_size=4, progress=False,
    )  # fmt: skip
    frame = pl.read_parquet(tmp_path / "out" / "answers" / "*.parquet")
    assert result.ok == frame.height == 8
    schemas = {q["id"]: q["schema"] for q in QUESTIONS}
    for row in frame.iter_rows(named=True):
        assert row["status"] == "ok", row["error"]
        for qid, value in json.loads(row["answers_json"]).items():
            jsonschema.validate(value, schemas[qid], format_checker=jsonschema.FormatChecker())


def test_bf16_load_tracks_fp32(tiny_checkpoint) -> None:
    """bf16 weights (routing still in fp32): close to fp32. Every token is routed to all 8
    experts, since with top-2 of random routers a rounding-size change flips some choices, a
    legitimate, discontinuous difference that would drown the comparison."""
    options = CASES["sdar_moe"] | {"extra_config": (("num_experts_per_tok", 8),)}
    model_dir = tiny_checkpoint("sdar_moe", **options)
    ref, low = load_model(model_dir, dtype="float32"), load_model(model_dir, dtype="bfloat16")
    assert all(p.dtype == torch.bfloat16 for p in low.model.parameters())
    ids = _ids([12], ref.tokenizer.vocab_size, ref.config.mask_token_id, seed=6)
    with torch.no_grad():
        a = ref.model.logits(ref.model(ids, ref.model.new_cache(1)))
        b = low.model.logits(low.model(ids, low.model.new_cache(1)))
    assert b.dtype == torch.bfloat16
    print("bf16 max relative error", max_rel_error(b.float(), a))
    assert max_rel_error(b.float(), a) <= 5e-2


def test_sampler_cached_equals_recomputed(tiny_checkpoint) -> None:
    """The unchanged sampler on LLaDA2: continuous batching over the KV cache decides exactly the
    tokens of recomputing everything (documents of 1–3 blocks, list-constrained slots)."""
    from decide.engine.sampler import Sampler, SamplerConfig

    loaded = load_model(tiny_checkpoint("llada2_moe", vocab="small", init_std=0.2))
    vocab = loaded.tokenizer.vocab_size - 4  # below the special tokens
    results = {}
    for cache in (False, True):
        sampler = Sampler(loaded.model, SamplerConfig(cache=cache, batch_size=3, threshold=0.5))
        requests = _sampler_requests(seed=7, count=6, vocab=vocab)
        results[cache] = {r.request.key: r for r in sampler.decode(requests)}
    assert sorted(results[False]) == sorted(results[True]) == list(range(6))
    cached = results[True].values()  # blocks took several passes over the same committed prefix
    assert sum(r.nfe for r in cached) > sum(len(r.request.blocks) for r in cached)
    for key, exact in results[False].items():
        assert exact.error is None, exact.error
        assert results[True][key].blocks == exact.blocks


def _sampler_requests(seed: int, count: int, vocab: int) -> list:
    """Documents of 1–3 blocks with list-constrained slots, built afresh for every sampler."""
    import random

    from helpers.constraints import ListConstraint

    from decide.engine.requests import Block, DecodeRequest, Slot

    rng = random.Random(seed)
    requests = []
    for key in range(count):
        blocks = []
        for _ in range(rng.randint(1, 3)):
            tokens: list[int] = []
            slots = []
            for _ in range(rng.randint(1, 2)):
                tokens += [rng.randrange(vocab) for _ in range(rng.randint(1, 4))]
                length = rng.randint(1, 3)
                language = {tuple(rng.randrange(vocab) for _ in range(length)) for _ in range(4)}
                slots.append(Slot(len(tokens), ListConstraint(sorted(language), finite=True)))
                tokens += [0] * length
            blocks.append(Block([*tokens, rng.randrange(vocab)], slots))
        prompt = [rng.randrange(vocab) for _ in range(rng.randint(3, 20))]
        requests.append(DecodeRequest(prompt=prompt, blocks=blocks, key=key, seed=key))
    return requests
