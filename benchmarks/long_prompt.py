"""Long prompts on block-causal families: the prefill in chunks against one forward.

A block-causal prefill commits the prompt to the cache. Read in one forward, its attention mask
and scores grow with the square of the prompt; `Sampler._read_ahead` commits everything but the
last `PREFILL_CHUNK` positions in leading forwards of whole model blocks, exactly (tests:
`tests/engine/test_read_ahead.py`). This is what lets the hybrid Gated-DeltaNet family read a
long document in one pass instead of windows: its linear-attention layers keep a fixed-size state
and only its attention layers' keys and values grow with the prompt.

Each run is a child process deciding one document (a synthetic claim after N tokens of filler
sentences, 8 questions) on a tiny random checkpoint whose `max_position_embeddings` is raised to
131,072, with `PREFILL_CHUNK` at its default ("chunked") or above the prompt ("one forward"); the
peak RSS comes from `wait4`. Both must produce the same answers.

    python benchmarks/long_prompt.py
    python benchmarks/long_prompt.py --families qwen3_next --tokens 8000 64000 --chunked-only 64000
    python benchmarks/long_prompt.py --tokens 16000 --chunked-only 16000 --reread

`--reread` adds a chunked run in which a block laid out again with grown slots re-reads its
row's prefix (as before 2026-12-05) instead of rewinding the row's cache lane to the block's
start (`Sampler._rewind`): same answers, and the time a regrow costs on a long document.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import common

FILLER = " The parties met again on a later date and talked at length about nothing of note."


def child(model: str, tokens: int, chunk: int | None, threads: int, reread: bool) -> None:
    from decide.engine import sampler

    common.set_threads(threads)
    if chunk is not None:
        sampler.PREFILL_CHUNK = chunk
    if reread:  # as before 2026-12-05: a regrown block re-reads its row's prefix
        sampler.Sampler._rewind = lambda self, row, main: False
    loaded = common.load_model(model)
    engine = common.engine(loaded, 1)
    doc = common.documents(1, 1234, questions=8)[0]
    per_sentence = len(loaded.tokenizer.encode(FILLER))
    text = FILLER * max(0, (tokens - 400) // per_sentence) + " " + doc.text
    item = common.items(engine, [doc])[0]
    item = common.Item(0, text, item.questions)
    decision = next(iter(engine.decide([item])))
    print(json.dumps({"tokens": len(loaded.tokenizer.encode(text)), "ok": decision.ok,
                      "error": decision.error, "nfe": decision.nfe,
                      "answers": decision.answers_json}))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", nargs="*", default=["qwen3_next", "sdar"])
    parser.add_argument("--tokens", type=int, nargs="*", default=[4000, 16000, 32000])
    parser.add_argument("--chunked-only", type=int, nargs="*", default=[],
                        help="prompt lengths run chunked only (one forward would need too much memory)")  # fmt: skip
    parser.add_argument(
        "--reread", action="store_true",
        help="also run chunked with a regrown block re-reading its row's prefix (as before "
        "2026-12-05) instead of rewinding the row's cache lane to the block's start",
    )  # fmt: skip
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)  # model, tokens, chunk, reread
    args = parser.parse_args()
    if args.child:
        model, tokens, chunk, reread = args.child
        child(model, int(tokens), None if chunk == "default" else int(chunk), args.threads,
              reread == "reread")  # fmt: skip
        return
    from decide.engine.sampler import PREFILL_CHUNK

    print(f"Machine: {common.describe_machine(args.threads)}; PREFILL_CHUNK {PREFILL_CHUNK}")
    rows: list = []
    rereads: list = []
    with tempfile.TemporaryDirectory() as tmp:
        for family in args.families:
            path = common.tiny_checkpoint(
                Path(tmp) / family, family, extra_config={"max_position_embeddings": 131_072}
            )
            for tokens in sorted(set(args.tokens) | set(args.chunked_only)):
                runs = {}
                modes = ["default"] + ([] if tokens in args.chunked_only else ["1000000"])
                modes += ["reread"] if args.reread else []
                for mode in modes:
                    chunk = "default" if mode == "reread" else mode
                    command = [sys.executable, __file__, "--threads", str(args.threads),
                               "--child", str(path), str(tokens), chunk, mode]  # fmt: skip
                    mb, seconds, out = common.peak_rss(command)
                    runs[mode] = (mb, seconds, json.loads(out.strip().splitlines()[-1]))
                if "reread" in runs:
                    again = runs["reread"]
                    rereads.append(
                        [family, f"{runs['default'][2]['tokens']:,}", f"{runs['default'][1]:.1f}",
                         str(runs["default"][2]["nfe"]), f"{again[1]:.1f}", str(again[2]["nfe"]),
                         f"{again[1] / runs['default'][1]:.2f}×",
                         str(again[2]["answers"] == runs["default"][2]["answers"])]
                    )  # fmt: skip
                mb, seconds, result = runs["default"]
                if not result["ok"]:
                    raise SystemExit(f"{family}, {tokens} tokens: {result['error']}")
                whole = runs.get("1000000")
                same = "" if whole is None else str(whole[2]["answers"] == result["answers"])
                rows.append(
                    [family, f"{result['tokens']:,}",
                     "not run" if whole is None else f"{whole[0]:,.0f}",
                     "" if whole is None else f"{whole[1]:.1f}",
                     f"{mb:,.0f}", f"{seconds:.1f}", str(result["nfe"]),
                     "" if whole is None else f"{whole[0] / mb:.1f}×", same]
                )  # fmt: skip
    header = ["family", "prompt tokens", "one forward: peak RSS MB", "s", "chunked: peak RSS MB",
              "s", "forwards", "peak ratio", "same answers"]  # fmt: skip
    print(common.table(header, rows))
    if rereads:
        print("\nA block laid out again with grown slots: lane rewound (default) or prefix re-read")
        header = ["family", "prompt tokens", "rewound: s", "forwards", "re-read: s", "forwards",
                  "time ratio", "same answers"]  # fmt: skip
        print(common.table(header, rereads))


if __name__ == "__main__":
    main()
