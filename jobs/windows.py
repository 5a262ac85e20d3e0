"""Windows over a long document: segmentation, lexical ranking and the combination of answers.

Pure functions, no model. Contract:

- `token_starts(encode, text)` is the character offset of every token of `text`, tokenized in
  pieces of about `TOKENIZE_CHARS` characters cut where the piece's own tokens meet at
  whitespace of any kind (never inside a token), so a 1 MB document never holds more than one
  piece's `Encoding`, the offsets live in one int array, and they are those of the whole text
  tokenized at once.
- `segment(text, starts, budget, overlap)` cuts `text` into windows of at most `budget` tokens
  each, on paragraph, line (any line break: `\r`, `\r\n`, U+2028, ...) or sentence boundaries
  (`boundaries`); consecutive windows share
  whole sentences worth at most `overlap` tokens (the stride is what is left). A sentence longer
  than `budget` (a 100 kB "sentence") is hard split at token boundaries. Windows without a token
  (whitespace only) are never produced; every token of the document lies in some window.
- `rank(texts, query, k)` is the indices of the `k` windows most relevant to `query` by BM25
  (`bm25s`), in document order; ties keep the earlier window.
- `combine(candidates, absent, confident)` is the one answer of a question among its per-window
  answers: with a declared absent value (`absent:` on the question, or `null` where the schema
  admits it) the most confident answer that is not absent wins when its confidence reaches
  `confident`, else the most confident absent answer; without one, the most confident answer.
  Ties keep the earlier window. `ranked` orders a question's distinct values under that rule
  and `combinations` walks choices of one value per question best first, for the rules.
"""

from __future__ import annotations

import heapq
import json
import math
import re
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from decide.schemas.span import combining_marks

# Scripts written without spaces between words (Han, kana): each of their characters is a term
# of its own, as CJK search engines index them (the evidence ranker also pairs adjacent terms,
# which gives the usual character bigrams); elsewhere a term is a run of two or more word
# characters, exactly what `\b\w\w+\b` (bm25s's and scikit-learn's default) finds.
UNSPACED = "\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f"
# A word character's combining marks are part of its term (Python's `\w` has none: "हिंदी"
# gave the terms "ह" and "द", dropped as shorter than two; `schemas.span.combining_marks`).
TERM = re.compile(rf"[{UNSPACED}]|(?:(?![{UNSPACED}])[\w{combining_marks()}]){{2,}}")
UNSPACED_CHAR = re.compile(rf"[{UNSPACED}]")


def word_count(text: str) -> int:
    """Words of `text`: whitespace-separated pieces, each character of an unspaced script one."""
    return len(text.split()) + len(UNSPACED_CHAR.findall(text))


# Where a text without whitespace is cut for tokenizing: just before a full-width sentence end
# (byte-level BPE pre-tokenizers glue punctuation to the letters after it, never before it).
UNSPACED_CUTS = ("。", "！", "？", "．")
TOKENIZE_CHARS = 1 << 16  # characters tokenized at once when counting a document's tokens
DEFAULT_OVERLAP = 64  # tokens two consecutive windows may share (whole sentences)
DEFAULT_CONFIDENT = 0.5  # a non-absent window answer at least this confident beats "absent"
ENFORCE_TRIES = 256  # choices tried, best first, to satisfy rules checked after decoding

# Where a unit ends: after a blank line, a line break of any kind (\n, \r\n, a lone \r as old Mac
# files end lines, vertical tab, form feed (a page break), U+001C-U+001E, NEL U+0085, the line
# and paragraph separators U+2028 and U+2029: what `str.splitlines` breaks at), or a sentence's
# final punctuation (with closing quotes or brackets). ASCII . ! ? ; : (and the ellipsis …) end
# a sentence only when whitespace follows, so "3.5" and "e.g.x" stay whole; the full-width
# terminators of Chinese and Japanese (。｡！？；：), the Devanagari danda (। ॥), the Arabic
# question mark ؟ and the Urdu full stop ۔ end one without (those scripts write none after them),
# and so does an ellipsis right after a Chinese or Japanese character ("……"). A cut lies after
# any whitespace that follows.
_CLOSE = "\"'’”)\\]»›」』）］｝〉》】〕〗〙〛〞〟＂＇"
_WIDE = "。｡！？；：।॥؟۔"
_CJK = "\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff01-\uff9f\uac00-\ud7af"
LINE_BREAKS = r"\n\r\v\f\x1c-\x1e\x85\u2028\u2029"
BOUNDARY = re.compile(
    rf"[{LINE_BREAKS}]\s*|[.!?;:…][{_CLOSE}]*\s+|(?:[{_WIDE}]|(?<=[{_CJK}])…)[{_WIDE}…]*[{_CLOSE}]*\s*"
)


class WindowError(ValueError):
    """Windows cannot be made (a budget of no tokens, an overlap not below the budget)."""


@dataclass(frozen=True)
class Window:
    """Characters `start:end` of the document, `tokens` of its tokens."""

    index: int
    start: int
    end: int
    tokens: int


