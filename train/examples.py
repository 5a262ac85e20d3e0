"""Training examples packed exactly as inference packs them.

A job row (document, questions, gold answers) goes through the same `Packer` the runner uses: the
same chat template, instruction, skeleton and slot lengths. The gold value of each question is
spelled canonically (`canonical_json`, then `Vocabulary.encode`, the spelling option scoring uses
too), padded with the filler token, and checked against the slot's own constraint, so the model is
only ever taught sequences the decoder can produce. For documents with more than eight questions
one block is trained per example, with the earlier blocks decided (clean) before it and the later
ones absent, as at inference.

Uncased vocabularies cannot spell upper case: a gold string the vocabulary cannot spell is
lower-cased when that makes it spellable (`Example.lowered` counts it), else the row is skipped.
"""

from __future__ import annotations

import json
import random
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from decide.engine.config import ModelConfig
from decide.engine.tokenizer import TokenizerBundle
from decide.jobs.pack import Packer
from decide.jobs.questions import CompiledQuestion
from decide.jobs.questionset import QuestionBook, QuestionsRefused
from decide.jobs.spec import SpecError, parse_questions
from decide.schemas import canonical_json
from decide.schemas.canonical import key_rank


@dataclass(frozen=True)
class Example:
    ids: list[int]  # prompt + decided blocks + the trained block with gold slot tokens
    slots: list[int]  # positions of the trained block's slot tokens (what may be masked)
    is_value: list[bool]  # per slot position: a value token (True) or filler (False)
    question: list[int] = field(default_factory=list)  # per slot position: its question's index


@dataclass
class BuildStats:
    rows: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    lowered: int = 0  # string answers lower-cased to be spellable

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1


def _lower(value: Any) -> Any:
    if isinstance(value, str):
        return value.lower()
    if isinstance(value, list):
        return [_lower(v) for v in value]
    if isinstance(value, dict):
        return {k: _lower(v) for k, v in value.items()}
    return value


class ExampleBuilder:
    def __init__(
        self,
        config: ModelConfig,
        tokenizer: TokenizerBundle,
        *,
        instruction: str | None = None,
    ) -> None:
        self.book = QuestionBook(config, tokenizer)
        self.packer = Packer.for_model(
            config,
            tokenizer,
            self.book.filler_id,
            instruction=instruction,
            long_documents="truncate",
        )
        self.stats = BuildStats()

    def target(self, question: CompiledQuestion, value: Any) -> list[int] | None:
        """Gold tokens of a slot (value then filler), or None when the slot cannot hold it."""
        slot, filler = question.slot, self.book.filler_id
        for candidate in (value, _lower(value)):
            ids = slot.vocab.encode(canonical_json(candidate, key_rank(question.schema)))
            if ids is None or len(ids) > slot.length:
                continue
            tokens = ids + [filler] * (slot.length - len(ids))
            state = slot.new_constraint(filler)
            if all(state.commit(p, t) for p, t in enumerate(tokens)):
                if candidate is not value and candidate != value:
                    self.stats.lowered += 1
                return tokens
        return None

    def build(
        self,
        document: str,
        questions: Sequence[dict[str, Any]],
        gold: dict[str, Any],
        rng: random.Random,
        given: Collection[str] = (),
    ) -> Example | None:
        """One example for a row (a random block when there are several), or None if skipped.
        The answers of the questions in `given` stay in their slots, never masked: what the
        trained answers see when they are decided after those (a derived answer after its
        inputs)."""
        self.stats.rows += 1
        try:
            compiled = self.book.build(parse_questions(list(questions), "row")).questions
        except QuestionsRefused as exc:  # a row the runner would refuse too
            self.stats.skip(type(exc.cause).__name__)
            return None
        except SpecError as exc:
            self.stats.skip(type(exc).__name__)
            return None
        if any(q.id not in gold for q in compiled):
            self.stats.skip("gold answer missing")
            return None
        doc = self.packer.pack(document, compiled)
        block_index = rng.randrange(len(doc.request.blocks))
        ids = list(doc.request.prompt)
        slots: list[int] = []
        is_value: list[bool] = []
        question: list[int] = []
        for b in range(block_index + 1):
            block, group = doc.request.blocks[b], doc.groups[b]
            start = len(ids)
            ids.extend(block.tokens)
            for k, (slot, compiled_question) in enumerate(zip(block.slots, group, strict=True)):
                tokens = self.target(compiled_question, gold[compiled_question.id])
                if tokens is None:
                    self.stats.skip(f"unspellable gold for {compiled_question.id}")
                    return None
                ids[start + slot.start : start + slot.end] = tokens
                if b == block_index and compiled_question.id not in given:
                    slots.extend(range(start + slot.start, start + slot.end))
                    is_value.extend(t != self.book.filler_id for t in tokens)
                    question.extend([k] * len(tokens))
        if not slots:
            self.stats.skip("every answer given")
            return None
        return Example(ids=ids, slots=slots, is_value=is_value, question=question)


def rows_from_frame(frame: Any, gold_column: str, spec_questions: list[dict] | None = None):
    """(document, questions, gold) triples from a job-format polars frame with a gold column
    (JSON text of the decision object)."""
    for row in frame.iter_rows(named=True):
        questions = spec_questions
        if row.get("questions") is not None:
            questions = row["questions"]
        yield row["document"], questions or [], json.loads(row[gold_column])
