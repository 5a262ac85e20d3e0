"""Example job data shared by the jobs, report and training tests: eight questions of mixed
schema kinds, random short documents, long documents of plain sentences (`long_text`), and the
checks every finished job's output must pass."""

from __future__ import annotations

import json
import random
from pathlib import Path

import jsonschema
import polars as pl

MODEL_TYPES = ("llada", "Dream", "sdar", "Fast_dLLM_Qwen", "bert")  # the dense families
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


def spec(**changes) -> dict:
    return {"questions": QUESTIONS, **changes}


def read_answers(out: Path) -> pl.DataFrame:
    return pl.read_parquet(out / "answers" / "*.parquet").sort("doc_id")


def check_output(out: Path, expected_ids: set, questions=QUESTIONS) -> pl.DataFrame:
    """One row per doc id; every ok row valid against every schema; manifest agrees."""
    frame = read_answers(out)
    assert frame["doc_id"].n_unique() == frame.height
    assert set(frame["doc_id"].to_list()) == expected_ids
    schemas = {q["id"]: q["schema"] for q in questions}
    for row in frame.filter(pl.col("status") == "ok").iter_rows(named=True):
        decision = json.loads(row["answers_json"])
        assert list(decision) == [q["id"] for q in questions]
        for qid, value in decision.items():
            jsonschema.validate(value, schemas[qid], format_checker=jsonschema.FormatChecker())
            assert 0 < row["confidence"][qid] <= 1.0 + 1e-6
        assert row["nfe"] >= 1
    manifest = json.loads((out / "manifest.json").read_text())
    counts = frame["status"].value_counts()
    by_status = dict(counts.iter_rows())
    assert manifest["status"] == "complete"
    assert manifest["counts"]["ok"] == by_status.get("ok", 0)
    assert manifest["counts"]["error"] == by_status.get("error", 0)
    errors = pl.read_parquet(out / "errors.parquet")
    assert errors.height == by_status.get("error", 0) + manifest["counts"]["invalid_rows"]
    return frame


def long_text(sentences: int, seed: int = 0) -> str:
    """A long document of short plain sentences (about 46 characters each)."""
    words = ["water", "damage", "in", "Denver", "claim", "policy", "report", "late", "roof"]
    return " ".join(
        f"Sentence {i} says {words[(i + seed) % 9]} {words[(i * 7 + seed) % 9]} was noted."
        for i in range(sentences)
    )


def run_interrupted(monkeypatch, after: int, spec, inputs: list[Path], out: Path, **options):
    """`runner.run_job` with a Ctrl-C raised after `after` decisions (the run aborts, as a real
    one does, with the decisions so far written); decoding is left as it was afterwards."""
    import pytest

    from decide.jobs import runner
    from decide.jobs.decisions import DecisionEngine

    decide = DecisionEngine.decide

    def interrupted(self, items):
        for n, decision in enumerate(decide(self, items)):
            if n == after:
                raise KeyboardInterrupt
            yield decision

    with monkeypatch.context() as patch:
        patch.setattr(DecisionEngine, "decide", interrupted)
        with pytest.raises(KeyboardInterrupt):
            runner.run_job(spec, inputs, out, **options)


NS = 1_704_164_645_123_456_789  # 2024-01-02 03:04:05.123456789
YEAR_20000 = 568_971_820_800_000_000  # microseconds after 1970: 20000-01-01


def carried(height: int) -> dict[str, pl.Series]:
    """Input columns to carry that Python objects would change: nanoseconds, a date past
    year 9999, a nested struct with a list."""
    return {
        "stamp": pl.Series([NS + i for i in range(height)]).cast(pl.Datetime("ns")),
        "far": pl.Series([YEAR_20000] * height).cast(pl.Datetime("us")),
        "nested": pl.Series([{"a": i, "b": [1.5, None]} for i in range(height)]),
        "team": pl.Series([f"t{i}" for i in range(height)]),
    }
