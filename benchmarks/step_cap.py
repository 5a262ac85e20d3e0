"""Benchmark: the step-cap fill (`max_steps`) as it is, against the implementation before
2026-12-01 (kept below as the baseline: every open position of every slot scored again after
each commit, one mask fill and one `masked_confidence` call per slot and round).

When a block reaches `decoding.max_steps`, the sampler commits the rest of it greedily in rounds
(`Sampler._commit_all`): each slot commits its most confident open position. Now a position is
scored again only when its mask changed, and independent slots are scored together. Both run
here in one process on the same documents and decoding settings, and their answers are checked
equal. Held-out synthetic documents, nine questions each (one block of 5 and one of 4), on a
tiny random LLaDA with the GPT-2 vocabulary (50,257 tokens; its forward is cheap, so the fill is
visible) and on the bundled model.

    python benchmarks/step_cap.py
    python benchmarks/step_cap.py --docs 8 --max-steps 1 --models tiny
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import common
import torch

from decide.engine import load_model
from decide.engine.commit import CommitPolicy
from decide.engine.constraints import InfeasibleSlot
from decide.kernels import masked_confidence


def baseline_commit_all(self, row, positions: list[int], logits: torch.Tensor) -> None:
    """`CommitPolicy.commit_all` (then `Sampler._commit_all`) before 2026-12-01."""
    remaining = dict(zip(positions, range(len(positions)), strict=True))
    while remaining:
        by_slot: dict[int, list[int]] = {}
        for pos in remaining:
            by_slot.setdefault(row.masked[pos][0], []).append(pos)
        for slot_index, slot_positions in by_slot.items():
            constraint = row.slots()[slot_index].constraint
            buffer = torch.zeros((constraint.length, self.width), dtype=torch.int32)
            constraint.fill_bitmask(buffer)
            masks = buffer[[row.masked[p][1] for p in slot_positions]]
            rows = torch.tensor([remaining[p] for p in slot_positions])
            best = masked_confidence(logits, masks.to(logits.device), rows.to(logits.device))
            k = int(torch.argmax(best.prob))
            pos = slot_positions[k]
            if not self.commit_position(row, pos, int(best.token[k]), float(best.prob[k])):
                raise InfeasibleSlot(f"slot {slot_index}: its best allowed token was rejected")
            del remaining[pos]


def run(engine, items) -> tuple[float, dict]:
    started = time.perf_counter()
    decisions = {d.doc_id: d for d in engine.decide(items)}
    return time.perf_counter() - started, decisions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=64)
    parser.add_argument("--max-steps", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--models", nargs="+", default=["tiny", "bundled"])
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    docs = common.documents(args.docs, seed=7, questions=9)
    current = CommitPolicy.commit_all
    rows = []
    with tempfile.TemporaryDirectory() as where:
        for name in args.models:
            path = common.tiny_checkpoint(Path(where), "llada") if name == "tiny" else None
            loaded = load_model(path) if path else common.load_trained(None)
            engine = common.engine(loaded, args.batch_size)
            for steps in args.max_steps:
                common.set_decoding(engine, args.batch_size, max_steps=steps)
                items = common.items(engine, docs)
                times: dict[bool, list[float]] = {False: [], True: []}
                answers = {}
                run(engine, items[:4])  # warm: masks, caches
                for _ in range(args.reps):
                    for now in (False, True):
                        CommitPolicy.commit_all = current if now else baseline_commit_all
                        seconds, decisions = run(engine, items)
                        times[now].append(seconds)
                        answers[now] = {k: d.answers_json for k, d in decisions.items()}
                CommitPolicy.commit_all = current
                assert answers[False] == answers[True], "the new fill changed an answer"
                slow, fast = min(times[False]), min(times[True])
                ok = sum(v is not None for v in answers[True].values())
                rows.append((name, steps, f"{ok}/{len(items)}", f"{1000 * slow / len(items):.1f}",
                             f"{1000 * fast / len(items):.1f}", f"{slow / fast:.2f}×"))  # fmt: skip
    print(f"{args.docs} held-out documents, 9 questions each, batch {args.batch_size}, best of "
          f"{args.reps}; {common.describe_machine(torch.get_num_threads())}\n")  # fmt: skip
    header = ["model", "max_steps", "answered", "before ms/doc", "now ms/doc", "speed-up"]
    print(common.table(header, rows))


if __name__ == "__main__":
    main()
