"""The most confident answers that satisfy the rules checked after decoding.

A CEL rule that reads a wide or extracted number, or a derived answer, cannot be enforced while
decoding (`jobs.checks`). When a decided document violates one, the finite answers it depends
on (directly or through derived answers) fall back to the other options their slots had when
they were committed (`SlotResult.ranked`, each with its probability among the slot's options):
choices of one value per question are tried best first by the confidence they give up
(`jobs.windows.combinations`, at most `ENFORCE_TRIES`), and the first one that passes the whole
check (derived answers recomputed, schemas, every rule) is kept, with each changed answer's
confidence that option's probability. When none passes, the row fails with the rule's message
as before. Answers read whole or committed greedily at the step cap have no options: they stay.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .windows import ENFORCE_TRIES, combinations


@dataclass(frozen=True)
class Choice:
    value: Any
    confidence: float


def depends_on_checks(qset: Any) -> set[str]:
    """The questions the CEL rules read, directly or through derived answers."""
    if qset.checks is None:
        return set()
    wanted = {i for check in qset.checks.checks for i in check.inputs}
    for derived in reversed(qset.plan.order):  # inputs come first in `order`
        if derived.id in wanted:
            wanted.update(derived.inputs)
    return wanted


def choices(
    answers: Mapping[str, Any],
    confidence: Mapping[str, float],
    ranked: Mapping[str, Sequence[tuple[Any, float]]],
) -> Iterator[tuple[dict[str, Any], dict[str, float]]]:
    """Answers and confidences, best first after the decided ones (which are not yielded)."""
    values = {}
    for qid, value in answers.items():
        options = [Choice(value, confidence[qid])]
        options += [Choice(v, p) for v, p in ranked.get(qid, ()) if v != value]
        values[qid] = options
    picks = combinations(values, ENFORCE_TRIES)
    next(picks, None)  # the decided answers
    for pick in picks:
        yield ({q: c.value for q, c in pick.items()}, {q: c.confidence for q, c in pick.items()})


def rechoose(
    conclude: Callable[[dict[str, Any], dict[str, float]], Any],
    qset: Any,
    answers: Mapping[str, Any],
    confidence: Mapping[str, float],
    ranked: Mapping[str, Sequence[tuple[Any, float]]],
) -> Any | None:
    """The first decision `conclude` accepts among the other choices, or None. Each answer it
    changed counts once, under the rule the decided answers violated first, in
    `Decision.narrowed`."""
    full = dict(answers)
    if qset.plan.order:
        full.update(qset.plan.evaluate(dict(answers), dict(confidence))[0])
    violated = qset.checks.violated(full)
    pointer = f"/rules/{violated[0].index}" if violated is not None else "/rules"
    for values, conf in choices(answers, confidence, ranked):
        decision = conclude(values, conf)
        if decision.ok:
            changed = sum(values[q] != answers[q] for q in answers)
            decision.narrowed[pointer] = decision.narrowed.get(pointer, 0) + changed
            return decision
    return None
