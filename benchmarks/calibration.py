"""Calibrated confidence on MAMS-ACSA val with the bundled model, fitted on one half, measured on
the other; and whether the fitted map transfers to the synthetic held-out documents.

A review's id is its position in val.xml (`mams-val-<i>`); it goes to the fitting half when the
first byte of sha256(id) is even, else to the measuring half, so the halves never change. The maps
are `decide.jobs.calibration`'s (one temperature per aspect question: every question has well
over 50 labels in the fitting half). Printed: ECE (10 equal-mass bins), Brier score and accuracy
before/after on the measuring half; at `review_below` 0.8 and 0.9 the share of reviews sent to
review (any answer below) and the accuracy of the answers of the other reviews, observed against
what their calibrated confidences promise (their mean); a risk–coverage table over answers.
Synthetic held-out documents (the test split, as benchmarks/accuracy.py draws them): the MAMS map
applied as a run would apply it (MAMS knows only `enum` questions, so only enum answers change),
and, for comparison, maps fitted on one half of the synthetic documents themselves.

    python benchmarks/calibration.py                  # all 400 reviews, 200 synthetic documents
    python benchmarks/calibration.py --mams 100 --docs 50
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path
from typing import Any

import common
import numpy as np

from decide.jobs import calibration as cal
from decide.jobs.calibrate import answers_match
from decide.jobs.decisions import DecisionEngine, Item
from decide.jobs.spec import Question
from decide.train import mams
from decide.train.evaluate import synthetic_documents
from decide.train.synthetic import CLAIM_QUESTIONS, LOAN_QUESTIONS, TICKET_QUESTIONS

OPTIONS = {  # K of every question's schema (temperature maps need it)
    q["id"]: cal.schema_options(q["schema"])
    for q in [*mams.QUESTIONS, *CLAIM_QUESTIONS, *LOAN_QUESTIONS, *TICKET_QUESTIONS]
}


def first_half(review_id: str) -> bool:
    return hashlib.sha256(review_id.encode()).digest()[0] % 2 == 0


def decide(engine: DecisionEngine, docs: list[tuple[str, list[dict], dict]]) -> list[dict]:
    """Per answer: doc, qid, kind, confidence, right."""
    items = []
    for i, (text, questions, _) in enumerate(docs):
        compiled = engine.questions([Question.model_validate(q) for q in questions])
        items.append(Item(i, text, compiled))
    decided = {d.doc_id: d for d in engine.decide(items)}
    rows = []
    for i, (_, questions, gold) in enumerate(docs):
        d = decided[i]
        for q in questions:
            qid = q["id"]
            if not d.ok or qid not in (d.answers or {}):
                continue  # failed rows carry no confidence (none in these runs)
            rows.append({"doc": i, "qid": qid, "kind": cal.schema_kind(q["schema"]),
                         "confidence": d.confidence[qid],
                         "right": answers_match(d.answers[qid], gold[qid])})  # fmt: skip
    return rows


def fit(rows: list[dict]) -> cal.Fitted:
    """Maps fitted to `rows` under `decide calibrate`'s rule."""
    labels: dict[str, tuple[list[float], list[int]]] = {}
    for r in rows:
        conf, right = labels.setdefault(r["qid"], ([], []))
        conf.append(r["confidence"])
        right.append(r["right"])
    options = {r["qid"]: OPTIONS.get(r["qid"], 2) for r in rows}
    return cal.fit_maps(labels, {r["qid"]: r["kind"] for r in rows}, options)


def arrays(rows: list[dict], fitted: cal.Fitted) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    raw = np.array([r["confidence"] for r in rows], float)
    after = np.array([float(fitted.map_for(r["qid"], r["kind"], OPTIONS.get(r["qid"]))(
        r["confidence"])) for r in rows])  # fmt: skip
    return raw, after, np.array([r["right"] for r in rows], float)


def pct(x: Any) -> str:
    return "–" if x is None else f"{100 * x:.1f} %"


def measure_table(title: str, rows: list[dict], fitted: cal.Fitted) -> None:
    raw, after, right = arrays(rows, fitted)
    before, now = cal.measures(raw, right), cal.measures(after, right)
    print(f"| {title} ({len(rows)} answers) | before | after |")
    print("|---|---:|---:|")
    print(f"| ECE, 10 equal-mass bins | {before['ece']:.4f} | {now['ece']:.4f} |")
    print(f"| Brier score | {before['brier']:.4f} | {now['brier']:.4f} |")
    print(f"| accuracy | {pct(before['accuracy'])} | {pct(now['accuracy'])} |")
    print(f"| mean confidence | {pct(before['mean_confidence'])} | {pct(now['mean_confidence'])} |")
    print()


