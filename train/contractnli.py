"""ContractNLI NDAs as decision jobs: 17 hypotheses per contract, with gold evidence spans.

Contract: `load_split(name)` reads `train/data/contract-nli/<name>.json.gz` (`dev`, 61 NDAs, or
`train50`, the first 50 of the training split; the official test split is not here and is never
read); `spec(split)` is the job spec of the 17 hypotheses, one enum question each
(`entailment|contradiction|not_mentioned`, `absent: not_mentioned`), ids from the hypotheses'
short descriptions, the default instruction (the one training packs with), and
`windows.questions` 2 (`window_settings()`, which training reads windows with); `documents(split)`
is one `LongRow` per NDA with its gold labels and, per hypothesis, the character offsets of its
gold evidence spans. `train50` is cut into a training part and a validation part for recipe
choices by a hash of the file name (`part`), never by position; the development split is
reported, never trained or tuned on.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from pathlib import Path
from typing import Any

from decide.jobs.spec import Windows

from .windows import LongRow

__all__ = ["SPLITS", "LongRow", "documents", "load_split", "questions", "spec"]

DATA = Path(__file__).parent / "data" / "contract-nli"
SPLITS = ("dev", "train50")
LABELS = {
    "Entailment": "entailment",
    "Contradiction": "contradiction",
    "NotMentioned": "not_mentioned",
}
ABSENT = "not_mentioned"
VALIDATION_BUCKET = 5  # one train50 NDA in five (by hash) is kept for validation


def load_split(name: str) -> dict[str, Any]:
    """The split as released (`documents` and `labels`)."""
    if name not in SPLITS:
        raise ValueError(f"unknown ContractNLI split {name!r}; bundled: {', '.join(SPLITS)}")
    with gzip.open(DATA / f"{name}.json.gz", "rt", encoding="utf-8") as f:
        return json.load(f)


def question_id(short_description: str) -> str:
    """`Sharing with third-parties` → `sharing_with_third_parties`."""
    return re.sub(r"[^a-z0-9]+", "_", short_description.lower()).strip("_")


def hypotheses(split: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(dataset key, question id, hypothesis text), in the dataset's key order nda-1..nda-20."""
    keys = sorted(split["labels"], key=lambda k: int(k.split("-")[1]))
    return [
        (k, question_id(split["labels"][k]["short_description"]), split["labels"][k]["hypothesis"])
        for k in keys
    ]


def questions(split: dict[str, Any]) -> list[dict[str, Any]]:
    """One enum question per hypothesis, `not_mentioned` its absent value."""
    return [
        {"id": qid, "text": text, "schema": {"enum": list(LABELS.values())}, "absent": ABSENT}
        for _, qid, text in hypotheses(split)
    ]


# Hypotheses per block of a contract read in windows: fewer leave each window more of the
# contract (on the bundled model's 512 positions, 2 leave about 330 tokens, 6 about 150).
WINDOW_QUESTIONS = 2


def spec(split: dict[str, Any]) -> dict[str, Any]:
    """The job spec of the 17 hypotheses."""
    return {"questions": questions(split), "windows": {"questions": WINDOW_QUESTIONS}}


def window_settings() -> Windows:
    """How the job spec reads a contract (training reads it the same way)."""
    return Windows(questions=WINDOW_QUESTIONS)


def is_validation(file_name: str) -> bool:
    """Whether a train50 NDA belongs to the validation part (a hash of its file name)."""
    return int(hashlib.sha256(file_name.encode()).hexdigest(), 16) % VALIDATION_BUCKET == 0


def documents(split: dict[str, Any], part: str | None = None) -> list[LongRow]:
    """One row per NDA (`part`: None for all, `train` or `validation` of train50)."""
    keys = hypotheses(split)
    asked = questions(split)
    out = []
    for doc in split["documents"]:
        if part is not None and is_validation(doc["file_name"]) != (part == "validation"):
            continue
        spans = doc["spans"]
        annotations = doc["annotation_sets"][0]["annotations"]
        gold = {qid: LABELS[annotations[key]["choice"]] for key, qid, _ in keys}
        evidence = {
            qid: [tuple(spans[i]) for i in annotations[key]["spans"]] for key, qid, _ in keys
        }
        out.append(LongRow(doc["file_name"], doc["text"], asked, gold, evidence))
    return out
