"""Benchmark: model-FLOP utilisation of the engine's forward on this CPU, against a matrix-product
ceiling measured in the same run.

Ceiling: the best rate of square `torch.mm` products (n = 1024 … 4096) in fp32 and in bf16, on
the same threads. Forward: the engine's `forward` at the shapes decoding runs, batch ≥ 16:

- *denoise*: a block of `--window` tokens per row over a cached prefix of `--prefix` tokens (the
  step the sampler repeats; the KV cache is filled once beforehand, nothing is committed);
- *prefill*: prefix + block per row without a cache (how every block starts on bidirectional
  models).

Model FLOPs = 2 × (multiply-adds of every linear layer of the trunk) per token, plus the two
attention products (2 × 2 × heads × head_dim × queries × keys per row); embedding lookups, norms,
softmax and rotary embeddings are work but not model FLOPs, and the logits are not part of the
forward (the sampler computes them only where it needs them). Also timed alone: the largest
single GEMM of a layer at the forward's token count, which shows how much of a miss the GEMM
shapes themselves explain. Shapes: the bundled model's (BERT, 6 layers, hidden 384) and a
LLaMA-style shape (Qwen2.5-0.5B's layers: hidden 896, 14 heads of 64, 2 KV heads, SwiGLU 4,864;
`--llama-layers` of its 24 layers, which leaves the utilisation unchanged), random weights.

    python benchmarks/mfu.py
    python benchmarks/mfu.py --batch-sizes 16 --reps 3 --dtypes fp32
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import common
import torch
from torch import nn

from decide.engine import load_model
from decide.engine.model import WindowedModel
from decide.engine.random_checkpoint import write_random_checkpoint

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
LLAMA_SHAPE = common.QWEN05_LAYER


def median_seconds(fn, reps: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(reps):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def mm_rate(m: int, k: int, n: int, dtype: torch.dtype, reps: int) -> float:
    """FLOP/s of `[m, k] @ [k, n]`."""
    a = torch.randn(m, k).to(dtype)
    b = torch.randn(k, n).to(dtype)
    out = torch.empty(m, n, dtype=dtype)
    seconds = median_seconds(lambda: torch.mm(a, b, out=out), reps)
    return 2 * m * k * n / seconds


def ceiling(dtype: torch.dtype, reps: int) -> tuple[float, int]:
    """Best square-matmul rate and the size it was reached at."""
    rates = {n: mm_rate(n, n, n, dtype, reps) for n in (1024, 2048, 3072, 4096)}
    best = max(rates, key=rates.__getitem__)
    return rates[best], best


def forward_flops(model: WindowedModel, rows: int, queries: int, keys: int) -> float:
    c = model.config
    linear = sum(
        m.in_features * m.out_features for m in model.layers.modules() if isinstance(m, nn.Linear)
    )
    attention = 2 * c.num_layers * c.num_heads * c.head_dim * queries * keys
    return 2 * (linear * rows * queries + attention * rows)


def largest_gemm(model: WindowedModel) -> tuple[int, int]:
    """(in, out) of the largest linear layer in the trunk."""
    best = max(
        (m for m in model.layers.modules() if isinstance(m, nn.Linear)),
        key=lambda m: m.in_features * m.out_features,
    )
    return best.in_features, best.out_features


def measure(model: WindowedModel, shape: str, batch: int, args) -> tuple[float, float, int]:
    """(seconds, model FLOPs, tokens) of one forward."""
    gen = torch.Generator().manual_seed(batch)
    vocab = model.config.vocab_size
    if shape == "denoise":
        ids = torch.randint(0, vocab, (batch, args.prefix + args.window), generator=gen)
        cache = model.new_cache(batch, args.prefix + args.window)
        model(ids[:, : args.prefix], cache, commit=args.prefix)
        block = ids[:, args.prefix :]
        seconds = median_seconds(lambda: model(block, cache), args.reps)
        return (
            seconds,
            forward_flops(model, batch, args.window, args.prefix + args.window),
            (batch * args.window),
        )
    length = args.prefix + args.window
    ids = torch.randint(0, vocab, (batch, length), generator=gen)
    seconds = median_seconds(lambda: model(ids), args.reps)
    return seconds, forward_flops(model, batch, length, length), batch * length


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-sizes", type=int, nargs="*", default=[16, 32])
    parser.add_argument("--window", type=int, default=96, help="block tokens per row")
    parser.add_argument("--prefix", type=int, default=320, help="prompt tokens per row")
    parser.add_argument("--dtypes", nargs="*", default=["fp32", "bf16"], choices=list(DTYPES))
    parser.add_argument("--llama-layers", type=int, default=2)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    common.set_threads(args.threads)
    print(f"Machine: {common.describe_machine(args.threads)}\n")
    ceilings = {}
    for name in args.dtypes:
        rate, n = ceiling(DTYPES[name], args.reps)
        ceilings[name] = rate
        print(f"- matmul ceiling {name}: {rate / 1e9:.1f} GFLOP/s (square n = {n})")
    rows = []
    with tempfile.TemporaryDirectory() as tmp, torch.inference_mode():
        bert = write_random_checkpoint(
            Path(tmp) / "bert", "bert", tokenizer_json=common.GPT2, **common.BUNDLED_SHAPE
        )
        llama = write_random_checkpoint(
            Path(tmp) / "llama", "llada", tokenizer_json=common.GPT2,
            num_layers=args.llama_layers, **LLAMA_SHAPE,
        )  # fmt: skip
        models = {
            "BERT 6×384 (bundled shape)": bert,
            f"LLaMA-style 896/4864 ({args.llama_layers} layers)": llama,
        }
        for label, path in models.items():
            for dtype_name in args.dtypes:
                model = load_model(path, dtype=DTYPES[dtype_name]).model
                k, n = largest_gemm(model)
                for shape in ("denoise", "prefill"):
                    for batch in args.batch_sizes:
                        seconds, flops, tokens = measure(model, shape, batch, args)
                        gemm = mm_rate(tokens, k, n, DTYPES[dtype_name], args.reps)
                        achieved = flops / seconds
                        rows.append(
                            [
                                label,
                                dtype_name,
                                shape,
                                batch,
                                tokens,
                                f"{1000 * seconds:.0f}",
                                f"{flops / 1e9:.1f}",
                                f"{achieved / 1e9:.1f}",
                                f"**{100 * achieved / ceilings[dtype_name]:.0f} %**",
                                f"{100 * gemm / ceilings[dtype_name]:.0f} %",
                            ]
                        )
                        print(f"- {label} {dtype_name} {shape} batch {batch}: done", flush=True)
    print()
    print(
        common.table(
            [
                "model",
                "dtype",
                "forward",
                "batch",
                "tokens",
                "ms",
                "GFLOP",
                "GFLOP/s",
                "MFU (of ceiling)",
                "largest layer GEMM alone",
            ],
            rows,
            "lllrrrrrrr",
        )
    )
    print(
        f"\nPrefix {args.prefix} + block {args.window} tokens per row. Target: ≥ 50 % of the "
        "measured matmul ceiling at batch ≥ 16."
    )


if __name__ == "__main__":
    main()
