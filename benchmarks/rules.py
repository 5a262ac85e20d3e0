"""Cross-question rules on the bundled model: violations and accuracy with rules off vs on.

Held-out synthetic documents (test split) of the three domains, each asked all of its questions,
are decided twice by the same model: without rules, then with the domain's rules declared in the
job spec (the business logic that links a decision to the facts it depends on: an inactive
policy or an amount over the limit makes a claim ineligible, and so on). The table gives, both
ways, the documents whose answers violate a rule (checked with `jsonschema`), accuracy on the
questions no rule mentions (rules must not lower it), accuracy on the questions the rules link,
and the documents with every answer right.

    python benchmarks/rules.py               # 150 documents per domain
    python benchmarks/rules.py --docs 50
"""

from __future__ import annotations

import argparse
import random
from typing import Any

import common
import jsonschema

from decide.jobs.decisions import DecisionEngine, Item
from decide.jobs.spec import Question
from decide.train.evaluate import Tally, same
from decide.train.synthetic import DOMAINS


def const(qid: str, value: Any) -> dict[str, Any]:
    return {"properties": {qid: {"const": value}}}


RULES: dict[str, dict[str, Any]] = {
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
    "tickets": {"allOf": [
        {"if": const("refund_requested", False), "then": const("refund_eligible", False)},
        {"if": {"properties": {"days_since_purchase": {"minimum": 31}}},
         "then": const("refund_eligible", False)},
        {"if": {"properties": {"refund_requested": {"const": True},
                               "days_since_purchase": {"maximum": 30}}},
         "then": const("refund_eligible", True)},
        {"if": const("urgent", True), "then": const("priority", "high")},
    ]},
}  # fmt: skip
RULED = {
    "claims": {"policy_active", "over_limit", "eligible"},
    "loans": {"employed", "prior_default", "within_income", "approve"},
    "tickets": {"refund_requested", "days_since_purchase", "refund_eligible", "urgent", "priority"},
}


def run(loaded, domain: str, docs: list, rules: dict | None, batch: int) -> dict[str, Any]:
    engine = DecisionEngine(loaded, batch_size=batch, rules=rules)
    questions = engine.questions([Question.model_validate(q) for q in DOMAINS[domain].questions])
    decided = {d.doc_id: d for d in engine.decide(
        Item(i, text, questions) for i, (text, _) in enumerate(docs))}  # fmt: skip
    check = jsonschema.Draft202012Validator(RULES[domain])
    out = {"violations": 0, "untouched": Tally(), "ruled": Tally(), "all": Tally(), "failed": 0,
           "narrowed": 0}  # fmt: skip
    for i, (_, gold) in enumerate(docs):
        d = decided[i]
        if not d.ok:
            out["failed"] += 1
            out["all"].add(False)
            continue
        out["narrowed"] += sum(d.narrowed.values())
        out["violations"] += not check.is_valid(d.answers)
        right = True
        for qid, truth in gold.items():
            ok = same(d.answers[qid], truth)
            right &= ok
            out["ruled" if qid in RULED[domain] else "untouched"].add(ok)
        out["all"].add(right)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None)
    parser.add_argument("--docs", type=int, default=150, help="documents per domain")
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()
    loaded = common.load_trained(args.model)
    print(
        "| domain | rules | documents violating a rule | accuracy, questions no rule mentions | "
        "accuracy, ruled questions | every answer right | slots narrowed |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    for domain in DOMAINS:
        rng = random.Random(99)
        docs = [DOMAINS[domain].sample(rng, "test") for _ in range(args.docs)]
        for label, rules in (("off", None), ("on", RULES[domain])):
            r = run(loaded, domain, docs, rules, args.batch_size)
            print(
                f"| {domain} | {label} | {r['violations']} of {args.docs - r['failed']} | "
                f"{100 * r['untouched'].rate:.1f} % | {100 * r['ruled'].rate:.1f} % | "
                f"{100 * r['all'].rate:.1f} % | {r['narrowed']} |"
            )


if __name__ == "__main__":
    main()
