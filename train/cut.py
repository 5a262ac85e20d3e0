"""Hand-written documents with the sentences stating one fact cut out: the same document with and
without a fact, for teaching and measuring null answers to optional questions.

A hand-written document's `facts` name what it states; taking out every sentence that writes one
string or integer fact leaves a document that no longer states it, in the writer's own words.
`cut(document, fact)` does that when it can be checked:

- a string fact is written in a sentence when one of its words is (so a signature "Ingrid" goes
  with "My name is Ingrid Solberg"); an integer fact when the sentence states its value as the
  extract reader reads numbers (`written_numbers`; in its `unit` for the facts that have one:
  "$1,400 a month" states an income of 16800 a year);
- at most `MAX_CUT` sentences and under half of the text are cut, and some text stays;
- afterwards every string and integer fact of the domain is `stated` (the value still written,
  its gold answer unchanged), `absent` (no word or value of it left: the answer is null; facts the
  document never stated are absent too) or, when only part of a name is left, neither, and is
  then not asked. Booleans and options are never asked of a cut document: what states them
  cannot be checked by reading (a cut sentence may have said "officers attended").

Sentences are the units a line break or a sentence's final punctuation ends (not after a title
such as "Mr."), so a key: value line goes whole. `training_row` asks a cut document its stated
and absent facts as optional questions (`handwritten.nullable`).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any

from decide.schemas.units import unit_values
from decide.schemas.written_numbers import number_places

from . import handwritten
from .handwritten import Document

MAX_CUT = 3  # sentences cut for one fact at most
MIN_LEFT_WORDS = 12  # words a cut document keeps at least
_END = re.compile(r"\n\s*|(?<=[.!?])[\"'’”)\]]*\s+")
_TITLES = {"mr", "mrs", "ms", "dr", "st", "no", "nr", "approx", "vs", "jr", "sr", "ref", "inc"}
_WORD = re.compile(r"[^\W_]+")


def sentences(text: str) -> list[tuple[int, int]]:
    """Offsets of `text`'s sentences and lines, whitespace between them left out."""
    cuts = [0]
    for m in _END.finditer(text):
        before = _WORD.findall(text[cuts[-1] : m.start()])
        title = bool(before) and (before[-1].casefold() in _TITLES or len(before[-1]) == 1)
        if title and "\n" not in m.group():
            continue  # "Mr. Haugen", "J. Smith": not a sentence's end
        cuts.append(m.end())
    spans = []
    for a, b in zip(cuts, [*cuts[1:], len(text)], strict=True):
        piece = text[a:b]
        if piece.strip():
            start = a + len(piece) - len(piece.lstrip())
            spans.append((start, start + len(piece.strip())))
    return spans


def _words(text: str) -> set[str]:
    return {w.casefold() for w in _WORD.findall(text)}


def _value_words(value: str) -> set[str]:
    """The words of a string fact that identify it (one letter and digits alone do not)."""
    return {w for w in _words(value) if len(w) > 1 and not w.isdigit()}


def status(domain: str, fact: str, value: Any, text: str) -> str:
    """`stated`, `absent` or `partial` (a part of the string left) for one string or integer
    fact of `domain` whose gold answer is `value` (None: never stated) in `text`."""
    question = handwritten.DOMAINS[domain].question(fact)
    if question["schema"].get("type") == "string":
        if value is not None and str(value).casefold() in text.casefold():
            return "stated"
        if value is None:
            return "absent"
        return "partial" if _value_words(str(value)) & _words(text) else "absent"
    unit = handwritten.UNITS.get(fact)
    numbers = unit_values(text, unit) if unit else [p.value for p in number_places(text)]
    return "stated" if value is not None and str(value) in numbers else "absent"


def checkable(domain: str) -> list[str]:
    """The facts of `domain` a cut can be checked for: strings (not dates) and integers."""
    spec = handwritten.DOMAINS[domain]
    return [
        f
        for f in spec.facts
        if spec.question(f)["schema"].get("type") in ("string", "integer")
        and "format" not in spec.question(f)["schema"]
    ]


@dataclass(frozen=True)
class Cut:
    document: Document
    fact: str  # the fact whose sentences were cut
    text: str
    gold: dict[str, Any]  # every checkable fact left stated (its answer) or absent (None)

    def as_document(self) -> Document:
        """The cut document as the evaluation decides it: asked every fact left stated or absent
        (`questions`), its gold answers those facts' answers (None where absent)."""
        doc = self.document
        return Document(
            f"{doc.id}-without-{self.fact}", doc.domain, doc.voice, self.text,
            questions(self), dict(self.gold), dict(self.gold),
        )  # fmt: skip


def cut(document: Document, fact: str) -> Cut | None:
    """`document` without the sentences that write `fact`, or None when the cut cannot be made
    and checked (see the module docstring)."""
    value = document.answers.get(fact)
    if value is None or fact not in checkable(document.domain):
        return None
    text = document.text
    spans = sentences(text)
    string = isinstance(value, str)
    marks = _value_words(value) if string else set()
    gone = [
        (a, b)
        for a, b in spans
        if (
            bool(marks & _words(text[a:b]))
            if string
            else status(document.domain, fact, value, text[a:b]) == "stated"
        )
    ]
    if not gone or len(gone) > MAX_CUT or 2 * sum(b - a for a, b in gone) >= len(text):
        return None
    kept, at = [], 0
    for a, b in gone:
        kept.append(text[at:a])
        at = b
        if a == 0 or text[a - 1] == "\n":  # a whole line: its line break goes too
            rest = text[b:]
            at += len(rest) - len(rest.lstrip(" \t"))
            at += text.startswith("\n", at)
    kept.append(text[at:])
    lines = [" ".join(line.split()) for line in "".join(kept).split("\n")]
    left = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    if len(left.split()) < MIN_LEFT_WORDS:
        return None
    gold: dict[str, Any] = {}
    for name in checkable(document.domain):
        found = status(document.domain, name, document.answers.get(name), left)
        if found == "stated":
            gold[name] = document.answers[name]
        elif found == "absent":
            gold[name] = None
    if gold.get(fact, "") is not None:
        return None  # the value is still written somewhere the sentences did not show
    return Cut(document, fact, left, gold)


def cuts(documents: list[Document]) -> list[Cut]:
    """Every checkable cut of every document, in order."""
    out = []
    for doc in documents:
        for fact in checkable(doc.domain):
            found = cut(doc, fact)
            if found is not None:
                out.append(found)
    return out


def questions(found: Cut) -> list[dict[str, Any]]:
    """The cut document's stated and absent facts as optional questions, in the domain's
    order, as a user's job asks them (strings and integers `extract: true`)."""
    spec = handwritten.DOMAINS[found.document.domain]
    return [handwritten.nullable(q) for q in spec.questions if q["id"] in found.gold]


def training_row(
    found: list[Cut], rng: random.Random
) -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
    """One row: a random cut document asked its cut fact and a random 2-7 of its other checkable
    facts, all optional, in the domain's order, stated ones with their gold answer and absent
    ones null."""
    one = rng.choice(found)
    others = [f for f in one.gold if f != one.fact]
    count = rng.randint(min(2, len(others)), min(handwritten.MAX_ASK - 1, len(others)))
    asked = {one.fact, *rng.sample(others, count)}
    spec = handwritten.DOMAINS[one.document.domain]
    chosen = [
        handwritten.nullable(handwritten.as_trained(q)) for q in spec.questions if q["id"] in asked
    ]
    return one.text, chosen, {q["id"]: one.gold[q["id"]] for q in chosen}
