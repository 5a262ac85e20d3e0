"""Regenerate `examples/claims.parquet` (the quick start's documents) and its gold answers.

The documents come from the held-out *test* split of `decide.train.synthetic`: templates, names
and cities the bundled model never saw in training. `claims_gold.parquet` holds the true answers
so you can check the model's (`python examples/check_claims.py out/claims`).

    python examples/make_claims.py
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import polars as pl

from decide.train.synthetic import CLAIM_QUESTIONS, DOMAINS

HERE = Path(__file__).parent
COUNT = 40


def main() -> None:
    rng = random.Random(2026)
    ids, documents, received, golds = [], [], [], []
    for i in range(COUNT):
        text, gold = DOMAINS["claims"].sample(rng, "test")
        ids.append(f"CLM-{1001 + i}")
        documents.append(text)
        received.append(f"2026-11-{1 + i % 28:02d}")
        golds.append(json.dumps(gold))
    pl.DataFrame({"doc_id": ids, "document": documents, "received": received}).write_parquet(
        HERE / "claims.parquet"
    )
    pl.DataFrame({"doc_id": ids, "gold": golds}).write_parquet(HERE / "claims_gold.parquet")
    print(f"wrote {COUNT} claims to {HERE / 'claims.parquet'}")
    assert [q["id"] for q in CLAIM_QUESTIONS]  # the spec in claims.yaml lists the same questions


if __name__ == "__main__":
    main()
