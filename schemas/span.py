"""Extractive slots: an answer that must be copied from its own document.

A question marked `extract: true` ("the claimant's name", "the clause cited") may only answer a
*span* of the document: one to `MAX_SPAN_WORDS` consecutive words, from the first character of a
word to the last character of a word, with each run of whitespace read as one space. Its schema
still applies (a span must also satisfy `maxLength`, `pattern`, ...), and if the schema admits
`null`, `null` stays an answer ("not in the document").

That is a finite language per document, so `SpanSlot` keeps it as an explicit option list (the
tokenizer's own spelling of each admissible span, padded with filler) and implements the engine's
`SlotConstraint` exactly: a token is allowed at a position iff some span still consistent with the
committed tokens has it there. A value the model would otherwise paraphrase, misspell or glue to
a neighbouring word ("aliceville", "clara henderson" for "Clara Olsen") cannot be produced. The
sampler decides spans position by position (`options()` is None; see there why). Word boundaries
come from `WORD`: letters and digits, each with the combining marks after it ("हिंदी", an accent
written apart), joined inside a word by one of `' ’ - . & /` ("O'Brien", "Jean-Luc", "U.S",
"B&B").

A numeric extract question (a schema that admits integers or numbers but no strings: "the claimed
amount") may only answer a number the document states (`document_numbers`, read by
`written_numbers`: "$12,500.00" is 12500, "$52k" 52000, "eighteen thousand four hundred" 18400),
by the same `SpanSlot` over the tokenizer's spelling of each number's canonical JSON; its schema's
bounds still apply. A copied amount cannot gain or lose a digit.
"""

from __future__ import annotations

import functools
import json
import re
import sys
import unicodedata
from collections.abc import Iterator, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import numpy as np

from decide.engine.constraints import InfeasibleSlot, bitmask_width

from .errors import UnsupportedSchema
from .nullable import value_schema
from .slot import CompiledSlot, Decoded, check_bitmask
from .units import unit_values
from .vocab import Vocabulary
from .vocab import plain_text as _plain
from .written_numbers import number_places

if TYPE_CHECKING:
    import torch


@functools.cache
def combining_marks() -> str:
    """The body of a regex character class holding every combining mark (Unicode categories
    Mn, Mc, Me as this Python's `unicodedata` has them): Indic vowel signs and viramas, Arabic
    and Hebrew vowel points, accents written apart. Built on first use (0.1 s)."""
    ranges: list[tuple[int, int]] = []
    for code in range(sys.maxunicode + 1):
        if unicodedata.category(chr(code))[0] == "M":
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1] = (ranges[-1][0], code)
            else:
                ranges.append((code, code))
    return "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in ranges)


def past_marks(text: str, end: int) -> int:
    """`end` moved past the combining marks (and variation selectors) that follow it: they
    belong to the character before (the accent of a decomposed "cafe\u0301", Arabic vowel
    marks, the keycap of "1\ufe0f\u20e3")."""
    while end < len(text) and unicodedata.category(text[end])[0] == "M":
        end += 1
    return end


class _Word:
    """`WORD`, compiled on first use: letters and digits, each with the combining marks that
    follow it ("हिंदी" is one word: Python's `\\w` has no marks, which cut it into "ह", "द"),
    joined inside a word by one of `' ’ - . & /`."""

    @functools.cached_property
    def pattern(self) -> re.Pattern[str]:
        part = f"[^\\W_]+(?:[{combining_marks()}]+[^\\W_]*)*"  # no backtracking over marks
        return re.compile(f"{part}(?:['’\\-.&/]{part})*")

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        return self.pattern.finditer(text)


WORD = _Word()
MAX_SPAN_WORDS = 12


class NoSpan(ValueError):
    """No span of the document is a value of the question's schema."""


