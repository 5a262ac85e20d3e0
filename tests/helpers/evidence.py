"""Long documents with a pets clause, and their evidence, for the learnt evidence ranker's tests."""

from __future__ import annotations

from decide.train.windows import LongRow

from .jobdata import long_text

PETS = {
    "id": "pets",
    "text": "Are pets allowed in the flat?",
    "schema": {"enum": ["yes", "no", "not_mentioned"]},
    "absent": "not_mentioned",
}
CLAUSES = [
    "Tenants may keep one small dog or cat in the flat with consent.",
    "The tenant may keep a cat or a small dog at the property.",
    "No dogs, cats or other animals may be kept in the flat at any time.",
    "Keeping a pet such as a dog or a cat in the flat is allowed.",
]


def document(seed: int, clause: str | None) -> tuple[str, list[tuple[int, int]]]:
    """A long plain document with `clause` in its middle, and the clause's offsets."""
    text = long_text(90 + 7 * seed, seed=seed)
    if clause is None:
        return text, []
    cut = text.index(" Sentence", len(text) // 2) + 1
    text = f"{text[:cut]}{clause} {text[cut:]}"
    return text, [(cut, cut + len(clause))]


def rows(seeds: range) -> list[LongRow]:
    out = []
    for seed in seeds:
        clause = None if seed % 3 == 2 else CLAUSES[seed % len(CLAUSES)]
        text, spans = document(seed, clause)
        gold = {"pets": "yes" if spans else "not_mentioned"}
        out.append(LongRow(f"d{seed}", text, [PETS], gold, {"pets": spans}))
    return out
