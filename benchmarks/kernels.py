"""Time the decoding kernels on a GPU: Triton against the PyTorch reference and the usual baselines.

Run `python benchmarks/kernels.py` on a CUDA machine (add `--sweep` to also time alternative tile
configurations, `--sweep masked_confidence` for that kernel's alone, `--quick` for fewer
repetitions). It first checks the Triton kernels against their
references on this GPU at the test suite's awkward shapes, then prints markdown tables ready for
docs/benchmarks.md: the device-to-device copy bandwidth it measures as the ceiling;
`masked_confidence` (Triton, the torch backend, the PyTorch reference, and xgrammar's bitmask
kernel plus a softmax and top-2 when `xgrammar` is installed) with bytes moved, achieved
bandwidth and its share of the ceiling; `block_attention` (Triton, SDPA with an explicit boolean mask, grouped-query heads passed
with `enable_gqa` or expanded beforehand, and unmasked flash SDPA over exactly the valid keys as a
lower bound) with speed-ups. Every time is the median over CUDA-event-timed repetitions, each after
an L2 flush; the Triton `masked_confidence` is timed both as an eager call (Python checks and two
launches included) and replayed from a CUDA graph (its kernels' device time, as a step captured
in a graph runs it), and the target is read from the replay. It closes with the issue's two targets, met or not. Without CUDA it says so and exits
0; it exits 1 when a correctness check fails.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import itertools
import math
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from decide.kernels import MaskedConfidence, block_attention, masked_confidence
from decide.kernels.masked_confidence_ref import masked_confidence_ref

sys.path.append(str(Path(__file__).resolve().parents[1] / "tests"))  # the tests' helpers
from helpers.numerics import rel_err

GB = 1e9
DEVICE = "cuda"

# Correctness checks at the test suite's awkward shapes: (V, N, dtype, logits layout) ...
MC_CHECKS = [
    (50257, 7, torch.float32, "row_padded"),
    (50257, 3, torch.bfloat16, "col_strided"),
    (32000, 257, torch.bfloat16, "contiguous"),
    (151936, 1, torch.float32, "contiguous"),
    (151936, 257, torch.bfloat16, "row_padded"),
    (97, 257, torch.float32, "transposed"),
]
# ... and ragged attention rows (prefix 0 with an empty block among them), L = max block length.
ATTN_CHECK_PREFIX = [0, 37, 100, 0, 64, 2047]
ATTN_CHECK_BLOCK = [64, 5, 64, 0, 1, 33]
# Timed shapes: (N, V, dtype, entropy); the first is the target.
MC_CASES = [
    (256, 151936, torch.bfloat16, False),
    (256, 151936, torch.bfloat16, True),
    (256, 151936, torch.float32, False),
    (64, 151936, torch.bfloat16, False),
    (8, 151936, torch.bfloat16, False),
    (256, 50257, torch.bfloat16, False),
    (256, 32000, torch.bfloat16, False),
]
# (B, L, prefix, Hq, Hkv, D, ragged): the target with Qwen3-8B-like heads first, then
# Qwen2.5-7B-like 7:1 heads, plain multi-head, ragged prefixes, a small batch.
ATTN_CASES = [
    (32, 64, 2048, 32, 8, 128, False),
    (32, 64, 2048, 28, 4, 128, False),
    (32, 64, 2048, 32, 32, 128, False),
    (32, 64, 2048, 32, 8, 128, True),
    (8, 32, 512, 16, 8, 128, False),
]


@dataclass
class Timer:
    """Median milliseconds of `fn` over CUDA-event-timed runs, L2 flushed before each."""

    iters: int
    warmup: int = 5

    def __post_init__(self) -> None:
        # Larger than any current GPU's L2 (H100/H200: 50 MiB), so each run starts cold.
        self.flush = torch.empty(256 << 20, dtype=torch.uint8, device=DEVICE)

    def __call__(self, fn: Callable[[], object]) -> float:
        for _ in range(self.warmup):
            fn()
        events = []
        for _ in range(self.iters):
            self.flush.zero_()
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            events.append((start, end))
        torch.cuda.synchronize()
        return statistics.median(s.elapsed_time(e) for s, e in events)

    def graphed(self, fn: Callable[[], object]) -> float:
        """Like calling the timer, but `fn` captured once in a CUDA graph and replayed: the
        device time of its kernels without the host's Python and launch work in between."""
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):  # compiles, autotuning and allocator warm-up stay out of capture
                fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        return self(graph.replay)


