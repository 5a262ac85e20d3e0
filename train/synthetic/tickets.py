"""Support tickets: the category, customer, product and days since purchase, whether the customer
asks for urgent handling and for a refund (stated facts), and whether a refund is due and the
ticket's priority (derived). Phrasings: data/synthetic/tickets.json; `sample(draw)` returns the
document and its gold answers."""

from __future__ import annotations

from typing import Any

from .draw import CLOSE_COMPARISONS, Draw, assemble
from .entities import person, product
from .tables import table

CATEGORIES = ("account", "billing", "shipping", "technical")

QUESTIONS = [
    {"id": "category", "text": "Which team should handle the ticket?",
     "schema": {"enum": ["billing", "technical", "shipping", "account"]}},
    {"id": "customer", "text": "What is the customer's full name?",
     "schema": {"type": "string", "minLength": 3, "maxLength": 24}},
    {"id": "product", "text": "Which product is it about?",
     "schema": {"type": "string", "minLength": 3, "maxLength": 20}},
    {"id": "days_since_purchase", "text": "How many days ago was the purchase?",
     "schema": {"type": "integer", "minimum": 0, "maximum": 365}},
    {"id": "urgent", "text": "Is the customer asking for urgent handling?",
     "schema": {"type": "boolean"}},
    {"id": "refund_requested", "text": "Does the customer want a refund?",
     "schema": {"type": "boolean"}},
    {"id": "refund_eligible", "text": "Is a refund due (requested within 30 days of purchase)?",
     "schema": {"type": "boolean"}},
    {"id": "priority", "text": "What priority should the ticket get?",
     "schema": {"enum": ["low", "medium", "high"]}},
]  # fmt: skip


def sample(draw: Draw) -> tuple[str, dict[str, Any]]:
    rng = draw.rng
    category = rng.choice(CATEGORIES)
    name, item = person(draw), product(draw)
    days = rng.randint(1, 90)
    if draw.split == "train" and rng.random() < CLOSE_COMPARISONS:
        days = rng.randint(23, 38)  # about the 30-day refund window
    urgent, refund = rng.random() < 0.35, rng.random() < 0.5
    issue = draw.widen(table(f"tickets/category/{category}"))
    facts = [
        draw.pick(table("common/name"), name=name),
        draw.pick(table("tickets/problem"), issue=issue),
        draw.widen(table("tickets/product"), item=item, days=days),
        draw.widen(table(f"tickets/urgent/{'yes' if urgent else 'no'}")),
        draw.widen(table(f"tickets/refund/{'yes' if refund else 'no'}")),
    ]
    greeting = draw.pick(table("tickets/greeting"))
    closing = draw.pick(table("tickets/closing"), name=name)
    form = [("Customer", name), ("Product", item), ("Days since purchase", str(days))]
    gold = {
        "category": category,
        "customer": name,
        "product": item,
        "days_since_purchase": days,
        "urgent": urgent,
        "refund_requested": refund,
        "refund_eligible": refund and days <= 30,
        "priority": "high"
        if urgent
        else ("medium" if category in ("billing", "technical") else "low"),
    }
    text = assemble(
        draw, table("common/layouts"), facts, greeting=greeting, closing=closing, form=form
    )
    return text, gold
