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


@dataclass
class Draw:
    rng: random.Random
    split: Split
    whole_cities: Sequence[str] | None = None  # one-piece cities of the model's tokenizer
    trace: list[tuple[str, str]] = field(default_factory=list)

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
    """Lay facts out as a narrative, an e-mail or a form, with distractors in between."""
    rng, pieces = draw.rng, raw("pieces")
    layout = draw.pick(layouts)
    facts = list(facts)
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