def bandwidth_ceiling(timer: Timer) -> tuple[float, float]:
    """(copy, read) bandwidth in GB/s: `dst.copy_(src)` counts 2 bytes per byte, a sum 1."""
    src = torch.empty(1 << 30, dtype=torch.uint8, device=DEVICE).random_()
    dst = torch.empty_like(src)
    copy_ms = timer(lambda: dst.copy_(src))
    as_f32 = src.view(torch.float32)
    read_ms = timer(lambda: as_f32.sum())
    return 2 * src.numel() / (copy_ms * 1e-3) / GB, src.numel() / (read_ms * 1e-3) / GB


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def random_bitmask(n: int, vocab: int, density: float = 0.5) -> torch.Tensor:
    words = (vocab + 31) // 32
    bits = torch.rand(n, words * 32, device=DEVICE) < density  # [N, 32·W]
    bits[:, vocab:] = False
    packed = (bits.view(n, words, 32).long() << torch.arange(32, device=DEVICE)).sum(-1)
    return torch.where(packed >= 2**31, packed - 2**32, packed).to(torch.int32)  # [N, W]


def check_masked_confidence() -> list[str]:
    failures = []
    gen = torch.Generator(device=DEVICE).manual_seed(0)
    for v, n, dtype, layout in MC_CHECKS:
        base = torch.randn(n, 2 * v, device=DEVICE, generator=gen) * 3
        if dtype == torch.bfloat16:
            base = base.round()  # small integers: many exact ties
        base = base.to(dtype)
        logits = {
            "contiguous": base[:, :v].contiguous(),
            "row_padded": base[:, :v],
            "col_strided": base[:, ::2],
            "transposed": base[:, :v].t().contiguous().t(),
        }[layout]
        bitmask = random_bitmask(n, v)
        bitmask[1::5] = 0  # rows with nothing allowed
        for entropy in (False, True):
            got = masked_confidence(logits, bitmask, entropy=entropy, backend="triton")
            want = masked_confidence(logits, bitmask, entropy=entropy, backend="torch")
            name = f"masked_confidence V={v} N={n} {dtype} {layout} entropy={entropy}"
            failures += compare_confidence(name, got, want)
    return failures


def compare_confidence(name: str, got: MaskedConfidence, want: MaskedConfidence) -> list[str]:
    if not torch.equal(got.token, want.token):
        bad = (got.token != want.token).sum().item()
        return [f"{name}: {bad} token ids differ"]
    errs = {
        "prob": rel_err(got.prob, want.prob),
        "margin": rel_err(got.margin, want.margin, want.prob),
    }
    if want.entropy is not None:
        scale = torch.nan_to_num(want.entropy.abs(), nan=1.0).clamp(min=1.0)
        errs["entropy"] = rel_err(got.entropy, want.entropy, scale)
    return [f"{name}: {k} rel. error {e:.2e} > 1e-5" for k, e in errs.items() if e > 1e-5]


def check_block_attention() -> list[str]:
    failures = []
    prefix = torch.tensor(ATTN_CHECK_PREFIX, device=DEVICE)
    block = torch.tensor(ATTN_CHECK_BLOCK, device=DEVICE, dtype=torch.int32)
    b, length = len(prefix), max(ATTN_CHECK_BLOCK)
    s = int((prefix + length).max()) + 7
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        for head_dim in (64, 80, 128):
            for group in (1, 4, 7):
                hkv = 2
                q = torch.randn(b, hkv * group, length, head_dim, device=DEVICE).to(dtype)
                k = torch.randn(b, s, hkv, head_dim, device=DEVICE).to(dtype).transpose(1, 2)
                v = torch.randn(b, s, hkv, head_dim, device=DEVICE).to(dtype).transpose(1, 2)
                got = block_attention(q, k, v, prefix, block, backend="triton")
                want = block_attention(
                    q.float(), k.float(), v.float(), prefix, block, backend="torch"
                )
                tol = 1e-5 if dtype == torch.float32 else 1e-2
                name = f"block_attention D={head_dim} group={group} {dtype}"
                if not torch.isfinite(got).all():
                    failures.append(f"{name}: non-finite output")
                for row, (p, n) in enumerate(zip(prefix.tolist(), block.tolist(), strict=True)):
                    if n == 0:
                        continue
                    vmax = v[row, :, : p + n].float().abs().amax(dim=(1, 2))
                    scale = vmax.repeat_interleave(group)[:, None, None]
                    err = rel_err(got[row, :, :n].float(), want[row, :, :n], scale)
                    if err > tol:
                        failures.append(f"{name} row {row}: rel. error {err:.2e} > {tol:g}")
    return failures