def extract_kind(schema: Any, slot: CompiledSlot | None = None) -> str:
    """What an extract question copies from its document, by its schema's `type`: "spans" (a
    schema that admits strings, or names no type), "dates" (such a schema with `format: date`
    or `date-time`: dates read into ISO, `schemas.dates`) or "numbers" (one that admits integers
    or numbers but no strings). A schema that admits neither is refused (the pointer is into the
    schema). With its compiled `slot`, strings and numbers are what the slot's language admits:
    a union whose string branch the compiler left out (Pydantic's `Decimal`) copies numbers."""
    if schema is False:
        raise UnsupportedSchema("", "extract", "the schema admits no value")
    schema, _ = value_schema(schema)  # `anyOf: [X, {type: null}]` copies what X copies
    kind = schema.get("type") if isinstance(schema, dict) else None
    kinds = [kind] if isinstance(kind, str) else kind
    if slot is not None:  # a JSON value's first byte says its type
        first = slot.language.dfa.trans[0]
        if first[ord('"')] < 0 and (first[[ord(c) for c in "-0123456789"]] >= 0).any():
            return "numbers"
    if kinds is None or "string" in kinds:
        formats = ("date", "date-time", "duration")
        dated = isinstance(schema, dict) and schema.get("format") in formats
        return "dates" if dated else "spans"  # dates are read into ISO (`schemas.dates`)
    if "integer" in kinds or "number" in kinds:
        return "numbers"
    raise UnsupportedSchema(
        "/type",
        "extract",
        "extract answers are strings or numbers copied from the document; this schema's type "
        f"is {kind!r}",
    )


def check_extract_schema(schema: Any) -> None:
    """Refuse `extract` on a schema that admits neither strings nor numbers (`extract_kind`)."""
    extract_kind(schema)


def document_spans(
    document: str | Sequence[str], max_words: int = MAX_SPAN_WORDS, max_chars: int | None = None
) -> list[str]:
    """Distinct spans of `document` in order of first appearance (whitespace collapsed). A
    sequence of texts (the head and tail a truncation keeps) gives the spans of each text: no
    span runs from one into the next."""
    return [text for _, _, _, text in _span_places(document, max_words, max_chars)]


def _span_places(
    document: str | Sequence[str], max_words: int, max_chars: int | None
) -> Iterator[tuple[int, int, int, str]]:
    """(part, start, end, text) of each distinct span, at its first appearance."""
    parts = [document] if isinstance(document, str) else document
    seen: set[str] = set()
    for p, part in enumerate(parts):
        words = [(m.start(), m.end()) for m in WORD.finditer(part)]
        for i, (start, _) in enumerate(words):
            for j in range(i, min(len(words), i + max_words)):
                end = words[j][1]
                text = " ".join(part[start:end].split())
                if max_chars is not None and len(text) > max_chars:
                    break
                if text not in seen:
                    seen.add(text)
                    yield p, start, end, text


def in_document(answer: str, document: str) -> bool:
    """Whether `answer` reads as a part of `document`, ignoring case, accents and whitespace
    (the forms in which a tokenizer's reading of a span may differ from the span): the check
    every extract answer gets after decoding, independent of how the slot was built."""
    return _plain(answer) in _plain(document)


@functools.lru_cache(maxsize=4096)
def _plain_char(char: str) -> str:
    return _plain(char)


