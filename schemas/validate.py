"""`decide validate SPEC` support: compile every question and report supported or refused.

`check_questions([(id, schema), …], vocab)` compiles each schema (with the vocabulary when one is
given, so the slot length in tokens is known) and never raises for a bad schema: each question gets
a `QuestionReport` with the draft its `$schema` names, the unknown keywords ignored as annotations
(`warnings`; `strict=True` refuses them instead), the cuts that left values out (`cuts`: depth
limits, `anyOf` branches the compiler refuses), or the refusal's JSON pointer, keyword and
message. `render_table` prints them as a fixed-width text table for the CLI, followed by one
line per warning.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from .dates import date_format
from .errors import SchemaError, UnsupportedSchema
from .language import compile_language, empty_refusal
from .slot import DEFAULT_MAX_TOKENS, compile_slot
from .span import extract_kind
from .vocab import Vocabulary


@dataclass(frozen=True)
class QuestionReport:
    question_id: str
    supported: bool
    slot_length: int | None = None
    values: int | None = None  # number of admissible values when the language is small
    truncated: bool = False  # some values need more than slot_length tokens
    extract: str | None = None  # "spans", "numbers", "dates" or "lengths of time": copied
    pointer: str | None = None
    keyword: str | None = None
    message: str | None = None
    draft: str | None = None  # the draft the schema was read as ("2020-12", "draft-07", …)
    warnings: tuple[str, ...] = ()  # unknown keywords ignored as annotations
    cuts: tuple[str, ...] = ()  # depth limits and anyOf branches left out (values not spelled)
    folded: bool = False  # upper case spelled lower-cased by an uncased vocabulary, decoded back
    # What spelling values as the tokenizer reads them loses ("upper case", "accents",
    # "trailing spaces", …), each answer decoded back as the schema writes it.
    spelling: tuple[str, ...] = ()


def check_questions(
    questions: Iterable[tuple[str, Any]],
    vocab: Vocabulary | None = None,
    *,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    extract: Iterable[str] = (),
    strict: bool = False,
    units: Mapping[str, str] | None = None,
) -> list[QuestionReport]:
    """Per question: supported (slot length when `vocab` is given) or refused (pointer, keyword).
    Questions whose ids are in `extract` must admit strings or numbers (`extract_kind`), those
    with a `unit` (`units`: id -> unit) numbers, as `decide run` requires.
    `strict`: unknown keywords are refused instead of ignored with a warning."""
    out = []
    extract = set(extract)
    units = units or {}
    for qid, schema in questions:
        try:
            kind = extract_kind(schema) if qid in extract else None
            if kind == "dates" and date_format(schema) == "duration":
                kind = "lengths of time"
            if vocab is None:
                lang = compile_language(schema, strict=strict)
                refusal = empty_refusal(lang)
                if refusal is not None:
                    raise refusal
                report = QuestionReport(qid, True, extract=kind)
            else:
                slot = compile_slot(schema, vocab, max_tokens=max_tokens, strict=strict)
                lang = slot.language
                n = None if slot.values is None else len(slot.values)
                # A finite language keeps every value that fits (the ones cut are listed);
                # only longer spellings of kept values would otherwise say "cut".
                cut = slot.truncated and (slot.values is None or bool(slot.too_long))
                report = QuestionReport(qid, True, slot.length, n, cut, kind)
            if qid in units and extract_kind(schema, slot if vocab is not None else None) != (
                "numbers"
            ):
                why = f"{units[qid]} needs a schema of numbers or integers"
                raise UnsupportedSchema("/type", "unit", why)
            warnings = tuple(str(w) for w in lang.warnings)
            cuts = tuple(lang.cuts)
            if vocab is not None:
                cuts += tuple(f"{text} (no spelling in this vocabulary)" for text in slot.unspelled)
                cuts += tuple(
                    f"{_short(text)} (needs {n} tokens, more than the {max_tokens} of a slot)"
                    for text, n in slot.too_long
                )
            spelling = () if vocab is None else _spelling(slot)
            folded = "upper case" in spelling
            report = replace(report, draft=lang.draft, warnings=warnings, cuts=cuts,
                             folded=folded, spelling=spelling)  # fmt: skip
            out.append(report)
        except SchemaError as exc:
            out.append(
                QuestionReport(
                    qid, False, pointer=exc.pointer or "#", keyword=exc.keyword, message=exc.message
                )
            )
    return out


LOSSES = ("upper case", "accents", "leading spaces", "trailing spaces", "repeated spaces",
          "spaces between words", "other spacing")  # fmt: skip


def _spelling(slot: Any) -> tuple[str, ...]:
    """What the slot's spelling loses of its values (`LOSSES`, in that order): upper case for a
    case-folded open-ended slot, and for a finite one what tells each value from the reading
    the tokenizer spells it as (`CompiledSlot.read_as`)."""
    lost = {"upper case"} if slot.folded else set()
    for reading, value in slot.read_as.items():
        lost |= _lost(value, reading)
    return tuple(loss for loss in LOSSES if loss in lost)


def _lost(value: str, reading: str) -> set[str]:
    """What `value` (a JSON text) has that `reading` (the text the tokenizer reads it as, the
    same up to case, accents and spaces: `vocab.plain_text`) lacks."""
    a, b = json.loads(value), json.loads(reading)
    if not (isinstance(a, str) and isinstance(b, str)):
        a, b = value, reading  # an object or array: lower-cased as a whole
    a, b = unicodedata.normalize("NFC", a), unicodedata.normalize("NFC", b)
    lost = set()
    if _spaceless(_unaccented(a)) != _spaceless(_unaccented(b)):
        lost.add("upper case")
    if _spaceless(a).casefold() != _spaceless(b).casefold():
        lost.add("accents")
    a, b = _unaccented(a).casefold(), _unaccented(b).casefold()
    if a != b:
        if a != a.lstrip() and b == b.lstrip():
            lost.add("leading spaces")
        if a != a.rstrip() and b == b.rstrip():
            lost.add("trailing spaces")
        a, b = a.strip(), b.strip()
        if a != b:
            if a.split() == b.split():
                lost.add("repeated spaces")
            elif len(a.split()) > len(b.split()):
                lost.add("spaces between words")
            else:
                lost.add("other spacing")
    return lost


def _unaccented(text: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


def _spaceless(text: str) -> str:
    return "".join(c for c in text if not c.isspace())


def _spelling_label(lost: tuple[str, ...]) -> str:
    """The table's words for what the tokenizer's spelling of the values loses (`LOSSES`)."""
    said = ["upper case spelled in lower case"] if "upper case" in lost else []
    without = [loss for loss in lost if loss not in ("upper case", "repeated spaces",
                                                     "other spacing")]  # fmt: skip
    if without:
        head = ", ".join(without[:-1])
        said.append("spelled without " + (f"{head} and " if head else "") + without[-1])
    if "repeated spaces" in lost:
        said.append("repeated spaces spelled as one")
    if "other spacing" in lost:
        said.append("spaces spelled otherwise")
    return ", ".join(said) + ", answered as the schema writes it"


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render_table(reports: list[QuestionReport]) -> str:
    """Fixed-width text table, one line per question; then the ignored keywords and depth
    limits, one line each."""
    rows = [("question", "status", "slot", "detail")]
    notes = []
    for r in reports:
        if r.supported:
            slot = "-" if r.slot_length is None else str(r.slot_length)
            detail = []
            if r.draft is not None:
                detail.append(f"draft {r.draft}")
            if r.values is not None:
                detail.append(f"{r.values} value{'' if r.values == 1 else 's'}")
            if r.truncated:
                detail.append("longer values cut at slot length")
            if r.extract:
                detail.append(f"extract: {r.extract} of each document")
            if r.spelling or r.folded:
                detail.append(_spelling_label(r.spelling or ("upper case",)))
            if r.warnings:
                n = len(r.warnings)
                detail.append(f"{n} unknown keyword{'s' * (n != 1)} ignored")
            if r.cuts:
                detail.append("some values left out")
            rows.append((r.question_id, "supported", slot, ", ".join(detail)))
            notes += [f"warning: {r.question_id}: {w}" for w in r.warnings]
            notes += [f"left out: {r.question_id}: {c}" for c in r.cuts]
        else:
            rows.append((r.question_id, "refused", "-", f"{r.pointer} {r.keyword}: {r.message}"))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row[:3], widths, strict=True)) + "  " + row[3]
        for row in rows
    ]
    return "\n".join([*(line.rstrip() for line in lines), *notes])
