"""One document's random draws: which phrasing of a table, filled how, with a trace of what was
drawn.

A `Draw` carries the `random.Random` that drives everything, the split ("train" or "test"), the
training city pool of the model's tokenizer (`entities.one_piece_cities`; None without one) and
`trace`: a (table id or `entity/<kind>`, phrasing or entity) pair for every phrasing and entity
drawn, whose side `tables.trace_side` gives. A test document draws only held-out phrasings; a
training one only `train` and `extra` ones. `pick` and `widen` fill every phrasing of a table (in
the order the file lists them) before choosing one, as the generator has always done: a field whose
value is a callable (a money amount, which draws its own spelling) is called once per phrasing, so
a seed gives the documents it gave before the phrasing tables moved into data files.
"""

from __future__ import annotations

import random
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .tables import Split, Table, raw

TRAIN_CUE_SHARE = 0.6  # of training picks of a table with `extra` phrasings that draw one of them
# Of the training documents of each domain, the share whose compared numbers (a claim's amount and
# limit, a loan's request and income, a ticket's days and the 30-day window) lie close to each
# other, so a comparison must read the digits: hand-written claims compare 5,300 with 5,000 and
# 640 with 500, where the generator's limits were round multiples of 5,000. Shipped 2026-12-06:
# the bundled model still compares by magnitude, but its joint answers agree more often
# (docs/bundled-model.md, changelog).
CLOSE_COMPARISONS = 0.3
# Round limits people write: these mantissas times 100, 1,000 or 10,000.
_MANTISSAS = (1, 1.5, 2, 2.5, 3, 3.5, 4, 5, 6, 7.5, 8)
_FORMATTER = string.Formatter()


def fill(template: str, values: Mapping[str, Any]) -> str:
    """`template` with its fields replaced, in the order they appear; callables are called."""
    parts = []
    for literal, name, spec, _ in _FORMATTER.parse(template):
        parts.append(literal)
        if name is not None:
            value = values[name]
            parts.append(format(value() if callable(value) else value, spec or ""))
    return "".join(parts)


def close_pair(rng: random.Random, low: int, high: int) -> tuple[int, int]:
    """(value, bound) for a comparison near its boundary: a bound in [low, high] (round most of
    the time, as people write limits and incomes) and a value 70-135 % of it, rounded to a step
    people write; a tenth of the values equal their bound."""
    while True:
        if rng.random() < 0.7:
            bound = int(rng.choice(_MANTISSAS) * 10 ** rng.randint(2, 4))
        else:
            bound = rng.randrange(low, high, 50)
        if low <= bound <= high:
            break
    if rng.random() < 0.1:
        return bound, bound
    step = rng.choice((1, 10, 50, 100, 250))
    value = max(step, round(bound * rng.uniform(0.7, 1.35) / step) * step)
    return value, bound


@dataclass
class Draw:
    rng: random.Random
    split: Split
    whole_cities: Sequence[str] | None = None  # one-piece cities of the model's tokenizer
    trace: list[tuple[str, str]] = field(default_factory=list)
    # a fact the document leaves out (one of its domain's `Domain.omittable`): its sentence is not
    # written and its answer, and those it decides, are null
    omit: str | None = None

    def pick(self, table: Table, **values: Any) -> str:
        """A phrasing of the split's side of `table`, filled with `values`."""
        filled = [fill(t, values) for t in (*table.train, *table.held_out)]
        side = table.train if self.split == "train" else table.held_out
        offset = 0 if self.split == "train" else len(table.train)
        i = self.rng.choice(range(len(side)))
        self.trace.append((table.id, side[i]))
        return filled[offset + i]

    def widen(
        self, table: Table, extra_values: Mapping[str, Any] | None = None, **values: Any
    ) -> str:
        """`pick`, or for TRAIN_CUE_SHARE of training picks one of the table's `extra`
        phrasings, filled with `extra_values` (default: `values`)."""
        if self.split != "train" or not table.extra:
            return self.pick(table, **values)
        filled = [fill(t, values) for t in (*table.train, *table.held_out)]
        if self.rng.random() < TRAIN_CUE_SHARE:
            template = self.rng.choice(table.extra)
            self.trace.append((table.id, template))
            return fill(template, values if extra_values is None else extra_values)
        i = self.rng.choice(range(len(table.train)))
        self.trace.append((table.id, table.train[i]))
        return filled[i]

    def entity(self, kind: str, value: str) -> str:
        self.trace.append((f"entity/{kind}", value))
        return value


def assemble(
    draw: Draw,
    layouts: Table,
    facts: list[str],
    *,
    greeting: str,
    closing: str,
    form: list[tuple[str, str]],
) -> str:
    """Lay facts out as a narrative, an e-mail or a form, with distractors in between; an empty
    fact (one the document leaves out, `Draw.omit`) is not written."""
    rng, pieces = draw.rng, raw("pieces")
    layout = draw.pick(layouts)
    facts = [f for f in facts if f]
    rng.shuffle(facts)
    for _ in range(rng.randint(1, 2)):
        facts.insert(rng.randrange(len(facts) + 1), rng.choice(pieces["distractors"]))
    if draw.split == "train":
        for _ in range(rng.randint(0, 2)):
            facts.insert(rng.randrange(len(facts) + 1), rng.choice(pieces["train_distractors"]))
    if layout == "form":
        lines = [f"{key}: {value}" for key, value in form]
        rng.shuffle(lines)
        return "\n".join(lines) + "\nNotes: " + " ".join(facts)
    if layout.startswith("email"):
        body = " ".join(facts)
        sep = "\n\n" if layout == "email" else "\n"
        return f"{greeting}{sep}{body}{sep}{closing}"
    if layout == "narrative-2":
        half = len(facts) // 2
        return " ".join(facts[:half]) + "\n\n" + " ".join(facts[half:])
    return " ".join(facts)
