"""The hand-written documents: every committed file is clean, the splits are apart, the checker
names what is wrong, and the bundled recipe trains on the train split only, from the weights it
names."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from decide.train import bundled, handwritten
from decide.train.bundled import PACKAGE_MODEL, row_sampler

CLAIM = {
    "id": "c1",
    "voice": "note",
    "text": "Ana Silva, car hit in Porto, $4,250 of repairs, limit 5,000, policy fine, police came.",
    "facts": {"claim_type": "auto", "claimant": "Ana Silva", "city": "Porto", "amount": 4250,
              "policy_limit": 5000, "policy_active": True, "police_report": True},
    "ask": ["claim_type", "claimant", "amount", "over_limit", "eligible"],
}  # fmt: skip


def _write(tmp_path: Path, *records: dict) -> Path:
    file = tmp_path / "claims.jsonl"
    file.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return file


def test_every_committed_file_is_clean_and_the_splits_are_apart() -> None:
    texts: dict[str, str] = {}
    for split in handwritten.SPLITS:
        for domain in handwritten.DOMAINS:
            file = handwritten.path(split, domain)
            if not file.is_file():
                continue
            documents, problems = handwritten.read(file, domain)
            assert problems == []
            for doc in documents:
                assert doc.text not in texts, f"{doc.id} repeats {texts.get(doc.text)}"
                texts[doc.text] = doc.id
                assert handwritten.MIN_ASK <= len(doc.gold) <= handwritten.MAX_ASK
    test = handwritten.load_split("test")
    trained = [d for d in test if handwritten.DOMAINS[d.domain].trained]
    assert len(trained) >= 150
    assert {d.domain for d in test} == set(handwritten.DOMAINS)
    assert handwritten.load_split("validation")
    # the domains kept for measuring transfer are never in the training split
    assert not handwritten.load_split("train", ("leave", "rental"))


def test_derived_answers_are_computed_from_the_facts(tmp_path) -> None:
    documents, problems = handwritten.read(_write(tmp_path, CLAIM), "claims")
    assert problems == []
    (doc,) = documents
    assert doc.gold == {"claim_type": "auto", "claimant": "Ana Silva", "amount": 4250,
                        "over_limit": False, "eligible": True}  # fmt: skip
    assert doc.answers["police_report"] is True and doc.answers["policy_limit"] == 5000


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"facts": {**CLAIM["facts"], "claim_type": "car"}}, "facts/claim_type = 'car'"),
        ({"facts": {**CLAIM["facts"], "claimant": "Ana Souza"}}, "is not written in the text"),
        ({"facts": {**CLAIM["facts"], "over_limit": False}}, "facts/over_limit is not a stated"),
        ({"facts": {**CLAIM["facts"], "policy_limit": None}}, "ask/over_limit is asked but"),
        ({"ask": ["claim_type", "amount"]}, "ask must list 4-8"),
        ({"text": "word " * 300}, "text has 300 words"),
    ],
)
def test_the_checker_names_the_line_and_the_field(tmp_path, change, expected) -> None:
    file = _write(tmp_path, CLAIM, {**CLAIM, "id": "c2", **change})
    documents, problems = handwritten.read(file, "claims")
    assert [d.id for d in documents] == ["c1"]
    assert problems and all(p.startswith(f"{file}:2 (c2): ") for p in problems)
    assert any(expected in p for p in problems), problems
    assert handwritten.main([str(file)]) == 1
    assert handwritten.main([str(_write(tmp_path, CLAIM))]) == 0


def test_a_training_row_asks_four_to_eight_answered_questions_in_order(tmp_path) -> None:
    documents, _ = handwritten.read(_write(tmp_path, CLAIM), "claims")
    order = [q["id"] for q in handwritten.DOMAINS["claims"].questions]
    rng = random.Random(0)
    seen = set()
    for _ in range(50):
        text, questions, gold = handwritten.training_row(documents, rng)
        ids = [q["id"] for q in questions]
        assert text == CLAIM["text"] and 4 <= len(ids) <= 8
        assert ids == sorted(ids, key=order.index) and set(gold) == set(ids)
        seen.update(ids)
    assert seen == set(order)  # every answered question is drawn, not only the written `ask`


def test_the_recipe_trains_on_the_train_split_only() -> None:
    written = handwritten.load_split("train", bundled.HANDWRITTEN_DOMAINS)
    train_texts = {d.text for d in written}
    held_out = {d.text for s in ("validation", "test") for d in handwritten.load_split(s)}
    tokenizer = Tokenizer.from_file(str(PACKAGE_MODEL / "tokenizer.json"))
    rows = row_sampler(tokenizer, written=written, written_share=0.5)
    rng = random.Random(5)
    drawn = [rows(rng)[0] for _ in range(80)]
    hand = [t for t in drawn if t in train_texts]
    assert 20 <= len(hand) <= 60
    assert not held_out & set(drawn)


def _shallow() -> bool:
    done = subprocess.run(["git", "-C", str(bundled.REPO), "rev-parse",
                           "--is-shallow-repository"], capture_output=True, text=True)  # fmt: skip
    return done.returncode != 0 or done.stdout.strip() != "false"


@pytest.mark.skipif(_shallow(), reason="the recipe's starting weights are in git history")
def test_the_recipe_starts_from_the_weights_it_names(tmp_path) -> None:
    start = bundled.starting_weights(tmp_path)
    assert bundled.sha256_of(start / "model.safetensors") == bundled.START.sha256
    assert {p.name for p in start.iterdir()} == set(bundled.MODEL_FILES)
    wrong = bundled.Start("wrong", bundled.START.commit, "0" * 64)
    with pytest.raises(SystemExit, match="not the recipe's 0000"):
        bundled.starting_weights(tmp_path / "other", wrong)
    missing = bundled.Start("missing", "0" * 40, bundled.START.sha256)
    with pytest.raises(SystemExit, match="pass --init DIR"):
        bundled.starting_weights(tmp_path / "third", missing)


# The derived answers as the data README states them, written apart from the CEL rules.
ORACLE = {
    "over_limit": lambda f: f["amount"] > f["policy_limit"],
    "eligible": lambda f: f["policy_active"] and f["amount"] <= f["policy_limit"],
    "within_income": lambda f: f["requested"] <= f["income"],
    "approve": lambda f: f["employed"] and not f["prior_default"] and f["requested"] <= f["income"],
    "refund_eligible": lambda f: f["refund_requested"] and f["days_since_purchase"] <= 30,
    "priority": lambda f: "high" if f["urgent"] else
    ("medium" if f["category"] in ("billing", "technical") else "low"),
    "within_balance": lambda f: f["days"] <= f["balance"],
    "affordable": lambda f: f["monthly_income"] >= 3 * f["monthly_rent"],
}  # fmt: skip


def test_the_cel_rules_give_the_readme_answers_on_every_document() -> None:
    """Each domain's CEL rules, evaluated as a job's `derive:` questions are, give what the data
    README says on every committed document whose facts determine them; a derived job asks the
    inputs of what it derives."""
    checked = 0
    for split in handwritten.SPLITS:
        for doc in handwritten.load_split(split):
            for derived in handwritten.DOMAINS[doc.domain].plan.order:
                qid = derived.id
                if not set(derived.asked) <= set(doc.answers):  # an input the text leaves open
                    assert qid not in doc.answers, (doc.id, qid)
                    continue
                assert doc.answers[qid] == ORACLE[qid](doc.answers), (doc.id, qid)
                checked += 1
    assert checked > 500
    claims = handwritten.DOMAINS["claims"]
    asked = [claims.question("eligible"), claims.question("claimant")]
    assert [q["id"] for q in claims.derived_questions(asked)] == [
        "claimant", "amount", "policy_limit", "policy_active", "eligible"]  # fmt: skip
    assert claims.derived_questions(asked)[-1]["derive"] == claims.rules["eligible"]


def test_every_training_row_is_a_valid_question_list() -> None:
    """Rows are packed as a job's rows are: a question field that needs `extract` (`unit`) must
    leave with it, or the row is refused and silently skipped by the example builder."""
    from decide.jobs.spec import parse_questions

    rng = random.Random(1)
    for domain in bundled.HANDWRITTEN_DOMAINS:
        documents = handwritten.load("train", domain)
        for _ in range(40):
            _, questions, _ = handwritten.training_row(documents, rng)
            parse_questions(questions, f"{domain} row")  # raises SpecError on a refused field


def test_optional_rows_answer_what_the_document_does_not_state_with_null(tmp_path) -> None:
    """`optional_share` of the rows: every question optional (`anyOf: [schema, null]`), the facts
    the document leaves null asked and answered null, one question of another trained domain
    (never the evaluation's pair) answered null at a random place; at most eight questions."""
    from decide.jobs.spec import parse_questions

    unstated = {**CLAIM, "facts": {**CLAIM["facts"], "city": None, "police_report": None}}
    documents, problems = handwritten.read(_write(tmp_path, unstated), "claims")
    assert not problems
    order = [q["id"] for q in handwritten.DOMAINS["claims"].questions]
    evaluated = handwritten.FOREIGN["claims"][1]
    rng = random.Random(0)
    places, foreign_ids = set(), set()
    for _ in range(60):
        text, questions, gold = handwritten.training_row(documents, rng, optional_share=1.0)
        parse_questions(questions, "optional row")
        ids = [q["id"] for q in questions]
        assert text == unstated["text"] and len(ids) <= 8 and set(gold) == set(ids)
        assert all(q["schema"]["anyOf"][1] == {"type": "null"} for q in questions)
        assert gold["city"] is None and gold["police_report"] is None
        foreign = [i for i in ids if i not in order]
        assert len(foreign) == 1 and gold[foreign[0]] is None and foreign[0] != evaluated
        own = [i for i in ids if i in order]
        assert own == sorted(own, key=order.index)
        assert all(gold[i] is not None for i in own if i not in ("city", "police_report"))
        places.add(ids.index(foreign[0]))
        foreign_ids.add(foreign[0])
    assert len(places) > 3 and len(foreign_ids) > 3
    _, questions, gold = handwritten.training_row(documents, rng, 1.0, foreign=False)
    assert {q["id"] for q in questions} <= set(order) and gold["city"] is None
    # share 0 draws exactly the rows of a recipe without it
    a, b = random.Random(3), random.Random(3)
    assert [handwritten.training_row(documents, a) for _ in range(5)] == [
        handwritten.training_row(documents, b, optional_share=0.0) for _ in range(5)
    ]