def review_table(rows: list[dict], fitted: cal.Fitted, thresholds=(0.8, 0.9)) -> None:
    _, after, right = arrays(rows, fitted)
    docs = np.array([r["doc"] for r in rows])
    print("| review_below | reviews sent to review | answers auto-accepted | promised (mean "
          "calibrated confidence) | observed accuracy |")  # fmt: skip
    print("|---:|---:|---:|---:|---:|")
    for t in thresholds:
        low_docs = set(docs[after < t].tolist())
        accepted = np.array([d not in low_docs for d in docs])
        n_docs = len(set(docs.tolist()))
        promised = after[accepted].mean() if accepted.any() else None
        observed = right[accepted].mean() if accepted.any() else None
        print(
            f"| {t} | {pct(len(low_docs) / n_docs)} ({len(low_docs)} of {n_docs}) | "
            f"{accepted.sum()} of {len(rows)} | {pct(promised)} | {pct(observed)} |"
        )
    print()
    print("| answers accepted at confidence ≥ | coverage | promised | observed | raw-confidence "
          "coverage at the same threshold |")  # fmt: skip
    print("|---:|---:|---:|---:|---:|")
    raw = np.array([r["confidence"] for r in rows], float)
    raw_curve = cal.risk_coverage(raw, right)
    for row, raw_row in zip(cal.risk_coverage(after, right), raw_curve, strict=True):
        print(f"| {row['threshold']} | {pct(row['coverage'])} | {pct(row['expected_accuracy'])} |"
              f" {pct(row['accuracy'])} | {pct(raw_row['coverage'])} |")  # fmt: skip
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="model directory (default: bundled)")
    parser.add_argument("--mams", type=int, default=400, help="MAMS val reviews (max 400)")
    parser.add_argument("--docs", type=int, default=200, help="synthetic test documents")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--dump", type=Path, help="save the decided answers (JSON) here")
    parser.add_argument("--load", type=Path, help="measure answers saved by --dump (no model)")
    parser.add_argument(
        "--decoding", nargs="*", default=[], metavar="KEY=VALUE",
        help="decoding settings over the defaults (e.g. max_steps=4), as a job's YAML writes them",
    )  # fmt: skip
    args = parser.parse_args()
    started = time.monotonic()
    if args.load:
        saved = json.loads(args.load.read_text())
        print(f"answers from {args.load} (model {saved['model']})\n")
        engine = None
    else:
        loaded = common.load_trained(args.model)
        engine = common.engine(loaded, args.batch_size, **common.decoding_settings(args.decoding))
        print(f"model: {loaded.path} ({loaded.config.model_type})\n")
    reviews = mams.load("val")[: args.mams]
    docs = [(text, mams.QUESTIONS, gold) for text, gold in reviews]
    rows = saved["mams"] if engine is None else decide(engine, docs)
    fit_rows = [r for r in rows if first_half(f"mams-val-{r['doc']}")]
    test_rows = [r for r in rows if not first_half(f"mams-val-{r['doc']}")]
    fitted = fit(fit_rows)
    temps = ", ".join(f"{q} {v['map'].get('temperature', 1.0):.2f} (K={v['map'].get('options')})"
                      for q, v in fitted.questions.items())  # fmt: skip
    n_fit = len({r["doc"] for r in fit_rows})
    print(f"MAMS-ACSA val: {len(reviews)} reviews, fitted on {n_fit}, measured on "
          f"{len(reviews) - n_fit}; temperatures: {temps}\n")  # fmt: skip
    measure_table("MAMS-ACSA val, measuring half", test_rows, fitted)
    review_table(test_rows, fitted)
    mams_seconds = time.monotonic() - started

    synth = synthetic_documents(args.docs, seed=args.seed)
    srows = saved["synthetic"] if engine is None else decide(engine, synth)
    if args.dump:
        model = str(loaded.path) if engine is not None else saved["model"]
        args.dump.write_text(json.dumps({"model": model, "mams": rows, "synthetic": srows}))
    measure_table("synthetic held-out, MAMS map (enum answers only change)", srows, fitted)
    enum_rows = [r for r in srows if r["kind"] == "enum"]
    measure_table("synthetic held-out, enum answers only, MAMS map", enum_rows, fitted)
    own_fit = fit([r for r in srows if first_half(f"synthetic-{r['doc']}")])
    own_test = [r for r in srows if not first_half(f"synthetic-{r['doc']}")]
    measure_table("synthetic held-out, map fitted on the other synthetic half", own_test, own_fit)
    review_table(own_test, own_fit)
    kinds = {}
    for r in srows:
        kinds[r["kind"]] = kinds.get(r["kind"], 0) + 1
    print("synthetic answers by kind: " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))
    print(f"time: MAMS {mams_seconds / 60:.1f} min, total {(time.monotonic() - started) / 60:.1f} "
          "min")  # fmt: skip


if __name__ == "__main__":
    main()
