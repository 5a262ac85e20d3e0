"""Answers too unsure to give: `absent_below` (per question, else `decoding.absent_below`).

Contract. `withhold(questions, answers, confidence, default)` replaces, in place, each decoded
answer whose confidence is below its question's threshold by the question's absent value
(`absent:`, or null where the schema admits it; `jobs.window_plan.absent_of`), and returns what
it withheld: question id -> `{"value": the decoded value, "confidence": its confidence}`. The
absent answer's confidence becomes `1 - confidence`, the probability mass the engine did not put
on the value. Questions without an absent value, derived questions, answers already absent and
questions without a threshold are left alone. The threshold compares the engine's own
confidence (before any `--calibration`), so it is chosen on the labelled documents of a job
decoded with the same spec (docs/jobs.md, answers withheld).

Why after decoding and not as a bias inside it: the value's confidence is the product of every
token's probability, so it carries the whole answer's doubt, while the null option competes only
at the slot's first position; on the bundled model's hand-written validation documents with
facts cut out, a threshold of 0.9 answers 29 % of the absent facts null (2.8 % without) and
costs 5 points of the stated facts (docs/bundled-model.md, answers withheld).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .questions import CompiledQuestion
from .window_plan import absent_of
from .windows import same_value


def threshold_of(question: CompiledQuestion, default: float | None) -> float | None:
    """The question's own `absent_below`, else the job's."""
    return question.absent_below if question.absent_below is not None else default


def withhold(
    questions: Iterable[CompiledQuestion],
    answers: dict[str, Any],
    confidence: dict[str, float],
    default: float | None,
) -> dict[str, dict[str, Any]]:
    """Replace unsure answers by their question's absent value (in place); what was withheld."""
    withheld: dict[str, dict[str, Any]] = {}
    for q in questions:
        below = threshold_of(q, default)
        if below is None or q.derive is not None or q.id not in answers:
            continue
        p = confidence.get(q.id)
        if p is None or p >= below:
            continue
        declared, absent = absent_of(q)
        if not declared or same_value(answers[q.id], absent):
            continue
        withheld[q.id] = {"value": answers[q.id], "confidence": p}
        answers[q.id], confidence[q.id] = absent, 1.0 - p
    return withheld