def xgrammar_baseline(logits: torch.Tensor, bitmask: torch.Tensor) -> Callable[[], object] | str:
    try:
        xgr = importlib.import_module("xgrammar")
    except ImportError:
        return "not installed"
    work = logits.clone()  # masked in place; masking again is idempotent, so reuse is fair

    def run() -> object:
        xgr.apply_token_bitmask_inplace(work, bitmask)
        probs = torch.softmax(work.float(), dim=-1)
        return probs.topk(2, dim=-1)

    return run


def masked_confidence_case(
    timer: Timer, copy_bw: float, n: int, v: int, dtype: torch.dtype, entropy: bool
) -> tuple[list[list[str]], float]:
    """Table rows for one shape, and the Triton kernel's share of the copy bandwidth."""
    logits = torch.randn(n, v, device=DEVICE).to(dtype)
    bitmask = random_bitmask(n, v)
    moved = logits.numel() * logits.element_size() + bitmask.numel() * 4 + n * (16 + 4 * entropy)
    triton_call = functools.partial(
        masked_confidence, logits, bitmask, entropy=entropy, backend="triton"
    )
    runs: dict[str, Callable[[], object] | str] = {
        "triton, CUDA graph replay": triton_call,
        "triton, eager call": triton_call,
        "torch backend": lambda: masked_confidence(
            logits, bitmask, entropy=entropy, backend="torch"
        ),
        "torch reference": lambda: masked_confidence_ref(logits, bitmask, None, v, entropy),
        "xgrammar mask + softmax + top-2": xgrammar_baseline(logits, bitmask),
    }
    shape = f"{n}×{v} {str(dtype).removeprefix('torch.')}{' +entropy' if entropy else ''}"
    rows, share = [], math.nan
    for name, fn in runs.items():
        if isinstance(fn, str):
            rows.append([shape, name, fn, "", "", ""])
            continue
        ms = timer.graphed(fn) if "graph" in name else timer(fn)
        bw = moved / (ms * 1e-3) / GB
        share = bw / copy_bw if name == "triton, CUDA graph replay" else share
        rows.append(
            [
                shape,
                name,
                f"{ms * 1e3:.1f}",
                f"{moved / 1e6:.1f}",
                f"{bw:.0f}",
                f"{100 * bw / copy_bw:.0f}%",
            ]
        )
    return rows, share


def bench_masked_confidence(timer: Timer, copy_bw: float, target: dict[str, float]) -> str:
    rows = []
    for i, case in enumerate(MC_CASES):
        case_rows, share = masked_confidence_case(timer, copy_bw, *case)
        rows += case_rows
        if i == 0:
            target["masked_confidence"] = share
    header = ["logits", "implementation", "median µs", "MB moved", "GB/s", "of copy BW"]
    return table(header, rows)


def sweep_masked_confidence(timer: Timer, copy_bw: float, target: dict[str, float]) -> str:
    """The fastest tile configurations at the target shape, each timed under graph replay."""
    from decide.kernels.masked_confidence_triton import (
        ConfidenceConfig,
        launch_config,
        masked_confidence_triton,
    )

    n, v, dtype, _ = MC_CASES[0]
    logits = torch.randn(n, v, device=DEVICE).to(dtype)
    bitmask = random_bitmask(n, v)
    out = masked_confidence(logits, bitmask, backend="triton")
    moved = logits.numel() * logits.element_size() + bitmask.numel() * 4 + n * 16
    default = launch_config(n, v, logits.device)
    results: list[tuple[float, list[str], float]] = []

    timed: list[ConfidenceConfig] = []

    def time_config(cfg: ConfidenceConfig) -> None:
        timed.append(cfg)
        run = functools.partial(masked_confidence_triton, logits, bitmask, None, v, out, config=cfg)
        try:
            ms = timer.graphed(run)
        except Exception as exc:  # a config that does not compile is a row of the table
            results.append((math.inf, [*map(str, cfg), f"failed: {str(exc)[:60]}", ""], 0.0))
            return
        share = moved / (ms * 1e-3) / GB / copy_bw
        mark = " (default)" if cfg == default else ""
        row = [*map(str, cfg), f"{ms * 1e3:.1f}{mark}", f"{100 * share:.0f}%"]
        results.append((ms, row, share))

    # Small tiles on few warps won the first H200 sweep (2026-12-04; pipelining depth made no
    # difference), so the grid centres there, for both the shared-shift and lane-shift kernels.
    for lane, block_w, warps, splits, unroll in itertools.product(
        (False, True), (16, 32, 64), (1, 2, 4), (2, 4, 8, 16), (1, 2, 4)
    ):
        if 4 <= block_w // warps <= 32:  # tokens per thread per tile: not too few or too many
            time_config(ConfidenceConfig(block_w, splits, warps, unroll, lane_shift=lane))
    if default not in timed:
        time_config(default)
    results.sort(key=lambda r: r[0])
    target["masked_confidence sweep best"] = results[0][2]
    header = ["BLOCK_W", "splits", "warps", "unroll", "lane shift", "median µs (graph)",
              "of copy BW"]  # fmt: skip
    fastest = {
        lane: next((r for _, r, _ in results if r[4] == str(lane)), None) for lane in (False, True)
    }
    summary = "".join(
        f"\n- fastest {'lane-shift' if lane else 'shared-shift'} kernel: "
        + (" / ".join(r) if r else "none ran")
        for lane, r in fastest.items()
    )
    return table(header, [r for _, r, _ in results[:16]]) + "\n" + summary


