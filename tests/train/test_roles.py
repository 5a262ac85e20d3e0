"""Role documents (`decide.train.synthetic.roles`) state every answer they ask, give each of their
numbers one role, and stay out of the hand-written held-out domains."""

from __future__ import annotations

import random
import re

import jsonschema

from decide.jobs.spec import Question
from decide.schemas.span import document_numbers
from decide.train import handwritten
from decide.train.bundled import row_sampler
from decide.train.synthetic import Generator, roles


def _documents(count: int, seed: int = 5):
    rng, generator = random.Random(seed), Generator(None)
    return [roles.sample(generator.draw(rng, "train")) for _ in range(count)]


def test_every_answer_is_stated_valid_and_each_number_has_one_role() -> None:
    asked: dict[str, int] = {}
    for text, questions, gold in _documents(600):
        assert [q["id"] for q in questions] == sorted(
            (q["id"] for q in questions), key=["name", "requested", "available", "kind", "flag",
                                                "fits"].index,
        )  # fmt: skip
        numbers = document_numbers(text)  # as the engine reads them: digits, money, words
        for q in questions:
            Question.model_validate(q)  # a job would accept the question
            jsonschema.validate(gold[q["id"]], q["schema"])
            asked[q["id"]] = asked.get(q["id"], 0) + 1
            if q["id"] == "name":
                assert gold["name"] in text
            if q["id"] in ("requested", "available"):
                assert str(gold[q["id"]]) in numbers, (q["id"], gold[q["id"]], text)
        if {"requested", "available"} <= gold.keys():
            assert gold["requested"] != gold["available"]
            assert gold.get("fits", gold["requested"] <= gold["available"]) == (
                gold["requested"] <= gold["available"]
            )
    assert min(asked.values()) > 300 and len(asked) == 6, asked


def test_the_fits_answer_is_balanced_and_not_readable_from_magnitude_alone() -> None:
    fits = [g["fits"] for _, _, g in _documents(800) if "fits" in g]
    assert 0.35 < sum(fits) / len(fits) < 0.75
    close = [
        g
        for _, _, g in _documents(800, seed=9)
        if {"requested", "available"} <= g.keys() and abs(g["requested"] - g["available"]) <= 3
    ]
    assert len(close) > 100  # requests close to what is available are common


def test_role_documents_never_touch_a_held_out_domain() -> None:
    # leave requests and rental applications are the hand-written domains never trained on
    assert not handwritten.DOMAINS["leave"].trained and not handwritten.DOMAINS["rental"].trained
    banned = re.compile(r"\b(leave|holidays?|sick|parental|bereavement|rent|rental|"
                        r"tenant|landlord|lease|flat|apartment|employ\w*)\b", re.I)  # fmt: skip
    for text, questions, _ in _documents(1500, seed=1):
        found = banned.search(" ".join([text, *(q["text"] for q in questions)]))
        assert found is None, (found, text)


def test_the_recipe_draws_role_documents_only_when_its_share_is_set() -> None:
    def drawn(share: float) -> list[tuple]:
        rows = row_sampler(None, written=None, windows=None, roles_share=share)
        rng = random.Random(0)
        return [rows(rng) for _ in range(300)]

    def is_role(row: tuple) -> bool:
        return any(q["id"] == "fits" or q["id"] == "available" for q in row[1])

    assert sum(map(is_role, drawn(0.3))) > 50
    assert not any(map(is_role, drawn(0.0)))
