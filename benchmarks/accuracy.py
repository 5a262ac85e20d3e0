"""Accuracy of the bundled decision model on held-out data, in one run, one table.

- Hand-written documents (`train/data/handwritten/`, text our generator did not write): answers
  right (strings compared without case) and documents with every answer right, for the domains
  the model is trained on and, apart, for two it never sees in training; validation and test
  columns side by side (recipes are chosen on validation; test is held out). Then the same
  documents asked every fact of their domain as an optional question (`anyOf: [schema, null]`,
  what a Pydantic `X | None` field gives) plus one question of another domain: stated facts
  right, and facts the document does not state (and the other domain's question) answered null;
  and the same documents with the sentences writing one name, city, product or number cut out
  (`train/cut.py`), asked their string and number facts as optional: the cut one must be null;
  with the validation split, those cut documents again with each question's `absent_below`
  chosen on the validation ones as `decide calibrate` chooses it (docs/jobs.md).
- Synthetic decisions from the *test* split (templates, names, cities and products never seen in
  training): exact match on questions stated in the document and on derived questions, and the
  share of documents with every answer right.
- MAMS-ACSA val: sentiment accuracy on the annotated aspects and mention accuracy (mentioned or
  not, over all eight aspects), next to majority-class baselines from the train split.
- Joint vs separate: the same model deciding every question of a document in one block, or each
  question alone in a block of its own: accuracy and dependencies violated among the answers
  (e.g. `eligible=true` with an amount over the limit).
- Parallelism: answer tokens per forward pass at threshold 0.9 against one token per step, with
  accuracy for both.
- Extract: the same synthetic documents with every string question (names, cities, products)
  marked `extract: true`, so its answer must be a span of the document, next to free strings;
  and with the integer questions (amounts, limits, days) marked as well, so each is a number the
  document states.

    python benchmarks/accuracy.py                   # 300 synthetic documents, all 400 MAMS reviews
    python benchmarks/accuracy.py --docs 100 --mams 100
    python benchmarks/accuracy.py --sections handwritten --splits validation --misses
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import common
import torch

from decide.jobs.decisions import DecisionEngine
from decide.jobs.spec import Decoding
from decide.schemas.dates import DatePolicy
from decide.train import handwritten
from decide.train.evaluate import (
    HandwrittenReport,
    MamsReport,
    SyntheticReport,
    UnstatedReport,
    absent_below_chosen,
    evaluate_cut,
    evaluate_handwritten,
    evaluate_mams,
    evaluate_synthetic,
    evaluate_unstated,
    synthetic_documents,
)
from decide.train.synthetic import CLAIM_QUESTIONS, LOAN_QUESTIONS, TICKET_QUESTIONS


def questions_of(kind: str) -> set[str]:
    return {
        q["id"]
        for questions in (CLAIM_QUESTIONS, LOAN_QUESTIONS, TICKET_QUESTIONS)
        for q in questions
        if q["schema"].get("type") == kind
    }


STRING_QUESTIONS, INTEGER_QUESTIONS = questions_of("string"), questions_of("integer")


def pct(x: float) -> str:
    return f"{100 * x:.1f} %"


SECTIONS = ("handwritten", "mams", "synthetic")
GROUPS = {"trained": "claims, loans, tickets (trained)", "new": "leave, rental (never trained)"}


MODES = {False: "asked", True: "derived"}


def handwritten_table(reports: dict[tuple[str, bool], HandwrittenReport], misses: bool) -> None:
    """Validation and test side by side, every answer asked of the model or the derived ones
    computed by `derive:` rules; per question and the misses for validation (asked) only."""
    keys = list(reports)
    print("| hand-written documents | " + " | ".join(f"{s}, {MODES[d]}" for s, d in keys)
          + " | target |")  # fmt: skip
    print("|---|" + "---:|" * len(keys) + "---:|")
    for group, name in GROUPS.items():
        for kind, tallies, target in (
            ("answers right", "answers", "≥ 85 %"),
            ("documents fully right", "documents", "≥ 50 %"),
        ):
            cells = []
            for key in keys:
                t = getattr(reports[key], tallies).get(group)
                cells.append(f"{pct(t.rate)} of {t.total}" if t else "–")
            print(f"| {name}: {kind} | " + " | ".join(cells) + f" | {target} |")
    failed = ", ".join(f"{s} {MODES[d]} {r.failed_rows}" for (s, d), r in reports.items())
    print(f"\nrows refused or failed: {failed}")
    failures(reports)
    for (split, derive), report in reports.items():
        domains = ", ".join(f"{d} {pct(t.rate)}" for d, t in report.per_domain.items())
        print(f"{split}, {MODES[derive]}, by domain: {domains}")
    if ("validation", False) in reports:
        report = reports[("validation", False)]
        print("validation per question: " + ", ".join(
            f"{q} {pct(t.rate)}" for q, t in sorted(report.per_question.items())))  # fmt: skip
        if misses:
            for doc_id, qid, got, gold in report.misses:
                print(f"  miss {doc_id} {qid}: {got!r} (gold {gold!r})")
    print()


def failures(reports: dict[Any, HandwrittenReport] | dict[str, UnstatedReport]) -> None:
    """Each failed row of `reports` with why it failed (a long document, a broken rule)."""
    for key, report in reports.items():
        where = " ".join((key[0], MODES[key[1]])) if isinstance(key, tuple) else key
        for doc_id, error in report.failures:
            print(f"  failed ({where}) {doc_id}: {error}")


def unstated_table(
    reports: dict[str, UnstatedReport],
    misses: bool,
    title: str = "hand-written, every fact asked as optional (`anyOf: [schema, null]`) + one "
    "question of another domain",
    rows: tuple[tuple[str, str], ...] = (
        ("stated", "stated facts right"),
        ("unstated", "facts it does not state answered null"),
        ("foreign", "the other domain's question answered null"),
        ("documents", "documents fully right"),
    ),
) -> None:
    """Optional questions (`X | None`): what a user asking about facts a document may not state
    gets. By default every fact of a document's domain plus one question of another domain;
    `evaluate_cut`'s reports give the title and rows of the cut documents."""
    splits = list(reports)
    print(f"| {title} | " + " | ".join(splits) + " |")
    print("|---|" + "---:|" * len(splits))
    for group, name in GROUPS.items():
        for kind, label in rows:
            cells = []
            for split in splits:
                t = getattr(reports[split], kind).get(group)
                cells.append(f"{pct(t.rate)} of {t.total}" if t else "–")
            print(f"| {name}: {label} | " + " | ".join(cells) + " |")
    failed = ", ".join(f"{s} {r.failed_rows}" for s, r in reports.items())
    print(f"\nrows refused or failed: {failed}")
    failures(reports)
    if misses and "validation" in reports:
        for doc_id, qid, got, gold in reports["validation"].misses:
            print(f"  miss (optional) {doc_id} {qid}: {got!r} (gold {gold!r})")
    print()


