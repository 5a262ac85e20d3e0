"""Benchmark: where a denoising step's time goes, and the share spent on token masks, at
vocabularies of 50,257 (GPT-2) and 151,936 tokens (GPT-2 plus synthetic tokens, the vocabulary of
`benchmarks/schemas.py`; the model's embedding and logits are that wide).

The production sampler runs unchanged; a subclass times the pieces of each step from outside:
the model's forward, the logits of the dense (position-by-position) slots, whole-option scoring
of finite slots (their candidate tokens' logits and the prefix-tree softmax), `bitmasks`
(`fill_bitmask` of every touched slot plus assembling the `[N, ceil(V/32)]` int32 rows),
`masked_confidence` (on CPU its torch backend: an additive mask bias, one softmax, two maxima),
commits (the constraints' reachability updates included), and the rest (batch assembly,
bookkeeping). Mask work = `bitmasks` + `masked_confidence`. To separate what masks add from what
any confidence-based decoder pays, each `masked_confidence` call is followed by an untimed-in-step
unmasked arg-max + log-sum-exp over the same logits (what the LLaDA loop computes), reported as
"mask work beyond unmasked". Each model runs twice: with the production backend, and with
`masked_confidence` running the reference instead (`masked_confidence_ref`: a boolean masked copy,
arg-max, top-2, log-sum-exp; the CPU backend before 2026-12-04), whose mask work is the column
"mask work, reference backend".

Models are random (every slot stays uncertain, so each step scores every open position: the most
mask work per step there can be) in the bundled model's shape and the tiny LLaMA-style shape, plus
the trained bundled model at its own 30,522-token vocabulary when installed.

    python benchmarks/constraint_overhead.py
    python benchmarks/constraint_overhead.py --docs 4 --models bert
    python benchmarks/constraint_overhead.py --models qwen05 --docs 4 --batch-size 4   # 0.5B shape
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import common
import torch

import decide.engine.commit as commit_module
import decide.engine.sampler as sampler_module
import decide.engine.scoring as scoring_module
from decide.engine import load_model
from decide.engine.commit import CommitPolicy
from decide.engine.random_checkpoint import write_random_checkpoint
from decide.engine.sampler import Sampler, SamplerConfig
from decide.kernels import masked_confidence
from decide.kernels.masked_confidence_ref import masked_confidence_ref

PIECES = ("forward", "logits", "options", "bitmask", "masked_confidence", "commit")


class _TimedModel:
    """The model, with its forward and dense logits timed; everything else passes through."""

    def __init__(self, model, watch: common.Stopwatch) -> None:
        self._model = model
        self._watch = watch

    def __getattr__(self, name: str):
        return getattr(self._model, name)

    def __call__(self, *args, **kwargs):
        with self._watch("forward"):
            return self._model(*args, **kwargs)

    def forward_queries(self, *args, **kwargs):  # the in-block cache's steps
        with self._watch("forward"):
            return self._model.forward_queries(*args, **kwargs)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        with self._watch("logits"):
            return self._model.logits(hidden)


class TimedSampler(Sampler):
    def __init__(self, model, config: SamplerConfig, watch: common.Stopwatch) -> None:
        super().__init__(_TimedModel(model, watch), config)  # type: ignore[arg-type]
        self.watch = watch

    def _step(self, rows, cache, prefill):
        with self.watch("step"):
            return super()._step(rows, cache, prefill)


def _timed(watch: common.Stopwatch, piece: str, function):
    def timed(*args, **kwargs):
        with watch(piece):
            out = function(*args, **kwargs)
            # score_options is a generator: its work runs while it is consumed
            return list(out) if piece == "options" else out

    return timed


@contextlib.contextmanager
def timed_pieces(watch: common.Stopwatch, reference: bool = False) -> Iterator[None]:
    """Time the step's pieces where the sampler's modules call them (bitmasks and options in
    `scoring`/`sampler`, commits in `commit`), and each `masked_confidence` call followed by the
    unmasked equivalent on the same logits (recorded as "plain" and taken out of the step time)."""
    original = masked_confidence
    if reference:

        def original(logits, bitmask, rows=None, **kwargs):  # the CPU backend before 2026-12-04
            vocab = min(logits.shape[1], 32 * bitmask.shape[1])
            return masked_confidence_ref(logits, bitmask, rows, vocab, False)

    def timed(logits, bitmask, *args, **kwargs):
        with watch("masked_confidence"):
            out = original(logits, bitmask, *args, **kwargs)
        started = time.perf_counter()
        x = logits.float()
        best = x.max(-1).values
        torch.exp(best - torch.logsumexp(x, -1))
        watch.add("plain", time.perf_counter() - started)
        return out

    patches = [
        (scoring_module, "masked_confidence", timed),
        (commit_module, "masked_confidence", timed),
        (scoring_module, "bitmasks", _timed(watch, "bitmask", scoring_module.bitmasks)),
        (sampler_module, "score_options", _timed(watch, "options", sampler_module.score_options)),
        (CommitPolicy, "commit", _timed(watch, "commit", CommitPolicy.commit)),
    ]
    saved = [(where, name, getattr(where, name)) for where, name, _ in patches]
    for where, name, value in patches:
        setattr(where, name, value)
    try:
        yield
    finally:
        for where, name, value in saved:
            setattr(where, name, value)


def measure(
    loaded, widen: bool, args: argparse.Namespace, reference: bool = False
) -> tuple[common.Stopwatch, dict]:
    eng = common.engine(loaded, args.batch_size)
    if widen:
        common.widen_vocabulary(eng)
    docs = common.documents(args.docs, args.seed, questions=8)
    items = common.items(eng, docs)
    list(eng.decide(items[:2]))  # warm-up (untimed): mask caches, allocator
    watch = common.Stopwatch()
    eng.sampler = TimedSampler(loaded.model, eng.sampler.config, watch)
    with timed_pieces(watch, reference):
        started = time.perf_counter()
        decisions = list(eng.decide(items))
        total = time.perf_counter() - started
    info = {
        "total": total,
        "ok": sum(d.ok for d in decisions),
        "docs": len(decisions),
        "nfe": sum(d.nfe for d in decisions) / len(decisions),
    }
    return watch, info


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--models", nargs="*", default=["bert", "llada", "bundled"],
        choices=["bert", "llada", "qwen05", "bundled"],
        help="qwen05: Qwen2.5-0.5B's shape, 24 layers (slow on CPU: use --docs 4)",
    )  # fmt: skip
    parser.add_argument("--docs", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    common.set_threads(args.threads)
    print(f"Machine: {common.describe_machine(args.threads)}")
    print(f"{args.docs} documents × 8 questions, batch {args.batch_size}, threshold 0.9\n")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        runs = []
        for name in args.models:
            if name == "bundled":
                path = common.bundled()
                if path is None:
                    print("- bundled model: not installed, skipped")
                    continue
                runs.append(("bundled (trained)", path, False))
                continue
            model_type = "bert" if name == "bert" else "llada"
            shape, label = {
                "bert": (common.BUNDLED_SHAPE, "BERT 6×384 (random)"),
                "llada": (common.TINY, "tiny llada (random)"),
                "qwen05": ({**common.QWEN05_LAYER, "num_layers": common.QWEN05_LAYERS},
                           "LLaMA-style 24×896, Qwen2.5-0.5B shape (random)"),
            }[name]  # fmt: skip
            for wide in (False, True):
                where = Path(tmp) / f"{name}-{wide}"
                extra = common.wide_config(model_type) if wide else None
                path = write_random_checkpoint(
                    where, model_type, tokenizer_json=common.GPT2, extra_config=extra, **shape
                )
                runs.append((label, path, wide))
        for label, path, wide in runs:
            loaded = load_model(path)
            watch, info = measure(loaded, wide, args)
            ref_watch, _ = measure(loaded, wide, args, reference=True)
            logits_width = loaded.config.embedding_size
            vocab = f"{common.WIDE_VOCAB:,}" if wide else f"{loaded.tokenizer.vocab_size:,}"
            step = watch.get("step") - watch.get("plain")
            ref_step = ref_watch.get("step") - ref_watch.get("plain")
            ref_mask = ref_watch.get("bitmask") + ref_watch.get("masked_confidence")
            parts = [watch.get(p) for p in PIECES]
            other = step - sum(parts)
            mask = watch.get("bitmask") + watch.get("masked_confidence")
            rows.append(
                [
                    label,
                    f"{vocab} ({logits_width:,} logits)",
                    watch.calls.get("step", 0),
                    f"{1000 * step / max(watch.calls.get('step', 1), 1):.0f}",
                    *[f"{100 * p / step:.1f}" for p in parts],
                    f"{100 * other / step:.1f}",
                    f"**{100 * mask / step:.1f} %**",
                    f"{100 * (mask - watch.get('plain')) / step:.1f} %",
                    f"{100 * ref_mask / ref_step:.1f} %",
                    f"{100 * (info['total'] - watch.get('step')) / info['total']:.0f} %",
                    f"{info['ok']}/{info['docs']}",
                ]
            )
            print(f"- {label}, vocabulary {vocab}: done ({info['nfe']:.1f} forwards/document)")
    print()
    print(
        common.table(
            [
                "model",
                "vocabulary",
                "steps",
                "ms / step",
                "forward %",
                "dense logits %",
                "option scoring %",
                "bitmasks %",
                "masked_confidence %",
                "commits %",
                "other %",
                "mask work",
                "mask work beyond unmasked",
                "mask work, reference backend",
                "time outside steps",
                "ok",
            ],
            rows,
            "ll" + "r" * 14,
        )
    )
    print(
        "\nShares are of the summed step time. Target: mask work ≤ 5 % of step time. "
        "'time outside steps' is the share of the whole run spent packing, admitting rows, "
        "moving caches, decoding and validating values."
    )


if __name__ == "__main__":
    main()
