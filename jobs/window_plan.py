"""The windows of one block of a long document, planned the same way for deciding and training.

Contract. `WindowPlanner(packer, settings).plan(text, starts, questions, kept, absent)` gives a
`BlockPlan` for one block of questions of a document too long for the model: which answers of
earlier blocks its prompts hold (`earlier`), how many prompt tokens are not document (`fixed`), and
the windows (`jobs.windows.segment`) of at most the tokens that leaves (minus `MARGIN`;
`settings.tokens` caps it), sharing up to `settings.overlap` tokens (at most a quarter of a
window). `reads(text, windows, questions)` is which of them are decided, each for which of the
block's questions: the learnt evidence ranker's (`jobs.evidence_ranker`) for the questions it
knows, else all or BM25's top k. `prompt(text, questions, earlier)` is a window's prompt: the
packer's layout with the earlier answers as compact JSON after the document text (`with_earlier`).
Earlier answers are all kept while they take at most `EARLIER_SHARE` of the room the document would
have without them; else the absent ones are left out first, then the oldest. A block whose
questions and answers leave fewer than `MIN_WINDOW` tokens raises `NoRoom`.

`jobs.longdocs` decides with it and `decide.train.windows` builds training examples with it, so a
model is taught windows exactly as it reads them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .evidence_ranker import EvidenceRanker
from .pack import Packer
from .questions import CompiledQuestion
from .spec import absent_value
from .windows import Window, rank, segment

MARGIN = 8  # tokens kept free: a window re-tokenized inside its prompt may take a few more
EARLIER_SHARE = 0.25  # earlier answers may take this share of the document's room
MIN_WINDOW = 32  # fewer document tokens than this per window: the block's questions do not fit


class NoRoom(ValueError):
    """A block's questions and answers leave no room for a window of the document."""


def absent_of(question: CompiledQuestion) -> tuple[bool, Any]:
    """(declared, value): the question's `absent:` value, else null if its schema admits it."""
    return absent_value(question.schema, question.absent)


def with_earlier(text: str, earlier: Mapping[str, Any]) -> str:
    """A window's text as its prompt holds it: the answers of earlier blocks after it."""
    if not earlier:
        return text
    answers = json.dumps(dict(earlier), separators=(",", ":"), ensure_ascii=False)
    return f"{text}\n\nAnswers so far:\n{answers}"


@dataclass(frozen=True)
class Reads:
    windows: list[tuple[Window, list[CompiledQuestion]]]  # decided, each for these questions
    unread: dict[str, float]  # learnt questions no window reaches: their best probability


@dataclass(frozen=True)
class BlockPlan:
    earlier: dict[str, Any]  # the earlier blocks' answers its prompts hold
    fixed: int  # prompt and answer tokens that are not document
    windows: list[Window]


