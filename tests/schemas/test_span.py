"""Extract slots (`SpanSlot`): a string answer restricted to spans of its document.

Oracles: spans are listed here from `str.split()` on documents whose words are separated by single
spaces, so they do not depend on the module's word pattern; masks are checked against the option
list filtered by the commits in plain Python; every completion is decoded and checked against
`jsonschema` and against the document text.
"""

from __future__ import annotations

import json
import random
from decimal import Decimal
from pathlib import Path

import jsonschema
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from decide.engine.constraints import InfeasibleSlot, SlotConstraint
from decide.schemas import UnsupportedSchema, Vocabulary, compile_language, compile_slot
from decide.schemas.span import (
    MAX_SPAN_WORDS,
    DocumentNumbers,
    DocumentSpans,
    NoSpan,
    SpanSlot,
    WrittenSpans,
    _encode_all,
    _plain,
    _span_places,
    _WordLocal,
    check_extract_schema,
    document_numbers,
    document_spans,
    extract_kind,
    in_document,
    number_in_document,
)

GPT2 = Path(__file__).parents[1] / "data" / "gpt2" / "tokenizer.json"
WORDPIECE = Path(__file__).parents[2] / "decide" / "model" / "tokenizer.json"
DOCUMENT = "My name is Clara Olsen and the storm hit Tulsa on Monday so I claim 7000 dollars"


def vocabulary(path: Path) -> tuple[Vocabulary, int]:
    tokenizer = Tokenizer.from_file(str(path))
    filler = tokenizer.get_vocab_size()  # one past the vocabulary: never spells text
    return Vocabulary.from_tokenizer(tokenizer, excluded={filler}), filler


WORDPIECE_VOCAB = vocabulary(WORDPIECE)


@pytest.fixture(scope="module", params=["gpt2", "wordpiece"])
def vocab(request) -> tuple[Vocabulary, int, bool]:
    path = GPT2 if request.param == "gpt2" else WORDPIECE
    return (*vocabulary(path), request.param == "wordpiece")


def reading(text: str, uncased: bool) -> str:
    """A span as the vocabulary spells it, up to what WordPiece cannot: its uncased pieces join
    punctuation and (split) digits without spaces ("claim 7000" reads "claim7000")."""
    return "".join(text.lower().split()) if uncased else text


def allowed(state: SpanSlot) -> list[set[int]]:
    buffer = torch.zeros((state.length, state.width), dtype=torch.int32)
    state.fill_bitmask(buffer)
    bits = buffer.numpy().view(np.uint32)
    out = []
    for row in bits:
        words = np.nonzero(row)[0]
        out.append({int(w) * 32 + b for w in words for b in range(32) if row[w] >> b & 1})
    return out


def test_spans_are_word_runs_with_whitespace_collapsed():
    doc = "Hi,  I am\tJean-Luc O'Brien.\nSt. Louis!"
    spans = document_spans(doc, max_words=3)
    assert spans[:3] == ["Hi", "Hi, I", "Hi, I am"]
    assert "Jean-Luc O'Brien" in spans and "O'Brien. St" in spans and "St. Louis" in spans
    assert "am Jean-Luc" in spans  # a tab is whitespace, read as one space
    assert not any(s.endswith((".", "!", ",")) or s.startswith((",", ".")) for s in spans)
    assert len(spans) == len(set(spans))
    assert document_spans(doc, max_words=3, max_chars=8) == [
        s for s in document_spans(doc, max_words=3) if len(s) <= 8
    ]


def test_spans_of_parts_never_cross_from_one_part_into_the_next():
    head, tail = "Storm in Denver", "Boston office filed it"
    spans = document_spans([head, tail], max_words=4)
    assert set(spans) == set(document_spans(head, max_words=4)) | set(
        document_spans(tail, max_words=4)
    )
    assert "Denver Boston" not in spans and "in Denver Boston" not in spans
    assert spans.index("Storm") < spans.index("Boston")  # first appearance, part by part


def test_spans_match_split_on_plain_text():
    words = DOCUMENT.split()
    expected = {" ".join(words[i:j]) for i in range(len(words)) for j in range(i + 1, i + 5)}
    expected = {s for s in expected if len(s.split()) <= 4}
    assert set(document_spans(DOCUMENT, max_words=4)) == expected


