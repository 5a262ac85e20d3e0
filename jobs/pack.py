"""Packing: one document and its questions → the token layout the sampler decides.

The prompt is the model's chat template applied to one user message: an instruction, the document,
and the numbered questions with their ids. The assistant turn is the compact JSON decision object
`{"<id>":<value>,...}` with every key and punctuation token fixed and only the value slots masked.
At most eight questions share a block; more are split into balanced blocks (17 → 6/6/5) decided in
order, and together the blocks spell exactly one JSON object: the first opens it with `{`, later
ones continue with `,"<id>":`, the last closes it with `}` and the end-of-turn token.

A document whose tokens do not fit the model's context fails with `DocumentTooLong`, or, with the
`truncate` policy, keeps its head and tail around a `[…]` marker and records that it did.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from decide.engine.config import ModelConfig
from decide.engine.requests import Block, DecodeRequest, Slot
from decide.engine.tokenizer import TokenizerBundle

from .questions import CompiledQuestion
from .spec import BLOCK_QUESTIONS

DEFAULT_INSTRUCTION = (
    "Read the document and answer every question. Reply with one JSON object that has one key "
    "per question id."
)
TRUNCATION_MARK = " […] "
PROBE_CHARS_PER_POSITION = 32  # characters tokenized per model position before deciding length


class DocumentTooLong(ValueError):
    """The document does not fit the model's context under the configured policy."""


class QuestionsDoNotFit(DocumentTooLong):
    """The instruction, questions and answers alone exceed the context: no document can fit."""


class InvalidText(ValueError):
    """A document or question text that cannot be tokenized (not valid Unicode)."""


