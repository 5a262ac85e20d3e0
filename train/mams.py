"""MAMS-ACSA restaurant reviews as decision jobs: one question per aspect category.

Each review becomes one document with eight questions, one per MAMS category (food, staff,
miscellaneous, place, service, menu, price, ambience), answered positive / negative / neutral /
not_mentioned. The XML files and their Apache-2.0 licence live in `train/data/mams-acsa/`
(siat-nlp/MAMS-for-ABSA); the test split is not included and is never used.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data" / "mams-acsa"
CATEGORIES = ("food", "staff", "miscellaneous", "place", "service", "menu", "price", "ambience")
SENTIMENTS = ["positive", "negative", "neutral"]
ANSWERS = [*SENTIMENTS, "not_mentioned"]
QUESTIONS = [
    {
        "id": category,
        "text": f"What does the review say about the {category}?",
        "schema": {"enum": ANSWERS},
    }
    for category in CATEGORIES
]


def load(split: str) -> list[tuple[str, dict[str, Any]]]:
    """(review text, gold answers) for `split` "train" or "val"."""
    if split not in ("train", "val"):
        raise ValueError(f"MAMS split must be train or val, got {split!r}")
    root = ET.parse(DATA / f"{split}.xml").getroot()
    out = []
    for sentence in root.iter("sentence"):
        text = (sentence.findtext("text") or "").strip()
        gold = dict.fromkeys(CATEGORIES, "not_mentioned")
        for aspect in sentence.iter("aspectCategory"):
            gold[aspect.attrib["category"]] = aspect.attrib["polarity"]
        out.append((text, gold))
    return out