def attention_inputs(
    b: int, length: int, prefix: int, hq: int, hkv: int, head_dim: int, ragged: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """bf16 q [B, Hq, L, D], k, v [B, Hkv, prefix + L, D] and prefix lengths (ragged: random)."""
    prefix_lens = torch.full((b,), prefix, device=DEVICE)
    if ragged:
        prefix_lens = torch.randint(0, prefix + 1, (b,), device=DEVICE)
    s = prefix + length
    bf16 = {"device": DEVICE, "dtype": torch.bfloat16}
    q = torch.randn(b, hq, length, head_dim, **bf16)
    k = torch.randn(b, hkv, s, head_dim, **bf16)
    v = torch.randn(b, hkv, s, head_dim, **bf16)
    return q, k, v, prefix_lens


def block_attention_case(
    timer: Timer, b: int, length: int, prefix: int, hq: int, hkv: int, head_dim: int, ragged: bool
) -> tuple[list[list[str]], float]:
    """Table rows for one shape, and Triton's speed-up over the faster masked SDPA."""
    q, k, v, prefix_lens = attention_inputs(b, length, prefix, hq, hkv, head_dim, ragged)
    s = k.shape[2]
    kv_len = prefix_lens + length  # [B]
    mask = (torch.arange(s, device=DEVICE)[None, :] < kv_len[:, None])[:, None, None, :]
    k_full = k.repeat_interleave(hq // hkv, dim=1)  # expanded outside the timed region
    v_full = v.repeat_interleave(hq // hkv, dim=1)
    gqa = hq != hkv
    runs = {
        "triton": lambda: block_attention(q, k, v, prefix_lens, backend="triton"),
        "SDPA + mask (enable_gqa)": lambda: F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, enable_gqa=gqa
        ),
        "SDPA + mask (kv expanded)": lambda: F.scaled_dot_product_attention(
            q, k_full, v_full, attn_mask=mask
        ),
    }
    if not ragged:  # every row has exactly S valid keys: flash needs no mask at all
        runs["flash SDPA, no mask (bound)"] = lambda: F.scaled_dot_product_attention(
            q, k, v, enable_gqa=gqa
        )
    times = {name: timer(fn) for name, fn in runs.items()}
    masked = min(t for name, t in times.items() if name.startswith("SDPA"))
    valid = int(kv_len.sum())
    flops = 4 * hq * length * valid * head_dim
    moved = (2 * q.numel() + 2 * hkv * valid * head_dim) * q.element_size()
    shape = f"B={b} L={length} prefix={'≤' if ragged else ''}{prefix} {hq}/{hkv}×{head_dim}"
    rows = [
        [
            shape,
            name,
            f"{ms * 1e3:.0f}",
            f"{flops / (ms * 1e-3) / 1e12:.0f}",
            f"{moved / (ms * 1e-3) / GB:.0f}",
            f"{masked / ms:.2f}×",
        ]
        for name, ms in times.items()
    ]
    return rows, masked / times["triton"]


def bench_block_attention(timer: Timer, target: dict[str, float]) -> str:
    rows = []
    for i, case in enumerate(ATTN_CASES):
        case_rows, speedup = block_attention_case(timer, *case)
        rows += case_rows
        if i == 0:
            target["block_attention"] = speedup
    header = ["shape (bf16)", "implementation", "median µs", "TFLOP/s", "GB/s", "vs masked SDPA"]
    return table(header, rows)


def sweep_block_attention(timer: Timer) -> str:
    from decide.kernels.block_attention_triton import AttentionConfig, block_attention_triton

    q, k, v, prefix_lens = attention_inputs(*ATTN_CASES[0])
    out = torch.empty_like(q)
    results = []
    for block_m, block_n, warps, stages in [
        (64, 64, 4, 3),
        (64, 128, 4, 3),
        (128, 64, 4, 3),
        (128, 64, 8, 2),
        (128, 64, 8, 3),
        (128, 64, 8, 4),
        (128, 128, 8, 2),
        (128, 128, 8, 3),
        (256, 64, 8, 2),
    ]:
        cfg = AttentionConfig(block_m, block_n, warps, stages)
        run = functools.partial(
            block_attention_triton, q, k, v, prefix_lens, None, q.shape[-1] ** -0.5, out, config=cfg
        )
        try:
            ms = timer(run)
        except RuntimeError as exc:  # e.g. out of shared memory for this tile size
            results.append((math.inf, [*map(str, cfg), f"failed: {str(exc)[:60]}"]))
            continue
        results.append((ms, [*map(str, cfg), f"{ms * 1e3:.0f}"]))
    results.sort(key=lambda r: r[0])
    return table(["BLOCK_M", "BLOCK_N", "warps", "stages", "median µs"], [r for _, r in results])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sweep",
        nargs="?",
        const="all",
        choices=("all", "masked_confidence"),
        help="also time other tile configs (of both kernels, or of masked_confidence alone)",
    )
    parser.add_argument("--quick", action="store_true", help="10 timed runs instead of 50")
    parser.add_argument(
        "--only", choices=("masked_confidence", "block_attention"), help="time one kernel only"
    )
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("benchmarks/kernels.py needs a CUDA GPU and found none: nothing was measured.")
        return 0
    import triton

    props = torch.cuda.get_device_properties(0)
    print(
        f"# {props.name}, {props.multi_processor_count} SMs, torch {torch.__version__}, "
        f"triton {triton.__version__}\n"
    )

    mc_on, ba_on = args.only != "block_attention", args.only != "masked_confidence"
    failures = (check_masked_confidence() if mc_on else []) + (
        check_block_attention() if ba_on else []
    )
    print("## Correctness on this GPU (Triton against the reference, awkward shapes)\n")
    print("all checks passed\n" if not failures else "\n".join(f"- FAIL {f}" for f in failures))

    timer = Timer(iters=10 if args.quick else 50)
    copy_bw, read_bw = bandwidth_ceiling(timer)
    print("## Bandwidth ceiling\n")
    print(f"copy {copy_bw:.0f} GB/s (read + write), read-only {read_bw:.0f} GB/s\n")
    target: dict[str, float] = {}
    if mc_on:
        print("## masked_confidence\n")
        print(bench_masked_confidence(timer, copy_bw, target) + "\n")
    if ba_on:
        print("## block_attention\n")
        print(bench_block_attention(timer, target) + "\n")
    if args.sweep and mc_on:
        print(f"## masked_confidence configs at {MC_CASES[0][:3]} (fastest 16)\n")
        print(sweep_masked_confidence(timer, copy_bw, target) + "\n")
    if args.sweep == "all" and ba_on:
        print(f"## block_attention configs at {ATTN_CASES[0]}\n")
        print(sweep_block_attention(timer) + "\n")

    print("## Targets\n")
    if mc_on:
        mc = target["masked_confidence"]
        print(
            f"- masked_confidence 256×151936 bf16, default config, graph replay: {100 * mc:.0f}% "
            f"of copy bandwidth (target ≥ 70%): {'met' if mc >= 0.7 else 'NOT met'}"
        )
    if "masked_confidence sweep best" in target:
        best = target["masked_confidence sweep best"]
        print(
            f"- masked_confidence, fastest swept config: {100 * best:.0f}% of copy bandwidth "
            f"(target ≥ 70%): {'met' if best >= 0.7 else 'NOT met'}"
        )
    if ba_on:
        ba = target["block_attention"]
        print(
            f"- block_attention B=32 L=64 prefix 2048: {ba:.2f}× masked SDPA "
            f"(target ≥ 1.5×): {'met' if ba >= 1.5 else 'NOT met'}"
        )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
