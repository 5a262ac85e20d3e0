"""Related answers that agree: no rules vs JSON Schema rules vs CEL rules vs derived answers.

For claims and loans (held-out synthetic documents, test split) and the leave requests (the ten
hand-written ones of `examples/`, gold in `examples/check_leave.py`), the same model decides the
same documents four ways:

- `none`: every question asked of the model, nothing linking them;
- `JSON Schema`: the domain's links as JSON Schema `rules` (enforced while decoding; JSON Schema
  cannot compare two answers, so `amount > policy_limit` and `days <= balance` are not among them,
  and the leave job has none);
- `CEL rules`: the domain's relations as CEL rules (`over_limit == (amount > policy_limit)`, ...):
  those over finite questions are enforced while decoding, the others checked after it (a row
  violating one fails);
- `derived`: the decision questions computed from the facts by CEL `derive`, never asked.

Printed per domain and way: rows decided, documents whose answers violate a relation (among those
decided), accuracy of the decision questions (asked of the model, or derived by logic), accuracy
of the other questions, documents with every answer right, forward passes per document.

    python benchmarks/rules.py               # 150 synthetic documents per domain
    python benchmarks/rules.py --docs 40
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from typing import Any

import common
import polars as pl

from decide.jobs.checks import plan_checks
from decide.jobs.decisions import DecisionEngine, Item
from decide.jobs.spec import Question, load_spec
from decide.train.evaluate import Tally, same
from decide.train.synthetic import DOMAINS

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def const(qid: str, value: Any) -> dict[str, Any]:
    return {"properties": {qid: {"const": value}}}


JSON_RULES: dict[str, dict[str, Any] | None] = {
    "claims": {"allOf": [
        {"if": const("policy_active", False), "then": const("eligible", False)},
        {"if": const("over_limit", True), "then": const("eligible", False)},
        {"if": {"properties": {"policy_active": {"const": True}, "over_limit": {"const": False}}},
         "then": const("eligible", True)},
    ]},
    "loans": {"allOf": [
        {"if": const("employed", False), "then": const("approve", False)},
        {"if": const("prior_default", True), "then": const("approve", False)},
        {"if": const("within_income", False), "then": const("approve", False)},
        {"if": {"properties": {"employed": {"const": True}, "prior_default": {"const": False},
                               "within_income": {"const": True}}},
         "then": const("approve", True)},
    ]},
    "leave": None,  # its one relation compares two answers: not expressible in JSON Schema
}  # fmt: skip
# The decision questions and the logic that links them to the facts.
DERIVED: dict[str, dict[str, str]] = {
    "claims": {"over_limit": "amount > policy_limit", "eligible": "policy_active && !over_limit"},
    "loans": {"within_income": "requested <= income",
              "approve": "employed && !prior_default && within_income"},
    "leave": {"within_balance": "days <= balance"},
}  # fmt: skip
WAYS = ("none", "JSON Schema", "CEL rules", "derived")


def relations(domain: str) -> list[dict[str, str]]:
    """The domain's relations as CEL rules: each decision question equals its logic."""
    return [{"rule": f"{qid} == ({expr})", "message": f"{qid} contradicts {expr}"}
            for qid, expr in DERIVED[domain].items()]  # fmt: skip


def leave_job() -> tuple[list[dict], list[tuple[str, dict]], Any]:
    """The leave questions (within_balance asked), the ten requests with gold, the date policy."""
    sys.path.insert(0, str(EXAMPLES))
    from check_leave import GOLD

    spec = load_spec(EXAMPLES / "leave.yaml")
    questions = [
        q.model_dump(by_alias=True, exclude_none=True, exclude={"derive"}) for q in spec.questions
    ]
    frame = pl.read_parquet(EXAMPLES / "leave.parquet").sort("doc_id")
    docs = [(row["document"], GOLD[row["doc_id"]]) for row in frame.iter_rows(named=True)]
    return questions, docs, spec.dates.policy()


def decide_way(
    loaded, domain: str, way: str, questions: list[dict], docs: list, dates: Any, batch: int
) -> dict[str, Any]:
    asked = [dict(q) for q in questions]
    rules: Any = None
    if way == "JSON Schema":
        rules = JSON_RULES[domain]
        if rules is None:
            return {}
    elif way == "CEL rules":
        rules = relations(domain)
    elif way == "derived":
        for q in asked:
            if q["id"] in DERIVED[domain]:
                q["derive"] = DERIVED[domain][q["id"]]
    engine = DecisionEngine(loaded, batch_size=batch, rules=rules, dates=dates)
    qset = engine.questions([Question.model_validate(q) for q in asked])
    judge = plan_checks([(r["rule"], r["message"]) for r in relations(domain)],
                        [(q["id"], q["schema"], None) for q in questions])  # fmt: skip
    decided = {d.doc_id: d for d in engine.decide(
        Item(i, text, qset) for i, (text, _) in enumerate(docs))}  # fmt: skip
    out = {"ok": 0, "violating": 0, "decisions": Tally(), "facts": Tally(), "all": Tally(),
           "nfe": 0}  # fmt: skip
    for i, (_, gold) in enumerate(docs):
        d = decided[i]
        out["nfe"] += d.nfe
        answers = d.answers or {}
        if d.ok:
            out["ok"] += 1
            out["violating"] += judge.violated(answers) is not None
        right = d.ok
        for qid, truth in gold.items():
            good = d.ok and qid in answers and same(answers[qid], truth)
            right &= good
            out["decisions" if qid in DERIVED[domain] else "facts"].add(good)
        out["all"].add(right)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None)
    parser.add_argument("--docs", type=int, default=150, help="synthetic documents per domain")
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()
    loaded = common.load_trained(args.model)
    header = ["domain", "way", "rows decided", "documents violating a relation",
              "decision questions right", "other questions right", "every answer right",
              "forward passes / document"]  # fmt: skip
    rows = []
    for domain in ("claims", "loans", "leave"):
        if domain == "leave":
            questions, docs, dates = leave_job()
        else:
            rng = random.Random(99)
            questions, dates = DOMAINS[domain].questions, None
            docs = [DOMAINS[domain].sample(rng, "test") for _ in range(args.docs)]
        for way in WAYS:
            r = decide_way(loaded, domain, way, questions, docs, dates, args.batch_size)
            if not r:
                rows.append([domain, way, "not expressible", "", "", "", "", ""])
                continue
            rows.append([
                domain, way, f"{r['ok']} of {len(docs)}", f"{r['violating']} of {r['ok']}",
                f"{100 * r['decisions'].rate:.1f} %", f"{100 * r['facts'].rate:.1f} %",
                f"{r['all'].right} of {len(docs)}", f"{r['nfe'] / len(docs):.1f}",
            ])  # fmt: skip
    print(common.table(header, rows))


if __name__ == "__main__":
    main()
