"""Rebuild `entities.json`: the large pools of real first names, surnames and city names that
training documents draw from, so the model learns to copy a name it has never seen rather than
to recall one of a short list.

The names come from Faker's locale data (MIT, see LICENSE); this script is only needed to
rebuild the file, never at training or run time:

    pip install faker==40.63.0 && python train/data/entities/build.py

Kept: ASCII-only entries (an uncased WordPiece vocabulary strips accents, so "Córdoba" could
never be spelled back exactly), names short enough for the name slots (a space or hyphen allowed
in cities, at most 16 characters), and nothing from the held-out entity lists
(data/synthetic/common.json), so test documents still use entities never seen in training.
"""

from __future__ import annotations

import importlib
import json
import random
import re
from pathlib import Path

from faker import Faker

from decide.train import synthetic

LOCALES = ["en_US", "en_GB", "de_DE", "fr_FR", "it_IT", "es_ES", "nl_NL", "sv_SE", "pl_PL",
           "pt_BR", "en_IN", "da_DK", "no_NO", "fi_FI", "cs_CZ"]  # fmt: skip
FIRST = re.compile(r"^[A-Z][a-z]{2,9}$")  # first + " " + last fits the 24-character name slots
LAST = re.compile(r"^[A-Z][a-z]{2,11}$")
PER_LOCALE = 800
CITY = re.compile(r"^[A-Z][a-z]+(?:[ -][A-Z][a-z]+)?$")


def held_out() -> set[str]:
    """Every name and city of the test split, lower-cased (data/synthetic/common.json)."""
    kinds = ("first", "last", "cities")
    return {x.casefold() for k in kinds for x in synthetic.entity_list(k).held_out}


def provider(kind: str, locale: str) -> type | None:
    try:
        return importlib.import_module(f"faker.providers.{kind}.{locale}").Provider
    except ModuleNotFoundError:
        return None


def names(attribute: str, pattern: re.Pattern[str]) -> set[str]:
    out: set[str] = set()
    for locale in LOCALES:
        p = provider("person", locale)
        out |= {n for n in getattr(p, attribute, ()) if pattern.match(n)}
    return out


def cities() -> set[str]:
    """Real city names, at most `PER_LOCALE` from each locale (Italian data alone has ~8,000)."""
    out: set[str] = set()
    rng = random.Random(0)
    for locale in LOCALES:
        p = provider("address", locale)
        found = sorted({c for c in getattr(p, "cities", ()) if CITY.match(c) and len(c) <= 16})
        out |= set(rng.sample(found, min(PER_LOCALE, len(found))))
    # English-speaking locales make city names up from names and suffixes ("Port Melanie",
    # "Jonesfurt"); a fixed sample of those keeps two-word, English-looking cities in the pool.
    fake = Faker("en_US")
    fake.seed_instance(0)
    out |= {c for c in (fake.city() for _ in range(600)) if CITY.match(c) and len(c) <= 16}
    # Many towns carry a family name (Houston, Austin, Irving, Chandler), and those are what
    # short city names look like to a WordPiece vocabulary: one word piece, where almost every
    # European village name above is several. Without them the only one-piece cities training
    # ever showed were the 28 of synthetic's train list, and the model answered one of those.
    out |= names("last_names", LAST)
    return out


def main() -> None:
    excluded = held_out()
    pools = {
        "first": sorted(n for n in names("first_names", FIRST) if n.casefold() not in excluded),
        "last": sorted(n for n in names("last_names", LAST) if n.casefold() not in excluded),
        "cities": sorted(c for c in cities() if not set(re.split("[ -]", c.casefold())) & excluded),
    }
    target = Path(__file__).with_name("entities.json")
    target.write_text(json.dumps(pools, indent=0) + "\n")
    print(", ".join(f"{k}: {len(v):,}" for k, v in pools.items()), f"-> {target}")


if __name__ == "__main__":
    main()