class WrittenSpans:
    """Where a document writes a span answer: the first span (word runs, `WORD`) that reads as
    the answer ignoring case, accents and spaces, found in one pass over the document's plain
    form (`_plain`, with each plain character's offset in the document). An uncased vocabulary
    spells "São Paulo" as "sao paulo" and closes up "Tent 4P" into "tent4p"; `written` gives
    the document's own text back."""

    def __init__(self, document: str) -> None:
        self.document = document
        self._index: tuple[str, list[int], set[int], set[int]] | None = None  # on first use

    def _read(self) -> tuple[str, list[int], set[int], set[int]]:
        if self._index is None:
            plain: list[str] = []
            where: list[int] = []
            for i, char in enumerate(self.document):
                kept = _plain_char(char)
                plain.append(kept)
                where.extend([i] * len(kept))
            words = list(WORD.finditer(self.document))
            starts, ends = {m.start() for m in words}, {m.end() for m in words}
            self._index = "".join(plain), where, starts, ends
        return self._index

    def find(self, answer: str) -> tuple[int, int] | None:
        """Offsets of the first span of the document that reads as `answer`, or None."""
        wanted = _plain(answer)
        if not wanted:
            return None
        plain, where, starts, ends = self._read()
        size = len(wanted)
        at = plain.find(wanted)
        while at >= 0:
            start, end = where[at], where[at + size - 1] + 1
            # whole characters only ("ß" reads "ss"), from a word's start to a word's end
            whole = (at == 0 or where[at - 1] != start) and (
                at + size == len(where) or where[at + size] != end - 1
            )
            end = past_marks(self.document, end)  # its last character's marks (plain: none)
            if whole and start in starts and end in ends:
                return start, end
            at = plain.find(wanted, at + 1)
        return None

    def written(self, answer: str) -> str | None:
        """The document's text of `answer`'s first span (whitespace collapsed), or None."""
        found = self.find(answer)
        return None if found is None else " ".join(self.document[found[0] : found[1]].split())


def document_numbers(document: str | Sequence[str]) -> list[str]:
    """The distinct numbers `document` states (`written_numbers.number_places`: digits, digits
    with a scale, numbers in words), as canonical JSON numbers in order of first appearance
    ("$12,500.00" → `12500`, "$52k" → `52000`, "eighteen thousand" → `18000`). A sequence of
    texts (the head and tail a truncation keeps) gives the numbers of each text."""
    parts = [document] if isinstance(document, str) else document
    out: dict[str, None] = {}
    for part in parts:
        for place in number_places(part):
            out.setdefault(place.value, None)
    return list(out)


