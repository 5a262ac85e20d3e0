"""Numbers as documents write them (`decide.schemas.written_numbers`): digits, scales, words."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from decide.jobs.evidence import locate
from decide.schemas.span import document_numbers, number_in_document
from decide.schemas.written_numbers import number_places

CASES = [
    ("income $52k a year", [("52k", "52000")]),
    ("about 12K, a 5kg box", [("12K", "12000"), ("5", "5")]),
    ("a $3.5m deal, a 5m ladder", [("3.5m", "3500000"), ("5", "5")]),
    ("€2bn and 1.2 million and 12 thousand", [("2bn", "2000000000"), ("1.2 million", "1200000"),
                                              ("12 thousand", "12000")]),
    ("eighteen thousand four hundred dollars", [("eighteen thousand four hundred", "18400")]),
    ("twenty-five days, Twenty Five", [("twenty-five", "25"), ("Twenty Five", "25")]),
    ("my income is zero", [("zero", "0")]),
    ("forty two point five", [("forty two point five", "42.5")]),
    ("ten, eleven", [("ten", "10"), ("eleven", "11")]),
    ("the third claim, second-year student, 5th floor", [("5", "5")]),  # ordinals are not read
    ("someone said nothing", []),
]  # fmt: skip


@pytest.mark.parametrize(("text", "places"), CASES)
def test_number_places_read_digits_scales_and_words(text, places):
    assert [(text[p.start : p.end], p.value) for p in number_places(text)] == places


ONES = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
ONES = (ONES + "fifteen sixteen seventeen eighteen nineteen").split()
TENS = ["_", "_", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]


def spell(n: int) -> str:
    """Oracle: `n` < 10**6 in English words, as people write them ("and" after hundreds)."""
    if n < 20:
        return ONES[n]
    if n < 100:
        return TENS[n // 10] + ("" if n % 10 == 0 else "-" + ONES[n % 10])
    if n < 1000:
        rest = n % 100
        return ONES[n // 100] + " hundred" + ("" if rest == 0 else " and " + spell(rest))
    rest = n % 1000
    return spell(n // 1000) + " thousand" + ("" if rest == 0 else " " + spell(rest))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 999_999), min_size=1, max_size=4, unique=True))
def test_numbers_spelled_in_words_are_read_back(numbers):
    text = "; ".join(f"claimed {spell(n)} dollars" for n in numbers)
    assert document_numbers(text) == [str(n) for n in numbers]


def test_the_check_after_decoding_and_the_evidence_accept_written_numbers():
    text = "Caller: about twelve thousand a month before tax. Agent: and the car costs $52k?"
    assert number_in_document(12000, text) and number_in_document(52000, text)
    assert not number_in_document(52, text)  # "$52k" is fifty-two thousand, not 52
    start, end = locate(12000, text, {"type": "integer"})
    assert text[start:end] == "twelve thousand"
    start, end = locate(52000, text, {"type": "integer"})
    assert text[start:end] == "52k"
