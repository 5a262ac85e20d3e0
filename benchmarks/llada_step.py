"""A LLaDA-8B-shaped model's decoding steps at batch 64: eager against CUDA graph replay, and
decide's block steps against the autoregressive steps of the same weights, in one run.

The model is the engine's own `DiffusionLM` built from LLaDA-8B-Instruct's published config.json
(`tests/data/real-checkpoints/llada-8b-instruct`: 32 layers, hidden 4,096, 32 heads, MLP 12,288,
126,464 embedding rows) with random bf16 weights on the GPU (no 16 GB checkpoint to read). Every
row has a `--prompt`-token prompt already in the KV cache. Timed, each as the median of CUDA-event
timed repetitions:

- **prefill**: one forward over the prompts that commits them (the work both decoders share);
- **decide step, whole block**: one forward of the `--block`-token block (skeleton and answer
  positions) over the cached prompt, the head over the `--open` answer positions and
  `masked_confidence` over their logits, as decide's loop runs it without the in-block cache;
- **decide step, queries only**: the same with only the `--open` positions recomputed, attending
  to the block's other keys in the cache (the in-block cache's step);
- **autoregressive step**: the same weights run causally, one token per row over a cache of
  prompt + half the answer, the head over that position and `masked_confidence` (its outlines-core
  mask is host work, left out here, so the autoregressive loop is favoured).

Each step runs eagerly (the engine's `forward`/`forward_queries` with their checks and attention
planning) and as a CUDA graph captured once from the same modules on static buffers
(`decide.engine.graphs.CapturedStep`). Per document, decide costs prefill + `--steps` block steps
and the autoregressive loop prefill + `--json-tokens` steps, divided by the batch; the step counts
default to what the bundled model takes on the held-out documents of `autoregressive.py` (4.3
forwards per document against 69.4: about 3.3 block steps after the prefill, rounded up to 4;
68 generated tokens), because a random model's own counts would mean nothing.

    python benchmarks/llada_step.py                        # on a CUDA GPU (about 17 GB of weights)
    python benchmarks/llada_step.py --device cpu --tiny    # the same code on a tiny CPU model
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch

from decide.engine.config import ModelConfig
from decide.engine.constraints import bitmask_width
from decide.engine.families import family_for
from decide.engine.graphs import CapturedStep, StepShape
from decide.engine.loader import build_model
from decide.engine.model import WindowedModel

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "tests/data/real-checkpoints/llada-8b-instruct/config.json"
TINY = {"d_model": 64, "n_heads": 4, "n_kv_heads": 4, "n_layers": 2, "mlp_hidden_size": 128,
        "vocab_size": 1024, "embedding_size": 1024, "mask_token_id": 1000, "eos_token_id": 1001}  # fmt: skip


def published_config(path: Path, overrides: dict | None = None) -> ModelConfig:
    """The engine config of a published config.json (tokenizer-free: ids from the file itself)."""
    raw = {**json.loads(path.read_text()), **(overrides or {})}
    family = family_for(raw["model_type"], raw)
    return ModelConfig(
        family=family.name,
        model_type=raw["model_type"],
        attention=family.attention,  # type: ignore[arg-type]
        logits_shift=family.logits_shift,
        block_size=None,
        mask_token_id=int(raw["mask_token_id"]),
        mask_token_source="config.json mask_token_id",
        end_of_turn_ids=(int(raw["eos_token_id"]),),
        **family.parse(raw),
    )


def random_model(config: ModelConfig, device: torch.device, dtype: torch.dtype) -> WindowedModel:
    """The engine's module for `config`, random weights created on `device` in `dtype`."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = build_model(config)
    finally:
        torch.set_default_dtype(previous)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:  # std 0.02, LLaDA's init_std: activations stay finite in bf16
                p.normal_(0.0, 0.02)
    return model.eval()


