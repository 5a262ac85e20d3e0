"""Windows over long documents, without a model: segmentation on sentence boundaries with an
overlap, hard splits of a giant sentence, BM25 ranking, the combination rule per kind of question,
and where extract answers are found (`jobs.windows`, `jobs.evidence`)."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

from decide.jobs.evidence import locate
from decide.jobs.windows import (
    Candidate,
    Window,
    WindowError,
    boundaries,
    combinations,
    combine,
    rank,
    ranked,
    segment,
    token_starts,
)


def words(text: str) -> list[tuple[int, int]]:
    """A whitespace tokenizer's offsets: one token per run of non-space characters."""
    return [m.span() for m in re.finditer(r"\S+", text)]


def starts_of(text: str, chunk: int = 1 << 16) -> np.ndarray:
    return token_starts(words, text, chunk)


def sentences(n: int, length: int = 5) -> str:
    return " ".join(
        " ".join(f"s{i}w{j}" for j in range(length - 1)) + f" s{i}end." for i in range(n)
    )


def test_token_starts_in_pieces_equal_one_pass() -> None:
    text = sentences(300)
    assert np.array_equal(starts_of(text, chunk=97), starts_of(text))
    assert starts_of(text).tolist() == [a for a, _ in words(text)]


def test_windows_cover_every_token_on_sentence_boundaries_within_budget() -> None:
    text = sentences(40)  # 200 tokens, sentences of 5
    starts = starts_of(text)
    windows = segment(text, starts, budget=23, overlap=6)
    assert len(windows) > 1
    covered: set[int] = set()
    for w in windows:
        inside = [i for i, s in enumerate(starts.tolist()) if w.start <= s < w.end]
        assert len(inside) == w.tokens <= 23
        covered.update(inside)
        piece = text[w.start : w.end].strip()
        assert piece.startswith("s") and piece.endswith("end.")  # whole sentences
    assert covered == set(range(len(starts)))
    for a, b in itertools.pairwise(windows):
        shared = [s for s in starts.tolist() if b.start <= s < a.end]
        assert 0 < len(shared) <= 6  # whole sentences, at most the overlap
        assert b.start > a.start


def test_no_overlap_and_one_window_for_a_short_document() -> None:
    text = sentences(10)
    starts = starts_of(text)
    assert [(w.start, w.end) for w in segment(text, starts, budget=1000)] == [(0, len(text))]
    windows = segment(text, starts, budget=10, overlap=0)
    assert [w.tokens for w in windows] == [10] * 5
    assert all(a.end <= b.start for a, b in itertools.pairwise(windows))


def test_paragraphs_and_lines_are_boundaries() -> None:
    text = "Title line\n\nFirst paragraph has words\nsecond line here"
    cuts = boundaries(text)
    assert text[cuts[1] :].startswith("First") and text[cuts[2] :].startswith("second")


def test_a_100_kb_sentence_is_hard_split_at_token_boundaries() -> None:
    text = "x" + " word" * 20_000  # one "sentence", no punctuation, 100 kB
    starts = starts_of(text)
    windows = segment(text, starts, budget=300, overlap=50)
    assert sum(w.tokens for w in windows) == len(starts)  # no overlap inside a hard split
    assert max(w.tokens for w in windows) == 300
    for w in windows:
        assert w.start in set(starts.tolist()) or w.start == 0
        assert text[w.start : w.end].split()[0] in ("x", "word")


def test_whitespace_makes_no_empty_window() -> None:
    text = "One sentence.\n\n\n   \n\n" + " " * 5000 + "\n\nTwo sentence."
    windows = segment(text, starts_of(text), budget=2, overlap=0)
    assert [text[w.start : w.end].split() for w in windows] == [
        ["One", "sentence."],
        ["Two", "sentence."],
    ]
    assert segment("   \n ", starts_of("   \n "), budget=4, overlap=0) == []


@pytest.mark.parametrize(("budget", "overlap"), [(0, 0), (10, 10), (10, -1)])
def test_bad_window_settings_are_refused(budget: int, overlap: int) -> None:
    with pytest.raises(WindowError, match=r"window|overlap"):
        segment("a b c.", starts_of("a b c."), budget, overlap)


