"""Vocabularies: byte-level BPE round trips on GPT-2, WordPiece join rules, refusals."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers

from decide.schemas import UnsupportedTokenizer, Vocabulary, compile_slot

GPT2 = Path(__file__).parents[1] / "data" / "gpt2" / "tokenizer.json"


@pytest.fixture(scope="module")
def gpt2() -> Vocabulary:
    return Vocabulary.from_tokenizer(Tokenizer.from_file(str(GPT2)), excluded=[50256])


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=30))
def test_gpt2_encode_spells_the_text(gpt2: Vocabulary, text: str) -> None:
    ids = gpt2.encode(text)
    assert ids is not None
    assert gpt2.detokenize(ids) == text.encode("utf-8")
    assert 50256 not in ids


def test_gpt2_excluded_ids_have_no_surface(gpt2: Vocabulary) -> None:
    bare = Vocabulary.from_tokenizer(Tokenizer.from_file(str(GPT2)))
    assert bare.excluded == {50256}  # <|endoftext|> is a plain entry in GPT-2's file
    assert 50256 in gpt2.excluded
    with pytest.raises(KeyError):
        gpt2.detokenize([50256])
    assert gpt2.size == 50257
    assert gpt2.detokenize(gpt2.encode('"positive"')) == b'"positive"'


SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
PIECES = ['"', "new", "york", "##s", "##ork", "y", ".", "3", "5", "##5", "a", "-", "b", "ne", "##w"]


def wordpiece() -> Tokenizer:
    vocab = {t: i for i, t in enumerate(SPECIALS + PIECES)}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.add_special_tokens(SPECIALS)
    return tok


def join(pieces: list[str]) -> str:
    """Independent statement of the WordPiece slot decoding rule."""
    bodies = [p[2:] if p.startswith("##") else p for p in pieces]
    isolated = [len(b) == 1 and not b.isalnum() for b in bodies]
    out = ""
    for i, (p, b) in enumerate(zip(pieces, bodies, strict=True)):
        glue = p.startswith("##") or i == 0 or isolated[i] or isolated[i - 1]
        out += b if glue else " " + b
    return out


def test_wordpiece_round_trip_and_specials() -> None:
    vocab = Vocabulary.from_tokenizer(wordpiece())
    assert vocab.kind == "wordpiece"
    assert set(range(len(SPECIALS))) <= vocab.excluded
    for text in ['"new york"', '"new yorks"', "3.5", "-35", '"a-b"']:
        ids = vocab.encode(text)
        assert ids is not None
        assert vocab.detokenize(ids).decode() == text
    # Upper case cannot be spelled by an uncased vocabulary: no silent lower-casing.
    assert vocab.encode('"New"') is None


def test_wordpiece_slot_language_matches_join_rule() -> None:
    vocab = Vocabulary.from_tokenizer(wordpiece())
    schema = {"enum": ["new york", "yorks", "a-b", 3.5, -35]}
    slot = compile_slot(schema, vocab, max_tokens=5)
    valid = {json.dumps(v, separators=(",", ":")) for v in schema["enum"]}
    names = SPECIALS + PIECES
    ids = range(len(SPECIALS), len(names))
    assert slot.length == 5  # '"a-b"' spells as 5 pieces
    accepted = set()
    for n in range(1, 5):
        for seq in itertools.product(ids, repeat=n):
            if slot._accepts(list(seq)):
                accepted.add(seq)
    expected = {
        seq
        for n in range(1, 5)
        for seq in itertools.product(ids, repeat=n)
        if join([names[i] for i in seq]) in valid
    }
    assert accepted == expected
    assert {slot.decode(o, 0).value for o in slot.new_constraint(0).options()} == {
        "new york",
        "yorks",
        "a-b",
        3.5,
        -35,
    }


def test_unsupported_tokenizer_is_refused_with_a_reason() -> None:
    tok = Tokenizer(models.Unigram([("a", -1.0), ("b", -2.0)], 0, False))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    with pytest.raises(UnsupportedTokenizer, match="byte-level BPE"):
        Vocabulary.from_tokenizer(tok)


def test_wordpiece_with_split_digits_joins_digits_without_spaces() -> None:
    """With `Digits(individual_digits=True)` every digit is a word of its own, as punctuation
    is: numbers are spelled digit by digit, and no space is implied between digits."""
    tok = wordpiece()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.BertPreTokenizer(), pre_tokenizers.Digits(individual_digits=True)]
    )
    vocab = Vocabulary.from_tokenizer(tok)
    names = SPECIALS + PIECES
    ids = vocab.encode("355")
    assert [names[i] for i in ids] == ["3", "5", "5"]
    assert vocab.detokenize(ids) == b"355"
    plain = Vocabulary.from_tokenizer(wordpiece())  # without the split, "3" "5" reads "3 5"
    assert plain.detokenize([names.index("3"), names.index("5")]) == b"3 5"
    slot = compile_slot({"type": "integer", "minimum": 0, "maximum": 999}, vocab, max_tokens=4)
    accepted = {seq for n in range(1, 4) for seq in itertools.product(range(len(names)), repeat=n)
                if slot._accepts(list(seq))}  # fmt: skip
    digits = {names.index(d) for d in ("3", "5", "##5")}
    assert all(set(seq) <= digits for seq in accepted)
    assert (names.index("3"), names.index("5"), names.index("5")) in accepted
