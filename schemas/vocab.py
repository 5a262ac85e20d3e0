"""Token ids → the bytes they spell inside a slot, for byte-level BPE and WordPiece tokenizers.

A `Vocabulary` lists, for every usable token, one or more *variants* `(token, ctx_in, bytes,
ctx_out)`: byte-level BPE tokens (GPT-2, Qwen, LLaDA) spell fixed bytes whatever surrounds them
(`ctx` is always 0). WordPiece tokens (BERT, MiniLM) do not: we decode a slot by joining pieces,
`##x` pieces glue to the previous one, and a word-initial piece gets one space before it unless it
is the slot's first piece or it or the previous piece is a single punctuation or CJK character (the
characters BERT's pre-tokenizer always splits off, and digits when a `Digits(individual_digits)`
pre-tokenizer splits them too). So a word-initial piece has two variants, with
and without the space, chosen by `ctx` (1 = the previous piece ended a word). Excluded ids (special,
added, unknown, mask, pad, filler) have no variant and can never appear inside a value. Variants
are kept in a byte trie whose children are contiguous, ready for vectorized automaton walks.
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import UnsupportedTokenizer


def _bytes_to_unicode() -> dict[int, str]:
    bs = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs), strict=True))


def _isolated(ch: str) -> bool:
    """Characters BERT always splits into a word of their own (punctuation, CJK ideographs)."""
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    if unicodedata.category(ch).startswith("P"):
        return True
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )


def plain_text(text: str) -> str:
    """`text` without case, accents or whitespace: how an uncased tokenizer's reading of a text
    may differ from the text."""
    decomposed = unicodedata.normalize("NFKD", text)
    kept = (c for c in decomposed if not unicodedata.combining(c) and not c.isspace())
    return "".join(kept).casefold()


@dataclass
class Trie:
    """Distinct variant byte strings in a trie laid out level by level (BFS)."""

    byte: np.ndarray  # [N] int16, byte on the edge into the node (-1 for the root)
    child_start: np.ndarray  # [N] int64
    child_count: np.ndarray  # [N] int64
    var_start: np.ndarray  # [N + 1] int64, variants ending at node n: var_ids[var_start[n]:…]
    var_ids: np.ndarray  # [M] int64
    depth: int


@dataclass(repr=False)
class Vocabulary:
    """Usable tokens of a tokenizer as byte variants; build with `from_tokenizer` / `from_bytes`."""

    size: int
    n_ctx: int
    var_token: np.ndarray  # [M] int64
    var_ctx_in: np.ndarray  # [M] int8
    var_ctx_out: np.ndarray  # [M] int8
    var_bytes: list[bytes]
    excluded: frozenset[int]
    kind: str
    tokenizer: Any = field(default=None, repr=False)
    trie: Trie = field(init=False, repr=False)
    _surface: dict[tuple[int, int], tuple[bytes, int]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.trie = _build_trie(self.var_bytes)
        self._surface = {}
        for v, tok in enumerate(self.var_token.tolist()):
            self._surface[(tok, int(self.var_ctx_in[v]))] = (
                self.var_bytes[v],
                int(self.var_ctx_out[v]),
            )
        self.fingerprint = hash((self.size, self.kind, tuple(self.var_bytes), self.excluded))

    def __repr__(self) -> str:
        return f"Vocabulary({self.kind}, size={self.size}, excluded={len(self.excluded)})"

    # Construction ------------------------------------------------------------------------------

    @classmethod
    def from_bytes(
        cls, surfaces: Sequence[bytes | None], excluded: Iterable[int] = ()
    ) -> Vocabulary:
        """Context-free vocabulary: token i spells `surfaces[i]` (None or b"" = unusable)."""
        bad = set(excluded)
        toks, data = [], []
        for i, s in enumerate(surfaces):
            if s and i not in bad:
                toks.append(i)
                data.append(bytes(s))
            else:
                bad.add(i)
        zeros = np.zeros(len(toks), dtype=np.int8)
        return cls(
            len(surfaces),
            1,
            np.array(toks, dtype=np.int64),
            zeros,
            zeros.copy(),
            data,
            frozenset(bad),
            "bytes",
        )

    @classmethod
    def from_tokenizer(cls, tokenizer: Any, excluded: Iterable[int] = ()) -> Vocabulary:
        """From a `tokenizers.Tokenizer`; `excluded` adds ids (mask, pad, filler) to the specials
        and added tokens that are always excluded."""
        spec = json.loads(tokenizer.to_str())
        model = spec.get("model", {})
        decoder = spec.get("decoder") or {}
        vocab = model.get("vocab", {})
        dec_types = _decoder_types(decoder)
        kind = (model.get("type"), "ByteLevel" in dec_types, "WordPiece" in dec_types)
        if kind not in (("BPE", True, False), ("WordPiece", False, True)) or not isinstance(
            vocab, dict
        ):
            raise UnsupportedTokenizer(
                f"tokenizer model {model.get('type')!r} with decoder {dec_types} is not supported:"
                " we need byte-level BPE (ByteLevel decoder) or WordPiece (WordPiece decoder) to "
                "know exactly which bytes each token spells. SentencePiece/Metaspace vocabularies "
                "need a variant rule for the leading '▁' (not implemented)."
            )
        size = max(tokenizer.get_vocab_size(with_added_tokens=True), max(vocab.values()) + 1)
        bad = set(excluded)
        bad |= {t["id"] for t in spec.get("added_tokens", [])}
        unk = model.get("unk_token")
        if unk in vocab:
            bad.add(vocab[unk])
        if kind[0] == "BPE":
            return cls._byte_level(tokenizer, vocab, size, bad)
        return cls._wordpiece(tokenizer, vocab, size, bad, model, _splits_digits(spec))

    @classmethod
    def _byte_level(cls, tokenizer: Any, vocab: dict[str, int], size: int, bad: set[int]):
        inverse = {u: b for b, u in _bytes_to_unicode().items()}
        surfaces: list[bytes | None] = [None] * size
        for text, i in vocab.items():
            # `<|endoftext|>`-style control tokens are plain vocabulary entries in some files.
            if text.startswith("<|") and text.endswith("|>"):
                bad.add(i)
            elif all(ch in inverse for ch in text):
                surfaces[i] = bytes(inverse[ch] for ch in text)
        out = cls.from_bytes(surfaces, bad)
        out.kind = "byte-level"
        out.tokenizer = _without_prefix_space(tokenizer)
        return out

    @classmethod
    def _wordpiece(
        cls, tokenizer, vocab: dict[str, int], size: int, bad: set[int], model, digits: bool
    ):
        prefix = model.get("continuing_subword_prefix", "##")
        toks, cin, cout, data = [], [], [], []
        for text, i in sorted(vocab.items(), key=lambda kv: kv[1]):
            if i in bad or re.fullmatch(r"\[[A-Za-z_]*[0-9]*\]", text):
                bad.add(i)
                continue
            cont = text.startswith(prefix) and len(text) > len(prefix)
            body = text[len(prefix) :] if cont else text
            if not body:
                bad.add(i)
                continue
            # With a `Digits(individual_digits=True)` pre-tokenizer every digit is its own word,
            # exactly like punctuation: no space is implied around it.
            iso = len(body) == 1 and (_isolated(body) or (digits and body.isdigit()))
            out_ctx = 0 if iso else 1
            raw = body.encode("utf-8")
            if cont or iso:
                for ctx in (0, 1):
                    toks.append(i), cin.append(ctx), cout.append(out_ctx), data.append(raw)
            else:
                toks.append(i), cin.append(0), cout.append(1), data.append(raw)
                toks.append(i), cin.append(1), cout.append(1), data.append(b" " + raw)
        out = cls(
            size,
            2,
            np.array(toks, dtype=np.int64),
            np.array(cin, dtype=np.int8),
            np.array(cout, dtype=np.int8),
            data,
            frozenset(bad),
            "wordpiece",
            tokenizer,
        )
        return out

    # Use ---------------------------------------------------------------------------------------

    def detokenize(self, ids: Iterable[int]) -> bytes:
        """Bytes spelled by a run of value tokens (raises KeyError on an excluded id)."""
        out = bytearray()
        ctx = 0
        for t in ids:
            data, ctx = self._surface[(int(t), ctx)]
            out += data
        return bytes(out)

    def encode(self, text: str) -> list[int] | None:
        """The tokenizer's own ids for `text` when they spell it back exactly (so a value the
        model saw in training keeps its tokens), else the fewest-token spelling; None if no
        spelling exists."""
        data = text.encode("utf-8")
        if self.tokenizer is not None:
            ids = self.tokenizer.encode(text, add_special_tokens=False).ids
            try:
                if self.detokenize(ids) == data:
                    return list(ids)
            except KeyError:
                pass
        return self.shortest(data)

    def as_read(self, text: str) -> tuple[list[int], str] | None:
        """The tokenizer's own ids for the JSON string `text` and the JSON string they spell
        (`"yes"` for `"Yes"` in an uncased vocabulary, `"tent4p"` for `"Tent 4P"`), when that
        reading is the same string up to case, accents and spaces; else None."""
        if self.tokenizer is None or not isinstance(json.loads(text), str):
            return None
        ids = list(self.tokenizer.encode(text, add_special_tokens=False).ids)
        try:
            reading = self.detokenize(ids).decode("utf-8")
            read = json.loads(reading)
        except (KeyError, ValueError):
            return None
        if not isinstance(read, str) or plain_text(read) != plain_text(json.loads(text)):
            return None
        return ids, reading

    @functools.cached_property
    def folds_case(self) -> bool:
        """Whether the tokenizer reads upper-case letters as lower case (an uncased vocabulary:
        `A` is read, and spelled, `a`)."""
        if self.tokenizer is None:
            return False
        found = self.as_read('"QZ"')
        return found is not None and found[1] == '"qz"'

    def shortest(self, data: bytes) -> list[int] | None:
        """Fewest tokens spelling `data` exactly (breadth-first over (offset, ctx))."""
        best: dict[tuple[int, int], list[int]] = {(0, 0): []}
        frontier = [(0, 0)]
        while frontier:
            nxt = []
            for off, ctx in frontier:
                path = best[(off, ctx)]
                if off == len(data):
                    return path
                for tok, end, ctx2 in self._matches(data, off, ctx):
                    if (end, ctx2) not in best:
                        best[(end, ctx2)] = [*path, tok]
                        nxt.append((end, ctx2))
            frontier = nxt
        return None

    def _matches(self, data: bytes, off: int, ctx: int):
        trie = self.trie
        node = 0
        i = off
        while True:
            for k in range(trie.var_start[node], trie.var_start[node + 1]):
                v = int(trie.var_ids[k])
                if self.var_ctx_in[v] == ctx and node != 0:
                    yield int(self.var_token[v]), i, int(self.var_ctx_out[v])
            if i == len(data):
                return
            start, count = int(trie.child_start[node]), int(trie.child_count[node])
            kids = trie.byte[start : start + count]
            j = int(np.searchsorted(kids, data[i]))
            if j >= count or kids[j] != data[i]:
                return
            node = start + j
            i += 1


def _decoder_types(decoder: dict) -> list[str]:
    if decoder.get("type") == "Sequence":
        return [d.get("type") for d in decoder.get("decoders", [])]
    return [decoder.get("type")]


def _splits_digits(spec: dict[str, Any]) -> bool:
    """Whether the tokenizer's pre-tokenizer splits every digit off on its own."""

    def walk(node: Any) -> bool:
        if isinstance(node, dict):
            if node.get("type") == "Digits" and node.get("individual_digits"):
                return True
            return any(walk(v) for v in node.values())
        if isinstance(node, list):
            return any(walk(v) for v in node)
        return False

    return walk(spec.get("pre_tokenizer"))