def test_every_completion_is_a_span_that_validates(vocab):
    voc, filler, uncased = vocab
    schema = {"type": "string", "minLength": 3, "maxLength": 16}
    slot = compile_slot(schema, voc)
    words = DOCUMENT.split()
    spans = {" ".join(words[i:j]) for i in range(len(words)) for j in range(i + 1, len(words) + 1)}
    spans = {reading(s, uncased) for s in spans if 3 <= len(s) <= 16}
    rng = random.Random(0)
    seen = set()
    for trial in range(40):
        state = SpanSlot(slot, filler, DOCUMENT)
        assert isinstance(state, SlotConstraint) and state.options() is None
        table = [list(o) for o in state.live()]
        committed: dict[int, int] = {}
        while not state.is_complete():
            live = [o for o in table if all(o[p] == t for p, t in committed.items())]
            masks = allowed(state)
            for p in range(state.length):
                assert masks[p] == {o[p] for o in live}, (trial, p)
            p = rng.choice([p for p in range(state.length) if p not in committed])
            bad = next(t for t in range(5000) if t not in masks[p])
            assert state.commit(p, bad) is False
            token = rng.choice(sorted(masks[p]))
            assert state.commit(p, token) is True
            committed[p] = token
        value = state.decode().value
        jsonschema.validate(value, schema)
        assert reading(value, uncased) in spans and in_document(value, DOCUMENT)
        seen.add(value)
    assert len(seen) > 10  # the walk reaches many different spans, not one


def test_options_are_the_admissible_spans(vocab):
    voc, filler, uncased = vocab
    slot = compile_slot({"type": "string", "maxLength": 11}, voc)
    state = SpanSlot(slot, filler, DOCUMENT)
    values = {json.loads(v) for v in state.values}
    words = DOCUMENT.split()
    spans = {" ".join(words[i:j]) for i in range(len(words)) for j in range(i + 1, len(words) + 1)}
    assert {reading(v, uncased) for v in values} == {
        reading(s, uncased) for s in spans if len(s) <= 11
    }
    assert len(state.live()) == len(values)
    assert all(len(o) == state.length for o in state.live())
    assert state.commit(1, state.live()[0][1])  # position 0 is the opening quote
    assert 0 < len(state.live()) < len(values)


def test_schema_narrows_spans_and_null_stays_an_answer():
    voc, filler = vocabulary(GPT2)
    capital = compile_slot({"type": ["string", "null"], "pattern": "^[A-Z][a-z]+$"}, voc)
    state = SpanSlot(capital, filler, DOCUMENT)
    assert {json.loads(v) for v in state.values} == {
        None, "Clara", "Monday", "My", "Olsen", "Tulsa"
    }  # "I" is one letter: the pattern needs two  # fmt: skip


def test_a_span_the_vocabulary_closes_up_is_offered_only_if_answerable_as_written():
    """The uncased WordPiece vocabulary spells "on 5" as "on5" and "Tulsa, OK" as "tulsa,ok".
    Answers are given back as the document writes them, so under a schema that refuses a
    space the spelling "on5" is no span of this document (it was answered, and is not in it),
    while the same spans stay under a schema the written text satisfies."""
    voc, filler = WORDPIECE_VOCAB
    doc = "Invoice due on 5 May from Tulsa, OK: ref ab/12."
    code = compile_slot({"type": "string", "pattern": "^[A-Za-z0-9/,#-]{2,20}$"}, voc)
    values = {json.loads(v) for v in SpanSlot(code, filler, doc).values}
    assert "on5" not in values and "tulsa,ok" not in values and "may5" not in values
    assert {"on", "invoice", "ab/12", "ref"} <= values
    free = compile_slot({"type": "string", "maxLength": 20}, voc)
    values = {json.loads(v) for v in SpanSlot(free, filler, doc).values}
    assert {"on5", "tulsa,ok", "ab/12"} <= values  # given back as "on 5", "Tulsa, OK"


