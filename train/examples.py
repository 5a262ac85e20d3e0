"""Training examples packed exactly as inference packs them.

A job row (document, questions, gold answers) goes through the same `Packer` the runner uses: the
same chat template, instruction, skeleton and slot lengths. The gold value of each question is
spelled canonically (`canonical_json`, then `Vocabulary.encode`, the spelling option scoring uses
too), padded with the filler token, and checked against the slot's own constraint, so the model is
only ever taught sequences the decoder can produce. For documents with more than eight questions
one block is trained per example, with the earlier blocks decided (clean) before it and the later
ones absent, as at inference.

Uncased vocabularies cannot spell upper case: a gold string the vocabulary cannot spell is
lower-cased when that makes it spellable (`BuildStats.lowered` counts it), else taught as the
tokenizer reads it when that reading is the same text up to case, accents and spaces (an uncased
WordPiece vocabulary reads "São Paulo" as "sao paulo" and "Tent 4P" as "tent4p", as an extract
slot copies it from the document; `BuildStats.as_read` counts it), else the row is skipped, as
"gold value invalid for <id>" when the question's schema refuses the value, else "unspellable
gold for <id>". Derived questions (`derive:`) are computed from the asked answers, never asked,
so they have no slot and are never trained: their gold, when a row gives it, is ignored.
`ExampleBuilder.problem` tells why a row cannot be taught without building its example (checking
a user's data before a run starts).
Rows whose questions the runner refuses are skipped and counted too, unless the builder is
`strict` (the bundled recipe: its rows are our own data, and a refused one is a bug that would
otherwise only show as a different model).
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
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
    # per slot position: whether its question's slot is finite (decided as a whole option)
    finite: list[bool] = field(default_factory=list)
    # per slot position: its question's loss weight (`build`'s `weights`; 1.0 when not given)
    scale: list[float] = field(default_factory=list)
    # per position of `ids`: what to add to the position the model encodes (the positions
    # slots laid out short before it left out, as decoding encodes them); empty: none
    shifts: list[int] = field(default_factory=list)
    masking: RowMasking = field(default_factory=lambda: RowMasking())  # besides the run's


@dataclass(frozen=True)
class RowMasking:
    """How one training row's example is masked, besides the run's `TrainConfig` (the sixth
    element of a row, `train.loop.Rows`): the ContractNLI windows of the bundled recipe with
    option masking while its other rows train as before (`train.windows.WindowRows`)."""

    option_masking: bool = False
    cap_weight: bool = False


@dataclass
class BuildStats:
    rows: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    lowered: int = 0  # string answers lower-cased to be spellable
    as_read: int = 0  # string answers taught as the tokenizer reads them (accents, spaces)

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1


class UnusableRows(SpecError):
    """No training row yields an example (every draw skipped): the reasons are in the message."""


def skip_summary(skipped: Mapping[str, int], unit: str = "row") -> str:
    """`reason: n rows; ...`, most frequent first."""
    parts = sorted(skipped.items(), key=lambda kv: (-kv[1], kv[0]))
    return "; ".join(f"{reason}: {n} {unit}{'' if n == 1 else 's'}" for reason, n in parts)


def _lower(value: Any) -> Any:
    if isinstance(value, str):
        return value.lower()
    if isinstance(value, list):
        return [_lower(v) for v in value]
    if isinstance(value, dict):
        return {k: _lower(v) for k, v in value.items()}
    return value


class _Skip(Exception):
    """A row's questions refused (not strict): the skip reason and the refusal."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(reason)
        self.reason, self.detail = reason, detail


