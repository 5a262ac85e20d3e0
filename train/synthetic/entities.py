"""Names, cities, products and money amounts for synthetic documents.

Test documents draw entities from the held-out part of common.json's entity lists. Training
entities never hold a word of a held-out one (`tables.entity_side`; a draw that would is drawn
again): PROCEDURAL of the names and cities are made up on the spot (several word pieces, never
seen twice), the rest come from thousands of real first names, surnames and cities
(data/entities, from Faker's locale data). With large pools the model has to find an entity by
its place in the document: neither "the odd-looking word" nor "one of 28 names" works. (The first
GPU model saw the 28 train-list entities in 20 % of its documents, each thousands of times, and
answered them for held-out ones.) Ordinary words (words.json) are used for products only: as names
and cities they taught the model that a name may be any word ("rosa education", "alice chef").
"""

from __future__ import annotations

import functools
import json
import random
from collections.abc import Callable
from pathlib import Path

from tokenizers import Tokenizer

from .draw import Draw
from .tables import entity_list, entity_side, raw

PROCEDURAL = 0.3
ENTITIES = Path(__file__).resolve().parent.parent / "data" / "entities" / "entities.json"
WORD_LIST = ENTITIES.with_name("words.json")
# Share of real training cities drawn from those the trained model's vocabulary spells as one
# piece, when the generator is given its tokenizer. Drawn uniformly, only 11 % of training cities
# were one piece, against most real cities in letters (and 10 of the 12 held-out ones): a model
# trained so expected a city of two pieces or more and answered "was norfolk" or "albany recently".
# 0.4 in stage 5, 0.55 from stage 6 (stage 5 still attached a neighbour to 24 of 38 wrong cities).
# A tokenizer that spells no city of the pool as one token (a tiny test vocabulary) draws them
# uniformly, as no tokenizer does.
ONE_PIECE_CITIES = 0.55


@functools.cache
def real_pool() -> dict[str, list[str]]:
    """{"first": [...], "last": [...], "cities": [...]}: see data/entities/build.py."""
    return json.loads(ENTITIES.read_text())


@functools.cache
def word_pool() -> list[str]:
    """Lower-case English words, none of them part of a held-out entity (build_words.py): the
    names of training products, so that a product can be any noun, not one of the listed nouns."""
    return json.loads(WORD_LIST.read_text())


def one_piece_cities(tokenizer: Tokenizer) -> list[str]:
    """The real pool's cities that `tokenizer` (the trained model's) encodes as one token."""
    cities = real_pool()["cities"]
    pieces = tokenizer.encode_batch(cities, add_special_tokens=False)
    return [c for c, e in zip(cities, pieces, strict=True) if len(e.ids) == 1]


def money(rng: random.Random, amount: int) -> str:
    style = rng.randrange(4)
    if style == 0:
        return f"${amount:,}"
    if style == 1:
        return f"{amount:,} dollars"
    if style == 2:
        return f"USD {amount:,}"
    return f"${amount}"


def made_up_word(rng: random.Random) -> str:
    """A pronounceable word that is in no list: entities the model cannot memorise, only copy."""
    pieces = raw("pieces")
    syllables = rng.randint(2, 3)
    word = "".join(
        rng.choice(pieces["onsets"]) + rng.choice(pieces["vowels"]) + rng.choice(pieces["codas"])
        for _ in range(syllables)
    )
    return word[:10].capitalize()


def _training(draw: Draw, kind: str, make: Callable[[], str]) -> str:
    """`make()` until it gives an entity on the training side (see `tables.entity_side`)."""
    while entity_side(kind, value := make()) != "train":
        pass
    return draw.entity(kind, value)


def _source(rng: random.Random) -> str:
    return "made_up" if rng.random() < PROCEDURAL else "real"


def person(draw: Draw) -> str:
    rng = draw.rng
    if draw.split != "train":
        first = rng.choice(entity_list("first").held_out)
        return draw.entity("name", f"{first} {rng.choice(entity_list('last').held_out)}")

    def make() -> str:
        if _source(rng) == "made_up":
            return f"{made_up_word(rng)} {made_up_word(rng)}"
        pool = real_pool()
        return f"{rng.choice(pool['first'])} {rng.choice(pool['last'])}"

    return _training(draw, "name", make)


def city(draw: Draw) -> str:
    rng = draw.rng
    if draw.split != "train":
        return draw.entity("city", rng.choice(entity_list("cities").held_out))

    def make() -> str:
        if _source(rng) == "made_up":
            prefix = rng.choice(["", "", "", "Port ", "New ", "San ", "Lake "])
            return prefix + made_up_word(rng)
        if draw.whole_cities and rng.random() < ONE_PIECE_CITIES:
            return rng.choice(draw.whole_cities)
        return rng.choice(real_pool()["cities"])

    return _training(draw, "city", make)


def product(draw: Draw) -> str:
    """Test products come from the held-out products; training ones are one or two ordinary
    words (25 %), a bare listed noun (20 %) or a listed adjective and noun (55 %)."""
    rng = draw.rng
    if draw.split != "train":
        return draw.entity("product", rng.choice(entity_list("products").held_out))
    pieces = raw("pieces")

    def make() -> str:
        r = rng.random()
        if r < 0.25:
            words = word_pool()
            one = rng.random() < 0.6
            named = rng.choice(words) if one else f"{rng.choice(words)} {rng.choice(words)}"
        elif r < 0.45:
            named = rng.choice(pieces["nouns"])
        else:
            named = f"{rng.choice(pieces['adjectives'])} {rng.choice(pieces['nouns'])}"
        return named if len(named) <= 20 else named.split()[-1]  # the slot holds 20 characters

    return _training(draw, "product", make)
