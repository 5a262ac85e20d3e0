"""Every format decide compiles is checked with the meaning its grammar produces (RFC 3339's for
dates and times), by the validator that checks each decision."""

from __future__ import annotations

import pytest

from decide.jobs.questions import CompiledQuestion
from decide.jobs.questionset import decision_validator
from decide.schemas import Vocabulary, compile_slot

VOCAB = Vocabulary.from_bytes([bytes([b]) for b in range(256)] + [b"<pad>"], [256])


@pytest.mark.parametrize(
    ("fmt", "good", "bad"),
    [
        ("time", ["10:10:10Z", "23:59:59+01:00", "08:30:00.5-05:00"], ["10:10:10", "25:00:00Z"]),
        ("date", ["2024-02-29"], ["2023-02-29"]),
        ("date-time", ["2024-01-02T10:10:10Z"], ["2024-01-02 10:10"]),
    ],
)
def test_values_the_format_grammars_produce_pass_the_decision_validator(fmt, good, bad) -> None:
    schema = {"type": "string", "format": fmt}
    validator = decision_validator(
        [CompiledQuestion("v", "?", schema, compile_slot(schema, VOCAB))]
    )
    for value in good:  # `time` failed every answer: the draft-3 checker wants no offset
        assert validator.is_valid({"v": value}), value
    for value in bad:
        assert not validator.is_valid({"v": value}), value
