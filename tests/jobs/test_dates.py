"""Dates read as written: extract questions with `format: date` answer the ISO value of a date
the document states, whatever its layout; ambiguous day/month dates follow `dates.order` and
are refused by default, never guessed."""

from __future__ import annotations

import json

import polars as pl
import pytest

from decide import Decider
from decide.jobs.runner import run_job
from decide.jobs.spec import SpecError, parse_spec
from decide.schemas.dates import DatePolicy, date_in_document, document_dates, read_date

REFUSE, DAY, MONTH = DatePolicy(), DatePolicy("day_first"), DatePolicy("month_first")
# written layout -> ISO value under (refuse, day_first, month_first); None: not read as a date
TABLE = [
    ("June 9, 2025", ("2025-06-09",) * 3),
    ("9 June 2025", ("2025-06-09",) * 3),
    ("Monday, June 9, 2025", ("2025-06-09",) * 3),
    ("Mon 9 Jun 2025", ("2025-06-09",) * 3),
    ("9th of June 2025", ("2025-06-09",) * 3),
    ("June 9th, 2025", ("2025-06-09",) * 3),
    ("Sept. 3, 2025", ("2025-09-03",) * 3),
    ("2025-06-09", ("2025-06-09",) * 3),  # year first is always year-month-day
    ("2025/06/09", ("2025-06-09",) * 3),
    ("09/06/2025", (None, "2025-06-09", "2025-09-06")),  # day and month could swap
    ("9.6.2025", (None, "2025-06-09", "2025-09-06")),
    ("06-09-2025", (None, "2025-09-06", "2025-06-09")),
    ("13/06/2025", ("2025-06-13",) * 3),  # 13 cannot be a month: not ambiguous
    ("06/13/2025", ("2025-06-13",) * 3),
    ("12/12/2025", ("2025-12-12",) * 3),  # both readings agree
    ("Tuesday, June 9, 2025", (None,) * 3),  # June 9, 2025 is a Monday
    ("June 2025", (None,) * 3),  # no day
    ("9 June", (None,) * 3),  # no year
    ("12500", (None,) * 3),
    ("9 June 2025 and 10 June 2025", (None,) * 3),  # two dates are not one
    ("9/6/25", (None, "2025-06-09", "2025-09-06")),  # two-digit year of an all-numeric date
    ("1 - Apr 30", (None,) * 3),  # a range's day: no year is written (read as 2030 before)
    ("Jun 1 - 15", (None,) * 3),
    ("9 Jun 25", (None,) * 3),  # beside a month name, two digits are a day
]


@pytest.mark.parametrize(("text", "expected"), TABLE)
def test_written_layouts_read_to_iso_or_refused(text: str, expected: tuple) -> None:
    assert tuple(read_date(text, "date", p) for p in (REFUSE, DAY, MONTH)) == expected


def test_date_times_and_documents() -> None:
    zulu = DatePolicy(timezone="Z")
    assert read_date("June 9, 2025 at 2:30 pm", "date-time", zulu) == "2025-06-09T14:30:00Z"
    assert read_date("June 9, 2025 at 2:30 pm", "date-time") is None  # no offset: not guessed
    assert read_date("2025-06-09T14:30:00+02:00", "date-time") == "2025-06-09T14:30:00+02:00"
    assert read_date("June 9, 2025", "date-time", zulu) is None  # no time of day
    doc = "Leave from Monday, June 9, 2025 until 20/06/2025; back on 07/08/2025."
    assert document_dates(doc) == ["2025-06-09", "2025-06-20"]  # 07/08 could be either
    assert document_dates(doc, "date", MONTH) == ["2025-06-09", "2025-06-20", "2025-07-08"]


def test_ambiguous_dates_refused_unless_ordered() -> None:
    doc = "Starting 09/06/2025."
    assert document_dates(doc) == []
    assert document_dates(doc, "date", DAY) == ["2025-06-09"]
    assert date_in_document("2025-09-06", doc, "date", MONTH)
    with pytest.raises(SpecError, match=r"dates\.order"):
        parse_spec({"questions": [], "dates": {"order": "guess"}})
    assert (
        parse_spec({"dates": {"order": "day_first"}}).fingerprint() != parse_spec({}).fingerprint()
    )


QUESTIONS = [
    {"id": "start", "text": "When does the leave start?", "extract": True,
     "schema": {"type": "string", "format": "date"}},
    {"id": "days", "text": "How many days?", "extract": True, "schema": {"type": "integer"}},
]  # fmt: skip


def test_date_extract_answers_are_iso_dates_of_their_document(tiny_checkpoint, tmp_path) -> None:
    model = tiny_checkpoint("bert", vocab="small", init_std=0.2)
    docs = {
        "a": "Leave from Monday, June 9, 2025 for 5 days.",
        "b": "From 9 June 2025 until 2025-06-20, 10 days.",
        "c": "Leave starts 09/06/2025, 3 days.",  # ambiguous: no date to answer by default
    }
    path = tmp_path / "in.parquet"
    pl.DataFrame({"doc_id": list(docs), "document": list(docs.values())}).write_parquet(path)
    for order in ("refuse", "day_first"):
        spec = parse_spec({"questions": QUESTIONS, "dates": {"order": order}})
        run_job(spec, [path], tmp_path / order, model=model, batch_size=4, progress=False)
        frame = pl.read_parquet(tmp_path / order / "answers" / "*.parquet").sort("doc_id")
        assert frame["status"].to_list() == ["ok", "ok", "ok"]
        starts = [json.loads(a).get("start") for a in frame["answers_json"]]
        assert starts[0] == "2025-06-09" and starts[1] in ("2025-06-09", "2025-06-20")
        if order == "refuse":
            assert starts[2] is None and frame["partial"].to_list() == [False, False, True]
        else:
            assert starts[2] == "2025-06-09" and not any(frame["partial"])
    d = Decider(model, batch_size=2, dates={"order": "month_first"}).decide(docs["c"], QUESTIONS)
    assert d.answers["start"] == "2025-09-06"