class WindowPlanner:
    def __init__(
        self, packer: Packer, settings: Any = None, ranker: EvidenceRanker | None = None
    ) -> None:
        from .spec import Windows

        self.packer = packer
        self.settings = settings if settings is not None else Windows()
        self.ranker = ranker

    def prompt(
        self, text: str, questions: Sequence[CompiledQuestion], earlier: Mapping[str, Any]
    ) -> list[int]:
        """The prompt tokens of one window (see the module docstring)."""
        return self.packer.prompt_tokens(with_earlier(text, earlier), questions)

    def answer_length(self, questions: Sequence[CompiledQuestion]) -> int:
        """Tokens of the answer block of `questions` asked alone."""
        return self.packer.answer_length(questions)  # every slot at its whole length

    def earlier(
        self,
        questions: Sequence[CompiledQuestion],
        kept: Mapping[str, Any],
        absent: Mapping[str, bool],
    ) -> tuple[dict[str, Any], int]:
        """The earlier answers (`kept`, oldest first; `absent[qid]`: whether that answer is its
        question's absent value) the prompts of `questions` hold, and the prompt and answer
        tokens that are not document."""
        answer_len = self.answer_length(questions)
        room = self.packer.max_length - MARGIN
        bare = len(self.prompt("", questions, {})) + answer_len
        order = sorted(kept, key=lambda qid: not absent.get(qid, False))
        earlier = dict(kept)
        while True:
            fixed = len(self.prompt("", questions, earlier)) + answer_len
            if not earlier or fixed - bare <= EARLIER_SHARE * (room - bare):
                return earlier, fixed
            del earlier[order.pop(0)]

    def plan(
        self,
        text: str,
        starts: np.ndarray,
        questions: Sequence[CompiledQuestion],
        kept: Mapping[str, Any] | None = None,
        absent: Mapping[str, bool] | None = None,
        label: str = "this block",
    ) -> BlockPlan:
        """The plan of one block (see the module docstring); raises `NoRoom`."""
        earlier, fixed, budget = self.room(questions, kept, absent, label)
        windows = segment(text, starts, budget, min(self.settings.overlap, budget // 4))
        return BlockPlan(earlier, fixed, windows)

    def room(
        self,
        questions: Sequence[CompiledQuestion],
        kept: Mapping[str, Any] | None = None,
        absent: Mapping[str, bool] | None = None,
        label: str = "this block",
    ) -> tuple[dict[str, Any], int, int]:
        """(earlier answers held, tokens that are not document, document tokens per window) of
        one block; raises `NoRoom`."""
        earlier, fixed = self.earlier(questions, kept or {}, absent or {})
        budget = self.packer.max_length - fixed - MARGIN
        if budget < MIN_WINDOW:
            raise NoRoom(
                f"the questions and answers of {label} alone need {fixed} tokens, the model "
                f"takes {self.packer.max_length}: no window of the document fits"
            )
        if self.settings.tokens is not None:
            budget = min(budget, self.settings.tokens)
        return earlier, fixed, budget

    def groups(
        self, questions: Sequence[CompiledQuestion], linked: Sequence[Sequence[str]] = ()
    ) -> list[list[CompiledQuestion]]:
        """The blocks of questions a document read in windows is asked in (`settings.questions`
        at most per block, balanced). `linked`: ids the rules link (`linked_by_rules`), kept in
        one block where they fit one, so each window decodes them under their rules."""
        size = self.settings.questions
        plain = self.packer.groups(questions, size)
        together = [set(ids) for ids in linked if 1 < len(ids) <= size]
        if all(any(ids <= {q.id for q in g} for g in plain) for ids in together):
            return plain
        unit_of = {qid: k for k, ids in enumerate(together) for qid in ids}
        units: list[list[CompiledQuestion]] = []
        placed: set[str] = set()
        for q in questions:
            if q.id in placed:
                continue
            k = unit_of.get(q.id)
            unit = [q] if k is None else [x for x in questions if unit_of.get(x.id) == k]
            placed.update(x.id for x in unit)
            units.append(unit)
        bins: list[list[CompiledQuestion]] = [[] for _ in plain]
        for unit in units:  # first fit, in question order
            fit = next((b for b in bins if len(b) + len(unit) <= size), None)
            if fit is None:
                bins.append(fit := [])
            fit.extend(unit)
        order = {q.id: i for i, q in enumerate(questions)}
        return [sorted(b, key=lambda q: order[q.id]) for b in bins if b]

    def reads(
        self, text: str, windows: Sequence[Window], questions: Sequence[CompiledQuestion]
    ) -> Reads:
        """The windows of a block that are decided, each with the questions it is asked, in
        document order (inference and training read the same ones). A question the learnt
        evidence ranker knows (`ranker`, with `settings.evidence_ranker`) is asked in the
        windows whose evidence probability reaches `min_evidence` (else the ranker's
        threshold), the `settings.top_k` most probable of them with `top_k`; one that no window
        reaches is in `unread` with its best probability. The other questions are asked in
        every window, or with `top_k` in the k that BM25 ranks highest for their texts."""
        learnt = [q for q in questions if self.learnt(q)]
        others = [q for q in questions if not self.learnt(q)]
        asked: dict[int, list[str]] = {}
        unread: dict[str, float] = {}
        probabilities = {}
        if learnt:
            assert self.ranker is not None
            probabilities = self.ranker.scores(text, windows, [q.text for q in learnt])
        for q in learnt:
            scores = probabilities[q.text]
            declared, _ = absent_of(q)
            floor = self.min_evidence if declared else 0.0  # without an absent value: rank only
            order = [i for i in np.argsort(-scores, kind="stable") if scores[i] >= floor]
            if self.settings.top_k is not None:
                order = order[: self.settings.top_k]
            if not order:
                unread[q.id] = float(scores.max()) if len(scores) else 0.0
            for i in order:
                asked.setdefault(int(i), []).append(q.id)
        if others:
            if self.settings.top_k is None:
                chosen = range(len(windows))
            else:
                query = " ".join(q.text for q in others)
                chosen = rank([text[w.start : w.end] for w in windows], query, self.settings.top_k)
            for i in chosen:
                asked.setdefault(i, []).extend(q.id for q in others)
        ordered = [(windows[i], [q for q in questions if q.id in asked[i]]) for i in sorted(asked)]
        return Reads(ordered, unread)

    def learnt(self, question: CompiledQuestion) -> bool:
        """Whether the learnt evidence ranker chooses the windows of `question`."""
        return (
            self.ranker is not None
            and self.settings.evidence_ranker
            and self.ranker.knows(question.text)
        )

    @property
    def min_evidence(self) -> float:
        """The evidence probability a window needs to be decided for a learnt question."""
        if self.settings.min_evidence is not None:
            return self.settings.min_evidence
        return self.ranker.threshold if self.ranker is not None else 0.0

    def fits(
        self, questions: Sequence[CompiledQuestion], linked: Sequence[Sequence[str]] = ()
    ) -> bool:
        """Whether every block of `questions`, asked alone, leaves room for a window of at
        least `MIN_WINDOW` tokens (later blocks' prompts also hold earlier answers: checked per
        document)."""
        for group in self.groups(questions, linked):
            fixed = len(self.prompt("", group, {})) + self.answer_length(group)
            if fixed + MARGIN + MIN_WINDOW > self.packer.max_length:
                return False
        return True


def linked_by_rules(qset: Any) -> list[list[str]]:
    """The ids of each group of questions the rules enforced while decoding link (a question
    set's `ruleset`), for `WindowPlanner.groups`."""
    ruleset = getattr(qset, "ruleset", None)
    return [] if ruleset is None else [list(order) for order, _ in ruleset.components]
