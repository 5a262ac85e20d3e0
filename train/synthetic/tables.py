"""The generator's phrasing tables and entity lists, read from `train/data/synthetic/*.json`, and
the held-out split they define.

A table is a JSON object with `train` and `held_out` lists of phrasings (format strings whose
`{fields}` the domain fills) and optionally `extra`, more training phrasings that a share of
training picks draws instead (`draw.TRAIN_CUE_SHARE`). A table is named by its file and JSON
pointer, e.g. `claims/active/yes`. `pieces.json` holds what is not a table: the distractor
sentences both splits draw (`distractors`; they state no fact), the training-only ones, the
syllables of made-up names and the words of training products.

Which side of the split a phrasing or an entity is on is a property of the phrasing or entity
itself, never of the order of random draws or of its place in a list: `Table.side` looks the text
up, `entity_side` checks the words of an entity against the held-out entity lists. Loading refuses
data in which a held-out phrasing is also a training one (anywhere), or a table lacks one of its
sides, naming the file and JSON pointer.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

Split = Literal["train", "test"]
DATA = Path(__file__).resolve().parent.parent / "data" / "synthetic"
FILES = ("common", "claims", "loans", "tickets")
SIDES = ("train", "held_out", "extra")


class SyntheticDataError(ValueError):
    """A phrasing table that breaks the format or the split, named by file and JSON pointer."""


@dataclass(frozen=True)
class Table:
    id: str  # file/pointer, e.g. "claims/active/yes"
    train: tuple[str, ...]
    held_out: tuple[str, ...]
    extra: tuple[str, ...] = ()  # more training phrasings (see the module docstring)

    @property
    def all(self) -> tuple[str, ...]:
        return (*self.train, *self.held_out, *self.extra)

    def side(self, template: str) -> Split:
        """The split `template` belongs to; KeyError if it is not one of this table's."""
        if template in self.held_out:
            return "test"
        if template in self.train or template in self.extra:
            return "train"
        raise KeyError(f"{template!r} is not a phrasing of table {self.id}")


def _strings(where: str, node: Any) -> tuple[str, ...]:
    if not isinstance(node, list) or not all(isinstance(s, str) for s in node):
        raise SyntheticDataError(f"{where}: expected a list of strings")
    return tuple(node)


def _walk(name: str, pointer: str, node: Any, out: dict[str, Table]) -> None:
    where = f"{name}.json#{pointer or '/'}"
    if not isinstance(node, dict):
        raise SyntheticDataError(f"{where}: expected an object")
    if "train" in node or "held_out" in node:
        unknown = set(node) - set(SIDES)
        if unknown:
            raise SyntheticDataError(f"{where}: unknown keys {sorted(unknown)}")
        sides = {k: _strings(f"{where}/{k}", node.get(k, [])) for k in SIDES}
        if not sides["train"] or not sides["held_out"]:
            raise SyntheticDataError(f"{where}: a table needs non-empty `train` and `held_out`")
        out[f"{name}{pointer}"] = Table(f"{name}{pointer}", **sides)
        return
    for key, child in node.items():
        _walk(name, f"{pointer}/{key}", child, out)


@functools.cache
def raw(name: str) -> dict[str, Any]:
    """One data file as parsed JSON (`name` of FILES, or "pieces")."""
    return json.loads((DATA / f"{name}.json").read_text())


@functools.cache
def tables() -> dict[str, Table]:
    """Every table of every file by id, checked: no held-out phrasing is a training one."""
    found: dict[str, Table] = {}
    for name in FILES:
        _walk(name, "", raw(name), found)
    training = {t: table.id for table in found.values() for t in (*table.train, *table.extra)}
    for table in found.values():
        for i, template in enumerate(table.held_out):
            if template in training:
                raise SyntheticDataError(
                    f"{table.id.replace('/', '.json#/', 1)}/held_out/{i}: {template!r} is also "
                    f"a training phrasing of {training[template]}"
                )
    return found


def table(table_id: str) -> Table:
    return tables()[table_id]


def entity_list(kind: str) -> Table:
    """`first`, `last`, `cities` or `products`: the entity lists of common.json."""
    return tables()[f"common/entities/{kind}"]


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.casefold()))


@functools.cache
def held_out_words() -> frozenset[str]:
    """Every word of every held-out entity, lower-cased: no training entity may hold one."""
    kinds = ("first", "last", "cities", "products")
    return frozenset(w for k in kinds for e in entity_list(k).held_out for w in _words(e))


def entity_side(kind: str, value: str) -> Split | None:
    """The split an entity belongs to: "test" when it is a held-out entity of its kind (a name is
    a held-out first name and a held-out surname), "train" when none of its words is a word of a
    held-out entity, None when it is neither (a generator must never emit such an entity)."""
    if kind == "name":
        first, _, last = value.partition(" ")
        held = first in entity_list("first").held_out and last in entity_list("last").held_out
    else:
        held = value in entity_list({"city": "cities", "product": "products"}[kind]).held_out
    if held:
        return "test"
    return None if _words(value) & held_out_words() else "train"


def trace_side(entry: tuple[str, str]) -> Split | None:
    """The split of one trace entry (`draw.Draw.trace`): a table's phrasing or an entity."""
    source, value = entry
    if source.startswith("entity/"):
        return entity_side(source.removeprefix("entity/"), value)
    return table(source).side(value)