CUT_ROWS = (
    ("stated", "facts still stated right"),
    ("unstated", "facts cut out (or never stated) answered null"),
    ("documents", "documents fully right"),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="model directory (default: bundled)")
    parser.add_argument("--docs", type=int, default=300, help="synthetic test documents")
    parser.add_argument("--mams", type=int, default=400, help="MAMS val reviews (max 400)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    parser.add_argument(
        "--splits", nargs="+", choices=("validation", "test"), default=["validation", "test"],
        help="hand-written splits to decide",
    )  # fmt: skip
    parser.add_argument("--misses", action="store_true", help="list validation misses")
    parser.add_argument(
        "--decoding", nargs="*", default=[], metavar="KEY=VALUE",
        help="decoding settings for every decide run (e.g. max_steps=2), as a job's YAML writes them",
    )  # fmt: skip
    parser.add_argument(
        "--summary", type=Path, default=None,
        help="write the figures into this train_summary.json (the model's, when shipping it)",
    )  # fmt: skip
    args = parser.parse_args()
    figures: dict[str, Any] = {}
    loaded = common.load_trained(args.model)
    path = loaded.path
    print(f"model: {path} ({loaded.config.model_type}, {loaded.parameter_count():,} parameters, "
          f"{torch.get_num_threads()} threads)\n")  # fmt: skip

    settings = common.decoding_settings(args.decoding)
    if settings:
        print(f"decoding: {settings}\n")

    def engine(**decoding) -> DecisionEngine:
        return DecisionEngine(
            loaded, Decoding(**{**settings, **decoding}), batch_size=args.batch_size
        )

    started = time.monotonic()
    if "handwritten" in args.sections:
        # numeric dates in the hand-written documents are day first (their README)
        dated = DecisionEngine(
            loaded,
            Decoding(**settings),
            batch_size=args.batch_size,
            dates=DatePolicy(order="day_first"),
        )
        reports = {
            (split, derive): evaluate_handwritten(dated, handwritten.load_split(split), derive)
            for split in args.splits
            for derive in (False, True)
        }
        handwritten_table(reports, args.misses)
        optional = {split: evaluate_unstated(dated, handwritten.load_split(split))
                    for split in args.splits}  # fmt: skip
        unstated_table(optional, args.misses)
        cut_out = {split: evaluate_cut(dated, handwritten.load_split(split))
                   for split in args.splits}  # fmt: skip
        unstated_table(
            cut_out, args.misses,
            "hand-written, the sentences writing one fact cut out (`train/cut.py`), every "
            "string and number fact asked as optional", CUT_ROWS,
        )  # fmt: skip
        chosen: dict[str, float] = {}
        withheld: dict[str, UnstatedReport] = {}
        if "validation" in cut_out:  # thresholds chosen on validation only, as a user would
            chosen = absent_below_chosen(cut_out["validation"])
            withheld = {split: evaluate_cut(dated, handwritten.load_split(split), chosen)
                        for split in args.splits}  # fmt: skip
            unstated_table(
                withheld, False,
                "the same cut documents, each question's `absent_below` chosen on the validation "
                "cut documents (`decide calibrate`'s rule; validation in-sample)", CUT_ROWS,
            )  # fmt: skip
            print("absent_below chosen: " + (", ".join(f"{k} {v:g}" for k, v in chosen.items())
                                             or "none") + "\n")  # fmt: skip
        figures["handwritten"] = {
            f"{split}, {MODES[derive]}": {
                f"{group} {kind}": round(100 * t.rate, 1)
                for kind in ("answers", "documents")
                for group, t in getattr(report, kind).items()
            }
            for (split, derive), report in reports.items()
        }
        figures["handwritten_optional"] = {
            split: {
                f"{group} {kind}": round(100 * t.rate, 1)
                for kind in ("stated", "unstated", "foreign", "documents")
                for group, t in getattr(report, kind).items()
            }
            for split, report in optional.items()
        }
        figures["handwritten_cut"] = {
            split: {
                f"{group} {kind}": round(100 * t.rate, 1)
                for kind in ("stated", "unstated", "documents")
                for group, t in getattr(report, kind).items()
            }
            for split, report in cut_out.items()
        }
        if withheld:
            figures["handwritten_cut_absent_below"] = {
                "thresholds": chosen,
                **{
                    split: {
                        f"{group} {kind}": round(100 * t.rate, 1)
                        for kind in ("stated", "unstated", "documents")
                        for group, t in getattr(report, kind).items()
                    }
                    for split, report in withheld.items()
                },
            }
    if "mams" in args.sections:
        mams = mams_table(engine(), args.mams)
        figures["mams_val"] = {
            "sentiment": round(100 * mams.sentiment.rate, 1),
            "mention": round(100 * mams.mention.rate, 1),
            "sentiment_given_aspect": round(100 * mams.sentiment_given_aspect.rate, 1),
        }
    if "synthetic" in args.sections:
        joint, extracted, numbers = synthetic_tables(engine, args)
        figures["synthetic_test"] = {
            name: {k: round(100 * getattr(r, k).rate, 1) for k in ("stated", "derived", "documents")}
            for name, r in (("free strings", joint), ("strings extracted", extracted),
                            ("strings and integers extracted", numbers))
        }  # fmt: skip
    if args.summary is not None:
        summary = json.loads(args.summary.read_text())
        summary["figures"] = {
            "command": shlex.join(["python", *sys.argv]),
            "date": time.strftime("%Y-%m-%d"),
            **figures,
        }
        args.summary.write_text(json.dumps(summary, indent=2) + "\n")
    print(f"evaluation time: {(time.monotonic() - started) / 60:.1f} min")


