"""Training speed: fp32 against bf16 autocast, on the batches `decide train --recipe bundled`
trains on, from the bundled model's weights.

`decide train` turns bf16 autocast on by default only where `bf16_is_fast` says the device runs
it faster (GPUs with bf16, CPUs whose bf16 products time faster than fp32's). This script
measures both on this machine in the same run, so the default can be checked against it: the same steps (same batches,
same masks) are timed once in fp32 and once under autocast, each from the same weights with a
fresh optimizer, after one untimed warm-up step.

    python benchmarks/train_precision.py                # 6 timed steps each
    python benchmarks/train_precision.py --steps 2 --batch-size 2
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from decide.engine import load_model
from decide.jobs.models import bundled_model_path
from decide.train.bundled import row_sampler
from decide.train.examples import ExampleBuilder
from decide.train.loop import TrainConfig, batch_loss, bf16_is_fast, draw_batch


def steps_per_second(model_dir: Path, config: TrainConfig, steps: int) -> tuple[float, float]:
    """(steps per second, mean loss) over `steps` timed optimizer steps after one warm-up."""
    loaded = load_model(model_dir, dtype="float32", device="cpu")
    model = loaded.model.train().requires_grad_(True)
    builder = ExampleBuilder(loaded.config, loaded.tokenizer)
    rows = row_sampler(loaded.tokenizer.tokenizer)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr)
    losses, started = [], 0.0
    for step in range(steps + 1):
        if step == 1:
            started = time.perf_counter()
        batch = draw_batch(builder, rows, config, step)
        gen = torch.Generator().manual_seed(step)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bool(config.bf16)):
            loss = batch_loss(model, batch, loaded.config.mask_token_id,
                              builder.book.filler_id, gen, config.filler_weight,
                              config.weighting)  # fmt: skip
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step:
            losses.append(loss.item())
    return steps / (time.perf_counter() - started), sum(losses) / len(losses)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=None, help="default: the bundled model")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--batch-size", type=int, default=8)
    args = parser.parse_args()
    model_dir = args.model or bundled_model_path()
    print(f"model: {model_dir}, {torch.get_num_threads()} threads, CPU capability "
          f"{torch.backends.cpu.get_cpu_capability()}, bf16_is_fast('cpu') = "
          f"{bf16_is_fast('cpu')}\n")  # fmt: skip
    rates = {}
    print("| precision | steps/s | examples/s | mean loss |")
    print("|---|---:|---:|---:|")
    for name, bf16 in (("fp32", False), ("bf16 autocast", True)):
        config = TrainConfig(batch_size=args.batch_size, bf16=bf16, seed=0)
        rate, loss = steps_per_second(model_dir, config, args.steps)
        rates[name] = rate
        print(f"| {name} | {rate:.3f} | {rate * args.batch_size:.2f} | {loss:.4f} |")
    print(f"\nbf16 autocast / fp32 speed: {rates['bf16 autocast'] / rates['fp32']:.2f}×")


if __name__ == "__main__":
    main()