def number_in_document(value: Any, document: str) -> bool:
    """Whether the number `value` is one `document` states (`document_numbers`): the check every
    numeric extract answer gets after decoding, independent of how the slot was built."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    wanted = Decimal(value) if isinstance(value, int) else Decimal(repr(value))
    return any(Decimal(n) == wanted for n in document_numbers(document))


class DocumentNumbers:
    """A document's numbers (`document_numbers`) as one vocabulary spells them: (token ids, JSON
    text) per number, plus `null`; the entries a numeric extract question's `SpanSlot` chooses
    from. With a `unit`, also the lengths of time or amounts per period it states, in that unit,
    and not the bare quantities of those stated in another unit (`units.unit_values`). Built
    once per document and shared by its numeric extract questions (of the same unit)."""

    what = "number"

    def __init__(
        self, document: str | Sequence[str], vocab: Vocabulary, unit: str | None = None
    ) -> None:
        self.vocab = vocab
        values: dict[str, None] = {}
        for part in [document] if isinstance(document, str) else document:
            if unit is None:  # as `document_numbers` reads them
                values.update(dict.fromkeys(p.value for p in number_places(part)))
            else:  # and what it states in `unit`, without quantities of other units
                values.update(dict.fromkeys(unit_values(part, unit)))
        self.entries = _distinct(_encode_all(vocab, [*values, "null"]))


class DocumentSpans:
    """A document's spans as one vocabulary spells them: (token ids, JSON text) per distinct
    spelling, plus `null`. Built once per document and shared by its extract questions; for a
    truncated document, from the parts the model sees (see `document_spans`)."""

    what = "span"

    def __init__(
        self,
        document: str | Sequence[str],
        vocab: Vocabulary,
        max_chars: int | None = None,
        max_words: int = MAX_SPAN_WORDS,
    ) -> None:
        self.vocab = vocab
        parts = [document] if isinstance(document, str) else list(document)
        places = list(_span_places(parts, max_words, max_chars))
        spelled = _spell_spans(vocab, parts, places)
        self.entries = _distinct([*spelled, _encode_all(vocab, ["null"])[0]])
        # what each spelling copies, as the document writes it (its first place)
        self.written: dict[tuple[int, ...], str] = {}
        for entry, place in zip(spelled, places, strict=True):
            if entry is not None:
                self.written.setdefault(entry[0], place[3])


class SpanSlot:
    """Per-document `SlotConstraint` of an extract question: a finite set of spellings of the
    document's spans (`DocumentSpans`) or of its numbers (`DocumentNumbers`)."""

    independent = True  # its masks depend on its own commits only

    def __init__(
        self,
        compiled: CompiledSlot,
        filler_id: int,
        document: str | DocumentSpans | DocumentNumbers | Any,
    ) -> None:
        self.compiled = compiled
        self.filler = int(filler_id)
        self._length = compiled.length  # the question's slot: the layout the model was trained on
        if isinstance(document, str):
            schema = compiled.schema
            max_chars = schema.get("maxLength") if isinstance(schema, dict) else None
            document = DocumentSpans(document, compiled.vocab, max_chars)
        if document.vocab is not compiled.vocab:
            raise ValueError("the document's spans were spelled with another vocabulary")
        # The byte-level check is the spelling language's (the language up to case in an uncased
        # vocabulary); `decode` re-checks the token path and jsonschema the value, so a spelling
        # the token automaton disagreed with would fail loudly.
        fits = [(ids, text) for ids, text in document.entries if len(ids) <= self._length]
        accepted = compiled.spelling.accepts_many([text for _, text in fits])
        kept = [entry for entry, ok in zip(fits, accepted, strict=True) if ok]
        written = getattr(document, "written", None)
        if written:
            kept = [e for e in kept if _writable(compiled, e[1], written.get(e[0]))]
        if not kept:
            raise NoSpan(f"no {document.what} of the document is a value of this question's schema")
        self.values = [text for _, text in kept]  # JSON text of each admissible answer
        self.table = np.full((len(kept), self._length), self.filler, dtype=np.int64)  # [K, L]
        for k, (ids, _) in enumerate(kept):
            self.table[k, : len(ids)] = ids
        self.what = document.what
        self.alive = np.ones(len(kept), dtype=bool)
        self.tokens = np.full(self._length, -1, dtype=np.int64)
        self.width = max(bitmask_width(compiled.vocab.size), bitmask_width(self.filler + 1))

    @property
    def length(self) -> int:
        return self._length

    def feasible(self) -> bool:
        return bool(self.alive.any())

    def commit(self, position: int, token: int) -> bool:
        if not 0 <= position < self._length:
            raise IndexError(f"position {position} outside slot of length {self._length}")
        token = int(token)
        if self.tokens[position] >= 0:
            return bool(self.tokens[position] == token)
        keep = self.alive & (self.table[:, position] == token)
        if not keep.any():
            return False
        self.alive = keep
        self.tokens[position] = token
        return True

    def fill_bitmask(self, out: torch.Tensor) -> None:
        check_bitmask(out, self._length, self.width)
        if not self.feasible():
            raise InfeasibleSlot(
                f"no {self.what} of the document is consistent with the committed tokens"
            )
        live = self.table[self.alive]  # [k, L]
        rows = np.zeros((self._length, out.shape[1]), dtype=np.uint32)
        for p in range(self._length):
            tokens = np.unique(live[:, p])
            np.bitwise_or.at(rows[p], tokens >> 5, np.left_shift(1, tokens & 31).astype(np.uint32))
        out.numpy()[:] = rows.view(np.int32)

    def is_complete(self) -> bool:
        return bool((self.tokens >= 0).all())

    def live(self) -> list[list[int]]:
        """The spellings (padded with filler) still consistent with the committed tokens."""
        return self.table[self.alive].tolist()

    def options(self) -> None:
        # Spans are decided position by position, never scored as whole options: spans share
        # long prefixes and differ where they end, and whole-option scores come from one forward
        # in which every position is masked, so the end of a span would be judged from marginals
        # that do not know its start ("wichita at" for "Wichita"). Stepping lets the model see
        # the committed start first: on 300 held-out documents every string question did better
        # (city 63.6 -> 69.3 %, product 65.0 -> 67.5 %) for 3.3 instead of 2.9 forwards; on the
        # 64 documents of benchmarks/extract.py whole options were ahead: a small difference.
        return None

    def decode(self) -> Decoded:
        if not self.is_complete():
            raise ValueError("slot is not complete")
        return self.compiled.decode(self.tokens.tolist(), self.filler)


