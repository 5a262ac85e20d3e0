"""Profile: where a decide step's time goes on the bundled model (or a tiny random one), per batch.

`--head-limit 0` scores every position through the full-vocabulary head (the path before the
restricted head); the default limit takes the restricted head where a mask allows few tokens.
`--in-block 0 1` runs without and with the in-block cache (`decoding.in_block_cache`);
`--max-steps 0 2` without and with a cap of 2 steps per block (`decoding.max_steps`);
`--grow-slots 0 1` without and with open-ended slots laid out short (`decoding.grow_slots`). The
script's defaults are not a job's (no cap, whole slots, both cache settings): `--in-block 1
--grow-slots 1 --max-steps 3` profiles a job's defaults.
Wraps the sampler's parts with CPU-time timers (one run per batch size, same documents, after a
warm-up): the trunk forward (`_trunk`: embeddings + layers over the window), the output head over
the full vocabulary (`logits`), the head restricted to candidate tokens (`token_logits`), the
slots' token masks (`_bitmasks`: `fill_bitmask` per touched slot), `masked_confidence`, option
scoring (`_score_options` minus its `token_logits`), commits (`_commit`), and the rest of the
step (Python per-row work: windows, ids, splitting slots). Padding waste is the share of window
positions a forward computes for padding (rows shorter than the widest row of their group).

    python benchmarks/step_profile.py --docs 16 --batch-sizes 1 16 --in-block 0 1
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import common

from decide.engine import commit, load_model, scoring
from decide.engine import sampler as sampler_module
from decide.engine.scoring import RESTRICTED_LIMIT

TIMES: collections.Counter[str] = collections.Counter()
PADDING = {"positions": 0, "padded": 0}


def timed(name: str, fn: Callable[..., Any], consume: bool = False) -> Callable[..., Any]:
    """`fn` timed in CPU time of this process (one thread: robust to other processes' load);
    `consume`: `fn` returns an iterator, timed while it is drained."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.process_time()
        try:
            out = fn(*args, **kwargs)
            return list(out) if consume else out
        finally:
            TIMES[name] += time.process_time() - started

    return wrapper


def instrument(model: Any) -> None:
    cls = type(model)
    cls._trunk = timed("forward (trunk)", cls._trunk)
    cls.logits = timed("head, full vocabulary", cls.logits)
    cls.token_logits = timed("head, candidate tokens", cls.token_logits)
    scoring.restricted_confidence = timed(
        "head, allowed tokens only", scoring.restricted_confidence
    )
    scoring.allowed_pairs = timed("masks (allowed pairs)", scoring.allowed_pairs)
    scoring.allowed_counts = timed("masks (allowed counts)", scoring.allowed_counts)
    scoring.bitmasks = timed("masks (fill_bitmask)", scoring.bitmasks)
    scoring.masked_confidence = timed("masked_confidence", scoring.masked_confidence)
    commit.masked_confidence = scoring.masked_confidence
    commit.CommitPolicy.commit = timed("commits", commit.CommitPolicy.commit)
    s = sampler_module.Sampler
    s._step = timed("step", s._step)
    sampler_module.score_options = timed("option scoring", sampler_module.score_options, True)
    window = s._window

    def counting(self: Any, rows: list, cache: Any, prefill: bool) -> None:
        windows = [window(self, r, prefill) for r in rows]
        width = max(end - start for start, end, _ in windows)
        PADDING["positions"] += width * len(rows)
        PADDING["padded"] += width * len(rows) - sum(end - start for start, end, _ in windows)
        before = TIMES["forward (trunk)"]
        try:
            return step(self, rows, cache, prefill)
        finally:  # the trunk's time split by the kind of forward
            kind = "prefill (prompt + block)" if prefill else "steps"
            TIMES[f"forward (trunk), {kind}"] += TIMES["forward (trunk)"] - before
            TIMES["forward (trunk)"] = before

    step = s._step
    s._step = counting


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=16)
    parser.add_argument("--batch-sizes", type=int, nargs="*", default=[1, 16])
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--head-limit", type=int, nargs="*", default=[RESTRICTED_LIMIT])
    parser.add_argument("--model", default="bundled",
                        help="bundled, or a family's tiny random checkpoint (llada, dream, ...)")  # fmt: skip
    parser.add_argument("--in-block", type=int, nargs="*", default=[0, 1],
                        help="decoding.in_block_cache off (0) and/or on (1)")  # fmt: skip
    parser.add_argument("--max-steps", type=int, nargs="*", default=[0],
                        help="decoding.max_steps per run (0: no cap, this script's default; a job's is 3)")  # fmt: skip
    parser.add_argument("--grow-slots", type=int, nargs="*", default=[0],
                        help="decoding.grow_slots off (0) and/or on (1)")  # fmt: skip
    args = parser.parse_args()
    common.set_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        if args.model == "bundled":
            path = common.bundled()
            if path is None:
                raise SystemExit("no bundled model installed")
        else:
            path = common.tiny_checkpoint(Path(tmp) / args.model, args.model)
        loaded = load_model(path)
    eng = common.engine(loaded, args.batch_sizes[0])
    docs = common.documents(args.docs, args.seed, questions=8)
    items = common.items(eng, docs)
    list(eng.decide(items[:2]))  # warm-up
    instrument(loaded.model)
    print(f"Machine: {common.describe_machine(args.threads)}; {args.docs} documents × 8 questions")
    rows = []
    runs = [
        (b, h, q, m, g)
        for b in args.batch_sizes
        for h in args.head_limit
        for q in args.in_block
        for m in args.max_steps
        for g in args.grow_slots
    ]
    for batch, limit, in_block, max_steps, grow in runs:
        common.set_decoding(
            eng,
            batch_size=batch,
            in_block_cache=bool(in_block),
            max_steps=max_steps or None,
            grow_slots=bool(grow),
        )
        eng.sampler.config = dataclasses.replace(eng.sampler.config, head_limit=limit)
        TIMES.clear()
        PADDING.update(positions=0, padded=0)
        started = time.process_time()
        decisions = list(eng.decide(items))
        total = time.process_time() - started
        nfe = sum(d.nfe for d in decisions) / len(decisions)
        t = {k: 1000 * v / len(docs) for k, v in TIMES.items()}
        step = t.pop("step")
        option = t.pop("option scoring", 0.0) - t.get("head, candidate tokens", 0.0)
        inside = sum(t.values())  # every timer but step: disjoint parts of the step
        parts = {**t, "option scoring (rest)": option}
        parts["Python per-row work (rest of step)"] = step - inside - option
        parts["outside the sampler's steps (packing, parsing)"] = 1000 * total / len(docs) - step
        cap = max_steps or "none"
        share = PADDING["padded"] / max(PADDING["positions"], 1)
        run = [batch, limit, in_block, cap, grow]
        for name, ms in parts.items():
            share_ms = f"{100 * ms / (1000 * total / len(docs)):.0f}%"
            if ms:
                rows.append([*run, name, f"{ms:.1f}", share_ms])
        rows.append([*run, "**total**", f"{1000 * total / len(docs):.1f}", f"nfe {nfe:.1f}"])
        rows.append([*run, "padding (window positions)", "", f"{100 * share:.0f}%"])
    header = ["batch", "head_limit", "in_block_cache", "max_steps", "grow_slots", "part",
              "CPU ms / document", "share"]  # fmt: skip
    print(common.table(header, rows, "rrrrrlrr"))


if __name__ == "__main__":
    main()
