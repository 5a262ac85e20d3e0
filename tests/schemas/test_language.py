"""Schema → byte language: exactness against `re` / `jsonschema`, refusals with pointers."""

from __future__ import annotations

import itertools
import json
import random
import re
from datetime import timedelta

import jsonschema
import pytest
from pydantic import AnyUrl, BaseModel, HttpUrl, TypeAdapter

from decide.schemas import MalformedSchema, UnsupportedSchema, compile_language
from decide.schemas.drafts import VALIDATORS
from decide.schemas.language import canonical_json

CHECKER = jsonschema.Draft202012Validator.FORMAT_CHECKER


def content(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


PATTERNS = [
    ("^[a-c]{2,3}$", "abcd"),
    ("b+a", "abc"),
    ("^(ab|a)c?$", "abc"),
    ("a.c", "abc\n\r"),
    ("^\\d*$", "12a٣"),
    ("[^a]", "ab"),
    ("^\\w\\W\\s$", "a !\t\u00a0\ufeff"),
    ("(0|[1-9][0-9]?|100)$", "0129x"),
    ("^é{1,2}|b$", "éba"),
    ("^a|b", "abc"),
    ("x{2}", "x"),
    ("^[\\]\\-]+$", "]-a"),
    ('^\\\\"$', '\\"a'),
]


@pytest.mark.parametrize("pattern,alphabet", PATTERNS)
def test_pattern_language_agrees_with_python_re(pattern: str, alphabet: str) -> None:
    lang = compile_language({"type": "string", "pattern": pattern})
    for n in range(5):
        for chars in itertools.product(alphabet, repeat=n):
            s = "".join(chars)
            python = re.search(pattern, s) is not None
            # Where ECMA-262 and Python disagree we must accept only what both accept.
            ecma_only_diff = any(c in s for c in "\ufeff٣\r\n")
            if ecma_only_diff:
                assert not lang.accepts(content(s)) or python
            else:
                assert lang.accepts(content(s)) == python, (pattern, s)


@pytest.mark.parametrize(
    "pattern", ["(?=a)", "\\1", "\\bx", "\\p{L}", "a(^b)", "[[a]]", "a{2000}", "(?i)a"]
)
def test_irregular_or_ambiguous_patterns_are_refused(pattern: str) -> None:
    with pytest.raises((UnsupportedSchema, MalformedSchema)) as exc:
        compile_language({"properties": {"p": {"pattern": pattern}}})
    assert exc.value.pointer == "/properties/p/pattern"


def decimals() -> list[str]:
    ints = [str(i) for i in range(0, 130)]
    out = []
    for i in ints:
        out.append(i)
        for frac in ["5", "25", "05", "1", "75", "999"]:
            out.append(f"{i}.{frac}")
    return out + ["-" + x for x in out if x != "0"]


BOUNDS = [
    {"type": "integer", "minimum": -7, "maximum": 101},
    {"type": "integer", "exclusiveMinimum": -7.5, "exclusiveMaximum": 99.99},
    {"type": "number", "minimum": 0.5, "maximum": 12.25},
    {"type": "number", "exclusiveMinimum": -3.05, "exclusiveMaximum": 0},
    {"type": "number", "minimum": -100, "exclusiveMaximum": -99.5},
    {"type": "number", "exclusiveMinimum": 9.999},
    {"type": "number", "maximum": 0},
]


@pytest.mark.parametrize("schema", BOUNDS, ids=json.dumps)
def test_number_languages_are_exact_on_canonical_decimals(schema: dict) -> None:
    lang = compile_language(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for text in decimals():
        assert lang.accepts(text) == validator.is_valid(json.loads(text)), text
    assert not lang.accepts("-0") and not lang.accepts("1.50") and not lang.accepts("1e2")


def random_member(lang, rng: random.Random) -> bytes:
    dfa = lang.dfa
    while True:
        s, out = 0, bytearray()
        while len(out) < 300:
            if dfa.accept[s] and rng.random() < 0.15 and dfa.accepts(bytes(out)):
                return bytes(out)
            choices = (dfa.trans[s] >= 0).nonzero()[0]
            if not len(choices):
                break
            b = int(rng.choice(choices))
            out.append(b)
            s = int(dfa.trans[s, b])


@pytest.mark.parametrize("fmt", ["date", "time", "date-time", "uuid", "ipv4", "email", "duration"])
def test_format_members_pass_jsonschema_format_checker(fmt: str) -> None:
    schema = {"type": "string", "format": fmt}
    lang = compile_language(schema)
    validator = jsonschema.Draft202012Validator(schema, format_checker=CHECKER)
    rng = random.Random(fmt)
    for _ in range(100):
        value = json.loads(random_member(lang, rng))
        assert validator.is_valid(value), value


@pytest.mark.parametrize(
    "fmt,good,bad",
    [
        (
            "date",
            ["2024-02-29", "2000-02-29", "0001-01-01"],
            ["2023-02-29", "1900-02-29", "0000-01-01", "2024-13-01", "2024-04-31"],
        ),
        ("time", ["23:59:59Z", "00:00:00.5+01:30"], ["24:00:00Z", "12:00:60Z", "12:00:00"]),
        ("ipv4", ["0.0.0.0", "255.255.255.255"], ["256.0.0.1", "01.2.3.4", "1.2.3"]),
        ("uuid", ["2EB8AA08-AA98-11EA-B4AA-73B441D16380"], ["2eb8aa08aa9811eab4aa73b441d16380"]),
        ("email", ["a.b+c@x-y.example"], ["a@b", ".a@b.c", "a..b@c.d", "a@-b.c"]),
        (
            "duration",
            ["P3W", "P1Y2M3DT4H5M6S", "P45D", "PT1H30M", "PT90S", "P1DT12H"],
            ["P", "PT", "P1W2D", "PT1H30S", "P1.5D", "p3w", "P1234567D"],
        ),
        (
            "uri",
            ["https://shop.example.com/orders/77?x=1&y=%20#top", "http://localhost:8080/"],
            ["ftp://x.org", "reply", "http://1.2.3.4/", "https://a-.b", "https://x.com/%zz"],
        ),
    ],
)
def test_format_examples(fmt: str, good: list[str], bad: list[str]) -> None:
    lang = compile_language({"format": fmt, "type": "string"})
    assert all(lang.accepts(content(g)) for g in good)
    assert not any(lang.accepts(content(b)) for b in bad)


def test_string_lengths_count_code_points_not_bytes() -> None:
    lang = compile_language({"type": "string", "minLength": 2, "maxLength": 3})
    for s, ok in [("é🙂", True), ("a\nb", True), ('"\\"', True), ("a", False), ("abcd", False)]:
        assert lang.accepts(content(s)) == ok, s


def test_a_string_branch_no_length_allows_is_empty_not_a_bound_on_the_others() -> None:
    # `^[a-z]+$` with maxLength 0 has no value: the anyOf is the first branch, unbounded.
    lang = compile_language(
        {
            "anyOf": [
                {"type": "string", "pattern": "^[a-z]+$"},
                {"type": "string", "pattern": "^[a-z]+$", "maxLength": 0},
            ]
        }
    )
    assert lang.accepts('"abcdefgh"') and not lang.accepts('""') and not lang.cuts
    # A bounded branch on the same path holds the unbounded one to its bounds (one counter per
    # path): sound, and said as a cut instead of silently.
    held = compile_language({"anyOf": [{"type": "string"}, {"type": "string", "maxLength": 5}]})
    assert held.accepts('"abcde"') and not held.accepts('"abcdef"')
    assert held.cuts and held.cuts[0].startswith("/anyOf/1/maxLength")


def test_objects_follow_schema_key_order_and_required() -> None:
    schema = {
        "type": "object",
        "properties": {"z": {"type": "boolean"}, "a": {"enum": [1, 2]}},
        "required": ["a"],
        "additionalProperties": False,
    }
    lang = compile_language(schema)
    assert lang.complete
    assert sorted(lang.values(10)) == sorted(
        [
            '{"a":1}',
            '{"a":2}',
            '{"z":true,"a":1}',
            '{"z":false,"a":1}',
            '{"z":true,"a":2}',
            '{"z":false,"a":2}',
        ]
    )
    assert canonical_json({"a": 1, "z": True}, lang.key_rank) == '{"z":true,"a":1}'


def test_filters_are_exact_by_enumeration_and_refused_otherwise() -> None:
    lang = compile_language(
        {"type": "integer", "minimum": 0, "maximum": 20, "multipleOf": 7, "not": {"const": 7}}
    )
    assert lang.values(100) == ["0", "14"]
    with pytest.raises(UnsupportedSchema) as exc:
        compile_language({"properties": {"n": {"type": "number", "multipleOf": 0.123456789}}})
    assert (exc.value.pointer, exc.value.keyword) == ("/properties/n/multipleOf", "multipleOf")


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "integer", "multipleOf": 7},
        {"type": "number", "multipleOf": 3, "minimum": -20, "maximum": 100},
        {"multipleOf": 2.0, "exclusiveMaximum": 10, "allOf": [{"multipleOf": 3}]},
    ],
    ids=json.dumps,
)
def test_integral_multiple_of_is_a_remainder_automaton(schema: dict) -> None:
    lang = compile_language(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for text in decimals():
        assert lang.accepts(text) == validator.is_valid(json.loads(text)), text
    assert lang.accepts('"x"') == validator.is_valid("x")


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "number", "multipleOf": 0.5},
        {"type": "number", "multipleOf": 0.05, "minimum": -3, "maximum": 99.99},
        {"type": "number", "multipleOf": 1.5},
        {"type": "number", "multipleOf": 0.25, "allOf": [{"multipleOf": 0.1}]},
        {"type": "integer", "multipleOf": 2.5},
        {"type": "number", "multipleOf": 0.001, "exclusiveMaximum": 10},
    ],
    ids=json.dumps,
)
def test_decimal_multiple_of_is_exact_on_the_decimals_as_written(schema: dict) -> None:
    lang = compile_language(schema)
    assert lang.complete
    validator = VALIDATORS["2020-12"](schema)
    for text in decimals():
        assert lang.accepts(text) == validator.is_valid(json.loads(text)), text