def test_no_span_and_wrong_schemas_are_refused():
    voc, filler = vocabulary(GPT2)
    with pytest.raises(NoSpan, match="no span"):
        SpanSlot(compile_slot({"type": "string", "pattern": "^[0-9]{5}$"}, voc), filler, DOCUMENT)
    for refused in ({"type": "boolean"}, {"type": ["object", "null"]}):
        with pytest.raises(UnsupportedSchema) as info:
            check_extract_schema(refused)
        assert info.value.pointer == "/type" and info.value.keyword == "extract"
    with pytest.raises(UnsupportedSchema):
        check_extract_schema(False)
    assert extract_kind({"type": ["string", "null"]}) == "spans"
    assert extract_kind({"enum": ["Tulsa", "Boston"]}) == "spans"
    assert extract_kind({"type": ["string", "integer"]}) == "spans"  # strings win: a span
    assert extract_kind({"type": "integer", "minimum": 0}) == "numbers"
    assert extract_kind({"type": ["number", "null"]}) == "numbers"


def test_enum_extract_answers_only_values_in_the_document():
    voc, filler = vocabulary(GPT2)
    slot = compile_slot({"enum": ["Tulsa", "Boston", "Clara Olsen"]}, voc)
    state = SpanSlot(slot, filler, DOCUMENT)
    assert {json.loads(v) for v in state.values} == {"Tulsa", "Clara Olsen"}


def test_infeasible_after_impossible_commit_is_never_reached():
    voc, filler = vocabulary(GPT2)
    state = SpanSlot(compile_slot({"type": "string", "maxLength": 6}, voc), filler, DOCUMENT)
    for p in range(state.length):
        assert state.commit(p, state.live()[-1][p])
    assert state.is_complete() and state.feasible()
    state.alive[:] = False  # what a constraint bug would leave behind: refused loudly
    with pytest.raises(InfeasibleSlot):
        state.fill_bitmask(torch.zeros((state.length, state.width), dtype=torch.int32))


def test_in_document_ignores_case_accents_and_spaces():
    assert in_document("jose garcia", "Signed, José  García.")
    assert in_document("tulsa,ok", "in Tulsa, OK")
    assert not in_document("tulsa ok", "in Tulsa, OK")
    assert not in_document("clara henderson", DOCUMENT)


def test_shared_document_spans_give_each_question_its_own_slot():
    voc, filler = vocabulary(GPT2)
    short = compile_slot({"type": "string", "maxLength": 8}, voc)
    long = compile_slot({"type": ["string", "null"], "maxLength": 30}, voc)
    shared = DocumentSpans(DOCUMENT, voc, max_chars=30)  # cut at the longer of the two bounds
    for slot in (short, long):
        alone = SpanSlot(slot, filler, DOCUMENT)
        together = SpanSlot(slot, filler, shared)
        assert alone.values == together.values and (alone.table == together.table).all()
    assert "null" in SpanSlot(long, filler, shared).values
    assert "null" not in SpanSlot(short, filler, shared).values
    other, _ = vocabulary(WORDPIECE)
    with pytest.raises(ValueError, match="another vocabulary"):
        SpanSlot(compile_slot({"type": "string"}, other), filler, shared)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "minLength": 2, "maxLength": 5},
        {"type": ["string", "null"], "pattern": "^[a-zé]+( [a-z]+)?$"},
        {"enum": ["ab", "abc", "abé", None]},
    ],
)
def test_accepts_many_agrees_with_accepts(schema):
    language = compile_language(schema)
    rng = random.Random(1)
    pieces = ['"', "a", "b", "c", "é", " ", "ab", "null", "\\n", "x"]
    texts = ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 6))) for _ in range(400)]
    texts += [f'"{t}"' for t in texts[:200]] + ['"ab"', '"ab"', "null"]  # duplicates, prefixes
    assert language.accepts_many(texts) == [language.accepts(t) for t in texts]
    assert any(language.accepts_many(texts)) and not all(language.accepts_many(texts))


PIECES = ["Clara", "O'Brien", "Jean-Luc", "U.S.", "12,500", "$7,000", "°C", "€5", "naïve",
          "nai\u0308ve", "e\u0301t\u00e9", "東京", "😀", '"quoted"', "back\\slash", "\x01", "tab\there",
          "_under_score", "B&B", "a/b", "ﬁne", "\u00a0", "\u200b", "हिन्दी", "서울", "Ωmega", "x²",
          "’s", "--", "...", "\n", " ", ",", "unaffable", "Tulsa,OK", "[UNK]", "##ing"]  # fmt: skip


