"""Role documents: everyday requests in which several numbers of one kind play different roles.

A hotel guest asks for 5 nights and has 3 reward nights left; a club wants 12 tickets and 9 are on
sale; a reader wants 4 books and the card allows 6 more. Each document states a quantity asked
for, a quantity available and a distractor of the same kind (last year's figure, a reference
number), so only the words around a number say which question it answers, plus a category stated
in other words ("I'm travelling alone" is a single room), a yes/no fact and the requester's name.
The questions are the name, the two quantities, the category, the fact and whether the request
fits what is available (derived: requested <= available). Eight domains (`roles.json`); none is
a domain of the hand-written held-out sets (no leave requests, no rentals), whose never-trained
figures these documents are meant to lift by teaching what the trained domains' templates do
not: reading a number's role from its words. Training only: there is no held-out side.
"""

from __future__ import annotations

import functools
import random
from typing import Any

from .draw import Draw, fill
from .entities import money, person
from .tables import raw

WORDS_SHARE = 0.3  # of counts written in words ("five nights")
CLOSE_SHARE = 0.5  # of documents whose two quantities lie within 3 of each other (or 15 %)
MIN_ASK, MAX_ASK = 4, 6


@functools.cache
def _data() -> dict[str, Any]:
    return raw("roles")


def questions(domain: str, rng: random.Random) -> list[dict[str, Any]]:
    """The domain's six questions, each text one of its phrasings."""
    d = _data()["domains"][domain]
    top = 100_000 if d.get("money") else 100
    return [
        {"id": "name", "text": rng.choice(d["name_question"]),
         "schema": {"type": "string", "minLength": 3, "maxLength": 32}},
        {"id": "requested", "text": rng.choice(d["requested"]["question"]),
         "schema": {"type": "integer", "minimum": 0, "maximum": top}},
        {"id": "available", "text": rng.choice(d["available"]["question"]),
         "schema": {"type": "integer", "minimum": 0, "maximum": top}},
        {"id": "kind", "text": rng.choice(d["enum"]["question"]),
         "schema": {"enum": sorted(d["enum"]["options"])}},
        {"id": "flag", "text": rng.choice(d["flag"]["question"]), "schema": {"type": "boolean"}},
        {"id": "fits", "text": rng.choice(d["compare"]), "schema": {"type": "boolean"}},
    ]  # fmt: skip


def _quantities(rng: random.Random, is_money: bool) -> tuple[int, int, int]:
    """(requested, available, distractor), all different."""
    while True:
        if is_money:
            requested = rng.randrange(500, 50_001, 50)
            spread = max(50, int(requested * 0.15)) if rng.random() < CLOSE_SHARE else 40_000
            available = max(50, requested + rng.randrange(-spread, spread + 1, 50))
            distractor = rng.randrange(500, 60_001, 50)
        else:
            requested = rng.randint(1, 40)
            spread = 3 if rng.random() < CLOSE_SHARE else 30
            available = max(0, requested + rng.randint(-spread, spread))
            distractor = rng.randint(1, 60)
        if len({requested, available, distractor}) == 3 and available <= (
            100_000 if is_money else 100
        ):
            return requested, available, distractor


def _written(rng: random.Random, value: int, is_money: bool) -> str:
    if is_money:
        return money(rng, value)
    from num2words import num2words  # training only (the dev and train extras)

    return num2words(value) if rng.random() < WORDS_SHARE else str(value)


def sample(draw: Draw, domain: str | None = None) -> tuple[str, list[dict[str, Any]], dict]:
    """(document, 4-6 of its questions in their order, their gold answers)."""
    rng, data = draw.rng, _data()
    domain = domain or rng.choice(sorted(data["domains"]))
    d = data["domains"][domain]
    is_money = bool(d.get("money"))
    name = person(draw)
    requested, available, distractor = _quantities(rng, is_money)
    kind = rng.choice(sorted(d["enum"]["options"]))
    flag = rng.random() < 0.5

    def say(text: str, value: int) -> str:
        return fill(text, {"n": _written(rng, value, is_money)})

    voice = rng.choice(["email", "note", "transcript", "form"])
    by_agent = voice == "transcript" and rng.random() < 0.6  # the agent states what is left
    facts = [
        say(rng.choice(d["requested"]["say"]), requested),
        say(rng.choice(d["available"]["agent" if by_agent else "say"]), available),
        say(rng.choice(d["distractor"]), distractor),
        rng.choice(d["enum"]["options"][kind]),
        rng.choice(d["flag"]["yes" if flag else "no"]),
    ]
    order = list(range(len(facts)))
    rng.shuffle(order)
    intro = rng.choice(d["intro"])
    if voice == "transcript":
        lines = [rng.choice(data["opening"]), fill(rng.choice(data["caller"]), {"name": name})]
        for i in order:
            who = "Agent" if (i == 1 and by_agent) else "Caller"
            lines.append(f"{who}: {facts[i]}")
            if rng.random() < 0.3:
                lines.append(rng.choice(["Agent: Okay.", "Agent: Let me check.", "Agent: Noted."]))
        text = "\n".join(lines)
    elif voice == "form":
        lines = [f"Name: {name}"]
        notes = []
        for i in order:
            if i in (0, 1) and rng.random() < 0.5:
                role = d["requested" if i == 0 else "available"]
                value = requested if i == 0 else available
                lines.append(f"{role['form'][0]}: {_written(rng, value, is_money)}")
            else:
                notes.append(facts[i])
        text = "\n".join(lines) + "\nNotes: " + " ".join(notes)
    else:
        body = " ".join([intro, *(facts[i] for i in order)])
        if voice == "email":
            closing = fill(rng.choice(data["closings"]), {"name": name})
            text = f"{rng.choice(data['greetings'])}\n\n{body}\n\n{closing}"
        else:
            text = f"{body} — {name}"
    gold = {
        "name": name,
        "requested": requested,
        "available": available,
        "kind": kind,
        "flag": flag,
        "fits": requested <= available,
    }
    asked = questions(domain, rng)
    count = rng.randint(MIN_ASK, MAX_ASK)
    chosen = sorted(rng.sample(range(len(asked)), count))
    asked = [asked[i] for i in chosen]
    return text, asked, {q["id"]: gold[q["id"]] for q in asked}