def test_steps_of_a_tenth_are_every_tenth_as_the_specification_and_pydantic_count() -> None:
    """`jsonschema` divides floats and rejects 0.3, 0.6, 0.7 as multiples of 0.1, and 19.99 of
    0.01; decide's checker (and so its languages) judge the decimals as written."""
    lang = compile_language({"type": "number", "minimum": 0, "maximum": 1, "multipleOf": 0.1})
    assert lang.values(20) == ["0", *(f"0.{k}" for k in range(1, 10)), "1"]
    assert lang.validator.is_valid(0.3) and lang.validator.is_valid(0.7)
    assert not jsonschema.Draft202012Validator({"multipleOf": 0.1}).is_valid(0.3)  # upstream
    money = compile_language({"type": "number", "minimum": 0, "multipleOf": 0.01})
    assert money.accepts("19.99") and not money.accepts("19.999") and money.accepts("20")
    assert money.validator.is_valid(19.99) and not money.validator.is_valid(19.995)


def test_unique_items_over_an_enum_are_distinct_items_in_sorted_order() -> None:
    schema = {"type": "array", "items": {"enum": ["b", "a", "c", "d"]}, "uniqueItems": True,
              "minItems": 1, "maxItems": 3}  # fmt: skip
    lang = compile_language(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for n in range(5):
        for items in itertools.product("abcd", repeat=n):
            text = json.dumps(list(items), separators=(",", ":"))
            expected = validator.is_valid(list(items)) and list(items) == sorted(items)
            assert lang.accepts(text) == expected, text
    assert not lang.complete
    assert compile_language({"items": {"type": "integer"}, "uniqueItems": False}).accepts("[1,1]")


NEGATIONS = [
    {"not": {"type": "string"}},
    {"type": "string", "maxLength": 3, "not": {"enum": ["ab", "x"]}},
    {"type": "integer", "not": {"minimum": 5}},
    {"type": ["integer", "string"], "not": {"minimum": 5, "pattern": "^a"}},
    {"type": "number", "not": {"exclusiveMaximum": 0.5}, "maximum": 3},
    {"anyOf": [{"type": "null"}, {"type": "array", "items": {"type": "boolean"}}],
     "not": {"maxItems": 1}},
]  # fmt: skip
POOL = [json.loads(t) for t in decimals()] + [
    "", "a", "ab", "x", "abc", "abcd", "é", None, True, False, [], [True], [True, False], [1],
    [[]], {},
]  # fmt: skip


CONDITIONS = [
    {"type": "integer", "minimum": 0, "if": {"maximum": 9}, "then": {"multipleOf": 2},
     "else": {"multipleOf": 5}},
    {"type": "string", "if": {"pattern": "^a"}, "then": {"maxLength": 3}},
    {"type": ["string", "null"], "if": {"type": "null"}, "else": {"enum": ["a", "é"]}},
    {"if": {"type": "integer"}, "then": {"maximum": 3}, "else": {"type": "boolean"}},
]  # fmt: skip


@pytest.mark.parametrize("schema", NEGATIONS + CONDITIONS, ids=json.dumps)
def test_not_and_if_by_complement_are_exact(schema: dict) -> None:
    lang = compile_language(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for value in POOL:
        text = canonical_json(value, {})
        if lang.complete:
            assert lang.accepts(text) == validator.is_valid(value), text
        else:
            assert not lang.accepts(text) or validator.is_valid(value), text
    with pytest.raises(UnsupportedSchema):  # a negated length bound would need a second counter
        compile_language({"type": "string", "not": {"maxLength": 2}})


def test_one_of() -> None:
    disjoint = compile_language({"oneOf": [{"type": "string"}, {"type": "integer"}]})
    assert disjoint.accepts('"x"') and disjoint.accepts("3") and not disjoint.accepts("null")
    overlap = compile_language({"oneOf": [{"enum": [1, 2, 3]}, {"enum": [3, 4]}]})
    assert sorted(overlap.values(10)) == ["1", "2", "4"]
    with pytest.raises(UnsupportedSchema) as exc:
        compile_language({"oneOf": [{"type": "integer"}, {"minimum": 3}]})
    assert exc.value.keyword == "oneOf"


def test_refs_and_recursion_cut() -> None:
    tree = {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {
                    "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 1}
                },
                "additionalProperties": False,
            }
        },
        "$ref": "#/$defs/node",
    }
    lang = compile_language(tree, max_recursion=2)
    assert lang.accepts('{"kids":[{}]}') and lang.accepts("{}")
    assert not lang.accepts('{"kids":[{"kids":[{"kids":[]}]}]}')
    assert not lang.complete


