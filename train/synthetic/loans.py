"""Loan applications: the purpose, applicant, city, requested amount and income, whether the
applicant is employed and has defaulted before (stated facts), and whether the amount is within
the income and the loan to be approved (derived: employed, no default, within income). Phrasings:
data/synthetic/loans.json; `sample(draw)` returns the document and its gold answers."""

from __future__ import annotations

from typing import Any

from .draw import CLOSE_COMPARISONS, Draw, assemble, close_pair
from .entities import city, money, person
from .tables import table

PURPOSES = ("business", "car", "education", "home")

QUESTIONS = [
    {"id": "purpose", "text": "What is the loan for?",
     "schema": {"enum": ["home", "car", "education", "business"]}},
    {"id": "applicant", "text": "What is the applicant's full name?",
     "schema": {"type": "string", "minLength": 3, "maxLength": 24}},
    {"id": "city", "text": "Where does the applicant live?",
     "schema": {"type": "string", "minLength": 2, "maxLength": 16}},
    {"id": "requested", "text": "How many dollars are requested?",
     "schema": {"type": "integer", "minimum": 0, "maximum": 200000}},
    {"id": "income", "text": "What is the annual income in dollars?",
     "schema": {"type": "integer", "minimum": 0, "maximum": 500000}},
    {"id": "employed", "text": "Is the applicant employed?", "schema": {"type": "boolean"}},
    {"id": "prior_default", "text": "Has the applicant defaulted before?",
     "schema": {"type": "boolean"}},
    {"id": "within_income", "text": "Is the requested amount at most the annual income?",
     "schema": {"type": "boolean"}},
    {"id": "approve", "text": "Approve (employed, no default, amount within income)?",
     "schema": {"type": "boolean"}},
]  # fmt: skip


def sample(draw: Draw) -> tuple[str, dict[str, Any]]:
    rng = draw.rng
    purpose = rng.choice(PURPOSES)
    name, place = person(draw), city(draw)
    income = rng.randrange(18000, 150000, 500)
    requested = rng.randrange(1000, 90000, 250)
    if draw.split == "train" and rng.random() < CLOSE_COMPARISONS:
        requested, income = close_pair(rng, 15000, 140000)
    employed, defaults = rng.random() < 0.7, rng.random() < 0.3
    years = rng.randint(1, 30)
    affordable = requested <= income
    facts = [
        draw.pick(table("common/name"), name=name),
        draw.pick(
            table("loans/request"),
            amount=lambda: money(rng, requested),
            purpose=lambda: draw.widen(table(f"loans/purpose/{purpose}")),
        ),
        draw.pick(table("loans/income"), amount=lambda: money(rng, income)),
        draw.widen(table(f"loans/employed/{'yes' if employed else 'no'}"), years=years),
        draw.widen(table(f"loans/default/{'yes' if defaults else 'no'}")),
        draw.widen(table("loans/place"), place=place),
    ]
    greeting = draw.pick(table("loans/greeting"))
    closing = draw.pick(table("loans/closing"), name=name)
    form = [
        ("Applicant", name),
        ("City", place),
        ("Requested", money(rng, requested)),
        ("Annual income", money(rng, income)),
    ]
    gold = {
        "purpose": purpose,
        "applicant": name,
        "city": place,
        "requested": requested,
        "income": income,
        "employed": employed,
        "prior_default": defaults,
        "within_income": affordable,
        "approve": employed and not defaults and affordable,
    }
    if draw.omit == "prior_default":
        facts[5] = ""
        gold["prior_default"] = None
        gold["approve"] = None if employed and affordable else False
    text = assemble(
        draw, table("common/layouts"), facts, greeting=greeting, closing=closing, form=form
    )
    return text, gold
