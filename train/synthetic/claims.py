"""Insurance claims: the claim's type, claimant, city, amount and policy limit, whether the policy
is active and a police report was filed (stated facts), and whether the amount is over the limit
and the claim eligible (derived: active and not over the limit). Phrasings: data/synthetic/
claims.json; `sample(draw)` returns the document and its gold answers."""

from __future__ import annotations

from typing import Any

from .draw import CLOSE_COMPARISONS, Draw, assemble, close_pair
from .entities import city, money, person
from .tables import table

ROUND_AMOUNTS = 0.3  # share of training claims whose amount is a round hundred or thousand
SMALL_AMOUNTS = 0.1  # of the other training claims, whose amount has three digits
TYPES = ("auto", "health", "home", "travel")

QUESTIONS = [
    {"id": "claim_type", "text": "What kind of claim is this?",
     "schema": {"enum": ["auto", "home", "health", "travel"]}},
    {"id": "claimant", "text": "What is the claimant's full name?",
     "schema": {"type": "string", "minLength": 3, "maxLength": 24}},
    {"id": "city", "text": "In which city did it happen?",
     "schema": {"type": "string", "minLength": 2, "maxLength": 16}},
    {"id": "amount", "text": "How many dollars are claimed?",
     "schema": {"type": "integer", "minimum": 0, "maximum": 100000}},
    {"id": "policy_limit", "text": "What is the policy limit in dollars?",
     "schema": {"type": "integer", "minimum": 0, "maximum": 100000}},
    {"id": "policy_active", "text": "Is the policy active?", "schema": {"type": "boolean"}},
    {"id": "police_report", "text": "Was a police report filed?", "schema": {"type": "boolean"}},
    {"id": "over_limit", "text": "Does the claimed amount exceed the policy limit?",
     "schema": {"type": "boolean"}},
    {"id": "eligible", "text": "Is the claim eligible (active policy, amount within the limit)?",
     "schema": {"type": "boolean"}},
]  # fmt: skip


def sample(draw: Draw) -> tuple[str, dict[str, Any]]:
    rng, train = draw.rng, draw.split == "train"
    claim_type = rng.choice(TYPES)
    name, place = person(draw), city(draw)
    limit = rng.choice([5000, 10000, 15000, 20000, 25000, 50000])
    amount = rng.randint(200, 60000) if rng.random() < 0.5 else rng.randint(200, limit)
    if train and rng.random() < ROUND_AMOUNTS:
        # People claim round sums too ("7,000 dollars"); the test amounts rarely are, and models
        # trained without round ones dropped a trailing zero of "7,000" (700).
        amount = max(100, round(amount, rng.choice([-2, -3])))
    elif train and rng.random() < SMALL_AMOUNTS:
        # Stage 6 read "I claim 400 dollars" as 4000: amounts under 1,000 were 1 % of training.
        amount = rng.randint(100, 999)
    if train and rng.random() < CLOSE_COMPARISONS:
        amount, limit = close_pair(rng, 300, 60000)
    active, police = rng.random() < 0.7, rng.random() < 0.5
    event = draw.widen(table(f"claims/type/{claim_type}"))
    # the train-only amount phrasings show one spelling, drawn for training documents only
    written = money(rng, amount) if train else ""
    facts = [
        draw.pick(table("common/name"), name=name),
        draw.pick(table("claims/event"), event=event),
        draw.widen(table("claims/amount"), {"amount": written}, amount=lambda: money(rng, amount)),
        draw.pick(table("claims/limit"), limit=lambda: money(rng, limit)),
        draw.widen(table(f"claims/active/{'yes' if active else 'no'}")),
        draw.pick(table(f"claims/police/{'yes' if police else 'no'}")),
        draw.widen(table("claims/place"), place=place),
    ]
    greeting = draw.pick(table("claims/greeting"))
    closing = draw.pick(table("claims/closing"), name=name)
    form = [
        ("Policyholder", name),
        ("City", place),
        ("Claim amount", money(rng, amount)),
        ("Policy limit", money(rng, limit)),
    ]
    over = amount > limit
    gold = {
        "claim_type": claim_type,
        "claimant": name,
        "city": place,
        "amount": amount,
        "policy_limit": limit,
        "policy_active": active,
        "police_report": police,
        "over_limit": over,
        "eligible": active and not over,
    }
    if draw.omit == "police_report":
        facts[5] = ""
        gold["police_report"] = None
    elif draw.omit == "policy_active":
        facts[4] = ""
        gold["policy_active"] = None
        gold["eligible"] = False if over else None
    text = assemble(
        draw, table("common/layouts"), facts, greeting=greeting, closing=closing, form=form
    )
    return text, gold
