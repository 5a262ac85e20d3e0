"""Training rows from long documents, cut into windows exactly as `decide run` reads them.

Contract. A `LongRow` is a document with its questions, its gold decision object and,
optionally per question, the character offsets of the gold evidence (where the document states
the answer). `WindowRows(config, tokenizer, rows)` draws training rows `(text, questions, gold)`
that `train.examples.ExampleBuilder` packs as it packs any row: one block of a document's asked
questions (the same balanced blocks as inference) over one window of the document planned by the
inference planner (`decide.jobs.window_plan.WindowPlanner`: same budget, sentence boundaries,
overlap, and the earlier blocks' answers after the window text, here their gold answers).

A window's gold answer to a question:
- with evidence offsets and an absent value (`absent:`, or null in its schema): the gold answer
  when the window holds at least half of one evidence span, else the absent value; a window
  without the evidence teaches "not in this part of the document", one with it the answer;
- an `extract` question: its gold answer when the window holds it, else the question is left
  out of that example (as inference leaves out an extract question a window offers nothing for);
- otherwise the document's gold answer.

A document that fits the model whole is returned as it is, or, with `cut_share`, that share of
its draws (when it has evidence for a question with an absent value whose answer is not absent)
is returned cut (`cut_row`): every sentence (`train.cut.sentences`) overlapping one such
question's evidence taken out, so the document no longer states it and its gold is the absent
value; the other questions are asked as a window would ask them (those with evidence: their
gold when at least half of one evidence span is left, else absent; `extract` ones when their
value is still in the text), except that questions with neither evidence nor `extract` are left
out (a cut sentence may have stated them). A cut that leaves the question's value written
elsewhere, or fewer than half the document's characters, is not made.

A block's windows are those inference decides, each asked the questions inference asks it
(`read`, `WindowPlanner.reads`): all of them, or with `top_k` in the settings the k that BM25
ranks highest for the block's question texts, or, with a learnt evidence `ranker`, those it
finds likely to hold each question's answer.
`evidence_share` of the draws pick, among them, one that holds evidence for one of its questions
(when there is one); the others pick one uniformly. Most window answers are the absent value, so a
window's answers that are not weigh `found_weight` times as much in the loss (the row's fifth
element). `masking` (the sixth) masks the windows' examples as the run does not (the bundled
recipe: finite slots as whole options, `train.examples.RowMasking`). Everything is drawn from
the `random.Random` passed in, so runs repeat for a seed.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from decide.engine.config import ModelConfig
from decide.engine.tokenizer import TokenizerBundle
from decide.jobs.evidence import locate
from decide.jobs.evidence_ranker import EvidenceRanker
from decide.jobs.pack import DocumentTooLong, Packer
from decide.jobs.questions import CompiledQuestion
from decide.jobs.questionset import QuestionBook
from decide.jobs.spec import parse_questions
from decide.jobs.window_plan import (
    BlockPlan,
    NoRoom,
    WindowPlanner,
    absent_of,
    linked_by_rules,
    with_earlier,
)
from decide.jobs.windows import Window, same_value, token_starts

from .cut import sentences
from .examples import RowMasking, UnusableRows

DRAW_TRIES = 1000  # draws before giving up on rows none of whose windows can be trained


def _complement(spans: Sequence[tuple[int, int]], length: int) -> list[tuple[int, int]]:
    """The parts of `[0, length)` outside the sorted, disjoint `spans` (empty parts dropped)."""
    out, at = [], 0
    for a, b in [*spans, (length, length)]:
        if a > at:
            out.append((at, a))
        at = max(at, b)
    return out


def _kept_half(span: tuple[int, int], kept: Sequence[tuple[int, int]]) -> bool:
    """Whether at least half of `span` lies in the `kept` parts of a text."""
    start, end = span
    inside = sum(max(0, min(end, b) - max(start, a)) for a, b in kept)
    return 2 * inside >= max(1, end - start)


@dataclass(frozen=True)
class LongRow:
    doc_id: str
    text: str
    questions: list[dict[str, Any]]
    gold: dict[str, Any]
    evidence: dict[str, list[tuple[int, int]]] = field(default_factory=dict)


def holds(window: Window, spans: Sequence[tuple[int, int]]) -> bool:
    """Whether the window holds at least half of one of the spans."""
    return any(
        2 * (min(end, window.end) - max(start, window.start)) >= max(1, end - start)
        for start, end in spans
    )


class WindowRows:
    def __init__(
        self,
        config: ModelConfig,
        tokenizer: TokenizerBundle,
        rows: Sequence[LongRow],
        evidence_share: float = 0.5,
        settings: Any = None,
        found_weight: float = 1.0,
        ranker: EvidenceRanker | None = None,
        masking: RowMasking | None = None,
        cut_share: float = 0.0,
    ) -> None:
        self.rows = list(rows)
        self.cut_share = cut_share
        self.masking = masking  # how the windows' examples are masked (None: as the run's)
        self.evidence_share = evidence_share
        self.found_weight = found_weight
        self.book = QuestionBook(config, tokenizer)
        packer = Packer.for_model(config, tokenizer, self.book.filler_id)
        self.packer = packer
        self.planner = WindowPlanner(packer, settings, ranker)
        self._plans: dict[tuple[int, int], BlockPlan | None] = {}
        self._read: dict[tuple[int, int], list[tuple[Window, list[CompiledQuestion]]]] = {}
        self._whole: dict[int, bool] = {}
        self._starts: dict[int, np.ndarray] = {}

    def _groups(self, row: LongRow) -> list[list[CompiledQuestion]]:
        qset = self.book.build(parse_questions(row.questions, "row"))
        return self.planner.groups(qset.asked, linked_by_rules(qset))  # as `decide run` does

    def fits(self, index: int) -> bool:
        """Whether row `index` is read whole by inference (no windows)."""
        if index not in self._whole:
            row = self.rows[index]
            asked = self.book.build(parse_questions(row.questions, "row")).asked
            try:
                self.packer.prompt(row.text, asked)
                self._whole[index] = True
            except DocumentTooLong:
                self._whole[index] = False
        return self._whole[index]

    def plan(self, index: int, block: int) -> BlockPlan | None:
        """The windows of one block of row `index` (None when its block leaves no room)."""
        key = (index, block)
        if key not in self._plans:
            row = self.rows[index]
            if index not in self._starts:
                encode = self.packer.tokenizer.tokenizer.encode
                self._starts[index] = token_starts(
                    lambda t: encode(t, add_special_tokens=False).offsets, row.text
                )
            groups = self._groups(row)
            earlier = [q for group in groups[:block] for q in group]
            kept = {q.id: row.gold[q.id] for q in earlier}
            absent = {q.id: absent_of(q) == (True, row.gold[q.id]) for q in earlier}
            try:
                self._plans[key] = self.planner.plan(
                    row.text, self._starts[index], groups[block], kept, absent
                )
            except NoRoom:
                self._plans[key] = None
        return self._plans[key]

    def read(
        self, index: int, block: int, plan: BlockPlan
    ) -> list[tuple[Window, list[CompiledQuestion]]]:
        """The windows of `plan` that inference decides, each with the questions it is asked
        (`WindowPlanner.reads`)."""
        key = (index, block)
        if key not in self._read:
            row = self.rows[index]
            questions = self._groups(row)[block]
            self._read[key] = self.planner.reads(row.text, plan.windows, questions).windows
        return self._read[key]

    def window_gold(
        self, row: LongRow, window: Window, questions: Sequence[CompiledQuestion]
    ) -> dict[str, Any]:
        """The gold answers one window teaches (questions left out: not in the dict)."""
        text = row.text[window.start : window.end]
        out: dict[str, Any] = {}
        for q in questions:
            gold = row.gold[q.id]
            declared, absent = absent_of(q)
            if q.id in row.evidence and declared:
                out[q.id] = gold if holds(window, row.evidence[q.id]) else absent
            elif q.extract:
                if gold is None or locate(gold, text, q.schema, unit=q.unit) is not None:
                    out[q.id] = gold
            else:
                out[q.id] = gold
        return out

    def cut_row(
        self, row: LongRow, rng: random.Random
    ) -> tuple[str, list[dict[str, Any]], dict[str, Any]] | None:
        """`(text, questions, gold)` of `row` with the sentences stating one question's evidence
        cut out (the module docstring), or None when no question allows a checked cut."""
        asked = self.book.build(parse_questions(row.questions, "row")).asked
        by_id = {q["id"]: q for q in row.questions}
        candidates = []
        for q in asked:
            declared, absent = absent_of(q)
            if declared and row.evidence.get(q.id) and not same_value(row.gold[q.id], absent):
                candidates.append(q)
        if not candidates:
            return None
        target = rng.choice(candidates)
        spans = row.evidence[target.id]
        removed = [s for s in sentences(row.text) if any(a < s[1] and s[0] < b for a, b in spans)]
        kept = _complement(removed, len(row.text))
        text = "".join(row.text[a:b] for a, b in kept)
        if 2 * sum(b - a for a, b in kept) < len(row.text):
            return None
        gold: dict[str, Any] = {}
        for q in asked:
            value = row.gold[q.id]
            declared, absent = absent_of(q)
            written = (
                value is not None
                and not isinstance(value, bool)
                and isinstance(value, str | int | float)
                and locate(value, text, q.schema, unit=q.unit) is not None
            )
            if q.id in row.evidence and declared:
                left = any(_kept_half(span, kept) for span in row.evidence[q.id])
                if not left and written:
                    if q is target:
                        return None  # its value is written outside its evidence: not checked
                    continue  # another question's evidence disagrees with the text: not asked
                gold[q.id] = value if left else absent
            elif q.extract and (value is None or written):
                gold[q.id] = value
            # Neither evidence nor extract: a cut sentence may have stated it; not asked.
        return text, [by_id[qid] for qid in gold], gold

    def draw(self, rng: random.Random) -> tuple[Any, ...]:
        """One training row `(text, questions, gold, given, weights, masking)`: a window of a
        block of a random document (see the module docstring), or a whole document that fits."""
        for _ in range(DRAW_TRIES):
            index = rng.randrange(len(self.rows))
            row = self.rows[index]
            if self.fits(index):
                if self.cut_share and rng.random() < self.cut_share:
                    cut = self.cut_row(row, rng)
                    if cut is not None:
                        return (*cut, (), {}, self.masking)
                return row.text, row.questions, row.gold, (), {}, self.masking
            groups = self._groups(row)
            block = rng.randrange(len(groups))
            plan = self.plan(index, block)
            if plan is None:
                continue  # this block leaves no room for a window: inference fails the row
            read = self.read(index, block, plan)
            if not read:
                continue  # the evidence ranker sends this block's questions to no window
            with_evidence = [
                (w, asked) for w, asked in read
                if any(holds(w, row.evidence.get(q.id, ())) for q in asked)
            ]  # fmt: skip
            if with_evidence and rng.random() < self.evidence_share:
                window, questions = rng.choice(with_evidence)
            else:
                window, questions = rng.choice(read)
            gold = self.window_gold(row, window, questions)
            if gold:
                by_id = {q["id"]: q for q in row.questions}
                text = with_earlier(row.text[window.start : window.end], plan.earlier)
                found = {q.id: self.found_weight for q in questions if self.found_weight != 1.0
                         and q.id in gold and absent_of(q) != (True, gold[q.id])}  # fmt: skip
                return text, [by_id[qid] for qid in gold], gold, (), found, self.masking
        raise UnusableRows(f"no trainable window in {DRAW_TRIES} draws: the questions of these "
                           "documents leave no room for a window of them")  # fmt: skip