def _without_prefix_space(tokenizer: Any) -> Any:
    """A copy whose ByteLevel pre-tokenizer adds no space before the text (slot values start
    right after the skeleton's `:`)."""
    from tokenizers import Tokenizer

    spec = json.loads(tokenizer.to_str())

    def patch(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "ByteLevel" and "add_prefix_space" in node:
                node["add_prefix_space"] = False
            for v in node.values():
                patch(v)
        elif isinstance(node, list):
            for v in node:
                patch(v)

    patch(spec.get("pre_tokenizer"))
    return Tokenizer.from_str(json.dumps(spec))


def _build_trie(strings: list[bytes]) -> Trie:
    uniq = sorted(set(strings))
    prefixes = {b""}
    for s in uniq:
        for k in range(1, len(s) + 1):
            prefixes.add(s[:k])
    nodes = sorted(prefixes, key=lambda p: (len(p), p))
    index = {p: i for i, p in enumerate(nodes)}
    n = len(nodes)
    byte = np.full(n, -1, dtype=np.int16)
    child_start = np.zeros(n, dtype=np.int64)
    child_count = np.zeros(n, dtype=np.int64)
    for i, p in enumerate(nodes[1:], start=1):
        byte[i] = p[-1]
        parent = index[p[:-1]]
        if child_count[parent] == 0:
            child_start[parent] = i
        child_count[parent] += 1
    ends = np.array([index[s] for s in strings], dtype=np.int64)
    order = np.argsort(ends, kind="stable")
    var_start = np.searchsorted(ends[order], np.arange(n + 1)).astype(np.int64)
    depth = max((len(s) for s in strings), default=0)
    return Trie(byte, child_start, child_count, var_start, order.astype(np.int64), depth)
