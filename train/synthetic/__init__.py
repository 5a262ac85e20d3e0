"""Synthetic decision documents: insurance claims, loan applications and support tickets.

Each domain (`claims`, `loans`, `tickets`) draws facts, writes them into a document with one of
several layouts (narrative, form, e-mail) and many phrasings per fact (negations included), adds
distracting sentences, and returns the document with its gold decision object. Some answers are
stated facts (a category, an amount, a name, a yes/no fact); others are derived from several facts
(a claim is eligible when the policy is active and the amount is within the limit), so related
questions depend on each other. Phrasings live in data files (`tables`).

The held-out split is defined by what a document is made of, not by the order of random draws:
every phrasing table has `train` and `held_out` phrasings and every entity list a held-out part
(`tables`); a `split="test"` document draws only held-out phrasings and entities, a training one
only training phrasings and entities that hold no word of a held-out one, whatever the seed.
`Generator.sample_document(..., trace=...)` lists what a document was made of, and
`tables.trace_side` tells the side of each part. Distractor sentences (they state no fact) are
drawn by both splits.

Training documents are widened beyond the lists: most names and cities come from thousands of real
ones or are made up, and cues and sentences often come from the tables' `extra` phrasings. Callers
training a model give `Generator` that model's tokenizer: a share of real training cities is drawn
from those it spells as one token (`entities.ONE_PIECE_CITIES`); without one, cities are drawn
uniformly. Everything is driven by one `random.Random`, so a seed gives the same documents on every
machine.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tokenizers import Tokenizer

from . import claims, loans, tickets
from .draw import Draw
from .entities import one_piece_cities, real_pool, word_pool
from .tables import Split, entity_list, raw, trace_side

CLAIM_QUESTIONS = claims.QUESTIONS
LOAN_QUESTIONS = loans.QUESTIONS
TICKET_QUESTIONS = tickets.QUESTIONS
DISTRACTORS: list[str] = raw("pieces")["distractors"]

__all__ = [
    "CLAIM_QUESTIONS", "DEPENDENCIES", "DEPENDENCY_INPUTS", "DERIVED", "DISTRACTORS", "DOMAINS",
    "LOAN_QUESTIONS", "TICKET_QUESTIONS", "Domain", "Draw", "Generator", "Split", "derived_drill",
    "entity_list", "one_piece_cities", "real_pool", "sample_document", "trace_side", "word_pool",
]  # fmt: skip


@dataclass(frozen=True)
class Domain:
    name: str
    questions: list[dict[str, Any]]  # job-format questions (id, text, schema)
    write: Callable[[Draw], tuple[str, dict[str, Any]]]  # a document and its gold answers
    # facts a document can leave out (`Draw.omit`): a sentence of their own states each
    omittable: tuple[str, ...] = ()

    def sample(self, rng: random.Random, split: Split) -> tuple[str, dict[str, Any]]:
        """A document and its gold answers, without a tokenizer (`Generator` takes one)."""
        return self.write(Generator().draw(rng, split))


DOMAINS = {
    "claims": Domain("claims", claims.QUESTIONS, claims.sample, ("police_report", "policy_active")),
    "loans": Domain("loans", loans.QUESTIONS, loans.sample, ("prior_default",)),
    "tickets": Domain("tickets", tickets.QUESTIONS, tickets.sample),
}
# Which answers restate the document and which are derived from several facts.
DERIVED = {"over_limit", "eligible", "within_income", "approve", "refund_eligible", "priority"}
# Answers implied by others, checked by the "joint vs separate" benchmark.
DEPENDENCIES: dict[str, Callable[[dict[str, Any]], bool]] = {
    "eligible": lambda a: a["eligible"] == (a["policy_active"] and not a["over_limit"]),
    "over_limit": lambda a: a["over_limit"] == (a["amount"] > a["policy_limit"]),
    "approve": lambda a: (
        a["approve"] == (a["employed"] and not a["prior_default"] and a["within_income"])
    ),
    "within_income": lambda a: a["within_income"] == (a["requested"] <= a["income"]),
    "refund_eligible": lambda a: (
        a["refund_eligible"] == (a["refund_requested"] and a["days_since_purchase"] <= 30)
    ),
}
# The answers each dependency reads.
DEPENDENCY_INPUTS: dict[str, set[str]] = {
    "eligible": {"policy_active", "over_limit"},
    "over_limit": {"amount", "policy_limit"},
    "approve": {"employed", "prior_default", "within_income"},
    "within_income": {"requested", "income"},
    "refund_eligible": {"refund_requested", "days_since_purchase"},
}

Document = tuple[str, str, list[dict[str, Any]], dict[str, Any]]


class Generator:
    """Documents for one model: `tokenizer` is the tokenizer of the model being trained (None
    when there is none, e.g. for a corpus to train a tokenizer on; test documents never need it)."""

    def __init__(self, tokenizer: Tokenizer | None = None) -> None:
        self.whole_cities = None if tokenizer is None else one_piece_cities(tokenizer)

    def draw(self, rng: random.Random, split: Split) -> Draw:
        if split not in ("train", "test"):
            raise ValueError(f"split must be 'train' or 'test', not {split!r}")
        return Draw(rng, split, self.whole_cities)

    def sample_document(
        self,
        rng: random.Random,
        split: Split,
        domain: str | None = None,
        min_q: int = 4,
        max_q: int = 9,
        trace: list[tuple[str, str]] | None = None,
        omit_share: float = 0.0,
    ) -> Document:
        """(domain, document, questions, gold answers): `min_q`–`max_q` of the domain's questions
        (nine make two blocks), in their defined order, with the gold value of each. `trace`, if
        given, gets every phrasing and entity drawn for the document (`Draw.trace`).
        `omit_share` of the documents of a domain with `omittable` facts (drawn only when above
        0) leave one of them out: its answer, and those it decides, are null (ask them as
        optional questions)."""
        draw = self.draw(rng, split)
        name = domain or rng.choice(sorted(DOMAINS))
        spec = DOMAINS[name]
        if omit_share > 0 and spec.omittable and rng.random() < omit_share:
            draw.omit = rng.choice(spec.omittable)
        text, gold = spec.write(draw)
        count = rng.randint(min_q, min(max_q, len(spec.questions)))
        chosen = sorted(rng.sample(range(len(spec.questions)), count))
        questions = [spec.questions[i] for i in chosen]
        if trace is not None:
            trace.extend(draw.trace)
        return name, text, questions, {q["id"]: gold[q["id"]] for q in questions}

    def derived_drill(
        self, rng: random.Random, split: Split, weights: dict[str, float] | None = None
    ) -> tuple[str, list[dict[str, Any]], dict[str, Any], set[str]]:
        """(document, questions, gold answers, given): one derived question of
        `DEPENDENCY_INPUTS` asked after exactly its inputs, whose answers are given (never
        masked in training). `weights` (by derived question, default 1) chooses which derived
        question is drilled. A derived answer trained only with its inputs masked learns to
        answer from the document's words (the bundled model's `over_limit` stayed at its
        majority value for every CPU stage); with the inputs' answers in the block it learns to
        read them. The drill is bare on purpose: its one maskable slot carries the row's whole
        loss, where in a whole document it would carry one slot's share."""
        names = sorted(DEPENDENCY_INPUTS)
        chance = [1.0 if weights is None else weights.get(name, 1.0) for name in names]
        derived = rng.choices(names, weights=chance)[0]
        domain = next(d for d in DOMAINS.values() if any(q["id"] == derived for q in d.questions))
        text, gold = domain.write(self.draw(rng, split))
        given = set(DEPENDENCY_INPUTS[derived])
        questions = [q for q in domain.questions if q["id"] in given | {derived}]  # inputs first
        return text, questions, {q["id"]: gold[q["id"]] for q in questions}, given


_PLAIN = Generator()


def sample_document(
    rng: random.Random, split: Split, domain: str | None = None, min_q: int = 4, max_q: int = 9
) -> Document:
    """`Generator().sample_document`: no tokenizer (training cities drawn uniformly)."""
    return _PLAIN.sample_document(rng, split, domain, min_q, max_q)


def derived_drill(
    rng: random.Random, split: Split, weights: dict[str, float] | None = None
) -> tuple[str, list[dict[str, Any]], dict[str, Any], set[str]]:
    """`Generator().derived_drill`: no tokenizer (training cities drawn uniformly)."""
    return _PLAIN.derived_drill(rng, split, weights)
