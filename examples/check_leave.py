"""Compare a run of the leave example with the true answers (written by hand, below).

    decide run examples/leave.parquet --spec examples/leave.yaml -o out/leave
    python examples/check_leave.py out/leave

Strings are compared case-insensitively (the bundled model's vocabulary is uncased). Also counts
the requests whose `within_balance` disagrees with their own extracted days and balance (derived
in the spec, so it must be 0).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import polars as pl

from decide.train.evaluate import same


def gold(kind: str, name: str, days: int, balance: int, start: str, cover: bool) -> dict:
    return {
        "leave_type": kind,
        "employee": name,
        "days": days,
        "balance": balance,
        "within_balance": days <= balance,
        "start_date": start,
        "cover_arranged": cover,
    }


GOLD = {
    "LV-01": gold("annual", "Marcus Lindqvist", 5, 18, "2025-06-09", True),
    "LV-02": gold("sick", "Dana Whitfield", 3, 2, "2025-07-14", False),
    "LV-03": gold("parental", "Akira Tanaka", 40, 40, "2025-09-01", True),
    "LV-04": gold("unpaid", "Oksana Kovalenko", 10, 0, "2025-11-03", True),
    "LV-05": gold("annual", "Jamie Ortiz", 1, 7, "2025-08-22", False),
    "LV-06": gold("bereavement", "Ravi Menon", 4, 12, "2025-06-16", True),
    "LV-07": gold("sick", "Grace O'Connor", 2, 9, "2025-10-02", False),
    "LV-08": gold("annual", "Liam Novak", 15, 11, "2025-12-01", True),
    "LV-09": gold("parental", "Chen Wei", 20, 25, "2025-10-20", True),
    "LV-10": gold("unpaid", "Eleanor Voss", 8, 3, "2026-01-13", False),
}


def score(out: Path) -> dict:
    """Per-question and overall counts of right answers in the job output at `out`."""
    answers = pl.read_parquet(out / "answers" / "*.parquet")
    right = total = full = inconsistent = 0
    per_question: dict[str, list[int]] = {}
    for row in answers.iter_rows(named=True):
        truth = GOLD[row["doc_id"]]
        got = json.loads(row["answers_json"]) if row["answers_json"] else {}
        try:
            inconsistent += got["within_balance"] != (got["days"] <= got["balance"])
        except (KeyError, TypeError):
            inconsistent += 1
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


def main(out: Path) -> None:
    result = score(out)
    for qid, (r, t) in result["per_question"].items():
        print(f"{qid:<15} {r}/{t}")
    print(
        f"answers right: {result['right']}/{result['total']}; requests with every answer right: "
        f"{result['full']}/{result['documents']}"
    )
    print(f"requests whose within_balance disagrees with their days and balance: "
          f"{result['inconsistent']}")  # fmt: skip


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "out/leave"))
