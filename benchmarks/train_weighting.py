"""Training experiment: does weighting the loss per question (instead of per slot position)
make the bundled recipe learn faster?

Two runs of the bundled recipe from the same starting weights (MiniLM + a fresh MLM head, built
by `decide.train.bundled.build_init`), identical except for `TrainConfig.weighting`, each in its
own process with one thread (they run side by side on two cores), then both scored on the same
held-out synthetic documents and MAMS-ACSA val reviews. Needs the `train` extra.

    python benchmarks/train_weighting.py                 # 600 steps each, about 45 minutes
    python benchmarks/train_weighting.py --steps 2 --docs 2 --mams 2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ARMS = ("positions", "questions")


def arm(config: dict) -> None:
    import torch

    from decide.engine import load_model
    from decide.jobs.decisions import DecisionEngine
    from decide.jobs.spec import Decoding
    from decide.train.bundled import row_sampler
    from decide.train.evaluate import evaluate_mams, evaluate_synthetic, synthetic_documents
    from decide.train.loop import TrainConfig, train

    torch.set_num_threads(1)
    out = Path(config["out"])
    settings = TrainConfig(steps=config["steps"], threads=1, weighting=config["weighting"])
    summary = train(Path(config["init"]), row_sampler(), out, settings, progress=False,
                    log=lambda _: None)  # fmt: skip
    engine = DecisionEngine(load_model(out, dtype="float32"), Decoding(), batch_size=16)
    synthetic = evaluate_synthetic(engine, synthetic_documents(config["docs"]))
    mams = evaluate_mams(engine, limit=config["mams"])
    print(json.dumps({
        "seconds": summary["seconds"],
        "stated": synthetic.stated.rate, "derived": synthetic.derived.rate,
        "all": synthetic.documents.rate,
        "sentiment": mams.sentiment.rate, "sentiment_base": mams.sentiment_baseline.rate,
        "mention": mams.mention.rate, "mention_base": mams.mention_baseline.rate,
        "per_question": {k: v.rate for k, v in sorted(synthetic.per_question.items())},
    }))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--docs", type=int, default=60, help="held-out synthetic documents")
    parser.add_argument("--mams", type=int, default=80, help="MAMS val reviews")
    parser.add_argument("--arm", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.arm:
        arm(json.loads(args.arm))
        return
    from decide.train.bundled import build_init

    with tempfile.TemporaryDirectory() as tmp:
        init = build_init(Path(tmp))
        children = []
        for weighting in ARMS:
            config = {"init": str(init), "out": str(Path(tmp) / weighting), "steps": args.steps,
                      "weighting": weighting, "docs": args.docs, "mams": args.mams}  # fmt: skip
            children.append(subprocess.Popen(
                [sys.executable, __file__, "--arm", json.dumps(config)],
                stdout=subprocess.PIPE, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"},
            ))  # fmt: skip
        results = {}
        for weighting, child in zip(ARMS, children, strict=True):
            stdout, _ = child.communicate()
            if child.returncode:
                raise SystemExit(f"the {weighting} run failed (exit {child.returncode})")
            results[weighting] = json.loads(stdout.strip().splitlines()[-1])
    print(f"{args.steps} steps of 8 examples each from MiniLM, one thread per run; "
          f"{args.docs} held-out documents, {args.mams} MAMS val reviews\n")  # fmt: skip
    print("| weighting | train time | stated | derived | all right | MAMS sentiment (baseline) "
          "| MAMS mention (baseline) |")  # fmt: skip
    print("|:---|---:|---:|---:|---:|---:|---:|")
    for weighting, r in results.items():
        print(f"| {weighting} | {r['seconds'] / 60:.0f} min | {100 * r['stated']:.1f} % "
              f"| {100 * r['derived']:.1f} % | {100 * r['all']:.1f} % "
              f"| {100 * r['sentiment']:.1f} % ({100 * r['sentiment_base']:.1f} %) "
              f"| {100 * r['mention']:.1f} % ({100 * r['mention_base']:.1f} %) |")  # fmt: skip
    print("\nper question (positions / questions):")
    a, b = (results[w]["per_question"] for w in ARMS)
    print(", ".join(f"{q} {100 * a[q]:.0f}/{100 * b[q]:.0f}" for q in a))


if __name__ == "__main__":
    main()
