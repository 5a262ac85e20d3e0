"""Long documents whose words are not separated by plain spaces, or whose lines end in another
way than "\n" (`jobs.windows`, `jobs.evidence`). Tab-separated exports, no-break spaces,
ideographic spaces, old Mac "\r" files and U+2028 line separators were cut for tokenizing in the
middle of a word (the pieces were cut at " " or "\n" only: none, so every 64 k characters
wherever that fell), which changed the document's tokens; their lines were no window
boundaries; a sentence longer than a window was hard split inside a word, a combining mark or an
emoji sequence; and an extract answer's evidence ended before the accent of a decomposed "é"."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

import decide
from decide.jobs.evidence import locate
from decide.jobs.windows import boundaries, segment, token_starts

TESTS = Path(__file__).parents[1]
TOKENIZERS = {
    "bundled-wordpiece": Path(decide.__file__).parent / "model" / "tokenizer.json",
    "gpt2": TESTS / "data" / "gpt2" / "tokenizer.json",
    "small-bpe": TESTS / "data" / "small-bpe" / "tokenizer.json",
}
WORDS = ["alpha", "beta", "gamma", "delta", "lorem", "ipsum", "confidentiality"]
SEPARATORS = {
    "tab": "\t",
    "no-break space": "\u00a0",
    "ideographic space": "\u3000",
    "zero-width space": "\u200b",
    "lone cr": "\r",
    "crlf": "\r\n",
    "line separator": "\u2028",
    "paragraph separator": "\u2029",
    "nel": "\u0085",
}


def encoder(name: str):
    tokenizer = Tokenizer.from_file(str(TOKENIZERS[name]))
    return lambda text: tokenizer.encode(text, add_special_tokens=False).offsets


@pytest.fixture(scope="module", params=list(TOKENIZERS))
def encode(request):
    return encoder(request.param)


def at_once(encode, text: str) -> np.ndarray:
    return np.asarray([a for a, _ in encode(text)], dtype=np.int64)


@pytest.mark.parametrize("separator", list(SEPARATORS.values()), ids=list(SEPARATORS))
def test_cutting_and_joining_never_changes_the_tokens(encode, separator: str) -> None:
    text = separator.join(WORDS[i % len(WORDS)] for i in range(3000))  # ~20 k characters
    assert " " not in text and "\n" not in text.replace("\r\n", "")
    assert np.array_equal(token_starts(encode, text, 1000), at_once(encode, text))


def test_a_200_kb_document_of_tab_or_no_break_space_words_keeps_its_tokens() -> None:
    encode = encoder("bundled-wordpiece")
    for separator in ("\t", "\u00a0"):
        text = separator.join(WORDS[i % len(WORDS)] for i in range(30000))
        assert len(text) > 200_000
        assert np.array_equal(token_starts(encode, text), at_once(encode, text))


def test_a_run_one_token_long_is_never_cut() -> None:
    """The bundled WordPiece deletes U+200B and U+0085 (format and control characters), so
    words joined by them are one word: one token over the whole piece."""
    encode = encoder("bundled-wordpiece")
    text = "\u200b".join(["word"] * 2000)
    assert len(at_once(encode, text)) == 1
    assert token_starts(encode, text, 500).tolist() == [0]


def test_mixed_scripts_keep_their_tokens(encode) -> None:
    parts = [
        "שלום עולם, זה מסמך.",
        "مرحبا بالعالم؛ هذا مستند.",
        "cafe\u0301 re\u0301sume\u0301 na\u00efve.",
        "👨\u200d👩\u200d👧\u200d👦 family 🏳️\u200d🌈 flag 👍🏽.",
        "𝐀𝐁𝐂 𝟏𝟐𝟑 𐍈 astral.",
        "| 12 | 3400 | 5600 | 78 | 910 |",
        "9" * 300,
        "भाषा हिंदी है।",
    ]
    text = "\t".join(parts[i % len(parts)] for i in range(400))
    assert np.array_equal(token_starts(encode, text, 700), at_once(encode, text))


def test_english_tokens_are_unchanged(encode) -> None:
    sentence = "The receiving party shall keep the information confidential for 3.5 years. "
    text = "\n\n".join(sentence * 8 for _ in range(300))
    assert np.array_equal(token_starts(encode, text, 4096), at_once(encode, text))


@pytest.mark.parametrize("separator", ["\r", "\r\n", "\u2028", "\u2029", "\u0085", "\f", "\v"])
def test_every_kind_of_line_break_is_a_boundary(separator: str) -> None:
    lines = ["Heading without a full stop", "Second line", "| a | b |"]
    text = separator.join(lines)
    cuts = boundaries(text)
    assert len(cuts) == 3
    assert [text[a:b].rstrip() for a, b in zip(cuts, [*cuts[1:], len(text)], strict=True)] == lines


def test_a_lone_cr_document_is_windowed_on_its_lines() -> None:
    encode = encoder("bundled-wordpiece")
    text = "\r".join(f"row {i} | value {i * 7} | total {i * 13}" for i in range(400))
    starts = token_starts(encode, text)
    for w in segment(text, starts, budget=60, overlap=15):
        assert w.start == 0 or text[w.start - 1] == "\r"
        assert w.end == len(text) or text[w.end - 1] == "\r"


@pytest.mark.parametrize("name", list(TOKENIZERS))
def test_a_giant_sentence_is_hard_split_between_words_not_inside_them(name: str) -> None:
    encode = encoder(name)
    rest = "👨\u200d👩\u200d👧 cafe\u0301 हिंदी unbelievably "
    text = "".join(f"{w}{rest}" for w in WORDS * 60)  # one unit, no sentence end
    starts = token_starts(encode, text)
    windows = segment(text, starts, budget=40, overlap=0)
    assert len(windows) > 10
    for w in windows[1:]:
        assert text[w.start - 1].isspace() or text[w.start].isspace(), repr(
            text[w.start - 5 : w.start + 5]
        )
    covered = sum(w.tokens for w in windows)
    assert covered == len(starts)


def test_evidence_ends_after_the_combining_marks_of_its_last_character() -> None:
    schema = {"type": "string"}
    text = "Le cafe\u0301 est ouvert."
    start, end = locate("café", text, schema)
    assert text[start:end] == "cafe\u0301"
    text = "كتب الطالبُ الدرسَ"
    start, end = locate("الطالب", text, schema)
    assert text[start:end] == "الطالبُ"
    text = "👨\u200d👩\u200d👧 𝐀𝐁𝐂 paid $1,400 to Zoë Smith"
    start, end = locate("Zoë Smith", text, schema)
    assert text[start:end] == "Zoë Smith"
    start, end = locate(1400, text, {"type": "integer"})
    assert text[start:end] == "1,400"
