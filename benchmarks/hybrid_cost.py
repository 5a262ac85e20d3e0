"""Cost of one denoising pass against document length: the GDN hybrid vs an attention-only model.

A denoising pass is what the sampler repeats for every step of every block: a forward of one
block (32 tokens) over the row's cached prefix, committing nothing. For an attention-only
block-causal model (`sdar`, Qwen3 layout) every layer reads the keys and values of the whole
prefix, so the pass grows with the document. In the hybrid (`qwen3_next` layout, 3 GDN layers per
attention layer as in Qwen3-Next and Clover) the GDN layers start from a fixed-size state, and only
the attention quarter reads the prefix. Both models are random, of similar parameter count
(printed), built in the real checkpoint formats with `write_random_checkpoint` and loaded with
`load_model`, with the GPT-2 tokenizer of the test data. Prefixes are prefilled in 512-token
windows (exact for block-causal models) and then the same block is timed: median of repetitions
that alternate between the two models (so outside load hits both alike), after warm-up, batch of
`--batch` rows, all in the same run. Also printed: cache bytes per
row (attention KV grows with the prefix; the GDN state does not).

    python benchmarks/hybrid_cost.py                         # CPU, prefixes 512 … 32,768
    python benchmarks/hybrid_cost.py --device cuda --lengths 1024 8192 32768 131072
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch

from decide.engine import load_model
from decide.engine.random_checkpoint import write_random_checkpoint

ROOT = Path(__file__).resolve().parents[1]
TOKENIZER = ROOT / "tests" / "data" / "gpt2" / "tokenizer.json"
BLOCK = 32
PREFILL_WINDOW = 512  # bounds the block-causal mask and scores of a prefill window


def build(tmp: Path, hidden: int, layers: int) -> dict[str, Path]:
    heads, kv_heads, head_dim = hidden // 64, max(1, hidden // 256), 64
    common = dict(
        tokenizer_json=TOKENIZER,
        num_layers=layers,
        hidden_size=hidden,
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        block_size=BLOCK,
        init_std=0.02,
    )
    positions = {"max_position_embeddings": 1 << 18}
    layer_types = ["full_attention" if i % 4 == 3 else "linear_attention" for i in range(layers)]
    hybrid = write_random_checkpoint(
        tmp / "hybrid",
        "qwen3_next",
        intermediate_size=4 * hidden,
        extra_config={
            "layer_types": layer_types,
            "linear_num_key_heads": heads // 2,
            "linear_num_value_heads": heads,
            "linear_key_head_dim": head_dim,
            "linear_value_head_dim": head_dim,
            "num_experts": 16,
            "num_experts_per_tok": 4,
            "moe_intermediate_size": hidden // 2,
            "shared_expert_intermediate_size": hidden,
        }
        | positions,
        **common,
    )
    attention = write_random_checkpoint(
        tmp / "attention",
        "sdar",
        intermediate_size=int(2.75 * hidden),
        extra_config=positions,
        **common,
    )
    return {"hybrid (qwen3_next)": hybrid, "attention-only (sdar)": attention}


def cache_bytes(cache) -> int:
    """Bytes per row a cache holds for its committed prefix (KV up to the longest prefix)."""
    kv = getattr(cache, "kv", cache)
    span = int(kv.lengths.max())
    total = sum(t[:1, :, :span].numel() * t.element_size() for t in kv.k + kv.v)
    for name in ("conv", "state"):
        total += sum(t[:1].numel() * t.element_size() for t in getattr(cache, name, []))
    return total


def prefill(model, ids: torch.Tensor, length: int):
    """A cache holding `ids[:, :length]`, committed in `PREFILL_WINDOW`-token windows."""
    cache = model.new_cache(ids.shape[0], length + BLOCK)
    for start in range(0, length, PREFILL_WINDOW):
        end = min(length, start + PREFILL_WINDOW)
        model(ids[:, start:end], cache, commit=end - start)
    return cache


def time_passes(models: dict, length: int, batch: int, reps: int, device: torch.device) -> dict:
    """Per model: (median ms of one block pass over a `length`-token prefix, cache bytes per row).
    Repetitions alternate between the models, so load from other processes hits both alike."""
    gen = torch.Generator().manual_seed(length)
    ids = torch.randint(0, 50000, (batch, length + BLOCK), generator=gen).to(device)
    block = ids[:, length:]
    times: dict[str, list[float]] = {name: [] for name in models}
    with torch.inference_mode():
        caches = {name: prefill(model, ids, length) for name, model in models.items()}
        for name, model in models.items():
            model(block, caches[name])  # warm-up
        for _ in range(reps):
            for name, model in models.items():
                if device.type == "cuda":
                    torch.cuda.synchronize()
                started = time.perf_counter()
                model(block, caches[name])
                if device.type == "cuda":
                    torch.cuda.synchronize()
                times[name].append((time.perf_counter() - started) * 1e3)
    return {n: (statistics.median(times[n]), cache_bytes(caches[n])) for n in models}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="*", default=[512, 2048, 8192, 32768])
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument(
        "--threads", type=int, default=1, help="CPU threads (more than the idle cores thrash)"
    )
    args = parser.parse_args()
    device = torch.device(args.device)
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        dirs = build(Path(tmp), args.hidden, args.layers)
        models = {name: load_model(d, dtype=args.dtype, device=device) for name, d in dirs.items()}
    names = list(models)
    print(
        f"Block of {BLOCK} tokens over a cached prefix, batch {args.batch}, {device}, "
        f"{args.reps} repetitions (median), {torch.get_num_threads()} threads.\n"
    )
    for name, loaded in models.items():
        config, spec = loaded.config, loaded.config.hybrid
        layers = spec.layer_types if spec else ["full_attention"] * config.num_layers
        idle = 0  # parameters of the experts a token is not routed to
        if spec is not None:
            expert = 3 * config.hidden_size * spec.moe_intermediate_size
            idle = spec.mlp_kinds.count("moe") * (spec.num_experts - spec.num_experts_per_tok)
            idle *= expert
        embeddings = 2 * config.embedding_size * config.hidden_size
        active = loaded.parameter_count() - idle - embeddings
        print(
            f"- {name}: {loaded.parameter_count() / 1e6:.1f} M parameters "
            f"({active / 1e6:.1f} M active per token without embeddings and head), "
            f"{layers.count('full_attention')} attention + {layers.count('linear_attention')} "
            f"GDN layers, hidden {config.hidden_size}, {loaded.dtype}"
        )
    print()
    header = ["prefix tokens"] + [f"{n} ms" for n in names] + ["ratio"]
    header += [f"{n} cache MiB/row" for n in names]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    first: dict[str, float] = {}
    for length in args.lengths:
        modules = {n: m.model for n, m in models.items()}
        results = time_passes(modules, length, args.batch, args.reps, device)
        for n, (ms, _) in results.items():
            first.setdefault(n, ms)
        ms = [results[n][0] for n in names]
        cells = [f"{length:,}"] + [
            f"{t:.1f} ({t / first[n]:.2f}×)" for t, n in zip(ms, names, strict=True)
        ]
        cells += [f"{ms[0] / ms[1]:.2f}"]
        cells += [f"{results[n][1] / 2**20:.2f}" for n in names]
        print("| " + " | ".join(cells) + " |", flush=True)
    print(
        "\nIn parentheses: the time relative to the shortest prefix. ratio = hybrid / "
        "attention-only."
    )


if __name__ == "__main__":
    main()