def slow_entries(vocab: Vocabulary, parts: list[str], max_chars: int | None):
    """What `DocumentSpans` must hold: every span's JSON text through the tokenizer's own call."""
    texts = [json.dumps(s, ensure_ascii=False) for s in document_spans(parts, max_chars=max_chars)]
    out, seen = [], set()
    for spelled in _encode_all(vocab, [*texts, "null"]):
        if spelled is not None and spelled[0] not in seen:
            seen.add(spelled[0])
            out.append(spelled)
    return out


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from(PIECES), min_size=1, max_size=30), min_size=1, max_size=2),
    st.sampled_from([None, 6, 24]),
)
def test_spans_read_off_one_tokenization_equal_the_tokenizers_own_reading(parts, max_chars):
    """For a word-local tokenizer (the bundled WordPiece), most spans are spelled from one
    tokenization of the document; every entry must equal what the tokenizer gives the span
    alone, in the same order, whatever the document holds."""
    vocab, _ = WORDPIECE_VOCAB
    texts = [" ".join(p) if len(p) % 2 else "".join(p) for p in parts]  # glued and spaced
    assert DocumentSpans(texts, vocab, max_chars).entries == slow_entries(vocab, texts, max_chars)


def test_written_spans_find_a_spelling_in_the_documents_own_text():
    doc = "From Ana Lúcia  Pereira in São Paulo: my Tent 4P (and a banana) broke; Jean-Luc knows."
    spans = WrittenSpans(doc)
    assert spans.written("ana lucia pereira") == "Ana Lúcia Pereira"  # spaces collapsed
    assert spans.written("SAO PAULO") == "São Paulo"
    assert spans.written("tent4p") == "Tent 4P"  # the spaces an uncased vocabulary closes up
    assert spans.written("paulo:my") == "Paulo: my"
    assert spans.find("jean-luc") == (doc.index("Jean"), doc.index(" knows"))
    # Only whole spans: a word's inside or a piece of a joined word is not one.
    assert spans.find("nan") is None and spans.find("luc") is None and spans.find("") is None
    assert spans.find("banana") == (doc.index("banana"), doc.index(") broke"))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from([*PIECES, "É", "ß", "Ab", "  "]), min_size=1, max_size=25))
def test_written_spans_agree_with_the_first_span_that_reads_the_same(pieces):
    """Oracle: the first of `document_spans`' places whose plain reading (case, accents and
    spaces ignored) is the answer's."""
    doc = "".join(p if i % 3 else f"{p} " for i, p in enumerate(pieces))
    spans = WrittenSpans(doc)
    for _, _, _, text in _span_places(doc, MAX_SPAN_WORDS, None):
        oracle = next(
            (a, b) for _, a, b, t in _span_places(doc, MAX_SPAN_WORDS, None)
            if _plain(t) == _plain(text)
        )  # fmt: skip
        assert spans.find(text.upper()) == oracle, (doc, text)


def test_the_bundled_tokenizer_is_word_local_and_gpt2_is_not():
    assert _WordLocal.of(WORDPIECE_VOCAB[0]) is not None
    assert _WordLocal.of(vocabulary(GPT2)[0]) is None  # byte-level BPE: its own call per span
    spans = DocumentSpans(DOCUMENT * 3, WORDPIECE_VOCAB[0])
    assert spans.entries == slow_entries(WORDPIECE_VOCAB[0], [DOCUMENT * 3], None)


# Numeric extract: numbers the document states.

NUMBERS = [
    ("Claim of $12,500.00 filed", ["12500"]),
    ("7,000 dollars, USD 1,234,567 and $950", ["7000", "1234567", "950"]),
    ("rates 0.50 and 2.25%, -5 degrees, (-4) and −3", ["0.5", "2.25", "-5", "-4", "-3"]),
    ("on 2024-03-05 at 10:30, pages 10-12", ["2024", "3", "5", "10", "30", "12"]),
    ("flight A320, version 1.2.3, v2.0 and 5th", ["5"]),  # in a word or a dotted run: no
    ("It was 12. Then 12.0 and 012", ["12"]),  # one number, however written
    ("no digits here", []),
]