def balanced_groups(count: int, size: int = BLOCK_QUESTIONS) -> list[int]:
    """Sizes of ceil(count / size) groups that differ by at most one, larger first."""
    if count <= 0:
        return []
    blocks = -(-count // size)
    base, extra = divmod(count, blocks)
    return [base + 1] * extra + [base] * (blocks - extra)


@dataclass(frozen=True)
class Prompt:
    """A document's prompt tokens, the parts of the document it holds, whether it was cut."""

    tokens: list[int]
    parts: tuple[str, ...]  # the whole document, or the kept head and tail
    truncated: bool


@dataclass(frozen=True)
class PackedDocument:
    request: DecodeRequest
    groups: list[list[CompiledQuestion]]  # the questions of each block, in block order
    prompt_tokens: int
    truncated: bool
    # The document as the prompt holds it: the whole text, or the head and the tail that a
    # truncation kept (the model never sees what lies between them).
    parts: tuple[str, ...] = ()


class Packer:
    def __init__(
        self,
        tokenizer: TokenizerBundle,
        *,
        mask_id: int,
        filler_id: int,
        end_ids: Sequence[int],
        max_length: int,
        instruction: str | None = None,
        long_documents: str = "error",
    ) -> None:
        self.tokenizer = tokenizer
        self.mask_id = mask_id
        self.filler_id = filler_id
        self.end_ids = list(end_ids)
        self.max_length = max_length
        self.instruction = instruction or DEFAULT_INSTRUCTION
        self.long_documents = long_documents
        # Open-ended slots laid out short, grown when a value fills them (`Decoding.grow_slots`;
        # `CompiledSlot.first_length`); off: every slot has its whole length, as in training.
        self.grow_slots = False
        self._piece_cache: dict[str, list[int]] = {}

    @classmethod
    def for_model(
        cls,
        config: ModelConfig,
        tokenizer: TokenizerBundle,
        filler_id: int,
        *,
        instruction: str | None = None,
        long_documents: str = "error",
    ) -> Packer:
        """The packer a model's decisions use: its mask token, the token that ends its assistant
        turn, its context length (each resolved where `decide.engine.resolution` says)."""
        return cls(
            tokenizer,
            mask_id=config.mask_token_id,
            filler_id=filler_id,
            end_ids=config.end_of_turn_ids[:1],
            max_length=config.context_length,
            instruction=instruction,
            long_documents=long_documents,
        )

    def _piece(self, text: str) -> list[int]:
        if text not in self._piece_cache:
            self._piece_cache[text] = self.tokenizer.encode(text)
        return self._piece_cache[text]

    def user_message(self, document: str, questions: Sequence[CompiledQuestion]) -> str:
        lines = [self.instruction, "", "Document:", document, "", "Questions:"]
        for number, q in enumerate(questions, start=1):
            lines.append(f"{number}. [{q.id}] {q.text}")
        return "\n".join(lines)

    def prompt_text(self, document: str, questions: Sequence[CompiledQuestion]) -> str:
        return self._render(self.user_message(document, questions))

    def _render(self, content: str) -> str:
        template = self.tokenizer.chat_template
        if template is None:
            return f"{content}\n\nAnswer:\n"
        return template.render([{"role": "user", "content": content}], add_generation_prompt=True)

    def prompt_tokens(self, document: str, questions: Sequence[CompiledQuestion]) -> list[int]:
        """The tokens of `prompt_text`, the user message (document, questions, instruction)
        read literally: special-token text in it is ordinary characters, not control tokens
        (`TokenizerBundle.encode_literal`)."""
        content = self.user_message(document, questions)
        text = self._render(content)
        start, length = text.find(content), len(content)
        if start < 0:  # a template that trims the message
            start, length = text.find(content.strip()), len(content.strip())
        if start < 0:  # one that rewrites it: its tokens as rendered
            return self.tokenizer.encode(text)
        return self.tokenizer.encode_literal(text, start, start + length)

    def blocks(
        self, questions: Sequence[CompiledQuestion], constraints: Sequence[Any] | None = None
    ) -> tuple[list[Block], list[list]]:
        """The decision blocks and the questions of each. `constraints` (one per question, in
        question order; e.g. bound to cross-question rules) default to fresh ones per slot."""
        if constraints is None:
            constraints = [
                q.slot.new_constraint(self.filler_id, first=self.grow_slots) for q in questions
            ]
        by_id = {q.id: c for q, c in zip(questions, constraints, strict=True)}
        groups = self.groups(questions)
        blocks = []
        for b, group in enumerate(groups):
            tokens: list[int] = []
            slots: list[Slot] = []
            for i, q in enumerate(group):
                tokens += self._key_piece(q, b == 0 and i == 0)
                constraint = by_id[q.id]
                if constraint.length not in (q.slot.length, q.slot.first_length):
                    raise AssertionError(f"the constraint of {q.id!r} changed its slot's length")
                slots.append(Slot(len(tokens), constraint))
                tokens += [self.mask_id] * constraint.length
            if b == len(groups) - 1:
                tokens += self._piece("}") + self.end_ids
            blocks.append(Block(tokens, slots))
        return blocks, groups

    @staticmethod
    def groups(
        questions: Sequence[CompiledQuestion], size: int = BLOCK_QUESTIONS
    ) -> list[list[CompiledQuestion]]:
        """The questions of each block, in order (`balanced_groups` of at most `size`)."""
        groups, cursor = [], 0
        for count in balanced_groups(len(questions), size):
            groups.append(list(questions[cursor : cursor + count]))
            cursor += count
        return groups

    def _key_piece(self, q: CompiledQuestion, first: bool) -> list[int]:
        return self._piece(f"{'{' if first else ','}{json.dumps(q.id)}:")

    def answer_length(self, questions: Sequence[CompiledQuestion]) -> int:
        """Tokens of the whole answer object of `questions` (keys, slots, closing, end of turn)."""
        keys = sum(len(self._key_piece(q, i == 0)) + q.slot.length for i, q in enumerate(questions))
        return keys + len(self._piece("}")) + len(self.end_ids) if questions else 0

    def prompt(self, document: str, questions: Sequence[CompiledQuestion]) -> Prompt:
        """The prompt of a document and its questions, fitted to the model's context beside
        their answers: the whole document, or (`truncate` policy) its head and tail. Raises
        `DocumentTooLong` (`QuestionsDoNotFit` when no document could fit)."""
        check_text(document, "document")
        answer_len = self.answer_length(questions)
        window = self.max_length * PROBE_CHARS_PER_POSITION
        if len(document) > window:
            # A huge document costs seconds to tokenize whole; its head already shows it is long.
            head = len(self.tokenizer.encode(document[:window]))
            if head + answer_len > self.max_length and self.long_documents != "truncate":
                raise DocumentTooLong(
                    f"document needs more than {head + answer_len} tokens (its first {window:,} "
                    f"of {len(document):,} characters alone take {head}), the model takes "
                    f"{self.max_length}; use --truncate to keep its head and tail"
                )
        tokens = None
        if len(document) <= window or head + answer_len <= self.max_length:
            tokens = self.prompt_tokens(document, questions)
        if tokens is not None and len(tokens) + answer_len <= self.max_length:
            return Prompt(tokens, (document,), False)
        if self.long_documents != "truncate":
            assert tokens is not None
            raise DocumentTooLong(
                f"document needs {len(tokens) + answer_len} tokens (prompt {len(tokens)}, "
                f"answers {answer_len}), the model takes {self.max_length}; "
                "use --truncate to keep its head and tail"
            )
        tokens, parts = self._truncated_prompt(document, questions, answer_len)
        return Prompt(tokens, parts, True)

    def pack(
        self,
        document: str,
        questions: Sequence[CompiledQuestion],
        key: object = None,
        seed: int = 0,
        constraints: Sequence[Any] | None = None,
        prompt: Prompt | None = None,
    ) -> PackedDocument:
        """The decode request of a document: its `prompt` (computed when not given) and the
        blocks of its questions with `constraints` (one per question, see `blocks`; build them
        for `prompt.parts` when they depend on what the model sees, as extract questions' do)."""
        if prompt is None:
            prompt = self.prompt(document, questions)
        blocks, groups = self.blocks(questions, constraints)
        request = DecodeRequest(prompt=prompt.tokens, blocks=blocks, key=key, seed=seed)
        return PackedDocument(request, groups, len(prompt.tokens), prompt.truncated, prompt.parts)

    def _edges(self, document: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
        """Character offsets of the document's first and last tokens (tokenizing only a window
        at each end of a huge document)."""
        window = self.max_length * PROBE_CHARS_PER_POSITION
        encode = self.tokenizer.tokenizer.encode
        if len(document) <= 2 * window:
            offsets = encode(document, add_special_tokens=False).offsets
            return offsets, offsets
        head = encode(document[:window], add_special_tokens=False).offsets
        shift = len(document) - window
        tail = [
            (a + shift, b + shift)
            for a, b in encode(document[shift:], add_special_tokens=False).offsets
        ]
        return head, tail[1:]  # the window may start inside a token: drop its first

    def _truncated_prompt(
        self, document: str, questions: Sequence[CompiledQuestion], answer_len: int
    ) -> tuple[list[int], tuple[str, ...]]:
        """Keep the document's first and last tokens, cut at token boundaries, so the whole
        prompt fits; the rest of the prompt (instruction, questions) is never cut. Returns the
        prompt and the kept head and tail."""
        empty = len(self.prompt_tokens(TRUNCATION_MARK, questions))
        budget = self.max_length - answer_len - empty
        head_offsets, tail_offsets = self._edges(document)
        while budget > 0:
            head = min((budget + 1) // 2, len(head_offsets))
            tail = min(budget - head, len(tail_offsets))
            head_end = head_offsets[head - 1][1] if head else 0
            tail_start = tail_offsets[len(tail_offsets) - tail][0] if tail else len(document)
            kept = (document[:head_end], document[max(tail_start, head_end) :])
            prompt = self.prompt_tokens(TRUNCATION_MARK.join(kept), questions)
            if len(prompt) + answer_len <= self.max_length:
                return prompt, kept
            budget -= max(1, len(prompt) + answer_len - self.max_length)
        raise QuestionsDoNotFit(
            f"the questions and answers alone need {empty + answer_len} tokens, the model takes "
            f"{self.max_length}; no truncation of the document can make it fit"
        )


def check_text(text: str, what: str) -> None:
    """Refuse text that is not valid Unicode (lone surrogates can come from JSON or Python and
    cannot be encoded, tokenized or written to parquet)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidText(
            f"{what} is not valid Unicode: lone surrogate {text[exc.start]!r} at character "
            f"{exc.start}"
        ) from exc
