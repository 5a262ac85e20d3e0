"""Benchmark: decide's documents/s against batch size, questions per document and document length,
with the peak memory of each run.

Documents are held-out synthetic insurance claims (test split) with the claims domain's questions:
the first k of its 9 for k ≤ 9, and for 17 all 9 plus the first 8 asked again under other ids
(split into blocks of 6/6/5, decided in order). Lengths: each document extended with the
generator's distracting sentences and cut to the given number of document tokens. Each
configuration runs in a fresh process (peak RSS from the kernel, so runs cannot inherit each
other's peaks); a process that loads the model, compiles the questions and packs the documents
but decodes nothing gives the memory floor. Documents that do not fit the model are truncated to
fit (head and tail kept, `long_documents: truncate`); the table counts them.

    python benchmarks/scaling.py                       # the bundled model, or the tiny llada without it
    python benchmarks/scaling.py --model tiny --docs 16
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import common

from decide.engine import load_config, load_model
from decide.jobs.decisions import DecisionEngine, Item
from decide.jobs.pack import DocumentTooLong
from decide.jobs.spec import Decoding
from decide.train import synthetic


def questions(count: int) -> list[dict]:
    base = synthetic.CLAIM_QUESTIONS
    out = [dict(q) for q in base[:count]]
    for q in base[: max(0, count - len(base))]:
        out.append({**q, "id": f"{q['id']}_again", "text": f"(Asked again.) {q['text']}"})
    return out


def fit(text: str, tokens: int, tokenizer, rng: random.Random) -> str:
    """`text` extended with distracting sentences and cut to `tokens` tokens."""
    encode = tokenizer.tokenizer.encode
    while len(encode(text, add_special_tokens=False).ids) < tokens:
        text += " " + rng.choice(synthetic.DISTRACTORS)
    offsets = encode(text, add_special_tokens=False).offsets
    return text[: offsets[tokens - 1][1]]


def worker(config: dict) -> None:
    common.set_threads(config["threads"])
    loaded = load_model(config["model"])
    eng = DecisionEngine(loaded, Decoding(), batch_size=config["batch"], long_documents="truncate")
    rng = random.Random(config["seed"])
    asked = common.compile_questions(eng, questions(config["questions"]))
    texts = []
    for _ in range(config["docs"]):
        text = synthetic.sample_document(rng, "test", domain="claims")[1]
        if config["doc_tokens"]:
            text = fit(text, config["doc_tokens"], loaded.tokenizer, rng)
        texts.append(text)
    items = [Item(i, t, asked) for i, t in enumerate(texts)]
    try:
        packed = [eng.packer.pack(t, asked) for t in texts]
    except DocumentTooLong as exc:  # no truncation of the document can make these questions fit
        print(json.dumps({"does_not_fit": str(exc)}))
        return
    result = {
        "prompt": sum(p.prompt_tokens for p in packed) / len(packed),
        "truncated": sum(p.truncated for p in packed),
        "blocks": len(packed[0].request.blocks),
    }
    if config["decode"]:
        list(eng.decide(items[:2]))  # warm-up (untimed)
        started = time.perf_counter()
        decisions = list(eng.decide(items))
        result["seconds"] = time.perf_counter() - started
        result["ok"] = sum(d.ok for d in decisions)
        result["nfe"] = sum(d.nfe for d in decisions) / len(decisions)
    result["peak_mb"] = common.peak_rss_mb()
    print(json.dumps(result))


def run(config: dict) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--worker", json.dumps(config)],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode:
        raise SystemExit(f"worker {config} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=["auto", "bundled", "tiny"], default="auto")
    parser.add_argument("--docs", type=int, default=32)
    parser.add_argument("--batch-sizes", type=int, nargs="*", default=[1, 4, 16, 32])
    parser.add_argument("--questions", type=int, nargs="*", default=[1, 2, 4, 8, 17])
    parser.add_argument("--doc-tokens", type=int, nargs="*", default=None)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(json.loads(args.worker))
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = common.bundled() if args.model in ("auto", "bundled") else None
        if path is None and args.model == "bundled":
            raise SystemExit("the bundled model is not installed")
        name = "bundled (BERT 6×384, trained)"
        if path is None:
            path, name = common.tiny_checkpoint(Path(tmp) / "llada", "llada"), "tiny llada (random)"
        limit = load_config(path)[1].max_position_embeddings
        lengths = args.doc_tokens or ([64, 128, 192] if limit <= 512 else [128, 512, 2048])
        base = {"model": str(path), "docs": args.docs, "seed": args.seed}
        base |= {"threads": args.threads, "batch": 16, "questions": 8, "doc_tokens": None}
        print(f"Machine: {common.describe_machine(args.threads)}")
        print(f"Model: {name}; {args.docs} documents per run, threshold 0.9\n")
        floor = run({**base, "decode": False})
        print(f"Memory floor (model loaded, questions compiled, documents packed): "
              f"{floor['peak_mb']:.0f} MB peak RSS\n")  # fmt: skip
        grid = [("batch size", b, {"batch": b}) for b in args.batch_sizes]
        grid += [("questions", q, {"questions": q}) for q in args.questions]
        grid += [("document tokens", n, {"doc_tokens": n}) for n in lengths]
        rows = []
        for axis, value, change in grid:
            config = {**base, **change, "decode": True}
            r = run(config)
            if "does_not_fit" in r:
                rows.append([axis, value, config["batch"], config["questions"], "–", "–",
                             "does not fit", "–", "–", "–", "–", "–"])  # fmt: skip
                print(f"- {axis} {value}: does not fit ({r['does_not_fit']})", flush=True)
                continue
            rows.append(
                [
                    axis,
                    value,
                    config["batch"],
                    config["questions"],
                    r["blocks"],
                    f"{r['prompt']:.0f}",
                    f"{args.docs / r['seconds']:.2f}",
                    f"{r['nfe']:.1f}",
                    f"{r['peak_mb']:.0f}",
                    f"{r['peak_mb'] - floor['peak_mb']:+.0f}",
                    r["truncated"],
                    f"{r['ok']}/{args.docs}",
                ]
            )
            print(f"- {axis} {value}: {args.docs / r['seconds']:.2f} documents/s", flush=True)
    print()
    print(
        common.table(
            [
                "varied",
                "value",
                "batch",
                "questions",
                "blocks",
                "prompt tokens",
                "documents/s",
                "forwards / document",
                "peak RSS MB",
                "over floor MB",
                "truncated",
                "ok",
            ],
            rows,
            "lrrrrrrrrrrr",
        )
    )


if __name__ == "__main__":
    main()