def test_bm25_ranks_the_window_that_mentions_the_question() -> None:
    texts = [
        "Payment is due within thirty days of the invoice.",
        "The parties agree to keep the weather report.",
        "The receiving party shall not reverse engineer the samples.",
        "Notices go to the addresses above.",
    ]
    assert rank(texts, "May the receiving party reverse engineer anything?", 1) == [2]
    assert rank(texts, "reverse engineer; invoice payment", 2) == [0, 2]  # document order
    assert rank(texts, "anything", 10) == [0, 1, 2, 3]
    assert rank(texts, "zzz unseen", 2) == [0, 1]  # no match: the earliest windows
    with pytest.raises(WindowError, match="top_k"):
        rank(texts, "x", 0)


def cand(value, confidence: float, index: int) -> Candidate:
    return Candidate(value, confidence, Window(index, index * 10, index * 10 + 9, 5))


def test_absent_loses_to_a_confident_answer() -> None:
    absent = (True, "not_mentioned")
    windows = [
        cand("not_mentioned", 0.99, 0),
        cand("entailment", 0.7, 1),
        cand("not_mentioned", 0.95, 2),
    ]
    kept = combine(windows, absent)
    assert kept is not None and kept.value == "entailment" and kept.window.index == 1
    # not confident enough: the most confident absent answer is kept
    weak = [
        cand("not_mentioned", 0.9, 0),
        cand("contradiction", 0.4, 1),
        cand("not_mentioned", 0.95, 2),
    ]
    kept = combine(weak, absent)
    assert kept is not None and (kept.value, kept.window.index) == ("not_mentioned", 2)
    # the most confident among several non-absent answers
    both = [
        cand("entailment", 0.6, 0),
        cand("contradiction", 0.8, 1),
        cand("not_mentioned", 1.0, 2),
    ]
    assert combine(both, absent).value == "contradiction"
    # only non-absent answers, none confident: the most confident still wins
    assert (
        combine([cand("entailment", 0.2, 0), cand("contradiction", 0.3, 1)], absent).value
        == "contradiction"
    )


def test_null_is_the_absent_value_of_a_nullable_question() -> None:
    absent = (True, None)
    kept = combine([cand(None, 0.99, 0), cand("Clara Olsen", 0.6, 1)], absent)
    assert kept is not None and kept.value == "Clara Olsen"


def test_without_an_absent_value_the_most_confident_wins_earlier_on_ties() -> None:
    kept = combine([cand(3, 0.5, 0), cand(7, 0.9, 1), cand(True, 0.9, 2)])
    assert kept is not None and kept.value == 7
    assert combine([cand(1, 0.5, 0), cand(True, 0.5, 1)]).value == 1  # 1 and true differ
    assert combine([]) is None


def test_ranked_lists_each_value_once_best_first() -> None:
    absent = (True, "not_mentioned")
    windows = [cand("not_mentioned", 0.99, 0), cand("entailment", 0.7, 1), cand("entailment", 0.8, 2),
               cand("contradiction", 0.6, 3)]  # fmt: skip
    assert [(c.value, c.window.index) for c in ranked(windows, absent, 0.5)] == [
        ("entailment", 2),
        ("contradiction", 3),
        ("not_mentioned", 0),
    ]


def test_locate_finds_spans_numbers_and_dates_where_they_are_written() -> None:
    text = "Claimant: Jean-Luc O'Brien of Tulsa, OK. Claimed $12,500.00 on June 9, 2025."
    start, end = locate("jean-luc o'brien", text, {"type": "string"})
    assert text[start:end] == "Jean-Luc O'Brien"
    start, end = locate("tulsa,ok", text, {"type": "string"})
    assert text[start:end] == "Tulsa, OK"
    start, end = locate(12500, text, {"type": "integer"})
    assert text[start:end] == "12,500.00"
    start, end = locate("2025-06-09", text, {"type": "string", "format": "date"})
    assert text[start:end] == "June 9, 2025"
    assert locate(None, text, {"type": ["string", "null"]}) is None
    assert locate("Wichita", text, {"type": "string"}) is None


def test_combinations_start_with_the_combined_answers_and_give_up_least_first() -> None:
    values = {
        "a": [cand("x", 0.9, 0), cand("y", 0.5, 1)],
        "b": [cand(1, 0.99, 0), cand(2, 0.2, 1)],
    }
    seen = [{k: c.value for k, c in combo.items()} for combo in combinations(values, 10)]
    assert seen == [
        {"a": "x", "b": 1},
        {"a": "y", "b": 1},  # gives up log(0.9/0.5), less than log(0.99/0.2)
        {"a": "x", "b": 2},
        {"a": "y", "b": 2},
    ]
    assert len(list(combinations(values, 2))) == 2