@pytest.mark.parametrize(("text", "numbers"), NUMBERS)
def test_document_numbers_read_numbers_as_documents_write_them(text, numbers):
    assert document_numbers(text) == numbers


def written(value: int, cents: int | None, style: int) -> str:
    """`value` (and cents) as a document might write it."""
    whole = f"{value:,}" if style % 2 else str(value)
    text = whole if cents is None else f"{whole}.{cents:02d}"
    return ["$" + text, text + " dollars", "USD " + text, "(" + text + ")", text + "."][style % 5]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 10**9), st.one_of(st.none(), st.integers(0, 99)), st.integers(0, 9)
        ),
        max_size=6,
    ),
    st.lists(st.sampled_from(["the", "claim", "of", "A", "on", "x"]), min_size=1, max_size=3),
)
def test_every_written_number_is_read_back(numbers, filler_words):
    """Oracle: the numbers written into the text, compared as decimals."""
    pieces = []
    for value, cents, style in numbers:
        pieces += [written(value, cents, style), *filler_words]
    text = " ".join(["Total", *pieces])
    read = [Decimal(n) for n in document_numbers(text)]
    wanted = {Decimal(v) + (Decimal(c or 0) / 100) for v, c, _ in numbers}
    assert set(read) == wanted and len(read) == len(wanted)


def test_numbers_of_parts_and_the_check_after_decoding():
    assert document_numbers(["amount 120", "limit 5,000"]) == ["120", "5000"]
    assert document_numbers(["costs 12", "34 more"]) == ["12", "34"]  # never "1234"
    assert number_in_document(12500, "a claim of $12,500.00")
    assert number_in_document(2.5, "at 2.50 a piece") and number_in_document(7.0, "7 days")
    assert not number_in_document(1250, "a claim of $12,500")
    assert not number_in_document(True, "1 claim") and not number_in_document("1", "1 claim")


NUMBER_DOCUMENT = (
    "Clara Olsen claims $12,500 for 3 windows; her limit is 10,000 and a pane costs 2.75"
)


def test_numeric_extract_answers_only_numbers_the_document_states(vocab):
    voc, filler, _ = vocab
    cases = [
        ({"type": "integer", "minimum": 0, "maximum": 20000}, {12500, 3, 10000}),
        ({"type": "integer", "minimum": 5}, {12500, 10000}),  # bounds still apply
        ({"type": ["integer", "null"], "maximum": 9}, {3, None}),
        ({"type": "number"}, {12500, 3, 10000, 2.75}),
    ]
    rng = random.Random(3)
    for schema, wanted in cases:
        slot = compile_slot(schema, voc)
        numbers = DocumentNumbers(NUMBER_DOCUMENT, voc)
        assert extract_kind(schema) == "numbers"
        assert {json.loads(v) for v in SpanSlot(slot, filler, numbers).values} == wanted
        seen = set()
        for _ in range(30):  # random walks of commits always end on an admissible number
            state = SpanSlot(slot, filler, numbers)
            while not state.is_complete():
                masks = allowed(state)
                p = rng.choice([p for p in range(state.length) if state.tokens[p] < 0])
                assert state.commit(p, rng.choice(sorted(masks[p])))
            value = state.decode().value
            jsonschema.validate(value, schema)
            assert value is None or number_in_document(value, NUMBER_DOCUMENT)
            seen.add(value)
        assert seen == wanted, schema
    with pytest.raises(NoSpan, match="no number of the document"):
        slot = compile_slot({"type": "integer", "minimum": 50000}, voc)
        SpanSlot(slot, filler, DocumentNumbers(NUMBER_DOCUMENT, voc))