def _writable(compiled: CompiledSlot, spelled: str, written: str | None) -> bool:
    """Whether a span spelled `spelled` (JSON text) can be answered as its document writes it
    (`written`): the spelling differs from it only in case and accents, or the written text is
    itself a value of the schema (an answer is given back as written, `jobs.extracted`). A
    vocabulary that closes up a space ("on 5" spelled "on5") under a schema that refuses the
    space would otherwise answer text the document never writes."""
    if written is None or spelled.count(" ") == written.count(" "):
        return True
    language = compiled.language
    if next(language.validator.iter_errors(written), None) is not None:
        return False
    return bool(language.accepts(json.dumps(written, ensure_ascii=False)))


def _distinct(
    spellings: Sequence[tuple[tuple[int, ...], str] | None],
) -> list[tuple[tuple[int, ...], str]]:
    """The spellings in order, without None and without repeated token sequences."""
    out: list[tuple[tuple[int, ...], str]] = []
    seen: set[tuple[int, ...]] = set()
    for spelled in spellings:
        if spelled is not None and spelled[0] not in seen:
            seen.add(spelled[0])
            out.append(spelled)
    return out


def _encode_all(
    vocab: Vocabulary, texts: Sequence[str]
) -> list[tuple[tuple[int, ...], str] | None]:
    """The tokenizer's own reading of every text (ids and what they spell), in one batched call:
    a span is copied token for token as the model reads it in the document, which for an
    uncased vocabulary is lower case and may close up spaces the vocabulary cannot spell
    ("Tulsa, OK" → "tulsa,ok"). Without a tokenizer, or where its ids have no spelling in the
    vocabulary, `vocab.encode`; None where nothing spells the text."""
    if vocab.tokenizer is None:
        encoded: list[list[int] | None] = [None] * len(texts)
    else:
        batch = vocab.tokenizer.encode_batch(list(texts), add_special_tokens=False)
        encoded = [list(e.ids) for e in batch]
    out: list[tuple[tuple[int, ...], str] | None] = []
    for text, ids in zip(texts, encoded, strict=True):
        data = None
        if ids is not None:
            try:
                data = vocab.detokenize(ids)
            except KeyError:
                data = None
        if data is None:
            ids = vocab.encode(text)
            data = None if ids is None else vocab.detokenize(ids)
        out.append(None if ids is None else (tuple(ids), data.decode("utf-8")))
    return out


def _spell_spans(
    vocab: Vocabulary, parts: Sequence[str], places: Sequence[tuple[int, int, int, str]]
) -> list[tuple[tuple[int, ...], str] | None]:
    """`_encode_all` of each span's JSON text, in the order of `places`. With a word-local
    tokenizer (`_WordLocal`) most spans are read off one tokenization of their part: a span
    whose ends fall on the part's pre-token boundaries is spelled by the tokens between them,
    inside the tokens of its quotes, exactly as the tokenizer reads the span alone. The others
    (an end inside a pre-token, a character JSON escapes, a token with no spelling) take the
    tokenizer's own call."""
    out: list[tuple[tuple[int, ...], str] | None] = [None] * len(places)
    local = _WordLocal.of(vocab)
    slow: list[int] = []
    read: dict[int, _PartTokens] = {}
    for n, (p, start, end, text) in enumerate(places):
        ids = None
        if local is not None and _JSON_ESCAPED.search(text) is None:
            if p not in read:
                read[p] = _PartTokens(local, parts[p])
            ids = read[p].between(start, end)
        if ids is not None:
            ids = (local.quote, *ids, local.quote)  # type: ignore[union-attr]
            try:
                out[n] = (ids, vocab.detokenize(ids).decode("utf-8"))
                continue
            except KeyError:
                pass
        slow.append(n)
    texts = [json.dumps(places[n][3], ensure_ascii=False) for n in slow]
    for n, spelled in zip(slow, _encode_all(vocab, texts), strict=True):
        out[n] = spelled
    return out