@dataclass(frozen=True)
class Candidate:
    """One window's answer to one question."""

    value: Any
    confidence: float
    window: Window | None  # None: the evidence ranker sent the question to no window
    span: tuple[int, int] | None = None  # document offsets of an extract answer's span


def token_starts(
    encode: Callable[[str], Sequence[tuple[int, int]]], text: str, chunk: int = TOKENIZE_CHARS
) -> np.ndarray:
    """Character offsets where the tokens of `text` start. `encode` gives a text's token
    offsets (no special tokens). The text is tokenized in pieces of about `chunk` characters;
    a piece is cut where its own tokens meet (no token of it crosses the cut) at least
    `_context(chunk)` characters before its end, so the tokens before the cut saw the text after
    it. Of such places the last one at whitespace of any kind (`str.isspace`: tabs, no-break and
    ideographic spaces, every line break) is taken, else the last one just before a full-width
    sentence end, else after or before any other non-word character, else any; a piece with none
    grows until it has one (a run one token long is never cut). Cut and joined again, the starts
    are those of `text` tokenized at once."""
    out: list[np.ndarray] = []
    position = 0
    while position < len(text):
        size = chunk
        while True:
            end = min(len(text), position + size)
            offsets = encode(text[position:end])
            pairs = np.asarray(offsets, dtype=np.int64).reshape(-1, 2) + position
            found = pairs[:, 0]
            if end == len(text):
                cut = len(text)
                break
            cut = _cut(text, position, end - _context(size), found, pairs[:, 1])
            if cut is not None:
                break
            size *= 2  # one token over the whole piece (a glued run): tokenize more of it
        out.append(found[found < cut])
        position = cut
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def _context(chunk: int) -> int:
    """Characters of a piece after its cut, tokenized but kept for the next piece."""
    return min(1024, chunk // 4)


def _cut(text: str, position: int, limit: int, found: np.ndarray, ends: np.ndarray) -> int | None:
    """The best place in `(position, limit]` to cut the piece of `text` starting at `position`
    whose tokens start at `found` and end at `ends` (document offsets; see `token_starts`);
    None when no token of it starts there without another token crossing it."""
    reach = np.maximum.accumulate(ends) if len(ends) else ends  # furthest end so far
    clean = np.ones(len(found), dtype=bool)
    clean[1:] = reach[:-1] <= found[1:]
    places = found[clean & (found > position) & (found <= limit)].tolist()
    fallback: list[int | None] = [None, None, None]  # full-width end, non-word, any
    for a in reversed(places):
        before, at = text[a - 1], text[a]
        if before.isspace() or at.isspace():
            return a
        if at in UNSPACED_CUTS:
            fallback[0] = fallback[0] or a
        elif not (before.isalnum() and at.isalnum()):
            fallback[1] = fallback[1] or a
        else:
            fallback[2] = fallback[2] or a
    return next((c for c in fallback if c is not None), None)


def boundaries(text: str) -> list[int]:
    """Sorted character offsets where units (paragraphs, lines, sentences) start, `0` first."""
    return [0, *(m.end() for m in BOUNDARY.finditer(text) if 0 < m.end() < len(text))]


def _units(text: str, starts: np.ndarray, budget: int) -> list[tuple[int, int, int, int]]:
    """(char start, char end, first token, end token) of each unit with tokens; a unit of more
    than `budget` tokens is cut into pieces of `budget` tokens at token starts."""
    cuts = boundaries(text)
    ends = [*cuts[1:], len(text)]
    first = np.searchsorted(starts, np.asarray(cuts), side="left")
    last = np.searchsorted(starts, np.asarray(ends), side="left")
    units: list[tuple[int, int, int, int]] = []
    for start, end, t0, t1 in zip(cuts, ends, first.tolist(), last.tolist(), strict=True):
        if t1 <= t0:
            continue  # whitespace only: no window of its own
        a = t0
        while a < t1:
            b = t1 if t1 - a <= budget else _split(text, starts, a, a + budget)
            char_start = start if a == t0 else int(starts[a])
            char_end = end if b == t1 else int(starts[b])
            units.append((char_start, char_end, a, b))
            a = b
    return units


def _split(text: str, starts: np.ndarray, first: int, last: int) -> int:
    """Where a unit too long for a window is cut after token `first`: the last token in
    `(first + half, last]` that starts a word (at or after whitespace), else the last there that
    starts a character of its own between two non-word characters or a word and a non-word one
    (not a subword, not a combining mark, not inside an emoji's joined sequence, not the second
    byte-level token of a character), else `last`."""
    low = first + max(1, (last - first) // 2)
    fallback = last
    for b in range(last, low - 1, -1):
        at = int(starts[b])
        if at == int(starts[b - 1]):
            continue  # the rest of a character a byte-level token began
        before, char = text[at - 1], text[at]
        if before.isspace() or char.isspace():
            return b
        if fallback == last and not _joined(before, char):
            fallback = b
    return fallback


def _joined(before: str, char: str) -> bool:
    """Whether a cut between `before` and `char` would split a word or a character as read."""
    if unicodedata.category(char)[0] == "M" or "\u200d" in (before, char):
        return True
    return before.isalnum() and char.isalnum()


def segment(
    text: str, starts: np.ndarray, budget: int, overlap: int = DEFAULT_OVERLAP
) -> list[Window]:
    """Windows of at most `budget` tokens over whole units, consecutive ones sharing at most
    `overlap` tokens of whole units (see the module docstring)."""
    if budget < 1:
        raise WindowError(f"a window must hold at least one token, the budget is {budget}")
    if not 0 <= overlap < budget:
        raise WindowError(f"overlap ({overlap} tokens) must be at least 0 and below the window "
                          f"size ({budget} tokens)")  # fmt: skip
    units = _units(text, starts, budget)
    windows: list[Window] = []
    i = 0
    while i < len(units):
        j = i
        while j + 1 < len(units) and units[j + 1][3] - units[i][2] <= budget:
            j += 1
        start, end = units[i][0], units[j][1]
        windows.append(Window(len(windows), start, end, units[j][3] - units[i][2]))
        if j == len(units) - 1:
            break
        nxt = j + 1
        while nxt - 1 > i and units[j][3] - units[nxt - 1][2] <= overlap:
            nxt -= 1
        i = nxt
    return windows


def _terms(texts: Sequence[str]) -> list[list[str]]:
    import bm25s

    return bm25s.tokenize(list(texts), token_pattern=TERM.pattern, stopwords="en",
                          return_ids=False, show_progress=False)  # fmt: skip


def rank(texts: Sequence[str], query: str, k: int) -> list[int]:
    """Indices of the `k` windows (by text) that BM25 ranks highest for `query`, in document
    order; all of them when there are at most `k`."""
    if k < 1:
        raise WindowError(f"top_k must be at least 1, got {k}")
    if len(texts) <= k:
        return list(range(len(texts)))
    import bm25s

    retriever = bm25s.BM25()
    retriever.index(_terms(texts), show_progress=False)
    scores = np.asarray(retriever.get_scores(_terms([query])[0]), dtype=np.float64)
    order = np.lexsort((np.arange(len(texts)), -scores))  # best first, earlier on ties
    return sorted(order[:k].tolist())


def same_value(a: Any, b: Any) -> bool:
    """JSON equality (`1` and `true` differ, key order does not matter)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _best(candidates: Sequence[Candidate]) -> Candidate:
    return max(candidates, key=lambda c: (c.confidence, -_index(c)))


def _index(candidate: Candidate) -> float:
    return math.inf if candidate.window is None else candidate.window.index


def combine(
    candidates: Sequence[Candidate],
    absent: tuple[bool, Any] = (False, None),
    confident: float = DEFAULT_CONFIDENT,
) -> Candidate | None:
    """The kept answer among one question's window answers (None when there are none)."""
    if not candidates:
        return None
    declared, value = absent
    if not declared:
        return _best(candidates)
    found = [c for c in candidates if not same_value(c.value, value)]
    missing = [c for c in candidates if same_value(c.value, value)]
    if found and (not missing or _best(found).confidence >= confident):
        return _best(found)
    return _best(missing)


def ranked(candidates: Sequence[Candidate], absent: tuple[bool, Any], confident: float) -> list:
    """The distinct values of one question's candidates, best first under `combine`'s rule:
    the kept one first, then the others by their best confidence (to enforce rules after
    combining, the next combination tried replaces one answer by its next value)."""
    out: list[Candidate] = []
    rest = list(candidates)
    while rest:
        kept = combine(rest, absent, confident)
        assert kept is not None
        out.append(kept)
        rest = [c for c in rest if not same_value(c.value, kept.value)]
    return out


def combinations(ranked_values: dict[str, list[Candidate]], limit: int) -> Iterator[dict]:
    """Up to `limit` choices of one candidate per question, best first: the combined answers
    first, then by the confidence they give up (the sum over questions of -log confidence, best
    first; ties in the order they were found). Used to enforce cross-question rules after
    combining: the first choice the rules accept is kept."""
    ids = list(ranked_values)
    cost = {
        qid: [-math.log(max(c.confidence, 1e-300)) for c in values]
        for qid, values in ranked_values.items()
    }

    def total(choice: tuple[int, ...]) -> float:
        return sum(cost[qid][i] for qid, i in zip(ids, choice, strict=True))

    start = tuple(0 for _ in ids)
    heap: list[tuple[float, int, tuple[int, ...]]] = [(total(start), 0, start)]
    seen = {start}
    order = 0
    for _ in range(limit):
        if not heap:
            return
        _, _, choice = heapq.heappop(heap)
        yield {qid: ranked_values[qid][i] for qid, i in zip(ids, choice, strict=True)}
        for k, qid in enumerate(ids):
            if choice[k] + 1 < len(ranked_values[qid]):
                nxt = (*choice[:k], choice[k] + 1, *choice[k + 1 :])
                if nxt not in seen:
                    seen.add(nxt)
                    order += 1
                    heapq.heappush(heap, (total(nxt), order, nxt))
