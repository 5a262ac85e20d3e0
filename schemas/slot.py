"""Compiled slots and their per-block constraints: exact masks by fixed-length reachability.

`compile_slot(schema, vocab)` → `CompiledSlot` (immutable, cached per vocabulary; compile once per
job): the schema's byte language, its token automaton, the slot length (longest accepted token path,
capped by `max_tokens`) and, for small finite languages, the values with one token spelling each.
`CompiledSlot.new_constraint(filler_id)` → `SlotState`, the cheap mutable `SlotConstraint` of one
slot in one block. A slot of length L spells one value in its first k tokens and the filler in the
remaining L - k. For every position p the state keeps F[p] (product states reachable from the start
through the committed tokens before p) and B[p] (states from which the positions p..L-1 can still be
completed consistently with the committed tokens there); a token t is allowed at an open position p
iff some transition of t leads from F[p] into B[p + 1]. That is exactly "on an accepting path
consistent with every committed token", and a feasible slot therefore never has an empty row.
Commits update F forward and B backward only as far as they change; mask rows are cached on the
compiled slot by (F[p], B[p + 1]) so documents after the first reuse them.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from decide.engine.constraints import InfeasibleSlot, bitmask_width

from . import automata
from .errors import DecodeMismatch, UnsupportedSchema
from .language import Language, compile_language, empty_refusal
from .tokens import TokenAutomaton
from .vocab import Vocabulary

if TYPE_CHECKING:
    import torch

# torch is imported only where a bitmask buffer is checked (`check_bitmask`): compiling and
# `decide validate` must not load it (`decide.engine.constraints` is torch-free).

DEFAULT_MAX_TOKENS = 32
# An open-ended slot (not a finite set of options, longest value above this many tokens) is first
# laid out this long, and given its whole length only when its value fills every position
# (`SlotState.grown`): most free strings are a few tokens, and every position costs a forward.
GROW_FROM = 8
MAX_OPTIONS = 128
_CACHE_ROWS = 16_384
SLOT_CACHE_SIZE = 512


@dataclass(frozen=True)
class Decoded:
    value: Any
    text: str


class CompiledSlot:
    """One question schema compiled against one vocabulary; share it across documents."""

    def __init__(
        self, schema: Any, vocab: Vocabulary, language: Language, max_tokens: int, max_options: int
    ) -> None:
        self.schema = schema
        self.vocab = vocab
        self.language = language
        # A finite slot's values the vocabulary cannot spell ("Yes", "USD" in an uncased one)
        # are spelled as its tokenizer reads them ("yes", "usd") when that reading is the same
        # text up to case, accents and spaces (an object's or array's: up to case) and no other
        # value reads alike (`read_as`: reading -> value, undone by `decode`); values spelled
        # neither way are `unspelled`.
        finite = language.values(max_options)
        self.read_as, self.unspelled = _readings(finite, vocab) if finite else ({}, [])
        spelling = language
        if self.read_as:
            as_read = {value: reading for reading, value in self.read_as.items()}
            texts = [as_read.get(text, text) for text in finite or ()]
            spelling = compile_language({"enum": [json.loads(text) for text in texts]})
        # An open-ended slot whose values hold upper-case ASCII letters (a `pattern` such as
        # "^[A-Z]{2}-\d+$", a date-time's "T", an object's upper-case keys or options) is
        # spelled, in an uncased vocabulary, in its case-folded language, and `decode` writes
        # the value back in the case the schema asks for (`automata.unfold`): "ab-1234" is
        # decoded as "AB-1234".
        self.folded = finite is None and vocab.folds_case and automata.case_matters(language.dfa)
        if self.folded:
            try:
                spelling = replace(language, dfa=automata.fold_case(language.dfa))
            except automata.RegionConflict:
                raise UnsupportedSchema(
                    "",
                    "pattern",
                    "this uncased vocabulary spells upper-case letters in lower case, and the "
                    "lower-cased schema would join strings of different length bounds",
                ) from None
        self.spelling = spelling  # the language the tokens spell (`language` but for case)
        self.automaton = auto = TokenAutomaton(spelling.dfa, vocab)
        self.n = auto.n_states
        self.done = self.n
        self._acc = auto.accepting
        self._rows: dict[bytes, np.ndarray] = {}
        # Per (filler id, length): F, B and mask rows of a slot with nothing committed.
        self._fresh: dict[tuple[int, int], tuple[list, list, np.ndarray | None]] = {}
        self._padded: dict[tuple[int, int], list[list[int]]] = {}  # options() per (filler, length)
        reach = self._start()
        lengths = []
        for k in range(1, max_tokens + 65):
            reach = self._any(reach, filler=False)
            if not reach.any():
                break
            if reach[self._acc].any():
                lengths.append(k)
        if not lengths and reach.any():
            raise UnsupportedSchema(
                "", "maxLength", f"every value of this schema needs more than {max_tokens} tokens"
            )
        if not lengths:
            refusal = empty_refusal(language)
            if refusal is not None:
                raise refusal
            raise UnsupportedSchema(
                "",
                "schema",
                "no value of this schema can be spelled with this vocabulary (e.g. accented "
                "letters in an uncased vocabulary, which reads them without their accents)",
            )
        fitting = [k for k in lengths if k <= max_tokens]
        if not fitting:
            raise UnsupportedSchema(
                "", "maxLength", f"no value of this schema fits in {max_tokens} tokens"
            )
        self.length = max(fitting)
        self.min_length = min(fitting)
        self.truncated = bool(lengths[-1] > max_tokens) or bool(reach.any())
        self.values: list[str] | None = finite
        self.value_tokens: list[list[int]] | None = None
        self.too_long: list[tuple[str, int]] = []  # finite values longer than the slot, tokens
        if self.values is not None:
            self.value_tokens = []
            kept = []
            spelled_as = {value: reading for reading, value in self.read_as.items()}
            for text in self.values:
                ids = vocab.encode(spelled_as.get(text, text))
                if ids is not None and len(ids) <= self.length and self._accepts(ids):
                    self.value_tokens.append(ids)
                    kept.append(text)
                elif ids is not None and len(ids) > self.length:
                    self.too_long.append((text, len(ids)))
            self.values = kept
        if language.dfa.accepts_ignoring_counts(b"null") and not self._spells_not_null(
            spelling, vocab, max_tokens
        ):
            raise UnsupportedSchema(
                "",
                "schema",
                "only null can be spelled with this vocabulary, no other value of this schema "
                "(e.g. accented letters in an uncased vocabulary): the question would always "
                "answer null",
            )
        # The length a block lays the slot out with first (`new_constraint(first=True)`).
        if self.value_tokens:  # decided as whole options: one position past the longest
            self.first_length = min(self.length, 1 + max(len(ids) for ids in self.value_tokens))
        elif self.values is not None or self.length <= GROW_FROM:
            self.first_length = self.length
        else:
            self.first_length = max(GROW_FROM, self.min_length)

    def _spells_not_null(self, language: Language, vocab: Vocabulary, max_tokens: int) -> bool:
        """Whether some value other than null is spelled within `max_tokens` tokens (true too
        when the schema has no other value at all: `{type: null}` is what it says)."""
        if self.values is not None:
            return any(v != "null" for v in self.values) or language.values(2) == ["null"]
        if self.length > 4:  # null is spelled in at most 4 tokens: a longer path is another value
            return True
        # A JSON value that starts with "n" is null: without that first byte, what is left.
        dfa = language.dfa
        trans = dfa.trans.copy()
        trans[0, ord("n")] = -1
        other = TokenAutomaton(replace(dfa, trans=trans), vocab)
        reach = np.zeros(other.n_states, dtype=bool)
        reach[other.start] = True
        for _ in range(max_tokens):
            nxt = np.zeros_like(reach)
            nxt[other.pair_dst[reach[other.pair_src]]] = True
            if nxt[other.accepting].any():
                return True
            if not nxt.any():
                break
            reach = nxt
        # Nothing else is spelled: refused, unless the schema admits null alone ({type: null},
        # or beside a branch no string satisfies: `{maxLength: 0, pattern: "^[a-z]+$"}`).
        return not automata.accepts_without(dfa, ord("n"))

    # DP primitives over product states (index n = DONE, the filler tail) ---------------------

    def _start(self) -> np.ndarray:
        f = np.zeros(self.n + 1, dtype=bool)
        f[self.automaton.start] = True
        return f

    def _final(self) -> np.ndarray:
        b = np.zeros(self.n + 1, dtype=bool)
        b[self._acc] = True
        b[self.done] = True
        return b

    def _any(self, f: np.ndarray, filler: bool = True) -> np.ndarray:
        a = self.automaton
        out = np.zeros(self.n + 1, dtype=bool)
        out[a.pair_dst[f[a.pair_src]]] = True
        if filler and (f[self.done] or f[self._acc].any()):
            out[self.done] = True
        return out

    def _any_back(self, b: np.ndarray) -> np.ndarray:
        a = self.automaton
        out = np.zeros(self.n + 1, dtype=bool)
        out[a.pair_src[b[a.pair_dst]]] = True
        if b[self.done]:
            out[self._acc] = True
            out[self.done] = True
        return out

    def _step(self, f: np.ndarray, token: int, filler: int) -> np.ndarray:
        out = np.zeros(self.n + 1, dtype=bool)
        if token == filler:
            out[self.done] = bool(f[self.done] or f[self._acc].any())
        else:
            src, dst = self.automaton.token_pairs(token)
            out[dst[f[src]]] = True
        return out

    def _back(self, b: np.ndarray, token: int, filler: int) -> np.ndarray:
        out = np.zeros(self.n + 1, dtype=bool)
        if token == filler:
            if b[self.done]:
                out[self._acc] = True
                out[self.done] = True
        else:
            src, dst = self.automaton.token_pairs(token)
            out[src[b[dst]]] = True
        return out

    def _accepts(self, ids: Sequence[int]) -> bool:
        f = self._start()
        for t in ids:
            f = self._step(f, int(t), -1)
        return bool(f[self._acc].any())

    def _row(self, f: np.ndarray, b: np.ndarray) -> np.ndarray:
        key = f.tobytes() + b.tobytes()
        row = self._rows.get(key)
        if row is None:
            a = self.automaton
            live = f[a.pair_src] & b[a.pair_dst]
            classes = np.unique(a.pair_cls[live])
            if len(classes):
                row = np.bitwise_or.reduce(a.class_masks[classes], axis=0)
            else:
                row = np.zeros(a.width, dtype=np.int32)
            if len(self._rows) >= _CACHE_ROWS:
                self._rows.clear()
            self._rows[key] = row
        return row

    # Public API ------------------------------------------------------------------------------

    @property
    def finite(self) -> bool:
        return self.values is not None

    def new_constraint(
        self, filler_id: int, length: int | None = None, *, first: bool = False
    ) -> SlotState:
        """A fresh `SlotConstraint` for one slot of one block. `length` (≥ the slot's own) lets a
        narrower language fill the positions of a wider slot: the extra ones hold filler.
        `first`: laid out with `first_length` positions, growing to the slot's own length when
        its value fills them (`SlotState.grown`)."""
        if first:
            if length is not None:
                raise ValueError("pass either a length or first=True")
            length = self.first_length
        return SlotState(self, filler_id, length)

    def decode(self, tokens: Sequence[int], filler_id: int) -> Decoded:
        """Value spelled by a full slot (value tokens, then filler), re-checked by jsonschema."""
        ids = [int(t) for t in tokens]
        if len(ids) < self.first_length:
            raise ValueError(f"expected at least {self.first_length} tokens, got {len(ids)}")
        k = ids.index(filler_id) if filler_id in ids else len(ids)
        if any(t != filler_id for t in ids[k:]) or not self._accepts(ids[:k]):
            raise DecodeMismatch(f"tokens {ids} are not a value of {json.dumps(self.schema)}")
        text = self.vocab.detokenize(ids[:k]).decode("utf-8")
        text = self.read_as.get(text, text)
        if self.folded and not self.language.accepts(text):
            unfolded = automata.unfold(self.language.dfa, text.encode("utf-8"))
            if unfolded is None:
                raise DecodeMismatch(f"{text!r} decoded from {ids} has no case the schema accepts")
            text = unfolded.decode("utf-8")
        value = json.loads(text)
        errors = [e.message for e in self.language.validator.iter_errors(value)]
        if errors or not self.language.accepts(text):
            raise DecodeMismatch(f"{text!r} decoded from {ids} is invalid: {errors}")
        return Decoded(value, text)


def _readings(values: Sequence[str], vocab: Vocabulary) -> tuple[dict[str, str], list[str]]:
    """({reading: value} for the values spelled as the tokenizer reads them, [values spelled
    neither way]) of a finite slot's JSON texts (see `CompiledSlot`): a string as the tokenizer
    reads it, an object or array with upper-case letters lower-cased by an uncased one."""
    if vocab.tokenizer is None:
        return {}, []
    unspelled = [text for text in values if vocab.encode(text) is None]
    if not unspelled:
        return {}, []
    taken = set(values)
    read_as: dict[str, str] = {}
    left = []
    for text in unspelled:
        found = vocab.as_read(text)
        reading = None if found is None else found[1]
        if reading is None and vocab.folds_case:  # an object or array with upper-case letters
            reading = automata.lower_ascii(text.encode("utf-8")).decode("utf-8")
        if reading is None or reading in taken or vocab.encode(reading) is None:
            left.append(text)
            continue
        taken.add(reading)
        read_as[reading] = text
    return read_as, left


class SlotState:
    """Mutable per-block state of one slot (implements the engine's `SlotConstraint`)."""

    independent = True  # its masks depend on its own commits only

    def __init__(self, compiled: CompiledSlot, filler_id: int, length: int | None = None) -> None:
        vocab = compiled.vocab
        if filler_id < vocab.size and filler_id not in vocab.excluded:
            raise ValueError(
                f"filler token {filler_id} can spell value text; pass it in the vocabulary's "
                "excluded ids so a value and its filler tail can never be confused"
            )
        self.compiled = compiled
        self.filler = int(filler_id)
        self._length = compiled.length if length is None else int(length)
        if self._length < compiled.first_length:
            raise ValueError(
                f"slot length {self._length} is below the language's {compiled.first_length}"
            )
        self.width = max(bitmask_width(vocab.size), bitmask_width(filler_id + 1))
        length = self._length
        self.tokens = np.full(length, -1, dtype=np.int64)
        key = (self.filler, self._length)
        fresh = compiled._fresh.get(key)
        if fresh is None:
            f = [compiled._start()]
            for _ in range(length):
                f.append(compiled._any(f[-1]))
            b = [compiled._final()]
            for _ in range(length):
                b.append(compiled._any_back(b[-1]))
            b.reverse()
            fresh = compiled._fresh[key] = (f, b, None)
        # The arrays are shared with the compiled slot: commits replace list items, never mutate
        # an array in place.
        self.f, self.b = list(fresh[0]), list(fresh[1])
        if fresh[2] is not None:
            self.rows = fresh[2].copy()
            self.dirty = np.zeros(length, dtype=bool)
        else:
            self.rows = np.zeros((length, self.width), dtype=np.int32)
            self.dirty = np.ones(length, dtype=bool)

    @property
    def length(self) -> int:
        return self._length

    @property
    def encoded_length(self) -> int:
        """The positions the model is shown the slot taking: a slot laid out short stands for
        its whole length, so the tokens after it keep their trained positions (docs/engine.md)."""
        return max(self._length, self.compiled.length)

    @property
    def stale_filler(self) -> int | None:
        """The filler, for an open-ended slot: its tail carries nothing the other answers need,
        so the in-block cache leaves it as it was masked. None for a finite slot, whose short
        option's tail tells the other slots the option ended (refreshing it is worth a point of
        MAMS sentiment, docs/benchmarks.md)."""
        return None if self.compiled.finite else self.filler

    def feasible(self) -> bool:
        return bool(self.f[self._length][self.compiled._acc].any() or self.f[-1][-1])

    def _allowed(self, position: int, token: int) -> bool:
        c = self.compiled
        f, b = self.f[position], self.b[position + 1]
        if token == self.filler:
            return bool((f[c.done] or f[c._acc].any()) and b[c.done])
        src, dst = c.automaton.token_pairs(token)
        return bool((f[src] & b[dst]).any())

    def commit(self, position: int, token: int) -> bool:
        if not 0 <= position < self._length:
            raise IndexError(f"position {position} outside slot of length {self._length}")
        token = int(token)
        if self.tokens[position] >= 0:
            return bool(self.tokens[position] == token)
        if not self._allowed(position, token):
            return False
        c = self.compiled
        self.tokens[position] = token
        self.dirty[position] = True
        for p in range(position, self._length):
            t = int(self.tokens[p])
            nxt = c._any(self.f[p]) if t < 0 else c._step(self.f[p], t, self.filler)
            if p > position and np.array_equal(nxt, self.f[p + 1]):
                break
            self.f[p + 1] = nxt
            if p + 1 < self._length:
                self.dirty[p + 1] = True
        for p in range(position, -1, -1):
            t = int(self.tokens[p])
            prv = c._any_back(self.b[p + 1]) if t < 0 else c._back(self.b[p + 1], t, self.filler)
            if p < position and np.array_equal(prv, self.b[p]):
                break
            self.b[p] = prv
            if p >= 1:
                self.dirty[p - 1] = True
        return True

    def fill_bitmask(self, out: torch.Tensor) -> None:
        check_bitmask(out, self._length, self.width)
        if not self.feasible():
            raise InfeasibleSlot("no value is consistent with the committed tokens")
        c = self.compiled
        for p in np.nonzero(self.dirty)[0].tolist():
            row = self.rows[p]
            row[:] = 0
            t = int(self.tokens[p])
            if t >= 0:
                row[t >> 5] = np.int32(np.uint32(1 << (t & 31)).view(np.int32))
            else:
                base = c._row(self.f[p], self.b[p + 1])
                row[: len(base)] = base
                if self._allowed(p, self.filler):
                    row[self.filler >> 5] |= np.uint32(1 << (self.filler & 31)).view(np.int32)
            self.dirty[p] = False
        key = (self.filler, self._length)
        fresh = c._fresh[key]
        if fresh[2] is None and not (self.tokens >= 0).any():
            c._fresh[key] = (fresh[0], fresh[1], self.rows.copy())
        view = out.numpy()
        view[:, : self.width] = self.rows
        view[:, self.width :] = 0

    def is_complete(self) -> bool:
        return bool((self.tokens >= 0).all())

    def grown(self) -> SlotState | None:
        """For a complete slot laid out shorter than the language's longest value: a fresh,
        empty constraint of the slot's whole length when the value fills every position (it
        may have been cut by the layout), else None. The sampler then decides the block again
        with the longer slot (`decide.engine.row_state.RowState.regrow`)."""
        if self._length >= self.compiled.length or not self.is_complete():
            return None
        if self.compiled.value_tokens:  # every option fits the layout: nothing was cut
            return None
        if int(self.tokens[-1]) == self.filler:
            return None
        return SlotState(self.compiled, self.filler)

    def options(self) -> list[list[int]] | None:
        """One full token sequence (value spelling + filler) per admissible value, for finite
        languages; the spelling is the tokenizer's own when it fits, else the fewest tokens."""
        c = self.compiled
        if c.value_tokens is None:
            return None
        key = (self.filler, self._length)
        padded = c._padded.get(key)
        if padded is None:
            padded = c._padded[key] = [
                ids + [self.filler] * (self._length - len(ids)) for ids in c.value_tokens
            ]
        fixed = [(j, t) for j, t in enumerate(self.tokens.tolist()) if t >= 0]
        return [list(seq) for seq in padded if all(seq[j] == t for j, t in fixed)]

    def decode(self) -> Decoded:
        if not self.is_complete():
            raise ValueError("slot is not complete")
        return self.compiled.decode(self.tokens.tolist(), self.filler)


def check_bitmask(out: torch.Tensor, length: int, width: int) -> None:
    """Refuse, with the actual values, a bitmask buffer that does not fit a slot's rows."""
    import torch

    if out.dtype != torch.int32 or out.device.type != "cpu" or out.dim() != 2:
        raise ValueError(
            f"bitmask must be a 2-D int32 CPU tensor, got {out.dtype} "
            f"{tuple(out.shape)} on {out.device}"
        )
    if out.shape[0] != length or out.shape[1] < width:
        raise ValueError(
            f"bitmask shape {tuple(out.shape)} does not fit slot [{length}, >= {width}]"
        )


def compile_slot(
    schema: Any,
    vocab: Vocabulary,
    *,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    max_recursion: int = 3,
    max_options: int = MAX_OPTIONS,
    strict: bool = False,
) -> CompiledSlot:
    """Compile (or fetch from the vocabulary's cache) the slot of one question schema;
    `strict`: unknown keywords are refused instead of ignored with a warning."""
    key = (json.dumps(schema, ensure_ascii=False), max_tokens, max_recursion, max_options, strict)
    cache: OrderedDict = vocab.__dict__.setdefault("_slots", OrderedDict())
    slot = cache.get(key)
    if slot is None:
        language = compile_language(schema, max_recursion=max_recursion, strict=strict)
        slot = cache[key] = CompiledSlot(schema, vocab, language, max_tokens, max_options)
        if len(cache) > SLOT_CACHE_SIZE:  # per-row question schemas must not grow it forever
            cache.popitem(last=False)
    else:
        cache.move_to_end(key)
    return slot
