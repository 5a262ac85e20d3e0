"""ContractNLI end to end: real NDAs (17 hypotheses each, most longer than 512 tokens) decided
in windows (`long_documents: windows`) by a model, against the per-hypothesis majority baseline
and the published anchors.

Measured in one run on the development split (or, for recipe choices, `--split validation`:
the train50 NDAs kept out of training; or the first `--docs` NDAs): rows decided,
3-class accuracy over contract × hypothesis pairs, F1 for entailment, contradiction and
not-mentioned, evidence share (of the pairs whose gold label has evidence spans, how many kept
windows contain one gold evidence span whole; also over the pairs answered as entailment or
contradiction), forward passes and seconds per document. The majority baseline predicts each
hypothesis's most frequent label among the 50 training NDAs (`train50`; for validation, among
its training part); nothing is tuned on the development split. The official test split is never
read.

    python benchmarks/contractnli.py                   # bundled model, all 61 dev NDAs
    python benchmarks/contractnli.py --docs 10 --top-k 4
    python benchmarks/contractnli.py --from-run out/nli   # score a plain `decide run` of dev
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import common
import polars as pl

from decide.jobs.decisions import DecisionEngine, Item
from decide.jobs.manifest import Manifest
from decide.jobs.spec import parse_spec
from decide.train import contractnli as data

LABELS = list(data.LABELS.values())
ABSENT = data.ABSENT
# Published figures, 3-class accuracy over all pairs (not measured here).
ANCHORS = [
    ("per-hypothesis majority, official test split (issue 30)", "0.67"),
    ("frontier API model, one hypothesis per call (public reproduction, 340 pairs)", "0.70"),
    ("Span NLI BERT, fine-tuned on the full training split (public reproduction)", "0.82"),
]


def majority(train: list[data.LongRow]) -> dict[str, str]:
    """Each hypothesis's most frequent label in the training NDAs (ties: the first in LABELS)."""
    counts: dict[str, Counter] = {}
    for row in train:
        for qid, label in row.gold.items():
            counts.setdefault(qid, Counter())[label] += 1
    return {
        qid: max(LABELS, key=lambda label: (c[label], -LABELS.index(label)))
        for qid, c in counts.items()
    }


def scores(pairs: list[tuple[str, str]]) -> dict[str, float]:
    """Accuracy and per-class F1 of (gold, predicted) pairs."""
    out = {"accuracy": sum(g == p for g, p in pairs) / len(pairs)}
    for label in LABELS:
        tp = sum(g == p == label for g, p in pairs)
        predicted = sum(p == label for _, p in pairs)
        actual = sum(g == label for g, _ in pairs)
        precision = tp / predicted if predicted else 0.0
        recall = tp / actual if actual else 0.0
        total = precision + recall
        out[f"F1 {label}"] = 2 * precision * recall / total if total else 0.0
    return out


def contains(evidence: dict | None, gold: list[tuple[int, int]]) -> bool:
    """Whether the kept window holds one gold evidence span whole."""
    if evidence is None:
        return False
    return any(evidence["start"] <= a and b <= evidence["end"] for a, b in gold)


def per_hypothesis(ok: list, gold: dict, baseline: dict[str, str]) -> str:
    """Each hypothesis's right answers, decide's and its majority label's, and how often decide
    answered it as not mentioned."""
    rows = []
    for qid, majority_label in baseline.items():
        labels = [(gold[d.doc_id].gold[qid], d.answers[qid]) for d in ok]
        rows.append([
            qid, majority_label, sum(g == p for g, p in labels),
            sum(g == majority_label for g, _ in labels),
            sum(p == ABSENT for _, p in labels), sum(g == ABSENT for g, _ in labels), len(labels),
        ])  # fmt: skip
    header = ["hypothesis", "majority label", "decide right", "majority right",
              "decide: not mentioned", "gold: not mentioned", "NDAs"]  # fmt: skip
    return common.table(header, rows, "llrrrrr")


@dataclass
class Decided:
    """What the figures need of one decided NDA (from the engine or from a run's parquet)."""

    doc_id: str
    ok: bool
    kind: str | None
    answers: dict[str, Any] | None
    evidence: dict[str, Any] | None  # question id -> {start, end, ...} or None
    nfe: int
    windows: int