class Timer:
    """Median milliseconds of CUDA-event-timed (or wall-clock, on CPU) repetitions."""

    def __init__(self, device: torch.device, iters: int) -> None:
        self.device, self.iters = device, iters

    def __call__(self, fn: Callable[[], object]) -> float:
        fn()  # warm-up
        times = []
        for _ in range(self.iters):
            if self.device.type == "cuda":
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
            else:
                started = time.perf_counter()
                fn()
                times.append(1000 * (time.perf_counter() - started))
        return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tiny", action="store_true", help="a 2-layer model of the same family")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--prompt", type=int, default=512, help="prompt tokens per row")
    parser.add_argument("--block", type=int, default=96, help="block tokens (skeleton + slots)")
    parser.add_argument("--open", type=int, default=48, help="answer positions still open")
    parser.add_argument("--steps", type=int, default=4, help="decide's block steps per document")
    parser.add_argument("--json-tokens", type=int, default=68, help="autoregressive steps")
    parser.add_argument("--iters", type=int, default=10)
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("benchmarks/llada_step.py: no CUDA GPU here; `--device cpu --tiny` runs it on CPU.")
        return 0
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    config = published_config(PUBLISHED, TINY if args.tiny else None)
    model = random_model(config, device, dtype)
    causal = dataclasses.replace(config, attention="block_causal", block_size=1)
    with torch.device("meta"):
        twin = build_model(causal)
    twin.load_state_dict(model.state_dict(), assign=True, strict=True)
    twin.eval()

    b, p, lb, q = args.batch, args.prompt, args.block, args.open
    half = args.json_tokens // 2
    width = bitmask_width(config.embedding_size)
    gen = torch.Generator(device=device).manual_seed(0)
    prompt = torch.randint(0, config.vocab_size, (b, p), device=device, generator=gen)
    block = torch.randint(0, config.vocab_size, (b, lb), device=device, generator=gen)
    block[:, lb - q :] = config.mask_token_id  # the open answer positions, last in the block
    bitmask = torch.randint(-(2**31), 2**31 - 1, (b * q, width), dtype=torch.int32, device=device)
    props = (
        f"{torch.cuda.get_device_name(device)}, torch {torch.__version__}"
        if device.type == "cuda"
        else f"CPU, torch {torch.__version__}"
    )
    params = sum(t.numel() for t in model.parameters()) / 1e9
    print(f"# {props}; {config.model_type} shape: {config.num_layers} layers, hidden "
          f"{config.hidden_size}, {config.num_heads} heads, {params:.2f} B parameters, {dtype}\n")  # fmt: skip
    print(f"batch {b}, prompt {p}, block {lb} with {q} open positions; decide {args.steps} block "
          f"steps per document, autoregressive {args.json_tokens} tokens\n")  # fmt: skip

    timer = Timer(device, args.iters)
    rows: dict[str, tuple[float, float]] = {}
    with torch.inference_mode():
        # Room for every step below from the start: a cache that grew later would move buffers
        # that graphs captured earlier still point at.
        cache = model.new_cache(b, max(p + lb, p + half + 1))

        def prefill() -> None:
            cache.lengths.zero_()
            model(prompt, cache, commit=p)

        prefill_ms = timer(prefill)
        shapes = {
            "decide step, whole block": (model, StepShape(b, lb, lb, p, scored=q), block, cache),
            "decide step, queries only": (model, StepShape(b, lb, q, p), block, cache),
        }
        ar_cache = twin.new_cache(b, 1)
        ar_cache.k, ar_cache.v = cache.k, cache.v  # same weights: the prompt's keys are the same
        ar_cache.lengths.fill_(p + half)
        shapes["autoregressive step"] = (
            twin,
            StepShape(b, 1, 1, p + half),
            block[:, -1:],
            ar_cache,
        )
        for name, (m, shape, ids, c) in shapes.items():
            step = CapturedStep(m, c, shape, bitmask[: b * shape.open])
            step.ids.copy_(ids[:, : shape.window])
            eager_ms = timer(step.eager)
            graph_ms = float("nan")
            if device.type == "cuda":
                try:
                    step.capture()
                    graph_ms = timer(step.replay)
                    same = step.matches_eager()
                    print(f"- {name}: graph replay equals the eager step: {same}")
                except RuntimeError as exc:  # reported in the table, not hidden
                    print(f"- {name}: CUDA graph capture failed: {exc}")
            rows[name] = (eager_ms, graph_ms)
    print()
    print("| step | eager ms | CUDA graph ms | graph speed-up |")
    print("|---|---:|---:|---:|")
    print(f"| prefill ({b} × {p} tokens) | {prefill_ms:.2f} | | |")
    for name, (eager, graph) in rows.items():
        print(f"| {name} | {eager:.2f} | {graph:.2f} | {eager / graph:.2f}× |")

    def best(name: str) -> float:
        eager, graph = rows[name]
        return graph if graph == graph else eager

    print()
    print("| decoder | per batch ms | ms / document | decide's speed-up |")
    print("|---|---:|---:|---:|")
    ar = prefill_ms + args.json_tokens * best("autoregressive step")
    print(f"| autoregressive, {args.json_tokens} steps | {ar:.1f} | {ar / b:.2f} | |")
    for name in ("decide step, whole block", "decide step, queries only"):
        ours = prefill_ms + args.steps * best(name)
        print(f"| decide, {args.steps} × {name.removeprefix('decide step, ')} | {ours:.1f} | "
              f"{ours / b:.2f} | **{ar / ours:.2f}×** |")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
