"""Benchmark: answer tokens decided per forward pass, by confidence threshold, with the accuracy
each threshold costs, on the bundled model's held-out synthetic documents.

Every document asks 8 questions (one block), drawn from the test split of
`decide.train.synthetic` (templates and entities never seen in training); accuracy is scored by
`decide.train.evaluate` (strings case-insensitively, everything else exactly). The baseline is one
token per step (`max_tokens_per_step=1`: every step commits the single most confident position, and
finite slots are decided position by position too). Answer tokens are slot positions (value tokens
and the filler after them, everything the sampler has to decide); value tokens are the answers'
own tokens, filler not counted (what `decide`'s report calls answer tokens); a forward pass is one
the document took part in. The thresholds run without a step cap; then threshold 0.9 without
parallel continuations (one uncertain item per step: the rule before 2026-12-07); the last row
is the defaults (threshold 0.9, at most `DEFAULT_MAX_STEPS` steps per block). All settings share
one engine (compiled questions and mask caches warm) and run on the same documents in the same
process.

    python benchmarks/parallelism.py                  # 100 documents
    python benchmarks/parallelism.py --docs 20 --thresholds 0.9
    python benchmarks/parallelism.py --model DIR --seed 4321   # another model, validation draw
"""

from __future__ import annotations

import argparse

import common

from decide.engine import load_model
from decide.jobs.spec import DEFAULT_MAX_STEPS
from decide.train.evaluate import SyntheticReport, evaluate_synthetic


def accuracy(report: SyntheticReport) -> float:
    right = report.stated.right + report.derived.right
    total = report.stated.total + report.derived.total
    return right / total if total else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="model directory (default: bundled)")
    parser.add_argument("--docs", type=int, default=100)
    parser.add_argument(
        "--thresholds", type=float, nargs="*", default=[0.5, 0.7, 0.8, 0.9, 0.95, 0.99]
    )
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    common.set_threads(args.threads)
    path = args.model or common.bundled()
    if path is None:
        print(
            "The bundled model is not installed (decide/model/ is absent; `decide train --recipe "
            "bundled` builds it): this table needs a trained model, skipped."
        )
        return
    loaded = load_model(path)
    print(f"Machine: {common.describe_machine(args.threads)}")
    print(
        f"Model: {args.model or 'bundled'} ({loaded.config.model_type}, "
        f"{loaded.parameter_count() / 1e6:.1f} M parameters, {loaded.dtype}); {args.docs} "
        f"held-out documents × 8 questions, batch {args.batch_size}\n"
    )
    docs = [d.as_tuple() for d in common.documents(args.docs, args.seed, questions=8)]
    eng = common.engine(loaded, args.batch_size)
    evaluate_synthetic(eng, docs[:4])  # warm-up: compiles the questions, fills mask caches
    settings = [("one token per step", {"max_tokens_per_step": 1})]
    # The thresholds alone (no step cap), then the defaults (threshold 0.9, the step cap).
    settings += [(f"threshold {t}", {"threshold": t, "max_steps": None}) for t in args.thresholds]
    # The commit rule before 2026-12-07 (one item per step when none reaches the threshold).
    settings += [
        (
            "threshold 0.9, no parallel continuations",
            {"threshold": 0.9, "max_steps": None, "parallel_continuations": False},
        )
    ]
    settings += [(f"defaults (threshold 0.9, max_steps {DEFAULT_MAX_STEPS})", {})]
    rows, baseline = [], None
    for label, decoding in settings:
        common.set_decoding(eng, **decoding)
        report = evaluate_synthetic(eng, docs)
        acc = accuracy(report)
        baseline = acc if baseline is None else baseline
        rows.append(
            [
                label,
                f"{report.answer_tokens / report.nfe:.2f}",
                f"{report.value_tokens / report.nfe:.2f}",
                f"{report.nfe / len(docs):.1f}",
                f"{100 * acc:.1f} %",
                f"{100 * (acc - baseline):+.1f}",
                f"{100 * report.stated.rate:.1f} %",
                f"{100 * report.derived.rate:.1f} %",
                f"{100 * report.documents.rate:.0f} %",
                f"{len(docs) / report.seconds:.2f}",
                report.failed_rows,
            ]
        )
    print(
        common.table(
            [
                "decoding",
                "answer tokens / forward",
                "value tokens / forward",
                "forwards / document",
                "accuracy",
                "Δ points vs one token/step",
                "stated",
                "derived",
                "documents all right",
                "documents/s",
                "failed rows",
            ],
            rows,
        )
    )
    print(
        f"\nAnswer tokens per document: {report.answer_tokens / len(docs):.1f} slot positions, "
        f"{report.value_tokens / len(docs):.1f} of them value tokens. "
        "Target: ≥ 3 answer tokens per forward with ≤ 1 point accuracy loss."
    )


if __name__ == "__main__":
    main()