def decide(docs: list[data.LongRow], spec: Any, args: argparse.Namespace) -> tuple[list, str]:
    loaded = common.load_trained(args.model)
    engine = DecisionEngine.for_spec(loaded, spec, batch_size=args.batch_size)
    assert engine.long is not None
    planner = engine.long.planner
    if planner.ranker is None or not spec.windows.evidence_ranker:
        print("windows ranked by BM25 (no learnt evidence ranker)")
    else:
        print(f"windows chosen by the model's learnt evidence ranker: a window is read for a "
              f"hypothesis when its evidence probability reaches {planner.min_evidence:g}")  # fmt: skip
    questions = engine.questions(spec.questions)
    items = [Item(d.doc_id, d.text, questions) for d in docs]
    out = []
    for d in engine.decide(items):
        evidence = None if d.evidence is None else {
            q: e and e.as_dict() for q, e in d.evidence.items()}  # fmt: skip
        kind = d.kind.value if d.kind else None
        out.append(Decided(d.doc_id, d.ok, kind, d.answers, evidence, d.nfe, d.windows))
    return out, str(loaded.path)


def read_run(out: Path) -> tuple[list, str, float]:
    """The decisions a `decide run` wrote to `out`, its model and its seconds."""
    manifest = Manifest.read(out)
    frame = pl.read_parquet(out / "answers" / "*.parquet")
    decided = [
        Decided(r["doc_id"], r["status"] == "ok", r["error_kind"],
                json.loads(r["answers_json"]) if r["answers_json"] else None,
                r["evidence"], r["nfe"], r["windows"])
        for r in frame.iter_rows(named=True)
    ]  # fmt: skip
    return decided, str(manifest.model), manifest.seconds or 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="model directory (default: the bundled model)")
    parser.add_argument(
        "--split", choices=["dev", "validation"], default="dev",
        help="dev: the official development split (report); validation: the train50 NDAs kept "
        "out of training (recipe choices)",
    )  # fmt: skip
    parser.add_argument("--docs", type=int, default=None, help="first N NDAs (default all)")
    parser.add_argument("--top-k", type=int, default=None, help="windows decided per block")
    parser.add_argument(
        "--confident", type=float, default=None,
        help="windows.confident: a found answer at least this confident beats an absent one "
        "(default: the spec's default)",
    )  # fmt: skip
    parser.add_argument(
        "--window-questions", type=int, default=None,
        help="windows.questions: hypotheses per window (default: the ContractNLI spec's)",
    )  # fmt: skip
    parser.add_argument(
        "--window-tokens", type=int, default=None,
        help="windows.tokens: document tokens per window at most (default: all the block leaves)",
    )  # fmt: skip
    parser.add_argument(
        "--no-evidence-ranker", action="store_true",
        help="windows.evidence_ranker: false (BM25 or every window, as without a learnt ranker)",
    )  # fmt: skip
    parser.add_argument(
        "--min-evidence", type=float, default=None,
        help="windows.min_evidence (default: the learnt ranker's threshold)",
    )  # fmt: skip
    parser.add_argument(
        "--per-hypothesis", action="store_true",
        help="also a table of each hypothesis's accuracy against its majority label",
    )  # fmt: skip
    parser.add_argument(
        "--decoding", nargs="*", default=[], metavar="KEY=VALUE",
        help="decoding settings over the spec's (e.g. max_steps=4), as a job's YAML writes them",
    )  # fmt: skip
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--from-run", type=Path, metavar="OUT",
        help="score what `decide run` wrote to OUT (over contractnli_data.py's parquet) instead "
        "of deciding here",
    )  # fmt: skip
    args = parser.parse_args()
    common.set_threads(args.threads)
    train50 = data.load_split("train50")
    if args.split == "dev":
        split = data.load_split("dev")
        docs, train = data.documents(split), data.documents(train50)
    else:
        split = train50
        docs, train = data.documents(split, "validation"), data.documents(split, "train")
    windows: dict[str, Any] = {**data.spec(split)["windows"], "top_k": args.top_k}
    if args.confident is not None:
        windows["confident"] = args.confident
    if args.window_questions is not None:
        windows["questions"] = args.window_questions
    if args.window_tokens is not None:
        windows["tokens"] = args.window_tokens
    if args.no_evidence_ranker:
        windows["evidence_ranker"] = False
    if args.min_evidence is not None:
        windows["min_evidence"] = args.min_evidence
    base_spec = data.spec(split)
    decoding = {**base_spec.get("decoding", {}), **common.decoding_settings(args.decoding)}
    spec = parse_spec({**base_spec, "windows": windows, "decoding": decoding}, "contractnli")
    if args.docs is not None:
        docs = docs[: args.docs]
    gold = {d.doc_id: d for d in docs}
    if args.from_run is not None:
        decisions, model, seconds = read_run(args.from_run)
        decisions = [d for d in decisions if d.doc_id in gold]
        how = f"scored from {args.from_run}"
    else:
        started = time.perf_counter()
        decisions, model = decide(docs, spec, args)
        seconds = time.perf_counter() - started
        how = (f"top_k={args.top_k}, confident={spec.windows.confident}, "
               f"window tokens {spec.windows.tokens or 'what the block leaves'}, "
               f"{spec.windows.questions} hypotheses per window, batch size {args.batch_size}, "
               f"decoding {spec.decoding.model_dump(exclude_defaults=True)}")  # fmt: skip
    ok = [d for d in decisions if d.ok]
    failed = Counter(d.kind or "?" for d in decisions if not d.ok)
    pairs, base, held, held_found, found = [], [], 0, 0, 0
    baseline = majority(train)
    evidence_pairs = 0
    for d in ok:
        row = gold[d.doc_id]
        for qid, label in row.gold.items():
            predicted = d.answers[qid]
            pairs.append((label, predicted))
            if row.evidence[qid]:
                evidence_pairs += 1
                hit = contains((d.evidence or {}).get(qid), row.evidence[qid])
                held += hit
                if predicted != ABSENT:
                    found += 1
                    held_found += hit
    for row in docs:
        base += [(label, baseline[qid]) for qid, label in row.gold.items()]
    ours, majority_scores = scores(pairs) if pairs else {}, scores(base)
    n = len(decisions)
    print(f"ContractNLI {args.split}, {n} NDAs × {len(spec.questions)} hypotheses, model {model}")
    print(f"{how}; {common.describe_machine(args.threads)}")
    print()
    print(f"rows decided: {len(ok)} of {n}" + (f"; failed: {dict(failed)}" if failed else ""))
    reference = "majority of train50" if args.split == "dev" else "majority of train50's train part"
    header = ["figure", "decide (windows)", reference]
    rows = [[k, f"{ours.get(k, 0):.3f}", f"{majority_scores[k]:.3f}"] for k in majority_scores]
    rows.append([
        "evidence: kept window holds a gold span (pairs with gold evidence)",
        f"{held / max(evidence_pairs, 1):.3f} ({held}/{evidence_pairs})", "-",
    ])  # fmt: skip
    rows.append([
        "evidence, of those answered entailment/contradiction",
        f"{held_found / max(found, 1):.3f} ({held_found}/{found})", "-",
    ])  # fmt: skip
    rows.append(["forward passes per document (sum over windows)",
                 f"{sum(d.nfe for d in decisions) / n:.1f}", "-"])  # fmt: skip
    rows.append(["windows per document", f"{sum(d.windows for d in decisions) / n:.1f}", "-"])
    rows.append(["seconds per document", f"{seconds / n:.2f}", "-"])
    print(common.table(header, rows, "lrr"))
    if args.per_hypothesis:
        print()
        print(per_hypothesis(ok, gold, baseline))
    print()
    print(common.table(["published anchor (3-class accuracy)", "value"], ANCHORS, "lr"))
    if pairs:
        target = majority_scores["accuracy"] + 0.05
        verdict = "met" if ours["accuracy"] >= target else "not met"
        print(f"\ntarget: accuracy ≥ majority + 5 points = {target:.3f}: {verdict}")


if __name__ == "__main__":
    main()
