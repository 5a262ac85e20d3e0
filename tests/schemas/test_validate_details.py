"""The details `decide validate` prints per question say what is true of it: what the tokenizer's
spelling of an enum's values loses (upper case, accents, spaces; nothing when nothing is lost),
"1 value", a `unit` refused in the table, and no warning for the keywords `jsonschema` reads
through another one (`then`/`else` through `if`, `minContains`/`maxContains` through
`contains`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tokenizers import Tokenizer

from decide.schemas import Vocabulary
from decide.schemas.drafts import keywords, normalize
from decide.schemas.validate import check_questions, render_table

WORDPIECE = Path(__file__).parents[2] / "decide" / "model" / "tokenizer.json"  # uncased
DRAFT06 = "http://json-schema.org/draft-06/schema#"
DRAFT07 = "http://json-schema.org/draft-07/schema#"


@pytest.fixture(scope="module")
def vocab() -> Vocabulary:
    tokenizer = Tokenizer.from_file(str(WORDPIECE))
    return Vocabulary.from_tokenizer(tokenizer, excluded={tokenizer.get_vocab_size()})


def _detail(vocab: Vocabulary, schema: dict) -> str:
    (report,) = check_questions([("q", schema)], vocab)
    assert report.supported, report.message
    return render_table([report]).splitlines()[1]


@pytest.mark.parametrize(
    ("values", "said"),
    [
        (["yes ", "no"], "spelled without trailing spaces, answered as the schema writes it"),
        ([" yes", "no"], "spelled without leading spaces, answered as the schema writes it"),
        (["two  spaces", "no"], "repeated spaces spelled as one, answered as the schema writes it"),
        (["café", "no"], "spelled without accents, answered as the schema writes it"),
        (["Yes", "No"], "upper case spelled in lower case, answered as the schema writes it"),
        (["Café ", "no"], "upper case spelled in lower case, spelled without accents and trailing "
         "spaces, answered as the schema writes it"),
    ],
)  # fmt: skip
def test_a_reading_label_says_what_the_spelling_loses(vocab, values, said) -> None:
    detail = _detail(vocab, {"enum": values})
    assert detail.endswith(f"2 values, {said}"), detail
    if not any(c.isupper() for v in values for c in v):
        assert "upper case" not in detail


def test_values_spelled_as_written_get_no_reading_label(vocab) -> None:
    assert _detail(vocab, {"enum": ["yes", "no"]}).endswith("draft 2020-12, 2 values")


def test_one_value_is_singular(vocab) -> None:
    assert _detail(vocab, {"const": "yes"}).endswith("draft 2020-12, 1 value")


def test_a_unit_needs_a_numeric_schema(vocab) -> None:
    units = {"a": "days", "b": "per_year"}
    reports = check_questions([("a", {"type": "string"}), ("b", {"type": "integer"})], vocab,
                              extract=["a", "b"], units=units)  # fmt: skip
    refused, numeric = reports
    assert (refused.supported, refused.pointer, refused.keyword) == (False, "/type", "unit")
    assert refused.message == "days needs a schema of numbers or integers"
    assert numeric.supported and numeric.extract == "numbers"
    assert "/type unit: days needs a schema of numbers or integers" in render_table(reports)


CONDITIONAL = {"type": "integer", "minimum": 0, "maximum": 9, "if": {"maximum": 3},
               "then": {"minimum": 1}, "else": {"minimum": 6}}  # fmt: skip


@pytest.mark.parametrize("draft", [None, DRAFT07, "https://json-schema.org/draft/2019-09/schema"])
def test_then_and_else_are_keywords_strict_accepts(vocab, draft) -> None:
    schema = CONDITIONAL if draft is None else {"$schema": draft, **CONDITIONAL}
    (report,) = check_questions([("n", schema)], vocab, strict=True)
    assert report.supported and report.warnings == () and report.values == 7, report
    assert "warning" not in render_table([report])


def test_min_and_max_contains_are_keywords_from_2019_09() -> None:
    assert {"minContains", "maxContains"} <= keywords("2019-09") & keywords("2020-12")
    assert not {"minContains", "maxContains"} & keywords("draft-07")
    assert {"then", "else"} <= keywords("draft-07") and not {"then", "else"} & keywords("draft-06")
    schema = {"type": "array", "items": {"enum": [1, 2]}, "maxItems": 3,
              "contains": {"const": 1}, "minContains": 2}  # fmt: skip
    (report,) = check_questions([("a", schema)], strict=True)
    assert report.supported and report.warnings == (), report
    # a draft that lacks them ignores them, as jsonschema does
    assert "minContains" in normalize({"$schema": DRAFT07, **schema}).schema["x-decide-ignored"]


def test_then_and_else_before_draft_07_are_ignored_with_if() -> None:
    norm = normalize({"$schema": DRAFT06, **CONDITIONAL})
    assert set(norm.schema["x-decide-ignored"]) == {"if", "then", "else"}
    assert [w.keyword for w in norm.warnings] == ["if", "then", "else"]