def test_a_unit_question_is_offered_a_quantity_of_another_unit_only_converted(vocab):
    """ "Two months ago" answers a question in days with 60, never with 2; "$1,400 a month" a
    question per year with 16800, never with 1400. Numbers stated as such stay candidates."""
    voc, filler, _ = vocab
    slot = compile_slot({"type": "integer", "minimum": 0}, voc)
    ticket = "Order 44-918273: bought two months ago, and 3 weeks and 4 days later it broke."
    days = SpanSlot(slot, filler, DocumentNumbers(ticket, voc, unit="days")).values
    assert {json.loads(v) for v in days} == {44, 918273, 60, 21, 25, 4}  # terms also alone
    plain = SpanSlot(slot, filler, DocumentNumbers(ticket, voc)).values
    assert {json.loads(v) for v in plain} == {44, 918273, 2, 3, 4}
    income = "I earn $1,400 a month and have 2 children."
    yearly = SpanSlot(slot, filler, DocumentNumbers(income, voc, unit="per_year")).values
    assert {json.loads(v) for v in yearly} == {16800, 2}
    monthly = SpanSlot(slot, filler, DocumentNumbers(income, voc, unit="per_month")).values
    assert {json.loads(v) for v in monthly} == {1400, 2}
    weekly = "$350 a week"  # per month not whole to two decimals: 350 stays a plain number
    assert SpanSlot(slot, filler, DocumentNumbers(weekly, voc, unit="per_month")).values == ["350"]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(-(10**6), 10**6), min_size=1, max_size=8),
    st.lists(st.integers(0, 99), max_size=3),
    st.sampled_from(["integer", "number"]),
    st.one_of(st.none(), st.integers(-1000, 1000)),
    st.one_of(st.none(), st.integers(0, 10**6)),
    st.sampled_from([None, 2, 5, 0.25]),
    st.booleans(),
)
def test_numeric_extract_values_are_the_stated_numbers_the_schema_accepts(
    whole, cents, kind, low, high, multiple, exclusive
):
    """Oracle: `jsonschema` on each number the document states."""
    schema: dict = {"type": kind}
    if low is not None:
        schema["exclusiveMinimum" if exclusive else "minimum"] = low
    if high is not None:
        schema["maximum"] = high
    if multiple is not None:
        schema["multipleOf"] = multiple
    stated = [Decimal(v) for v in whole] + [Decimal(c) / 100 + 7 for c in cents]
    text = " and ".join(f"{v:,}" for v in stated)  # "1,234,567 and -42 and 7.25"
    wanted = {v for v in stated if jsonschema.Draft202012Validator(schema).is_valid(float(v))}
    if kind == "integer":
        wanted = {v for v in wanted if v == v.to_integral_value()}
    voc, filler = WORDPIECE_VOCAB
    try:
        slot = compile_slot(schema, voc)
    except UnsupportedSchema:
        return  # e.g. no integer satisfies the bounds: refused when the job starts
    try:
        values = SpanSlot(slot, filler, DocumentNumbers(text, voc)).values
    except NoSpan:
        assert not wanted
        return
    assert {Decimal(v) for v in values} == wanted


def test_words_keep_their_combining_marks():
    """Python's `\\w` has no combining marks, so a Devanagari word was cut at every vowel sign
    and virama ("हिंदी भाषा" gave the words "ह", "द", "भ", "ष"): no Hindi, Bengali or Tamil
    name could be an extract answer, and an accent written apart ("cafe" + U+0301) was left off
    its word. English words are unchanged."""
    hindi = "मेरा नाम राहुल शर्मा है, हिंदी भाषा।"
    assert document_spans(hindi, max_words=1) == ["मेरा", "नाम", "राहुल", "शर्मा", "है", "हिंदी", "भाषा"]
    assert "राहुल शर्मा" in document_spans(hindi, max_words=2)
    assert document_spans("un cafe\u0301 noir", max_words=1) == ["un", "cafe\u0301", "noir"]
    assert WrittenSpans(hindi).find("राहुल शर्मा") == (hindi.index("राहुल"), hindi.index(" है"))
    # every completion of a span slot over the Hindi text is a run of its whole words (GPT-2's
    # byte-level vocabulary spells them exactly)
    voc, filler = vocabulary(GPT2)
    slot = compile_slot({"type": "string", "maxLength": 40}, voc)
    words = hindi.replace(",", "").replace("।", "").split()
    rng = random.Random(1)
    seen = set()
    for _ in range(12):
        state, committed = SpanSlot(slot, filler, hindi), set()
        while not state.is_complete():
            masks = allowed(state)
            p = rng.choice([p for p in range(state.length) if p not in committed])
            assert state.commit(p, rng.choice(sorted(masks[p])))
            committed.add(p)
        seen.add(state.decode().value)
    assert seen <= set(document_spans(hindi)) and len(seen) > 3
    assert all(w.strip(",।") in words for value in seen for w in value.split())  # whole words