def mams_table(engine: DecisionEngine, limit: int) -> MamsReport:
    mams = evaluate_mams(engine, limit=limit)
    print(f"| MAMS-ACSA val ({min(limit, 400)} reviews, human-written, never trained on) "
          "| model | majority baseline | target |")  # fmt: skip
    print("|---|---:|---:|---:|")
    print(
        f"| sentiment accuracy, annotated aspects ({mams.sentiment.total}) | "
        f"{pct(mams.sentiment.rate)} | {pct(mams.sentiment_baseline.rate)} "
        f"(always {mams.majority_sentiment}) | ≥ 78 % |"
    )
    print(
        f"| sentiment accuracy, aspect given ({mams.sentiment_given_aspect.total}; only the "
        f"annotated aspects asked, 3 sentiments: the protocol of published ACSA figures) | "
        f"{pct(mams.sentiment_given_aspect.rate)} | {pct(mams.sentiment_baseline.rate)} | – |"
    )
    print(
        f"| mention accuracy, all aspects ({mams.mention.total}) | {pct(mams.mention.rate)} | "
        f"{pct(mams.mention_baseline.rate)} (never mentioned) | ≥ 95 % |"
    )
    print()
    return mams


def synthetic_tables(
    engine: Callable[..., DecisionEngine], args: argparse.Namespace
) -> tuple[SyntheticReport, SyntheticReport, SyntheticReport]:
    """Generator-written documents (what the model has learnt of our templates), last."""
    docs = synthetic_documents(args.docs, seed=args.seed)
    joint = evaluate_synthetic(engine(), docs, joint=True)
    separate = evaluate_synthetic(engine(), docs, joint=False)
    # the baseline of the parallelism table: one token per forward, no step cap
    serial = evaluate_synthetic(engine(max_tokens_per_step=1, max_steps=None), docs, joint=True)
    extracted = evaluate_synthetic(engine(), docs, joint=True, extract=True)
    numbers = evaluate_synthetic(engine(), docs, joint=True, extract=("string", "integer"))

    print(
        f"| synthetic, generator-written, held-out templates and entities ({args.docs} "
        "documents) | free strings "
        "| strings extracted | strings and integers extracted | target |"
    )
    print("|---|---:|---:|---:|---:|")
    rows = (
        (f"stated facts, exact match ({joint.stated.total})", "stated", "≥ 95 %"),
        (f"derived answers, exact match ({joint.derived.total})", "derived", "≥ 85 %"),
        ("documents with every answer right", "documents", "≥ 70 %"),
    )
    for name, attr, target in rows:
        free, spans = getattr(joint, attr).rate, getattr(extracted, attr).rate
        both = getattr(numbers, attr).rate
        print(f"| {name} | {pct(free)} | {pct(spans)} | {pct(both)} | {target} |")
    print()
    print(
        "| joint vs separate | stated | derived | all right | violated dependencies | forward passes/doc |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for name, r in (("all questions in one block", joint), ("each question alone", separate)):
        print(
            f"| {name} | {pct(r.stated.rate)} | {pct(r.derived.rate)} | {pct(r.documents.rate)} | "
            f"{r.violations} of {r.checks} | {r.nfe / args.docs:.1f} |"
        )
    print()
    print(
        "| parallelism | answer tokens per forward pass | forward passes/doc | stated | derived | all right |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for name, r in (("threshold 0.9", joint), ("one token per step", serial)):
        print(
            f"| {name} | {r.answer_tokens / max(r.nfe, 1):.2f} | {r.nfe / args.docs:.1f} | "
            f"{pct(r.stated.rate)} | {pct(r.derived.rate)} | {pct(r.documents.rate)} |"
        )
    print("\nper question (joint): " + ", ".join(
        f"{q} {pct(t.rate)}" for q, t in sorted(joint.per_question.items())))  # fmt: skip
    strings = sorted(q for q in extracted.per_question if q in STRING_QUESTIONS)
    print("string questions extracted (joint): " + ", ".join(
        f"{q} {pct(extracted.per_question[q].rate)}" for q in strings))  # fmt: skip
    integers = sorted(q for q in numbers.per_question if q in INTEGER_QUESTIONS)
    print("integer questions, free -> extracted (joint): " + ", ".join(
        f"{q} {pct(joint.per_question[q].rate)} -> {pct(numbers.per_question[q].rate)}"
        for q in integers))  # fmt: skip
    print(f"forward passes/doc: free strings {joint.nfe / args.docs:.1f}, "
          f"strings extracted {extracted.nfe / args.docs:.1f}, "
          f"strings and integers extracted {numbers.nfe / args.docs:.1f}")  # fmt: skip

    return joint, extracted, numbers


if __name__ == "__main__":
    main()
