"""Questions compiled against one model's tokenizer, compiled once per job and reused.

A job asks the same few questions of thousands of documents (or, with per-row questions, a small
set of distinct schemas over and over); `decide.schemas` caches compiled slots on the vocabulary,
so each distinct schema is compiled once. Refusals raise `SchemaError` with the JSON pointer and
keyword.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from decide.engine.config import ModelConfig
from decide.engine.tokenizer import TokenizerBundle
from decide.schemas import CompiledSlot, SchemaError, Vocabulary, compile_slot
from decide.schemas.errors import UnsupportedSchema
from decide.schemas.rules import RuleSet
from decide.schemas.span import check_extract_schema, extract_kind

from .spec import Question, SpecError


@dataclass(frozen=True)
class CompiledQuestion:
    id: str
    text: str
    schema: Any
    slot: CompiledSlot | None  # None for a derived question: it is computed, never decoded
    extract: bool = False  # answer with a span of the document (`SpanSlot`)
    derive: str | None = None  # CEL over other answers (`jobs.derive`)
    absent: Any = None  # the declared "not in this part of the document" value (`Question`)
    unit: str | None = None  # a numeric extract question's unit (`Question.unit`)
    absent_below: float | None = None  # withhold answers less confident (`jobs.withhold`)


def special_ids(config: ModelConfig, tokenizer: TokenizerBundle) -> set[int]:
    """Token ids that may never stand inside a value: the mask, every special and added token
    the tokenizer marks special, and the tokenizer's configured special tokens."""
    ids = {config.mask_token_id}
    for token_id, added in tokenizer.tokenizer.get_added_tokens_decoder().items():
        if added.special:
            ids.add(token_id)
    for key in tokenizer.special_tokens:
        token_id = tokenizer.special_id(key)
        if token_id is not None:
            ids.add(token_id)
    return ids


def filler_id(tokenizer: TokenizerBundle) -> int:
    """The token that fills slot positions after a value: pad, else end of sequence."""
    for key in ("pad_token", "eos_token"):
        token_id = tokenizer.special_id(key)
        if token_id is not None:
            return token_id
    raise SpecError(
        "the tokenizer defines neither pad_token nor eos_token, so there is no filler token for "
        "the positions after a value"
    )


class QuestionCompiler:
    """Compiles questions against a model's tokenizer (the weights are not needed)."""

    def __init__(self, config: ModelConfig, tokenizer: TokenizerBundle) -> None:
        self.filler_id = filler_id(tokenizer)
        self.vocabulary = Vocabulary.from_tokenizer(
            tokenizer.tokenizer, excluded=special_ids(config, tokenizer) | {self.filler_id}
        )

    def compile(self, question: Question) -> CompiledQuestion:
        """Raises `SchemaError` (with pointer and keyword) for a refused schema."""
        if question.derive is not None:
            return CompiledQuestion(
                question.id, question.text, question.schema_, None, derive=question.derive
            )
        if question.extract:
            check_extract_schema(question.schema_)
        slot = compile_slot(question.schema_, self.vocabulary)
        if question.unit is not None and extract_kind(question.schema_, slot) != "numbers":
            raise UnsupportedSchema(
                "/type", "unit", f"{question.unit} needs a schema of numbers or integers"
            )
        return CompiledQuestion(
            question.id, question.text, question.schema_, slot, question.extract,
            absent=question.absent, unit=question.unit, absent_below=question.absent_below,
        )  # fmt: skip


def asked(questions: Sequence[CompiledQuestion]) -> list[CompiledQuestion]:
    """The questions put to the model (all but the derived ones), in order."""
    return [q for q in questions if q.derive is None]


def refuse_ruled_derived(rules: Any, questions: Sequence[CompiledQuestion]) -> None:
    """Rules are enforced while decoding; a derived answer is never decoded, so a rule over one
    is refused (its pointer into the rules)."""
    from decide.schemas.rules import rule_question_ids

    derived = {q.id for q in questions if q.derive is not None}
    for qid, pointer in rule_question_ids(rules).items():
        if qid in derived:
            raise SchemaError(
                pointer,
                "rules",
                f"{qid!r} is a derived question (computed after decoding, so rules cannot "
                "constrain it while decoding)",
            )


def refuse_ruled_extract(ruleset: RuleSet, questions: list[CompiledQuestion]) -> None:
    """Rules cannot constrain an extract question: its language is a different set of spans in
    every document, not one the rules' cells can be compiled against."""
    for q in questions:
        if q.extract and q.id in ruleset.slot_atoms:
            raise SchemaError(
                ruleset.mentioned.get(q.id, f"/properties/{q.id}"), "extract",
                "rules cannot constrain an extract question "
                "(its answers are spans or numbers of each document)"
            )  # fmt: skip
