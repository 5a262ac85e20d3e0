"""Example job data shared by the jobs and report tests: eight questions of mixed schema kinds
and random short documents."""

from __future__ import annotations

import random
from pathlib import Path

import polars as pl

QUESTIONS = [
    {"id": "kind", "text": "What kind of claim is it?",
     "schema": {"enum": ["auto", "home", "health", "travel"]}},
    {"id": "eligible", "text": "Is the claim eligible?", "schema": {"type": "boolean"}},
    {"id": "amount", "text": "How many dollars are claimed?",
     "schema": {"type": "integer", "minimum": 0, "maximum": 20000}},
    {"id": "city", "text": "Which city?",
     "schema": {"type": "string", "minLength": 2, "maxLength": 10}},
    {"id": "days", "text": "How many days late?",
     "schema": {"type": "integer", "exclusiveMinimum": -1, "maximum": 90}},
    {"id": "police", "text": "Was a police report filed?", "schema": {"type": ["boolean", "null"]}},
    {"id": "contact", "text": "Who should be contacted?",
     "schema": {"type": "object",
                "properties": {"team": {"enum": ["claims", "fraud"]},
                               "level": {"type": "integer", "minimum": 1, "maximum": 3}},
                "required": ["team", "level"], "additionalProperties": False}},
    {"id": "code", "text": "Which clause applies?",
     "schema": {"type": "string", "pattern": "^[A-C][0-9]$"}},
]  # fmt: skip
WORDS = [
    "car",
    "home",
    "water",
    "fire",
    "claim",
    "policy",
    "limit",
    "dollars",
    "Boston",
    "Denver",
    "report",
    "late",
    "days",
]


def write_docs(path: Path, count: int, seed: int = 0, **columns: list) -> Path:
    rng = random.Random(seed)
    docs = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 40))) for _ in range(count)]
    frame = {"doc_id": [f"doc-{i:05d}" for i in range(count)], "document": docs, **columns}
    pl.DataFrame(frame).write_parquet(path)
    return path
