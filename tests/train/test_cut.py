"""Cut documents (`decide.train.cut`): the sentences writing one fact go, every string and number
fact is then checked as still stated or absent, and training rows ask the cut fact as an optional
question answered null."""

from __future__ import annotations

import json
import random
from pathlib import Path

from tokenizers import Tokenizer

from decide.jobs.spec import parse_questions
from decide.train import bundled, cut, handwritten

CLAIM = {
    "id": "c1",
    "voice": "email",
    "text": (
        "Dear team,\n\nMy name is Ana Silva and my car was hit in Porto last week. The garage "
        "of Mr. Costa quotes $4,250 for the repairs. My policy covers up to $5,000 and is paid "
        "up. The police came and wrote a report.\n\nThanks,\nAna"
    ),
    "facts": {"claim_type": "auto", "claimant": "Ana Silva", "city": "Porto", "amount": 4250,
              "policy_limit": 5000, "policy_active": True, "police_report": True},
    "ask": ["claim_type", "claimant", "amount", "over_limit", "eligible"],
}  # fmt: skip
LOAN = {
    "id": "l1",
    "voice": "form",
    "text": (
        "LOAN APPLICATION\nApplicant: Zhang Wei\nCity: Vancouver\nAmount requested: $33,000\n"
        "Salary: $5,500 a month\nEmployed: yes, engineer\nPrevious defaults: none"
    ),
    "facts": {"purpose": "car", "applicant": "Zhang Wei", "city": "Vancouver",
              "requested": 33000, "income": 66000, "employed": True, "prior_default": False},
    "ask": ["applicant", "requested", "income", "employed"],
}  # fmt: skip


def _documents(tmp_path: Path, domain: str, *records: dict) -> list[handwritten.Document]:
    file = tmp_path / f"{domain}.jsonl"
    file.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    documents, problems = handwritten.read(file, domain)
    assert not problems, problems
    return documents


def test_sentences_end_at_lines_and_final_punctuation_not_after_a_title() -> None:
    text = "Hi.\nThe plumber, Mr. Costa, came. J. Smith paid! Done?  Yes"
    pieces = [text[a:b] for a, b in cut.sentences(text)]
    assert pieces == ["Hi.", "The plumber, Mr. Costa, came.", "J. Smith paid!", "Done?", "Yes"]


def test_a_name_goes_with_every_sentence_holding_a_word_of_it(tmp_path) -> None:
    (doc,) = _documents(tmp_path, "claims", CLAIM)
    found = cut.cut(doc, "claimant")
    assert found is not None
    assert "Ana" not in found.text and "Silva" not in found.text and "Porto" not in found.text
    assert "Mr. Costa quotes $4,250" in found.text and "Thanks," in found.text
    # the cut took the city with the name; both are asked null, the numbers stay
    assert found.gold == {"claimant": None, "city": None, "amount": 4250, "policy_limit": 5000}
    again = cut.cut(doc, "amount")
    assert again is not None and "4,250" not in again.text and "Mr." not in again.text
    assert again.gold == {"claimant": "Ana Silva", "city": "Porto", "amount": None,
                          "policy_limit": 5000}  # fmt: skip


def test_a_number_is_cut_where_the_reader_finds_it_in_its_unit(tmp_path) -> None:
    (doc,) = _documents(tmp_path, "loans", LOAN)
    found = cut.cut(doc, "income")  # 66000 a year, written "$5,500 a month"
    assert found is not None and "Salary" not in found.text
    assert found.text.splitlines()[3:] == ["Amount requested: $33,000", "Employed: yes, engineer",
                                           "Previous defaults: none"]  # fmt: skip
    assert found.gold["income"] is None and found.gold["requested"] == 33000
    # booleans and options are never asked of a cut document
    assert set(found.gold) == {"applicant", "city", "requested", "income"}


def test_cuts_that_cannot_be_checked_are_not_made(tmp_path) -> None:
    partial = {**CLAIM, "id": "c2", "text": CLAIM["text"].replace("Thanks,\nAna", "Thanks, Ana")}
    short = {**CLAIM, "id": "c3", "text": "Ana Silva, Porto, $4,250, limit $5,000, active, police."}
    twice = {**CLAIM, "id": "c4", "text": CLAIM["text"] + " Amount: 4250 dollars."}
    a, b, c = _documents(tmp_path, "claims", partial, short, twice)
    # the signature shares its line with "Thanks": the whole line goes and the cut is clean
    assert cut.cut(a, "claimant") is not None
    assert cut.cut(b, "claimant") is None  # nothing would be left
    assert cut.cut(b, "police_report") is None  # a boolean: not checkable
    found = cut.cut(c, "amount")
    assert found is not None and "4250" not in found.text and "4,250" not in found.text
    (loan,) = _documents(tmp_path, "loans", {**LOAN, "text": LOAN["text"] + "\nSigned: Wei"})
    found = cut.cut(loan, "city")
    assert found is not None and found.gold["applicant"] == "Zhang Wei"
    # "Wei" is left when only the applicant's line goes: the name is partly there, not asked
    assert cut.cut(loan, "applicant") is not None
    assert cut.status("loans", "applicant", "Zhang Wei", "Signed: Wei") == "partial"


def test_training_rows_ask_the_cut_fact_as_optional_and_answer_null(tmp_path) -> None:
    docs = _documents(tmp_path, "claims", CLAIM) + _documents(tmp_path, "loans", LOAN)
    found = cut.cuts(docs)
    assert {(f.document.id, f.fact) for f in found} >= {("c1", "claimant"), ("l1", "income")}
    rng = random.Random(0)
    for _ in range(30):
        text, questions, gold = cut.training_row(found, rng)
        parse_questions(questions, "cut row")
        one = next(f for f in found if f.text == text)
        assert gold[one.fact] is None and set(gold) <= set(one.gold)
        assert all(gold[k] == one.gold[k] for k in gold) and 3 <= len(gold) <= 8
        assert all(q["schema"]["anyOf"][1] == {"type": "null"} for q in questions)
        assert not any("extract" in q for q in questions)


def test_cut_evaluation_documents_ask_as_users_do() -> None:
    found = cut.cuts(handwritten.load_split("validation"))
    assert len({f.document.id for f in found}) > 70
    doc = found[0].as_document()
    assert doc.gold[found[0].fact] is None and doc.text == found[0].text
    strings = [q for q in doc.questions if q["schema"]["anyOf"][0].get("type") == "string"]
    assert strings and all(q.get("extract") for q in strings)


def test_the_recipe_draws_cut_rows_only_when_asked() -> None:
    tokenizer = Tokenizer.from_file(str(bundled.PACKAGE_MODEL / "tokenizer.json"))
    written = handwritten.load_split("train", bundled.HANDWRITTEN_DOMAINS)
    plain = bundled.row_sampler(tokenizer, written=written)
    zero = bundled.row_sampler(tokenizer, written=written, cut_share=0.0)
    a, b = random.Random(5), random.Random(5)
    assert [plain(a) for _ in range(12)] == [zero(b) for _ in range(12)]
    cutting = bundled.row_sampler(tokenizer, written=written, written_share=1.0, cut_share=1.0)
    rng = random.Random(5)
    texts = {d.text for d in written}
    for _ in range(10):
        text, _, gold = cutting(rng)
        assert text not in texts and None in gold.values()