_JSON_ESCAPED = re.compile(r'["\\\x00-\x1f]')


class _WordLocal:
    """A WordPiece tokenizer whose normalizer works character by character and whose
    pre-tokenizer splits at every whitespace and punctuation character (BERT's, optionally with
    digits split): a pre-token never runs across a span's end, so a span's tokens do not depend
    on the text around it."""

    NORMALIZERS = frozenset({None, "BertNormalizer", "Lowercase", "NFD", "StripAccents"})
    PRE_TOKENIZERS = frozenset({"BertPreTokenizer", "Digits"})

    def __init__(self, tokenizer: Any, prefix: str, quote: int) -> None:
        self.tokenizer = tokenizer
        self.prefix = prefix
        self.quote = quote

    @classmethod
    def of(cls, vocab: Vocabulary) -> _WordLocal | None:
        tokenizer = vocab.tokenizer
        if tokenizer is None:
            return None
        cached = getattr(vocab, "_word_local", False)
        if cached is not False:
            return cached
        found = None
        spec = json.loads(tokenizer.to_str())
        model = spec.get("model") or {}
        if (
            model.get("type") == "WordPiece"
            and _types(spec.get("normalizer")) <= cls.NORMALIZERS
            and "BertPreTokenizer" in _types(spec.get("pre_tokenizer"))
            and _types(spec.get("pre_tokenizer")) <= cls.PRE_TOKENIZERS
        ):
            quote = tokenizer.encode('"', add_special_tokens=False).ids
            if len(quote) == 1:
                found = cls(tokenizer, model.get("continuing_subword_prefix") or "##", quote[0])
        vocab._word_local = found  # type: ignore[attr-defined]
        return found


def _types(component: Any) -> set[str | None]:
    """The `type` of a tokenizer component, or of each member of a Sequence."""
    if component is None:
        return {None}
    if component.get("type") == "Sequence":
        members = component.get("normalizers") or component.get("pretokenizers") or []
        return set().union(*(_types(m) for m in members)) if members else {None}
    return {component.get("type")}


class _PartTokens:
    """One tokenization of a text, indexed by the character offsets where a pre-token starts
    and ends (a token that does not continue the one before starts a pre-token)."""

    def __init__(self, local: _WordLocal, text: str) -> None:
        encoding = local.tokenizer.encode(text, add_special_tokens=False)
        self.ids = encoding.ids
        starts_word = [not t.startswith(local.prefix) for t in encoding.tokens]
        self.starts: dict[int, int] = {}
        self.ends: dict[int, int] = {}
        for k, (a, b) in enumerate(encoding.offsets):
            if starts_word[k]:
                self.starts.setdefault(a, k)
            if k + 1 == len(starts_word) or starts_word[k + 1]:
                self.ends[b] = k

    def between(self, start: int, end: int) -> tuple[int, ...] | None:
        i, j = self.starts.get(start), self.ends.get(end)
        if i is None or j is None or j < i:
            return None
        return tuple(self.ids[i : j + 1])


__all__ = [
    "MAX_SPAN_WORDS",
    "DocumentNumbers",
    "DocumentSpans",
    "NoSpan",
    "SpanSlot",
    "WrittenSpans",
    "check_extract_schema",
    "document_numbers",
    "document_spans",
    "extract_kind",
    "in_document",
    "number_in_document",
]
