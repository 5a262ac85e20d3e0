"""JSON Schema → exact token masks for slots filled out of order by a diffusion model.

Typical use (compile once per job, one cheap constraint per slot per block):

    vocab = Vocabulary.from_tokenizer(tokenizer, excluded=[mask_id, pad_id, filler_id])
    slot = compile_slot(question_schema, vocab)          # CompiledSlot, cached per vocab
    state = slot.new_constraint(filler_id)               # SlotConstraint for one block
    ... state.fill_bitmask(rows); state.commit(p, t) ...
    value = state.decode().value                         # re-checked with jsonschema

Pipeline: `drafts` (any draft's schema → its 2020-12 form, unknown keywords → warnings) →
`language` (schema → canonical JSON byte DFA; per-type builders in `shapes`, spelling in
`canonical`, with `regex`, `numbers`, `formats`, `automata`, `charclass` underneath) → `tokens`
(token automaton over a `vocab`) → `slot` (fixed-length reachability, masks, options, decoding).
`validate` serves `decide validate`. See docs/schemas.md.
"""

from .errors import (
    DecodeMismatch,
    EmptySchema,
    MalformedSchema,
    SchemaError,
    UnsupportedSchema,
    UnsupportedTokenizer,
)
from .language import Language, canonical_json, compile_language
from .slot import DEFAULT_MAX_TOKENS, CompiledSlot, Decoded, SlotState, compile_slot
from .validate import QuestionReport, check_questions, render_table
from .vocab import Vocabulary

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "CompiledSlot",
    "DecodeMismatch",
    "Decoded",
    "EmptySchema",
    "Language",
    "MalformedSchema",
    "QuestionReport",
    "SchemaError",
    "SlotState",
    "UnsupportedSchema",
    "UnsupportedTokenizer",
    "Vocabulary",
    "canonical_json",
    "check_questions",
    "compile_language",
    "compile_slot",
    "render_table",
]