class ExampleBuilder:
    def __init__(
        self,
        config: ModelConfig,
        tokenizer: TokenizerBundle,
        *,
        instruction: str | None = None,
        strict: bool = False,
        short_slots: float = 0.0,
    ) -> None:
        # strict: a row whose questions the runner refuses raises instead of being skipped (our
        # own training data, where such a row is a bug: the bundled recipe)
        self.strict = strict
        # The chance that an open-ended slot whose gold value ends inside its first positions
        # is laid out with those only, as decoding with `grow_slots` lays it out (else whole).
        if not 0.0 <= short_slots <= 1.0:
            raise ValueError(f"short_slots must lie in [0, 1], got {short_slots}")
        self.short_slots = short_slots
        self.book = QuestionBook(config, tokenizer)
        self.packer = Packer.for_model(
            config,
            tokenizer,
            self.book.filler_id,
            instruction=instruction,
            long_documents="truncate",
        )
        self.stats = BuildStats()

    def target(
        self, question: CompiledQuestion, value: Any, length: int | None = None
    ) -> list[int] | None:
        """Gold tokens of a slot of `length` positions (default: the slot's whole length; a
        shorter one must keep a filler after the value, or decoding would grow it), value then
        filler, or None when the slot cannot hold it."""
        slot, filler = question.slot, self.book.filler_id
        length = slot.length if length is None else length
        room = length if length >= slot.length else length - 1
        for kind, ids in self._spellings(question, value):
            if ids is None or len(ids) > room:
                continue
            tokens = ids + [filler] * (length - len(ids))
            state = slot.new_constraint(filler, length)
            if all(state.commit(p, t) for p, t in enumerate(tokens)):
                if kind == "lowered":
                    self.stats.lowered += 1
                elif kind == "as read":
                    self.stats.as_read += 1
                return tokens
        return None

    def _unusable(self, question: CompiledQuestion, value: Any) -> tuple[str, str]:
        """Why the gold `value` of `question` cannot be taught: the skip reason and a detail."""
        error = next(question.slot.language.validator.iter_errors(value), None)
        if error is not None:
            return f"gold value invalid for {question.id}", error.message
        return (
            f"unspellable gold for {question.id}",
            f"{value!r} cannot be spelled in its slot by this model's tokenizer",
        )

    def _compile(self, questions: Sequence[dict[str, Any]]) -> list[CompiledQuestion]:
        """The questions a row asks the model (derived ones are computed, never asked)."""
        try:
            return self.book.build(parse_questions(list(questions), "row")).asked
        except QuestionsRefused as exc:  # a row the runner would refuse too
            if self.strict:
                raise SpecError(f"a training row's questions are refused: {exc}") from exc
            raise _Skip(type(exc.cause).__name__, str(exc)) from exc
        except SpecError as exc:
            if self.strict:
                raise SpecError(f"a training row's questions are refused: {exc}") from exc
            raise _Skip(type(exc).__name__, str(exc)) from exc

    def problem(
        self, questions: Sequence[dict[str, Any]], gold: Mapping[str, Any]
    ) -> tuple[str, str] | None:
        """Why a row (its questions and gold) would be skipped whatever block or draw, as
        `(reason, detail)`, `reason` as `stats` counts it; None when every asked question's
        gold can be taught. Counts nothing in `stats`."""
        lowered, as_read = self.stats.lowered, self.stats.as_read
        try:
            compiled = self._compile(questions)
            if not compiled:
                return "no question asked (all derived)", "every question is derived"
            missing = [q.id for q in compiled if q.id not in gold]
            if missing:
                return f"gold answer missing for {missing[0]}", f"no gold for {', '.join(missing)}"
            for q in compiled:
                if self.target(q, gold[q.id]) is None:
                    return self._unusable(q, gold[q.id])
            return None
        except _Skip as skip:
            return skip.reason, skip.detail
        finally:
            self.stats.lowered, self.stats.as_read = lowered, as_read

    def _spellings(
        self, question: CompiledQuestion, value: Any
    ) -> Iterator[tuple[str, list[int] | None]]:
        """The ways to spell a gold value, in order: as written, lower-cased, as the tokenizer
        reads it (a string only, when that reading differs from it in case, accents and spaces
        alone)."""
        vocab, rank = question.slot.vocab, key_rank(question.schema)
        yield "as written", vocab.encode(canonical_json(value, rank))
        lowered = _lower(value)
        if lowered != value:
            yield "lowered", vocab.encode(canonical_json(lowered, rank))
        if isinstance(value, str):
            found = vocab.as_read(canonical_json(value, rank))
            if found is not None:
                yield "as read", found[0]

    def build(
        self,
        document: str,
        questions: Sequence[dict[str, Any]],
        gold: dict[str, Any],
        rng: random.Random,
        given: Collection[str] = (),
        weights: Mapping[str, float] | None = None,
        masking: RowMasking | None = None,
    ) -> Example | None:
        """One example for a row (a random block when there are several), or None if skipped.
        The answers of the questions in `given` stay in their slots, never masked: what the
        trained answers see when they are decided after those (a derived answer after its
        inputs). `weights` scales the loss of some questions' positions (a window's answers that
        are not its question's absent value, `train.windows`); `masking` how its example is
        masked besides the run's masking."""
        self.stats.rows += 1
        try:
            compiled = self._compile(questions)
        except _Skip as skip:
            self.stats.skip(skip.reason)
            return None
        if not compiled:
            self.stats.skip("no question asked (all derived)")
            return None
        missing = [q.id for q in compiled if q.id not in gold]
        if missing:
            self.stats.skip(f"gold answer missing for {missing[0]}")
            return None
        # Slots laid out short, with their gold tokens (no draw at all when `short_slots` is 0,
        # so recipes without it draw the same rows as before it existed).
        short: dict[str, list[int]] = {}
        for q in compiled:
            first = q.slot.first_length
            if self.short_slots and first < q.slot.length and rng.random() < self.short_slots:
                tokens = self.target(q, gold[q.id], first)
                if tokens is not None:
                    short[q.id] = tokens
        filler = self.book.filler_id
        constraints = [
            q.slot.new_constraint(filler, len(short[q.id]) if q.id in short else None)
            for q in compiled
        ]
        doc = self.packer.pack(document, compiled, constraints=constraints)
        block_index = rng.randrange(len(doc.request.blocks))
        ids = list(doc.request.prompt)
        slots: list[int] = []
        is_value: list[bool] = []
        question: list[int] = []
        finite: list[bool] = []
        scale: list[float] = []
        steps = [0] * (
            len(ids) + sum(len(doc.request.blocks[b].tokens) for b in range(block_index + 1))
        )
        for b in range(block_index + 1):
            block, group = doc.request.blocks[b], doc.groups[b]
            start = len(ids)
            ids.extend(block.tokens)
            for k, (slot, compiled_question) in enumerate(zip(block.slots, group, strict=True)):
                tokens = short.get(compiled_question.id) or self.target(
                    compiled_question, gold[compiled_question.id]
                )
                if tokens is None:
                    reason, _ = self._unusable(compiled_question, gold[compiled_question.id])
                    self.stats.skip(reason)
                    return None
                ids[start + slot.start : start + slot.end] = tokens
                if compiled_question.id in short:  # decoding encodes what follows further on
                    steps[start + slot.end] += (
                        compiled_question.slot.length - slot.constraint.length
                    )
                if b == block_index and compiled_question.id not in given:
                    slots.extend(range(start + slot.start, start + slot.end))
                    is_value.extend(t != self.book.filler_id for t in tokens)
                    question.extend([k] * len(tokens))
                    finite.extend([compiled_question.slot.finite] * len(tokens))
                    weight = (weights or {}).get(compiled_question.id, 1.0)
                    scale.extend([weight] * len(tokens))
        if not slots:
            self.stats.skip("every answer given")
            return None
        shifts = list(accumulate(steps)) if any(steps) else []
        return Example(
            ids, slots, is_value, question, finite, scale, shifts, masking or RowMasking()
        )
