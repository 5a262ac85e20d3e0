"""Benchmark: scoring finite slots' whole options, every slot of a batch in one tree walk
(`decide.engine.scoring._trie_scores`) against one walk per slot and prefix node (the
implementation before 2026-12-01, kept below as the baseline).

A finite slot (enum, boolean, small integer range, short pattern) is decided as a whole option:
each option's probability is read through the options' prefix tree from the logits of their own
tokens. The options here are real: the schemas are compiled against the GPT-2 vocabulary of the
test data, and each slot's options are what `SlotState.options()` gives with nothing committed.
The logits are random (the tree walk does not depend on them). Both implementations get the same
inputs, their results are checked equal, and the table gives milliseconds per denoising step for
a batch of documents with one slot of the schema each, eight slots per document.

    python benchmarks/option_scoring.py
    python benchmarks/option_scoring.py --batch-sizes 1 16 --reps 5
"""

from __future__ import annotations

import argparse
import time

import common
import torch
from tokenizers import Tokenizer

from decide.engine.scoring import _trie_scores
from decide.schemas import Vocabulary, compile_slot

SCHEMAS = {
    "boolean": {"type": "boolean"},
    "enum of 4": {"enum": ["auto", "home", "health", "travel"]},
    "clause ^[A-C][0-9]$ (30)": {"type": "string", "pattern": "^[A-C][0-9]$"},
    "integer 0..90 (91)": {"type": "integer", "minimum": 0, "maximum": 90},
    "integer 0..120 (121)": {"type": "integer", "minimum": 0, "maximum": 120},
}


def per_slot_walk(
    scores: torch.Tensor, columns: list[tuple[int, int, torch.Tensor]], count: int
) -> torch.Tensor:
    """The baseline: one slot at a time, one prefix node at a time."""
    total = torch.zeros(count)
    groups: dict[tuple[int, ...], list[int]] = {(): list(range(count))}
    for first, width, where in columns:
        column = scores[first : first + width]
        branches: dict[tuple[int, ...], list[int]] = {}
        for prefix, members in groups.items():
            tokens = where[members]
            present = torch.unique(tokens)
            if len(present) > 1:
                total[members] += column[tokens] - torch.logsumexp(column[present], 0)
            for k, t in zip(members, tokens.tolist(), strict=True):
                branches.setdefault((*prefix, t), []).append(k)
        groups = branches
    return total


def inputs(options: list[list[int]], slots: int, generator: torch.Generator):
    """Both implementations' inputs for `slots` copies of one slot's options, as the sampler
    numbers the (position, token) pairs: the baseline's per-slot columns and the batched pairs."""
    opts = torch.tensor(options)
    per_slot, pairs, trees, scores = [], [], [], []
    for slot in range(slots):
        columns, rows = [], [[] for _ in options]
        for j in range(opts.shape[1]):
            candidates, where = torch.unique(opts[:, j], return_inverse=True)
            columns.append((len(scores), len(candidates), where))
            for k, w in enumerate(where.tolist()):
                rows[k].append(len(scores) + w)
            scores.extend(torch.randn(len(candidates), generator=generator).tolist())
        per_slot.append(columns)
        pairs.extend(rows)
        trees.extend([slot] * len(options))
    return per_slot, torch.tensor(pairs), torch.tensor(trees), torch.tensor(scores)


def per_slot_walks(scores: torch.Tensor, per_slot: list, count: int) -> torch.Tensor:
    return torch.cat([per_slot_walk(scores, columns, count) for columns in per_slot])


def best_of(reps: int, fn, *args) -> float:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    common.set_threads(args.threads)
    print(common.describe_machine(args.threads))
    tokenizer = Tokenizer.from_file(str(common.GPT2))
    vocab = Vocabulary.from_tokenizer(tokenizer, excluded=[])
    filler = vocab.size  # an id past the vocabulary, as the engine's filler is
    generator = torch.Generator().manual_seed(0)
    rows = []
    for name, schema in SCHEMAS.items():
        state = compile_slot(schema, vocab).new_constraint(filler)
        options = state.options()
        assert options is not None, name
        for batch in args.batch_sizes:
            slots = batch * 8
            per_slot, pairs, trees, scores = inputs(options, slots, generator)
            want = per_slot_walks(scores, per_slot, len(options))
            got = _trie_scores(scores, pairs, trees)
            if not torch.allclose(got, want, atol=1e-4):
                raise SystemExit(f"{name}: the two walks disagree")
            old = best_of(args.reps, per_slot_walks, scores, per_slot, len(options))
            new = best_of(args.reps, _trie_scores, scores, pairs, trees)
            rows.append(
                (name, f"{len(options)} × {len(options[0])}", batch, slots,
                 f"{old * 1e3:.2f}", f"{new * 1e3:.2f}", f"{old / new:.1f}×")
            )  # fmt: skip
    header = ("schema", "options × tokens", "documents", "slots", "per-slot walk ms",
              "batched walk ms", "speed-up")  # fmt: skip
    print(common.table(header, rows))


if __name__ == "__main__":
    main()
