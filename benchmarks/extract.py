"""What `extract: true` costs and buys: span slots against free-string slots, in one run.

1. Per document and question, on the CPU: building the slot's constraint and its first bitmask,
   for a free string (the shared compiled slot's fresh state) and for an extract question (a
   `SpanSlot` over every span of the document), on documents of growing length, with the GPT-2
   vocabulary (50,257 tokens) and the bundled model's WordPiece one. For WordPiece, spans are
   read off one tokenization of the document; "span-by-span" is the same slot built with one
   tokenizer reading per span (what GPT-2's byte-level BPE always takes).
2. End to end with the bundled model: held-out synthetic documents decided with their string
   questions free and extracted: documents per second, forward passes, string-answer accuracy.

    python benchmarks/extract.py                       # 100/400/1600-word documents, 64 docs
    python benchmarks/extract.py --words 100 --docs 8  # quick
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

import common
import torch
from tokenizers import Tokenizer

from decide.schemas import Vocabulary, compile_slot
from decide.schemas.span import SpanSlot, _WordLocal
from decide.train import synthetic
from decide.train.evaluate import evaluate_synthetic

ROOT = Path(__file__).resolve().parents[1]
VOCABS = {
    "gpt2": ROOT / "tests" / "data" / "gpt2" / "tokenizer.json",
    "wordpiece": ROOT / "decide" / "model" / "tokenizer.json",
}
SCHEMAS = {
    "maxLength 24": {"type": "string", "minLength": 2, "maxLength": 24},
    "no maxLength": {"type": "string"},  # spans of up to 12 words, 32 tokens
}


def text_of(words: int, seed: int) -> str:
    """Held-out synthetic documents glued together until they have `words` words."""
    rng = random.Random(seed)
    parts: list[str] = []
    while sum(len(p.split()) for p in parts) < words:
        parts.append(synthetic.sample_document(rng, "test")[1])
    return " ".join(" ".join(parts).split()[:words])


def per_document(
    vocab: Vocabulary, filler: int, schema: dict, text: str, reps: int
) -> tuple[float, float, float, int]:
    """Median ms of (free state + bitmask, span slot + bitmask, the same with the tokenizer
    called span by span), and the number of spans."""
    slot = compile_slot(schema, vocab)
    times: list[list[float]] = [[], [], []]
    count = 0
    local = _WordLocal.of(vocab)
    for _ in range(reps):
        started = time.perf_counter()
        state = slot.new_constraint(filler)
        state.fill_bitmask(torch.zeros((state.length, state.width), dtype=torch.int32))
        times[0].append(time.perf_counter() - started)
        for k, word_local in ((1, local), (2, None)):
            vocab._word_local = word_local  # type: ignore[attr-defined]  # None: span by span
            started = time.perf_counter()
            span = SpanSlot(slot, filler, text)
            span.fill_bitmask(torch.zeros((span.length, span.width), dtype=torch.int32))
            times[k].append(time.perf_counter() - started)
            count = len(span.values)
    vocab._word_local = local  # type: ignore[attr-defined]
    free, spans, by_span = (1e3 * sorted(t)[reps // 2] for t in times)
    return free, spans, by_span, count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--words", type=int, nargs="+", default=[100, 400, 1600])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--docs", type=int, default=64, help="documents for the end-to-end part")
    parser.add_argument("--model", default=None, help="model directory (default: bundled)")
    args = parser.parse_args()
    print(common.describe_machine(torch.get_num_threads()), "\n")

    rows = []
    for name, path in VOCABS.items():
        tokenizer = Tokenizer.from_file(str(path))
        filler = tokenizer.get_vocab_size()
        vocab = Vocabulary.from_tokenizer(tokenizer, excluded={filler})
        for label, schema in SCHEMAS.items():
            per_document(vocab, filler, schema, text_of(20, 0), 1)  # compile outside the timing
            for words in args.words:
                text = text_of(words, words)
                free, span, by_span, count = per_document(vocab, filler, schema, text, args.reps)
                rows.append((name, label, words, count, f"{free:.2f}", f"{span:.2f}",
                             f"{by_span:.2f}", f"{by_span / span:.2f}×",
                             f"{span / free:.1f}×"))  # fmt: skip
    print(f"Per document and question, median of {args.reps}:\n")
    header = ["vocabulary", "schema", "words", "spans kept", "free ms", "extract ms",
              "span-by-span ms", "span-by-span / extract", "extract / free"]  # fmt: skip
    print(common.table(header, rows))

    loaded = common.load_trained(args.model)
    docs = [d.as_tuple() for d in common.documents(args.docs, seed=99)]
    engine = common.engine(loaded)
    evaluate_synthetic(engine, docs[:4], extract=True)  # warm both paths' caches
    evaluate_synthetic(engine, docs[:4], extract=False)
    results = {}
    for mode in (False, True):
        results[mode] = evaluate_synthetic(engine, docs, extract=mode)
    strings = {q["id"] for _, qs, _ in docs for q in qs if q["schema"].get("type") == "string"}

    def string_rate(report) -> str:
        tallies = [report.per_question[q] for q in strings if q in report.per_question]
        right = sum(t.right for t in tallies)
        total = sum(t.total for t in tallies)
        return f"{100 * right / max(total, 1):.1f} % ({total})"

    print(f"\nEnd to end, {args.docs} held-out synthetic documents, batch 16, {loaded.path}:\n")
    rows = []
    for mode, name in ((False, "free strings"), (True, "strings extracted")):
        r = results[mode]
        rows.append((name, f"{args.docs / r.seconds:.2f}", f"{r.nfe / args.docs:.1f}",
                     string_rate(r), f"{100 * r.documents.rate:.1f} %"))  # fmt: skip
    print(common.table(["mode", "docs/s", "forward passes/doc", "string answers right",
                        "all answers right"], rows))  # fmt: skip
    ratio = results[False].seconds / results[True].seconds
    print(f"\nextract / free throughput: {ratio:.2f}×")


if __name__ == "__main__":
    main()