@pytest.mark.parametrize(
    "schema,pointer,keyword,error",
    [
        (
            {"properties": {"a": {"maxLenght": 3}}},
            "/properties/a/maxLenght",
            "maxLenght",
            UnsupportedSchema,
        ),
        ({"format": "ipv6"}, "/format", "format", UnsupportedSchema),
        ({"$ref": "http://example.com/s.json"}, "/$ref", "$ref", UnsupportedSchema),
        ({"$ref": "#/$defs/missing"}, "/$ref", "$ref", MalformedSchema),
        ({"items": {"minimum": "3"}}, "/items/minimum", "minimum", MalformedSchema),
        ({"$dynamicRef": "#x"}, "/$dynamicRef", "$dynamicRef", MalformedSchema),
        (
            {"$defs": {"a": {"$id": "a.json"}}, "$ref": "#/$defs/a"},
            "/$defs/a/$id",
            "$id",
            UnsupportedSchema,
        ),
        (
            {"anyOf": [{"type": "string", "maxLength": 2}, {"type": "string", "maxLength": 3}]},
            "/anyOf/1/maxLength",
            "maxLength",
            UnsupportedSchema,
        ),
        ({"not": {"type": "string", "maxLength": 2}}, "/not", "not", UnsupportedSchema),
    ],
)
def test_refusals_name_pointer_and_keyword(schema, pointer, keyword, error) -> None:
    with pytest.raises(error) as exc:
        compile_language(schema)
    assert (exc.value.pointer, exc.value.keyword) == (pointer, keyword)
    assert pointer in str(exc.value)


class Addresses(BaseModel):
    any_url: AnyUrl
    http_url: HttpUrl
    length: timedelta


@pytest.mark.parametrize("field", ["any_url", "http_url", "length"])
def test_uri_and_duration_values_read_back_into_pydantic(field: str) -> None:
    """Pydantic writes `format: uri` for `AnyUrl`/`HttpUrl` and `format: duration` for
    `timedelta`; jsonschema checks neither here (they need rfc3987 and isoduration), so every
    value the slot language admits is read back by Pydantic itself."""
    schema = Addresses.model_json_schema()["properties"][field]
    lang = compile_language(schema)
    adapter = TypeAdapter(Addresses.model_fields[field].annotation)
    rng = random.Random(field)
    for _ in range(200):
        adapter.validate_python(json.loads(random_member(lang, rng)))
