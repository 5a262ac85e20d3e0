"""Compare a run of the claims example with the true answers.

    decide run examples/claims.parquet --spec examples/claims.yaml -o out/claims
    python examples/check_claims.py out/claims

Strings are compared case-insensitively: the bundled model's vocabulary is uncased. Also
counts the claims whose `over_limit` or `eligible` disagree with the claim's own extracted amounts
and policy status (derived in the spec, so it must be 0).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import polars as pl

from decide.train.evaluate import same


def score(out: Path) -> dict:
    """Per-question and overall counts of right answers in the job output at `out`."""
    here = Path(__file__).parent
    gold = {
        r["doc_id"]: json.loads(r["gold"])
        for r in pl.read_parquet(here / "claims_gold.parquet").iter_rows(named=True)
    }
    answers = pl.read_parquet(out / "answers" / "*.parquet")
    right = total = full = inconsistent = 0
    per_question: dict[str, list[int]] = {}
    for row in answers.iter_rows(named=True):
        truth = gold[row["doc_id"]]
        got = json.loads(row["answers_json"]) if row["answers_json"] else {}
        inconsistent += not consistent(got)
        all_right = True
        for qid, value in truth.items():
            ok = qid in got and same(got[qid], value)
            right += ok
            total += 1
            all_right &= ok
            per_question.setdefault(qid, [0, 0])[0] += ok
            per_question[qid][1] += 1
        full += all_right
    return {"right": right, "total": total, "full": full, "documents": answers.height,
            "per_question": per_question, "inconsistent": inconsistent}  # fmt: skip


def consistent(got: dict) -> bool:
    """Whether the decisions agree with the facts they are derived from (the truth's own
    definitions: over the limit when amount > limit; eligible when active and not over)."""
    try:
        over = got["amount"] > got["policy_limit"]
        return got["over_limit"] == over and got["eligible"] == (got["policy_active"] and not over)
    except (KeyError, TypeError):
        return False


def main(out: Path) -> None:
    result = score(out)
    for qid, (r, t) in result["per_question"].items():
        print(f"{qid:<14} {r}/{t}")
    print(
        f"answers right: {result['right']}/{result['total']}; claims with every answer right: "
        f"{result['full']}/{result['documents']}"
    )
    print(
        f"claims whose over_limit/eligible disagree with their own amounts and policy status: "
        f"{result['inconsistent']}"
    )


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "out/claims"))
