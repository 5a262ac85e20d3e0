"""Size of report.html, and the time and peak memory of building the report, for large jobs.

Writes a synthetic job output directory (answer parts with the runner's columns and types,
a manifest, an input file holding the documents) of N rows, builds report.json and report.html
from it with the real `decide report` in a child process (peak RSS from `wait4`), and prints one
table. The page embeds aggregates and a bounded sample, so its size should stay flat from 10,000
to 1,000,000 rows (target: < 5 MB).

The directory is written by another child process: Linux counts the parent's resident memory at
the time of the spawn into the child's peak, so a parent that had built a million rows would be
measured instead of the report.

    python benchmarks/report_size.py                 # 10k, 100k and 1M rows
    python benchmarks/report_size.py --rows 100000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

PART_ROWS = 100_000
# `fake_job` in a child: python -c MAKE BENCHMARKS_DIR ROOT ROWS
MAKE = (
    "import sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]); "
    "from report_size import fake_job; fake_job(Path(sys.argv[2]), int(sys.argv[3]))"
)


def fake_job(root: Path, rows: int, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    out = root / "out"
    (out / "answers").mkdir(parents=True)
    kinds = np.array(["auto", "home", "health", "travel"])
    words = np.array(
        [
            "car",
            "roof",
            "pipe",
            "water",
            "storm",
            "claim",
            "policy",
            "limit",
            "van",
            "luggage",
            "flight",
            "clinic",
        ]
    )
    inputs = root / "in.parquet"
    docs = [" ".join(rng.choice(words, 60)) for _ in range(min(rows, 5000))]
    pl.DataFrame({
        "doc_id": [f"doc-{i:07d}" for i in range(rows)],
        "document": [docs[i % len(docs)] for i in range(rows)],
    }).write_parquet(inputs)  # fmt: skip
    for part, start in enumerate(range(0, rows, PART_ROWS)):
        n = min(PART_ROWS, rows - start)
        ok = rng.random(n) > 0.01
        kind = rng.choice(kinds, n)
        amount = rng.integers(0, 100_000, n)
        eligible = rng.random(n) > 0.4
        conf = rng.beta(8, 1, (n, 3))
        answers = [
            {"claim_type": str(k), "amount": int(a), "eligible": bool(e)} if o else None
            for k, a, e, o in zip(kind, amount, eligible, ok, strict=True)
        ]
        frame = pl.DataFrame(
            {
                "doc_id": [f"doc-{i:07d}" for i in range(start, start + n)],
                "status": np.where(ok, "ok", "error"),
                "error": [None if o else "document is empty" for o in ok],
                "answers": answers,
                "answers_json": [json.dumps(a, separators=(",", ":")) if a else None
                                 for a in answers],
                "confidence": [
                    {"claim_type": float(c[0]), "amount": float(c[1]), "eligible": float(c[2])}
                    if o else None
                    for c, o in zip(conf, ok, strict=True)
                ],
                "nfe": rng.integers(2, 9, n).astype(np.int32),
                "value_tokens": np.where(ok, rng.integers(3, 12, n), 0).astype(np.int32),
                "filler_tokens": np.where(ok, rng.integers(0, 40, n), 0).astype(np.int32),
                "error_kind": [None if o else "empty_document" for o in ok],
                "truncated": np.zeros(n, dtype=bool),
                "model_fingerprint": ["0123456789abcdef"] * n,
                "spec_fingerprint": ["fedcba9876543210"] * n,
            },
            schema_overrides={
                "answers": pl.Struct({"claim_type": pl.String, "amount": pl.Int64,
                                      "eligible": pl.Boolean}),
                "confidence": pl.Struct({k: pl.Float64 for k in ("claim_type", "amount",
                                                                  "eligible")}),
            },
        )  # fmt: skip
        frame.write_parquet(out / "answers" / f"part-{part:05d}.parquet")
    ok_total = pl.scan_parquet(out / "answers" / "*.parquet").filter(
        pl.col("status") == "ok").select(pl.len()).collect().item()  # fmt: skip
    manifest = {
        "status": "complete",
        "fingerprints": {"model": "0123456789abcdef", "spec": "fedcba9876543210"},
        "model": "bundled", "model_type": "bert", "inputs": [str(inputs)],
        "spec": {"questions": [
            {"id": "claim_type", "text": "What kind of claim?", "schema": {"enum": list(kinds)}},
            {"id": "amount", "text": "How much?", "schema": {"type": "integer"}},
            {"id": "eligible", "text": "Eligible?", "schema": {"type": "boolean"}},
        ], "decoding": {"threshold": 0.9}, "input": {"doc_id": "doc_id", "document": "document"}},
        "counts": {"total": rows, "ok": ok_total, "error": rows - ok_total, "invalid_rows": 0},
        "seconds": rows / 50.0, "batch_size": 16, "device": "cpu",
        "throughput": {"documents": rows, "nfe": rows * 5, "answer_tokens": rows * 27,
                       "value_tokens": rows * 7},
    }  # fmt: skip
    (out / "manifest.json").write_text(json.dumps(manifest))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="*", default=[10_000, 100_000, 1_000_000])
    args = parser.parse_args()
    print("| rows | report.html | report.json | build time | peak RSS of `decide report` |")
    print("|---:|---:|---:|---:|---:|")
    for rows in args.rows:
        with tempfile.TemporaryDirectory() as tmp:
            here = str(Path(__file__).resolve().parent)
            subprocess.run([sys.executable, "-c", MAKE, here, tmp, str(rows)], check=True)
            out = Path(tmp) / "out"
            started = time.perf_counter()
            child = subprocess.Popen([sys.executable, "-m", "decide", "report", str(out)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
            _, status, usage = os.wait4(child.pid, 0)
            seconds = time.perf_counter() - started
            if os.waitstatus_to_exitcode(status) != 0:
                raise SystemExit(f"decide report failed: {child.stderr.read().decode()[-2000:]}")
            html = (out / "report.html").stat().st_size
            js = (out / "report.json").stat().st_size
            print(f"| {rows:,} | {html / 1e6:.2f} MB | {js / 1e3:.1f} kB | {seconds:.1f} s "
                  f"| {usage.ru_maxrss / 1024:,.0f} MB |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
