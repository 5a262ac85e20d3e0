"""The recipe asks the trained domains' questions in other words and orders (`bundled.rewording`)."""

from __future__ import annotations

import json
import random

from decide.train import bundled, handwritten, mams, synthetic

TRAINED = {
    "claims": synthetic.CLAIM_QUESTIONS,
    "loans": synthetic.LOAN_QUESTIONS,
    "tickets": synthetic.TICKET_QUESTIONS,
}


def _phrasings() -> dict[str, list[str]]:
    return json.loads(bundled.QUESTION_PHRASINGS.read_text())["phrasings"]


def test_every_trained_question_has_other_wordings_and_none_is_a_question_of_its_own() -> None:
    """Each trained question has wordings of its own; none repeats a question text of any domain,
    trained or held out (the leave and rental questions stay unseen), or another's wording."""
    phrasings = _phrasings()
    keys = {f"{d}/{q['id']}" for d, qs in TRAINED.items() for q in qs}
    assert set(phrasings) == keys
    texts = {q["text"].lower() for spec in handwritten.DOMAINS.values() for q in spec.questions}
    texts |= {q["text"].lower() for qs in TRAINED.values() for q in qs}
    seen: set[str] = set()
    for key, words in phrasings.items():
        assert len(words) >= 3, key
        for text in words:
            assert text.lower() not in texts, (key, text)
            assert text.lower() not in seen, (key, text)
            seen.add(text.lower())


def test_rows_of_the_trained_domains_are_reworded_and_shuffled_and_others_pass() -> None:
    phrasings = _phrasings()
    always = bundled.rewording(1.0, 1.0)
    assert always is not None and bundled.rewording(0.0, 0.0) is None
    rng = random.Random(3)
    generator = synthetic.Generator(None)
    shuffled = 0
    for _ in range(20):
        _, text, questions, gold = generator.sample_document(rng, "train")
        domain = next(d for d, qs in TRAINED.items() if questions[0] in qs)
        row = always((text, questions, gold), rng)
        assert row[0] == text and row[2] == gold
        assert sorted(q["id"] for q in row[1]) == sorted(q["id"] for q in questions)
        for q in row[1]:
            assert q["text"] in phrasings[f"{domain}/{q['id']}"]
            original = next(o for o in questions if o["id"] == q["id"])
            assert q["schema"] == original["schema"]
        shuffled += [q["id"] for q in row[1]] != [q["id"] for q in questions]
    assert shuffled >= 15  # of 20 rows of 4-9 questions (a shuffle may leave the order as it was)
    # A drill asks its derived question after its inputs: reworded, never shuffled.
    for _ in range(10):
        drill = generator.derived_drill(rng, "train")
        reworded = always(drill, rng)
        assert [q["id"] for q in reworded[1]] == [q["id"] for q in drill[1]]
        assert reworded[3] == drill[3]
    # MAMS reviews and rows of other questions pass unchanged, drawing nothing.
    text, gold = mams.load("train")[0]
    review = (text, mams.QUESTIONS, gold)
    state = rng.getstate()
    assert always(review, rng) is review
    window = (
        "an NDA",
        [{"id": "h1", "text": "Is it confidential?", "schema": {}}],
        {},
        (),
        {},
        None,
    )
    assert always(window, rng) is window
    assert rng.getstate() == state


def test_rewording_repeats_for_a_seed_and_only_rewords_its_share() -> None:
    half = bundled.rewording(0.5, 0.0)
    assert half is not None
    generator = synthetic.Generator(None)
    rows = [generator.sample_document(random.Random(i), "train")[1:] for i in range(30)]
    first = [half(row, random.Random(i)) for i, row in enumerate(rows)]
    again = [half(row, random.Random(i)) for i, row in enumerate(rows)]
    assert first == again
    asked = [q for row in first for q in row[1]]
    own = {q["text"] for qs in TRAINED.values() for q in qs}
    kept = sum(q["text"] in own for q in asked)
    assert 0.3 * len(asked) < kept < 0.7 * len(asked)
    assert all(
        [q["id"] for q in a[1]] == [q["id"] for q in r[1]] for a, r in zip(first, rows, strict=True)
    )  # no shuffle share: the domain's order
