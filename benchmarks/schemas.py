"""Benchmark: compile time per question and mask refresh time per denoising step for one 8-slot
block, `decide.schemas` against outlines-core's left-to-right `Guide` on the same schemas, with the
GPT-2 vocabulary (50,257 tokens) and a 151,936-token vocabulary (GPT-2 plus synthetic extra tokens:
concatenations of GPT-2 tokens and CJK characters, seeded).

Run: `python benchmarks/schemas.py [--docs 30]`. Prints tables; asserts nothing about timings.
Our mask step = `fill_bitmask` for all 8 slots plus committing two tokens per slot (the sampler's
work per step); outlines' step = `write_mask_into` for the 8 guides plus one `advance` each (it can
only decide the next position, so it does strictly less per step). outlines-core builds run in a
subprocess with a time limit because bounded string lengths make it blow up.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import random
import statistics
import time
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer

from decide.engine.constraints import bitmask_width
from decide.schemas import Vocabulary, compile_slot
from decide.schemas import shapes as shapes_module

GPT2 = Path(__file__).parents[1] / "tests" / "data" / "gpt2" / "tokenizer.json"
QUESTIONS = {
    "sentiment": {"enum": ["positive", "negative", "neutral", "mixed"]},
    "urgent": {"type": "boolean"},
    "score": {"type": "integer", "minimum": 0, "maximum": 100},
    "amount": {"type": "integer", "minimum": 0, "maximum": 20000},
    "city": {"type": "string", "maxLength": 20},
    "visit_date": {"type": "string", "format": "date"},
    "category": {
        "anyOf": [{"enum": ["billing", "shipping", "product", "other"]}, {"type": "null"}]
    },
    "ratio": {"type": "number", "minimum": 0, "maximum": 1},
}
OUTLINES_LIMIT_S = 20.0


def gpt2_surfaces() -> tuple[list[bytes | None], Tokenizer]:
    tok = Tokenizer.from_file(str(GPT2))
    vocab = Vocabulary.from_tokenizer(tok)
    surfaces: list[bytes | None] = [None] * vocab.size
    for t, data in zip(vocab.var_token.tolist(), vocab.var_bytes, strict=True):
        surfaces[t] = data
    return surfaces, tok


def big_surfaces(base: list[bytes | None], size: int = 151_936) -> list[bytes | None]:
    rng = random.Random(0)
    seen = {s for s in base if s}
    out = list(base)
    words = [s for s in base if s]
    cjk = [chr(cp).encode() for cp in range(0x4E00, 0x9FFF)]
    while len(out) < size:
        s = (
            rng.choice(cjk) + rng.choice(cjk)
            if rng.random() < 0.2
            else (rng.choice(words) + rng.choice(words))
        )
        if s not in seen:
            seen.add(s)
            out.append(s)
    return out


def ours_compile(vocab: Vocabulary, schema: dict, repeats: int = 5) -> tuple[float, object]:
    times = []
    slot = None
    for _ in range(repeats):
        vocab.__dict__.pop("_slots", None)
        shapes_module._CACHE.clear()
        t = time.perf_counter()
        slot = compile_slot(schema, vocab)
        times.append(time.perf_counter() - t)
    return statistics.median(times), slot


def simulate(slots: list, filler: int, width: int, docs: int, seed: int = 0):
    """Per step: fill the masks of all open slots, then commit two allowed tokens per slot at
    random open positions (the filler half the time when allowed), as a sampler would."""
    rng = np.random.default_rng(seed)
    fill_cold, fill_warm, commit_warm, nfe, refused = [], [], [], [], 0
    for doc in range(docs):
        states = [s.new_constraint(filler) for s in slots]
        outs = [torch.empty((s.length, width), dtype=torch.int32) for s in slots]
        steps = 0
        while not all(s.is_complete() for s in states):
            live = [(s, o) for s, o in zip(states, outs, strict=True) if not s.is_complete()]
            t = time.perf_counter()
            for s, o in live:
                s.fill_bitmask(o)
            t_fill = time.perf_counter() - t
            picks = []
            for s, o in live:
                open_pos = np.nonzero(s.tokens < 0)[0]
                for p in rng.choice(open_pos, size=min(2, len(open_pos)), replace=False):
                    bits = np.unpackbits(o[p].numpy().view(np.uint8), bitorder="little")
                    allowed = np.nonzero(bits)[0]
                    pick = (
                        filler
                        if filler in allowed and rng.random() < 0.5
                        else (int(rng.choice(allowed)))
                    )
                    picks.append((s, int(p), pick))
            t = time.perf_counter()
            for s, p, pick in picks:
                refused += not s.commit(p, pick)
            t_commit = time.perf_counter() - t
            (fill_cold if doc == 0 else fill_warm).append(t_fill)
            if doc:
                commit_warm.append(t_commit)
            steps += 1
        for s in states:
            s.decode()
        nfe.append(steps)
    return fill_cold, fill_warm, commit_warm, nfe, refused


def _outlines_worker(surfaces, eos, questions, queue) -> None:
    import outlines_core as oc
    from outlines_core.json_schema import build_regex_from_schema

    mapping: dict[bytes, list[int]] = {}
    for i, s in enumerate(surfaces):
        if s and i != eos:
            mapping.setdefault(s, []).append(i)
    vocab = oc.Vocabulary(eos, mapping)
    for name, schema in questions.items():
        t = time.perf_counter()
        index = oc.Index(build_regex_from_schema(json.dumps(schema), whitespace_pattern=""), vocab)
        queue.put((name, time.perf_counter() - t, index))


def outlines_compile(surfaces, eos):
    """Per question: (seconds or None if over the limit, Index or None)."""
    ctx = mp.get_context("fork")
    out = {}
    for name, schema in QUESTIONS.items():
        queue = ctx.Queue()
        proc = ctx.Process(target=_outlines_worker, args=(surfaces, eos, {name: schema}, queue))
        proc.start()
        try:
            _, seconds, index = queue.get(timeout=OUTLINES_LIMIT_S)
            out[name] = (seconds, index)
        except Exception:
            out[name] = (None, None)
        proc.kill()
        proc.join()
    return out


def outlines_steps(indexes: list, width: int, steps: int = 200, seed: int = 0) -> list[float]:
    import outlines_core as oc

    rng = random.Random(seed)
    guides = [oc.Guide(i) for i in indexes]
    mask = torch.empty((1, width), dtype=torch.int32)
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        for g in guides:
            if g.is_finished():
                g.reset()  # keep all 8 guides busy: a finished field starts a new document
            g.write_mask_into(mask.data_ptr(), mask.numel(), 4)
            g.advance(rng.choice(g.get_tokens()), return_tokens=False)
        times.append(time.perf_counter() - t)
    return times


def ms(x: float | None) -> str:
    return "timeout" if x is None else f"{x * 1000:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=30)
    args = parser.parse_args()
    torch.set_num_threads(1)
    base, _ = gpt2_surfaces()
    eos = 50256
    for label, surfaces in (("GPT-2 50,257", base), ("151,936 (GPT-2 + synthetic)", None)):
        surfaces = surfaces if surfaces is not None else big_surfaces(base)
        t = time.perf_counter()
        vocab = Vocabulary.from_bytes(surfaces, excluded=[eos])
        build = time.perf_counter() - t
        print(f"\n## vocabulary {label}: {vocab.size} tokens, Vocabulary built in {build:.2f} s")
        theirs = outlines_compile(surfaces, eos)
        print(
            f"{'question':<12} {'ours ms':>8} {'slot L':>6} {'states':>6} {'classes':>7} "
            f"{'outlines ms':>11}"
        )
        slots = []
        for name, schema in QUESTIONS.items():
            seconds, slot = ours_compile(vocab, schema)
            slots.append(slot)
            auto = slot.automaton
            print(
                f"{name:<12} {ms(seconds):>8} {slot.length:>6} {auto.n_states:>6} "
                f"{auto.n_classes:>7} {ms(theirs[name][0]):>11}"
            )
        width = bitmask_width(vocab.size)
        cold, warm, commits, nfe, refused = simulate(slots, eos, width, args.docs)
        idx = [theirs[n][1] for n in QUESTIONS if theirs[n][1] is not None]
        theirs_steps = outlines_steps(idx, width)
        print(
            f"per denoising step, whole 8-slot block ({args.docs} documents, "
            f"{statistics.mean(nfe):.1f} steps each, {refused} commits refused):"
        )
        print(
            f"  ours fill_bitmask, first document  median {ms(statistics.median(cold))} ms, "
            f"max {ms(max(cold))} ms"
        )
        print(
            f"  ours fill_bitmask, later documents median {ms(statistics.median(warm))} ms, "
            f"p90 {ms(float(np.percentile(warm, 90)))} ms, max {ms(max(warm))} ms"
        )
        print(
            f"  ours commit (2 per slot)           median {ms(statistics.median(commits))} ms, "
            f"p90 {ms(float(np.percentile(commits, 90)))} ms"
        )
        print(
            f"  outlines Guide mask + advance ({len(idx)} slots that compiled, next position "
            f"only) median {ms(statistics.median(theirs_steps))} ms"
        )


if __name__ == "__main__":
    main()
