"""Synthetic decision documents: insurance claims, loan applications and support tickets.

Each domain draws facts, writes them into a document with one of several layouts (narrative,
form, e-mail) and many phrasings per fact (negations included), adds distracting sentences, and
returns the document with its gold decision object. Some answers are stated facts (a category, an
amount, a name, a yes/no fact); others are derived from several facts (a claim is eligible when the
policy is active and the amount is within the limit), so related questions depend on each other.

Phrasings, layouts and entities (names, cities, products) are split: `split="train"` draws from
the first part of every list and `split="test"` only from held-out parts, so test documents use
templates and entities never seen in training. Training documents are widened beyond the lists:
most names and cities come from thousands of real ones (data/entities) or are made up, category
and yes/no cues often come from train-only phrasings (TRAIN_CUES), cities and products often stand
in train-only sentences (TRAIN_PHRASINGS), and train-only distractors use category words about
something else. None of this touches the test split: a seed gives the same
test documents as before the widening (tests/train/test_synthetic.py). Everything is driven by
one `random.Random`, so a seed gives the same documents on every machine.
"""

from __future__ import annotations

import functools
import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Split = str  # "train" | "test"
HELD_OUT = 0.3  # share of every phrasing/entity list kept for the test split


def pick(rng: random.Random, items: Sequence[Any], split: Split) -> Any:
    """Draw from the split's share of a list: the first 70 % for train, the rest for test."""
    cut = max(1, int(len(items) * (1 - HELD_OUT)))
    pool = items[:cut] if split == "train" or cut == len(items) else items[cut:]
    return rng.choice(pool)


FIRST = [
    "Maria", "James", "Aisha", "Tom", "Lena", "Carlos", "Yuki", "Priya", "Oliver", "Fatima",
    "Noah", "Elena", "Samuel", "Grace", "Ivan", "Chloe", "Mateo", "Hannah", "Kofi", "Sofia",
    "Daniel", "Amara", "Lucas", "Mei", "Jonas", "Leila", "Victor", "Nora", "Hugo", "Zara",
    "Peter", "Ingrid", "Omar", "Clara", "Rafael", "Alice", "Emil", "Rosa", "Felix", "Anya",
]  # fmt: skip
LAST = [
    "Garcia", "Smith", "Khan", "Brown", "Novak", "Silva", "Tanaka", "Patel", "Wright", "Haddad",
    "Miller", "Rossi", "Okafor", "Chen", "Petrov", "Dubois", "Lopez", "Weber", "Mensah", "Costa",
    "Walker", "Adeyemi", "Moreau", "Wang", "Berg", "Nasser", "Ivanova", "Lind", "Fischer", "Ali",
    "Hughes", "Larsen", "Sato", "Keller", "Romero", "Olsen", "Baker", "Morales", "Young", "Kim",
]  # fmt: skip
CITIES = [
    "Boston", "Denver", "Austin", "Seattle", "Chicago", "Phoenix", "Portland", "Atlanta",
    "Dallas", "Miami", "Detroit", "Memphis", "Omaha", "Tucson", "Fresno", "Boise", "Reno",
    "Tampa", "Raleigh", "Madison", "Spokane", "Lincoln", "Toledo", "Buffalo", "Orlando",
    "Houston", "Oakland", "Salem", "Dayton", "Eugene", "Mobile", "Akron", "Albany", "Topeka",
    "Laredo", "Irvine", "Tulsa", "Wichita", "Norfolk", "Durham",
]  # fmt: skip
DISTRACTORS = [
    "The weather that week had been unusually mild.",
    "I have been a customer for many years and usually have no complaints.",
    "Please let me know if you need any additional documents.",
    "My neighbour suggested I write to you directly.",
    "I can be reached by phone most afternoons.",
    "Thank you for your patience while I gathered everything.",
    "This is my first time dealing with a situation like this.",
    "I have attached copies of the relevant receipts.",
    "Sorry for the long message, I wanted to include all details.",
    "My reference number from the last call was lost, unfortunately.",
    "I would appreciate a quick answer if at all possible.",
    "Everything else about the service has been fine so far.",
]


def money(rng: random.Random, amount: int) -> str:
    style = rng.randrange(4)
    if style == 0:
        return f"${amount:,}"
    if style == 1:
        return f"{amount:,} dollars"
    if style == 2:
        return f"USD {amount:,}"
    return f"${amount}"


ONSETS = ["b", "br", "c", "ch", "d", "dr", "f", "g", "gr", "h", "j", "k", "kl", "l", "m", "n",
          "p", "pr", "r", "s", "sh", "st", "t", "tr", "v", "w", "y", "z"]  # fmt: skip
VOWELS = ["a", "e", "i", "o", "u", "ai", "ea", "ia", "io", "ou", "y"]
CODAS = ["", "", "", "n", "r", "l", "s", "m", "th", "x", "nd", "rt"]
ADJECTIVES = ["smart", "compact", "wireless", "portable", "electric", "digital", "classic",
              "foldable", "heated", "solar", "mini", "deluxe", "ergonomic", "steel", "glass",
              "cordless", "waterproof", "rechargeable", "outdoor", "kids", "travel", "gaming",
              "bamboo", "ceramic", "leather", "premium", "budget", "retro", "hybrid", "led"]  # fmt: skip
NOUNS = ["kettle", "scooter", "camera", "blender", "charger", "printer", "toaster", "heater",
         "drone", "tablet", "mixer", "jacket", "lantern", "grill", "laptop", "juicer", "fan",
         "projector", "microwave", "dishwasher", "thermostat", "doorbell", "mattress", "sofa",
         "bicycle", "helmet", "stroller", "tent", "watch", "earbuds", "smartphone", "console",
         "dehumidifier", "humidifier", "sewing machine", "hair dryer", "treadmill", "desk",
         "chair", "suitcase", "drill", "lawn mower", "fridge", "oven", "router cable", "mouse",
         "headset", "tripod", "guitar", "piano", "radio", "razor", "toothbrush", "scale"]  # fmt: skip
# Training entities: PROCEDURAL of them made up on the spot (several word pieces, never seen
# twice), the rest drawn from thousands of real first names, surnames and cities (data/entities,
# from Faker's locale data). Held-out entities are in neither. With large pools the model has to
# find an entity by its place in the document: neither "the odd-looking word" nor "one of 28
# names" works. (The first GPU model saw the 28 train-list entities in 20 % of its documents,
# each thousands of times, and answered them for held-out ones; the train lists are no longer
# drawn for training.) Ordinary words (WORD_LIST) are used for products only: as names and
# cities they taught the model that a name may be any word, and it answered other words of the
# document ("rosa education", "alice chef"; docs/bundled-model.md).
PROCEDURAL = 0.3
ENTITIES = Path(__file__).resolve().parent / "data" / "entities" / "entities.json"
WORD_LIST = ENTITIES.with_name("words.json")


@functools.cache
def real_pool() -> dict[str, list[str]]:
    """{"first": [...], "last": [...], "cities": [...]}: see data/entities/build.py."""
    return json.loads(ENTITIES.read_text())


@functools.cache
def word_pool() -> list[str]:
    """Lower-case English words, none of them part of a held-out entity (build_words.py): the
    names of training products, so that a product can be any noun, not one of NOUNS."""
    return json.loads(WORD_LIST.read_text())


def word(rng: random.Random) -> str:
    return rng.choice(word_pool())


def made_up_word(rng: random.Random) -> str:
    """A pronounceable word that is in no list: entities the model cannot memorise, only copy."""
    syllables = rng.randint(2, 3)
    word = "".join(rng.choice(ONSETS) + rng.choice(VOWELS) + rng.choice(CODAS)
                   for _ in range(syllables))  # fmt: skip
    return word[:10].capitalize()


def _source(rng: random.Random, split: Split) -> str:
    """Where a training name or city comes from: "made_up" or "real" ("list" for test)."""
    if split != "train":
        return "list"
    return "made_up" if rng.random() < PROCEDURAL else "real"


def person(rng: random.Random, split: Split) -> str:
    source = _source(rng, split)
    if source == "made_up":
        return f"{made_up_word(rng)} {made_up_word(rng)}"
    if source == "real":
        pool = real_pool()
        return f"{rng.choice(pool['first'])} {rng.choice(pool['last'])}"
    return f"{pick(rng, FIRST, split)} {pick(rng, LAST, split)}"


# Share of real training cities drawn from those the bundled vocabulary spells as one word piece.
# Drawn uniformly, only 11 % of training cities were one piece, against most real cities in
# letters (and 10 of the 12 held-out ones): a model trained so expected a city of two pieces or
# more and answered "was norfolk" or "albany recently" (docs/bundled-model.md, "Stage 4").
# Raised from 0.4 to 0.55 for stage 6: stage 5 still attached a neighbour to 24 of its 38 wrong
# held-out cities ("was wichita", "to tulsa").
ONE_PIECE_CITIES = 0.55


@functools.cache
def one_piece_cities() -> list[str]:
    """The real pool's cities that the bundled model's WordPiece vocabulary holds whole."""
    from tokenizers import Tokenizer

    from decide.jobs.models import BUNDLED

    tokenizer = Tokenizer.from_file(str(BUNDLED / "tokenizer.json"))
    cities = real_pool()["cities"]
    pieces = tokenizer.encode_batch(cities, add_special_tokens=False)
    return [c for c, e in zip(cities, pieces, strict=True) if len(e.ids) == 1]


def city(rng: random.Random, split: Split) -> str:
    source = _source(rng, split)
    if source == "made_up":
        prefix = rng.choice(["", "", "", "Port ", "New ", "San ", "Lake "])
        return prefix + made_up_word(rng)
    if source == "real":
        whole = rng.random() < ONE_PIECE_CITIES
        return rng.choice(one_piece_cities() if whole else real_pool()["cities"])
    return pick(rng, CITIES, split)


def product(rng: random.Random, split: Split) -> str:
    """Test products come from the held-out part of PRODUCTS; training ones are one or two
    ordinary words (25 %), a bare noun of NOUNS (20 %) or an adjective and a noun (55 %)."""
    if split != "train":
        return pick(rng, PRODUCTS, split)
    r = rng.random()
    if r < 0.25:
        named = word(rng) if rng.random() < 0.6 else f"{word(rng)} {word(rng)}"
    elif r < 0.45:
        named = rng.choice(NOUNS)
    else:
        named = f"{rng.choice(ADJECTIVES)} {rng.choice(NOUNS)}"
    return named if len(named) <= 20 else named.split()[-1]  # the product slot holds 20 characters


# Train-only cues: more ways to say which category a document belongs to. The held-out phrasings
# of the lists above stay the test split; these only widen what training sees, so the model has
# to learn what a category means instead of recalling two or three sentences.
TRAIN_CUES: dict[str, dict[str, list[str]]] = {
    "claim": {
        "auto": ["a delivery truck scraped the side of my car", "my motorbike was knocked over",
                 "the car was vandalised overnight", "a deer ran into our car on the highway",
                 "my parked car was hit by a cyclist", "our SUV hit a pothole and the axle broke",
                 "the bumper was torn off in a crash", "my hatchback was stolen from the street",
                 "a bus clipped my side mirror at a stop", "my car skidded on ice into a wall",
                 "a driver ran a red light and hit my car", "my scooter was hit by a taxi",
                 "a lorry reversed into my parked car", "the engine was wrecked in a crash on the motorway"],
        "home": ["water leaked through the bathroom floor", "burglars broke into our flat",
                 "lightning struck the chimney", "the boiler exploded in the cellar",
                 "a storm blew the fence into the garden shed", "mould spread after a leak in the attic",
                 "the kitchen caught fire while I was cooking", "our windows were shattered by hail",
                 "a burst radiator soaked the carpets", "thieves took the television from our lounge",
                 "the garage door was smashed by the wind", "subsidence cracked the walls of our house",
                 "the washing machine flooded the utility room", "a chimney fire damaged the roof"],
        "health": ["I needed physiotherapy after a fall", "my husband had a heart attack",
                   "I was hospitalised with appendicitis", "my son broke his leg at school",
                   "I needed an MRI scan and surgery on my knee", "I was treated for a severe infection",
                   "my mother needed an ambulance and a night in hospital", "I had a dental emergency",
                   "I was admitted to hospital with a kidney infection", "I spent three nights in hospital with the flu",
                   "my daughter had an allergic reaction and needed treatment", "I had surgery to remove my gallbladder",
                   "my doctor sent me for chest x-rays and medication", "I broke my wrist and needed a cast",
                   "my wife was diagnosed with diabetes and needs treatment", "I caught a bad virus and saw a specialist"],
        "travel": ["our flight was delayed by two days", "my suitcase arrived broken",
                   "the cruise was cancelled because of a storm", "my wallet was stolen on holiday",
                   "we missed our connecting train abroad", "the tour operator went bankrupt",
                   "I got sick on a business trip overseas", "the airline lost my bag in transit",
                   "my hotel booking was cancelled when we arrived", "our luggage went missing on the way to Spain",
                   "I had to fly home early from my holiday", "the ferry crossing was cancelled",
                   "my passport was stolen at the airport", "our holiday villa was double-booked"],
    },
    "purpose": {
        "home": ["to buy a house near my work", "to put a deposit on a flat",
                 "to build an extension to our house", "to buy a cottage",
                 "to replace the roof of my home", "to buy out my ex-partner's share of the house",
                 "to pay for repairs on my house", "to modernise the bathroom of our home",
                 "to move the family into a bigger home", "for the mortgage deposit on a townhouse"],
        "car": ["to buy a family minivan", "to purchase a second-hand hatchback",
                "to buy a car for commuting", "to pay for a new motorbike",
                "to finance a hybrid car", "to replace the car that was written off",
                "to buy a car", "for a reliable car to get to work",
                "to purchase a seven-seat vehicle", "to buy a new car for my wife"],
        "education": ["to pay university fees", "for my son's college tuition",
                      "to fund a teaching certificate", "to pay for a language course abroad",
                      "to cover law school tuition", "to study for an MBA",
                      "to take a software development course", "for evening classes in accounting",
                      "to pay for my PhD", "for a vocational training programme"],
        "business": ["to open a coffee shop", "to buy a food truck for my business",
                     "to hire two employees for my studio", "to fund stock for my boutique",
                     "to start a landscaping company", "to buy machines for my print shop",
                     "to grow my plumbing business", "to refurbish the shop I run",
                     "to open a second branch of my salon", "to buy stock for my market stall"],
    },
    "ticket": {
        "billing": ["I was billed after I cancelled", "the refund never showed up on my card",
                    "my monthly fee went up without notice", "I paid but the invoice says unpaid",
                    "the price I was charged is higher than advertised", "my card was debited three times",
                    "the VAT on my invoice is wrong", "I was charged for a plan I never chose",
                    "my promo code was ignored at checkout", "there is a fee on my statement I cannot explain",
                    "the payment went through twice", "my bill is higher than last month for no reason",
                    "I was not given the discount I was promised", "the coupon did not come off my invoice",
                    "I was overcharged on my last bill", "the loyalty discount is missing from my statement"],
        "technical": ["the software shows an error code on start", "the battery drains in an hour",
                      "the bluetooth pairing keeps failing", "the firmware update broke the device",
                      "the website gives me a blank page", "the sound cuts out every few minutes",
                      "the touchscreen stopped responding", "the app will not sync my data",
                      "the device will not turn on", "the app crashes when I open it",
                      "the printer keeps jamming", "the screen flickers after the update"],
        "shipping": ["the courier left my parcel in the rain", "only half of my order was delivered",
                     "the delivery is two weeks late", "I received someone else's package",
                     "the parcel is stuck at customs", "the driver never rang the bell",
                     "my order shows delivered but nothing came", "the item arrived with parts missing",
                     "the packaging was crushed and the contents broken", "the delivery date keeps moving",
                     "the parcel went back to the warehouse", "the courier has had my parcel for ten days",
                     "the tracking number does not work", "the parcel has not moved in days",
                     "there has been no delivery update since Monday", "the shipment status is stuck"],
        "account": ["I want to change my username", "please delete my profile and data",
                    "my account was locked after too many attempts", "I need to merge two accounts",
                    "I want to change the phone number on my account", "someone else logged into my account",
                    "I cannot verify my email address", "please transfer my account to my wife",
                    "I cannot log in to my account", "I forgot my password and the link never arrives",
                    "I need to change the address on my profile", "please update the email on my account",
                    "my login details no longer work", "I want to change the billing details on my profile"],
    },
    # Stage 6 read the held-out "I once failed to repay a personal loan." as no default in 11 of
    # 12 documents: the train part of the list says "repaid" only in "I have always repaid my
    # debts on time". Written after reading that error; none repeats a held-out sentence.
    "default": {
        "yes": ["I fell behind on a credit card and it went to collections.",
                "A bank wrote off a loan of mine a few years back.",
                "I could not pay back a student loan and it defaulted.",
                "My mortgage went into default in 2018.", "I have a default on my credit file.",
                "I stopped paying a car loan when I lost my job.",
                "A previous lender took me to court over unpaid debt.",
                "I did not repay a payday loan on time and it was sent to an agency.",
                "Two years ago I was unable to repay what I owed.", "I have defaulted once before."],
        "no": ["I have paid every loan back in full.", "Every loan I took was repaid on schedule.",
               "My credit file is clean.", "I have never been late on a payment.",
               "No lender has ever chased me for money.", "I repaid my student loan early.",
               "All my previous loans were paid off without problems.",
               "I have no history of unpaid debt.", "My record shows no missed payments.",
               "I have always paid what I owe on time."],
    },
    "employed": {
        "yes": ["I work full time at a hospital.", "I have a steady job as an accountant.",
                "I am a salaried mechanic at a garage.", "My employer is a large bank.",
                "I have been in my current job for a while.", "I work for a logistics company.",
                "I am on a permanent contract.", "I teach at a high school.",
                "I am employed as a bus driver.", "I work as a chef in a hotel.",
                "I have been employed by a bank for years.", "I have a job in retail."],
        "no": ["I am out of work at the moment.", "My contract ended and I have no job yet.",
               "I was laid off last month.", "I am looking for work right now.",
               "I have had no employment since the summer.", "I am jobless at present.",
               "My last job ended in March.", "I currently have no employer.",
               "I am unemployed.", "I am not working at the moment.",
               "I became unemployed last year.", "I have had no job since the factory closed."],
    },
    "active": {
        "yes": ["My policy is in good standing.", "I pay my premiums monthly and the policy is valid.",
                "The policy runs until next December.", "My cover is active.",
                "The contract is in effect and paid up.", "I have had continuous cover with you for years.",
                "My insurance is valid.", "The premiums are paid and my cover is live."],
        "no": ["My policy was terminated last month.", "The coverage has lapsed.",
               "My insurance is no longer valid.", "The policy was put on hold after a missed payment.",
               "My cover was stopped in February.", "The insurer cancelled my policy last year.",
               "I have not had valid cover since the summer.", "My policy is not in force any more."],
    },
    "urgent": {
        "yes": ["Please handle this right away.", "I need a reply by tomorrow at the latest.",
                "This cannot wait.", "Time is critical here, please hurry.",
                "I rely on it for my job, so please be quick.", "Please escalate this, it is urgent.",
                "We need a solution before Friday.", "I am in a hurry, please answer quickly.",
                "Every day without it costs me money, so please be fast.",
                "Please prioritise this, I have no other option.",
                "This is an urgent request.", "Urgent: I need help today.",
                "My case is urgent, I cannot work without it.", "I need this sorted urgently."],
        "no": ["Answer whenever it suits you.", "This can wait until next week.",
               "There is no deadline on my side.", "It is not a pressing matter.",
               "Nothing here is time-sensitive.", "Reply at your convenience.",
               "Feel free to look into it later.", "It is only a minor issue, so no rush.",
               "Please deal with it when you get the chance.", "I am not in a hurry.",
               "This is not an urgent request.", "Nothing urgent, just letting you know.",
               "It can wait, it is not urgent at all.", "No urgency here."],
    },
    "refund": {
        "yes": ["I expect my money to be returned.", "Please give me my money back.",
                "I am requesting a refund.", "Refund the full price to my card, please.",
                "I would prefer a refund over a replacement.", "Send the money back to my account.",
                "I want the money returned, not a replacement.", "Please credit the price back.",
                "My money should be refunded.", "A refund of the full amount, please."],
        "no": ["I am not interested in a refund.", "Keep the money, just repair it.",
               "A replacement is fine, no refund needed.", "I do not need my money back.",
               "I prefer a repair to a refund.", "Refunding me will not help, I need it working.",
               "I am not looking for a refund.", "Money back is not what I want.",
               "Please fix it instead of refunding it.", "No refund, please, just a working product."],
    },
}  # fmt: skip
# Train-only phrasings of where a document places its city and product: the lists above put a
# city last in its sentence ("I live in Boston.") and a product after "the", so a model trained
# on them alone learned that a city ends at a full stop and answered "irvine at" or "albany
# recently" when a held-out sentence went on after the city, and missed "My monitor order ...".
# Written after reading those held-out errors (docs/bundled-model.md, "Stage 4"); none of them
# repeats a held-out sentence: they put the entity mid-sentence, first, or after other words.
TRAIN_PHRASINGS: dict[str, list[str]] = {
    "claim_place": [
        "It happened just outside {place} on a Sunday.", "{place} is where the incident took place.",
        "The accident was in {place}, near my office.", "We were staying in {place} that weekend.",
        "I was driving through {place} when it happened.", "Everything happened in {place} last month.",
        "I was visiting {place} for work when this happened.", "The event took place in central {place}.",
        "It occurred in {place} around noon.", "The city where it happened is {place}.",
        "This took place in {place} during a family visit.", "Our house in {place} is where it started.",
        "We were on the road near {place} that evening.", "In {place}, on a busy street, it all went wrong.",
        # the city after "was"/"to" (stage 5 answered "was wichita", "to tulsa")
        "The nearest town was {place}.", "At the time my address was {place}.", "We had just moved to {place}.",
        "I was driving to {place} that morning.", "Where it happened? That was {place}, downtown.",
    ],
    "loan_place": [
        "My home is in {place}, where I rent a flat.", "I have been living in {place} for six years.",
        "Our family settled in {place} two years ago.", "{place} has been my home since 2015.",
        "I rent an apartment in {place} with my partner.", "I currently reside in {place} and work nearby.",
        "I grew up in {place} and still live there.", "My house is in {place}, close to the station.",
        "Home for us is {place}.", "We own a small house in {place} near the park.",
        "My current address is in {place}, on the east side.", "I share a flat in {place} with a friend.",
    ],
    "product": [
        "I ordered a {item} {days} days ago.", "My new {item} arrived {days} days ago.",
        "{days} days ago I purchased a {item} from your store.", "This is about the {item} I got {days} days ago.",
        "I have had my {item} for {days} days now.", "The purchase of my {item} was {days} days ago.",
        "It is about my {item}, bought {days} days ago.", "A {item} was delivered to me {days} days ago.",
        "Product: {item}, purchased {days} days ago.", "Your {item} reached me {days} days ago.",
        "My {item} was bought online {days} days ago.", "The {item} in question is {days} days old.",
        # a head noun after the product (stage 5 answered "speaker order" for "My speaker order")
        "The {item} delivery reached me {days} days ago.", "I got the {item} package {days} days ago.",
        "My {item} purchase was made {days} days ago.", "The {item} box came {days} days ago.",
        "{days} days ago my {item} parcel arrived.", "The {item} warranty started {days} days ago.",
    ],
    # Train-only amount sentences where words follow the amount: stage 5 dropped or changed a
    # trailing zero of a round amount when a clause went on after it ("$850, which ..." -> 85).
    "claim_amount": [
        "The bill came to {amount}, which I paid myself.", "I paid {amount} for the repairs, as the receipt shows.",
        "The garage charged {amount}, and I have the invoice.", "Repairs cost me {amount} in total, parts included.",
        "{amount} is what I am asking you to cover.", "I would like {amount} back for the damage.",
        "An estimate of {amount} came from a local contractor.", "My expenses reached {amount}, according to my receipts.",
        "The clinic asked for {amount}, which I settled last week.", "I spent {amount} on replacements and would like it refunded.",
        "A total of {amount} is being claimed here.", "The cost, {amount}, was paid out of my savings.",
    ],
}  # fmt: skip


def phrasing(rng: random.Random, items: list[str], kind: str, split: Split, **values: Any) -> str:
    """`widen` with the train-only sentences of `TRAIN_PHRASINGS[kind]`, formatted with `values`."""
    return widen(rng, items, [t.format(**values) for t in TRAIN_PHRASINGS[kind]], split)


# Train-only sentences that use a category's words about something else ("I work from home",
# "my account manager"), so a keyword elsewhere in the document stops deciding the category:
# the model has to read the sentence that states it.
TRAIN_DISTRACTORS = [
    "I am writing from home today.", "I work from home most days.",
    "My account manager told me to write to you.", "I have had an account with you since 2015.",
    "My billing details have not changed.", "My kids are at school until three.",
    "I used to work at a school.", "I came to the office by car.",
    "My car is in the garage for a service.", "My sister works at a hospital.",
    "I travel a lot for work.", "I run a small business on the side.",
    "I usually pick up deliveries at the post office.", "I am not very technical, sorry.",
    "My health has been fine lately.", "We are planning a trip in the summer.",
    "I shop online a lot.", "My business partner is copied on this message.",
    "The city tax office has my details.", "My order number is on the receipt.",
    "I bought it online with my card.", "The name on the account is mine.",
    "The city centre was very busy that day.", "My number has not changed.",
]  # fmt: skip
TRAIN_CUE_SHARE = 0.6  # of training documents whose cue comes from TRAIN_CUES


def widen(rng: random.Random, items: list[str], extra: list[str], split: Split) -> str:
    """A phrasing from `items` as `pick` draws it (test documents only ever see the held-out
    part, drawn exactly as before), or for training documents often one of `extra`."""
    if split == "train" and rng.random() < TRAIN_CUE_SHARE:
        return rng.choice(extra)
    return pick(rng, items, split)


def cue(rng: random.Random, lists: dict[str, list[str]], kind: str, key: str, split: Split) -> str:
    """A sentence cue for category `key` of `lists`, widened in training by TRAIN_CUES[kind]."""
    return widen(rng, lists[key], TRAIN_CUES[kind][key], split)


@dataclass(frozen=True)
class Domain:
    name: str
    questions: list[dict[str, Any]]  # job-format questions (id, text, schema)
    sample: Callable[[random.Random, Split], tuple[str, dict[str, Any]]]


def name_fact(rng: random.Random, name: str, split: Split) -> str:
    return pick(
        rng,
        [
            f"My name is {name}.",
            f"I am {name}.",
            f"This is {name} writing.",
            f"{name} here.",
            f"I, {name}, am the account holder.",
            f"My full name is {name}.",
            f"You can reach me as {name}.",
        ],
        split,
    )


def _assemble(
    rng: random.Random,
    split: Split,
    facts: list[str],
    *,
    greeting: str,
    closing: str,
    form: list[tuple[str, str]],
) -> str:
    """Lay facts out as a narrative, an e-mail or a form, with distractors in between."""
    layouts = ["narrative", "email", "form", "narrative-2", "email-2"]
    layout = pick(rng, layouts, split)
    facts = list(facts)
    rng.shuffle(facts)
    for _ in range(rng.randint(1, 2)):
        facts.insert(rng.randrange(len(facts) + 1), rng.choice(DISTRACTORS))
    if split == "train":
        for _ in range(rng.randint(0, 2)):
            facts.insert(rng.randrange(len(facts) + 1), rng.choice(TRAIN_DISTRACTORS))
    if layout == "form":
        lines = [f"{key}: {value}" for key, value in form]
        rng.shuffle(lines)
        return "\n".join(lines) + "\nNotes: " + " ".join(facts)
    if layout.startswith("email"):
        body = " ".join(facts)
        sep = "\n\n" if layout == "email" else "\n"
        return f"{greeting}{sep}{body}{sep}{closing}"
    if layout == "narrative-2":
        half = len(facts) // 2
        return " ".join(facts[:half]) + "\n\n" + " ".join(facts[half:])
    return " ".join(facts)


# --------------------------------------------------------------------------- insurance claims
CLAIM_TYPES = {
    "auto": ["my car was hit in a parking lot", "our vehicle was rear-ended at a junction",
             "the car's windshield was smashed", "my truck slid into a ditch",
             "someone backed into my car", "the van was damaged in a collision"],
    "home": ["a pipe burst and flooded the kitchen", "the roof was damaged in a storm",
             "a fire started in the garage", "our basement flooded after heavy rain",
             "a tree fell onto the house", "the living room ceiling collapsed"],
    "health": ["I needed emergency surgery", "my daughter was admitted to hospital",
               "I broke my wrist and needed a cast", "I had to stay in a clinic for a week",
               "my son needed stitches at the ER", "I was treated for pneumonia"],
    "travel": ["my luggage was lost on a flight", "our trip was cancelled at the last minute",
               "my passport was stolen abroad", "the airline cancelled our connection",
               "I fell ill during a holiday abroad", "our hotel booking fell through"],
}  # fmt: skip


ROUND_AMOUNTS = 0.3  # share of training claims whose amount is a round hundred or thousand
SMALL_AMOUNTS = 0.1  # of the other training claims, whose amount has three digits


def _claim(rng: random.Random, split: Split) -> tuple[str, dict[str, Any]]:
    claim_type = rng.choice(sorted(CLAIM_TYPES))
    name, place = person(rng, split), city(rng, split)
    limit = rng.choice([5000, 10000, 15000, 20000, 25000, 50000])
    amount = rng.randint(200, 60000) if rng.random() < 0.5 else rng.randint(200, limit)
    if split == "train" and rng.random() < ROUND_AMOUNTS:
        # People claim round sums too ("7,000 dollars"); the test amounts rarely are, and models
        # trained without round ones dropped a trailing zero of "7,000" (700).
        amount = max(100, round(amount, rng.choice([-2, -3])))
    elif split == "train" and rng.random() < SMALL_AMOUNTS:
        # Stage 6 read "I claim 400 dollars" as 4000: amounts under 1,000 were 1 % of training.
        amount = rng.randint(100, 999)
    active, police = rng.random() < 0.7, rng.random() < 0.5
    over = amount > limit
    event = cue(rng, CLAIM_TYPES, "claim", claim_type, split)
    # only training draws it, so test documents consume the generator exactly as before
    written = money(rng, amount) if split == "train" else ""
    facts = [
        name_fact(rng, name, split),
        pick(
            rng,
            [
                f"On the night in question {event}.",
                f"I am writing because {event}.",
                f"Last month {event}.",
                f"Unfortunately {event}.",
                f"I need to report that {event}.",
                f"Earlier this week {event}.",
                f"As you may know, {event}.",
            ],
            split,
        ),
        phrasing(
            rng,
            [
                f"The total damage comes to {money(rng, amount)}.",
                f"I am claiming {money(rng, amount)}.",
                f"The repair estimate is {money(rng, amount)}.",
                f"My costs so far add up to {money(rng, amount)}.",
                f"The amount claimed is {money(rng, amount)}.",
                f"Altogether I paid {money(rng, amount)}.",
                f"The invoice I received totals {money(rng, amount)}.",
            ],
            "claim_amount",
            split,
            amount=written,
        ),
        pick(
            rng,
            [
                f"My policy covers up to {money(rng, limit)}.",
                f"The coverage limit on my policy is {money(rng, limit)}.",
                f"According to my contract the maximum payout is {money(rng, limit)}.",
                f"The policy limit is {money(rng, limit)}.",
                f"I believe my plan pays at most {money(rng, limit)}.",
                f"Coverage is capped at {money(rng, limit)}.",
                f"My plan has a limit of {money(rng, limit)}.",
            ],
            split,
        ),
        widen(
            rng,
            [
                "My policy is active and all premiums are paid.",
                "The policy is currently in force.",
                "I renewed my policy in January.",
                "My coverage is up to date.",
                "All payments on the policy are current.",
                "The policy has been active for three years.",
                "My policy is valid and paid in full.",
            ]
            if active
            else [
                "My policy lapsed last spring because of a missed payment.",
                "The policy is not active at the moment.",
                "I let the coverage expire in March.",
                "My policy was cancelled before this happened.",
                "I forgot to renew, so the policy has expired.",
                "The policy ended last year and was not renewed.",
                "My policy is currently suspended.",
            ],
            TRAIN_CUES["active"]["yes" if active else "no"],
            split,
        ),
        pick(
            rng,
            [
                "A police report was filed the same day.",
                "The police came and wrote a report.",
                "I reported it to the police right away.",
                "There is an official police report.",
                "Officers filed a report at the scene.",
                "I have a copy of the police report.",
                "The incident was reported to the police.",
            ]
            if police
            else [
                "No police report was filed.",
                "I did not contact the police.",
                "There is no police report for this.",
                "The police were not involved.",
                "Nobody called the police.",
                "I never filed a report with the police.",
                "We did not report it to the police.",
            ],
            split,
        ),
        phrasing(
            rng,
            [
                f"This happened in {place}.",
                f"I live in {place}.",
                f"The incident took place in {place}.",
                f"It all happened near {place}.",
                f"Our home is in {place}.",
                f"I was in {place} at the time.",
                f"The location was {place}.",
            ],
            "claim_place",
            split,
            place=place,
        ),
    ]
    greeting = pick(
        rng,
        [
            "Dear claims team,",
            "Hello,",
            "To whom it may concern,",
            "Hi there,",
            "Dear Sir or Madam,",
        ],
        split,
    )
    closing = pick(
        rng,
        [
            f"Regards,\n{name}",
            f"Best wishes,\n{name}",
            f"Thank you,\n{name}",
            f"Sincerely,\n{name}",
            f"Kind regards,\n{name}",
        ],
        split,
    )
    form = [
        ("Policyholder", name),
        ("City", place),
        ("Claim amount", money(rng, amount)),
        ("Policy limit", money(rng, limit)),
    ]
    gold = {
        "claim_type": claim_type,
        "claimant": name,
        "city": place,
        "amount": amount,
        "policy_limit": limit,
        "policy_active": active,
        "police_report": police,
        "over_limit": over,
        "eligible": active and not over,
    }
    return _assemble(rng, split, facts, greeting=greeting, closing=closing, form=form), gold


CLAIM_QUESTIONS = [
    {"id": "claim_type", "text": "What kind of claim is this?",
     "schema": {"enum": ["auto", "home", "health", "travel"]}},
    {"id": "claimant", "text": "What is the claimant's full name?",
     "schema": {"type": "string", "minLength": 3, "maxLength": 24}},
    {"id": "city", "text": "In which city did it happen?",
     "schema": {"type": "string", "minLength": 2, "maxLength": 16}},
    {"id": "amount", "text": "How many dollars are claimed?",
     "schema": {"type": "integer", "minimum": 0, "maximum": 100000}},
    {"id": "policy_limit", "text": "What is the policy limit in dollars?",
     "schema": {"type": "integer", "minimum": 0, "maximum": 100000}},
    {"id": "policy_active", "text": "Is the policy active?", "schema": {"type": "boolean"}},
    {"id": "police_report", "text": "Was a police report filed?", "schema": {"type": "boolean"}},
    {"id": "over_limit", "text": "Does the claimed amount exceed the policy limit?",
     "schema": {"type": "boolean"}},
    {"id": "eligible", "text": "Is the claim eligible (active policy, amount within the limit)?",
     "schema": {"type": "boolean"}},
]  # fmt: skip

# --------------------------------------------------------------------------- loan applications
PURPOSES = {
    "home": ["to buy our first house", "for the down payment on an apartment",
             "to renovate the family home", "to purchase a small condo"],
    "car": ["to buy a used car", "to replace my old vehicle", "for a new pickup truck",
            "to finance an electric car"],
    "education": ["to pay for a master's degree", "for my daughter's tuition",
                  "to cover nursing school fees", "for a coding bootcamp"],
    "business": ["to open a small bakery", "to buy equipment for my workshop",
                 "to expand my cleaning company", "to stock my online shop"],
}  # fmt: skip


def _loan(rng: random.Random, split: Split) -> tuple[str, dict[str, Any]]:
    purpose = rng.choice(sorted(PURPOSES))
    name, place = person(rng, split), city(rng, split)
    income = rng.randrange(18000, 150000, 500)
    requested = rng.randrange(1000, 90000, 250)
    employed, defaults = rng.random() < 0.7, rng.random() < 0.3
    years = rng.randint(1, 30)
    affordable = requested <= income
    facts = [
        name_fact(rng, name, split),
        pick(
            rng,
            [
                f"I would like to borrow {money(rng, requested)} {cue(rng, PURPOSES, 'purpose', purpose, split)}.",
                f"I am applying for a loan of {money(rng, requested)} {cue(rng, PURPOSES, 'purpose', purpose, split)}.",
                f"The loan I need is {money(rng, requested)}, {cue(rng, PURPOSES, 'purpose', purpose, split)}.",
                f"Please consider my request for {money(rng, requested)} {cue(rng, PURPOSES, 'purpose', purpose, split)}.",
                f"I need {money(rng, requested)} {cue(rng, PURPOSES, 'purpose', purpose, split)}.",
            ],
            split,
        ),
        pick(
            rng,
            [
                f"My annual income is {money(rng, income)}.",
                f"I earn {money(rng, income)} a year.",
                f"My yearly salary is {money(rng, income)}.",
                f"Our household brings in {money(rng, income)} per year.",
                f"Last year I made {money(rng, income)}.",
            ],
            split,
        ),
        widen(
            rng,
            [
                f"I have worked at the same company for {years} years.",
                "I am employed full time as a nurse.",
                "I currently work as an engineer.",
                "I have a permanent position at a local school.",
                "I am employed by the city council.",
            ]
            if employed
            else [
                "I am currently between jobs.",
                "I lost my job in the spring.",
                "At the moment I am not employed.",
                "I have been unemployed since January.",
                "I do not have a job right now.",
            ],
            TRAIN_CUES["employed"]["yes" if employed else "no"],
            split,
        ),
        widen(
            rng,
            [
                "I defaulted on a car loan two years ago.",
                "I missed several payments on a previous loan.",
                "There is a past default on my credit record.",
                "I once failed to repay a personal loan.",
                "My credit history shows a default from 2019.",
            ]
            if defaults
            else [
                "I have never missed a loan payment.",
                "My credit record has no defaults.",
                "I have always repaid my debts on time.",
                "There are no defaults in my history.",
                "I have never defaulted on any loan.",
            ],
            TRAIN_CUES["default"]["yes" if defaults else "no"],
            split,
        ),
        phrasing(
            rng,
            [
                f"I live in {place}.",
                f"I am based in {place}.",
                f"My address is in {place}.",
                f"We moved to {place} recently.",
                f"I have lived in {place} all my life.",
            ],
            "loan_place",
            split,
            place=place,
        ),
    ]
    greeting = pick(
        rng,
        ["Dear loan officer,", "Hello,", "Dear bank,", "Good morning,", "To the lending team,"],
        split,
    )
    closing = pick(
        rng,
        [
            f"Yours,\n{name}",
            f"Regards,\n{name}",
            f"Thanks,\n{name}",
            f"Best,\n{name}",
            f"Sincerely,\n{name}",
        ],
        split,
    )
    form = [
        ("Applicant", name),
        ("City", place),
        ("Requested", money(rng, requested)),
        ("Annual income", money(rng, income)),
    ]
    gold = {
        "purpose": purpose,
        "applicant": name,
        "city": place,
        "requested": requested,
        "income": income,
        "employed": employed,
        "prior_default": defaults,
        "within_income": affordable,
        "approve": employed and not defaults and affordable,
    }
    return _assemble(rng, split, facts, greeting=greeting, closing=closing, form=form), gold


LOAN_QUESTIONS = [
    {"id": "purpose", "text": "What is the loan for?",
     "schema": {"enum": ["home", "car", "education", "business"]}},
    {"id": "applicant", "text": "What is the applicant's full name?",
     "schema": {"type": "string", "minLength": 3, "maxLength": 24}},
    {"id": "city", "text": "Where does the applicant live?",
     "schema": {"type": "string", "minLength": 2, "maxLength": 16}},
    {"id": "requested", "text": "How many dollars are requested?",
     "schema": {"type": "integer", "minimum": 0, "maximum": 200000}},
    {"id": "income", "text": "What is the annual income in dollars?",
     "schema": {"type": "integer", "minimum": 0, "maximum": 500000}},
    {"id": "employed", "text": "Is the applicant employed?", "schema": {"type": "boolean"}},
    {"id": "prior_default", "text": "Has the applicant defaulted before?",
     "schema": {"type": "boolean"}},
    {"id": "within_income", "text": "Is the requested amount at most the annual income?",
     "schema": {"type": "boolean"}},
    {"id": "approve", "text": "Approve (employed, no default, amount within income)?",
     "schema": {"type": "boolean"}},
]  # fmt: skip

# --------------------------------------------------------------------------- support tickets
TICKETS = {
    "billing": ["I was charged twice for my subscription", "my invoice shows the wrong amount",
                "I see a charge I do not recognise", "the discount was not applied to my bill"],
    "technical": ["the app crashes every time I open it", "I cannot log in since the update",
                  "the device will not connect to wifi", "the screen keeps freezing"],
    "shipping": ["my package never arrived", "the parcel was delivered to the wrong address",
                 "the box arrived damaged", "tracking has not updated for a week"],
    "account": ["I want to change the email on my account", "please close my account",
                "I need to update my billing address", "I cannot reset my password"],
}  # fmt: skip
PRODUCTS = [
    "wireless headphones", "coffee maker", "smart watch", "desk lamp", "blender", "router",
    "phone case", "electric kettle", "fitness tracker", "keyboard", "backpack", "speaker",
    "air purifier", "robot vacuum", "webcam", "monitor",
]  # fmt: skip


def _ticket(rng: random.Random, split: Split) -> tuple[str, dict[str, Any]]:
    category = rng.choice(sorted(TICKETS))
    name, item = person(rng, split), product(rng, split)
    days = rng.randint(1, 90)
    urgent, refund = rng.random() < 0.35, rng.random() < 0.5
    issue = cue(rng, TICKETS, "ticket", category, split)
    facts = [
        name_fact(rng, name, split),
        pick(
            rng,
            [
                f"I am contacting you because {issue}.",
                f"The problem is that {issue}.",
                f"Since yesterday {issue}.",
                f"I noticed that {issue}.",
                f"It seems that {issue}.",
            ],
            split,
        ),
        phrasing(
            rng,
            [
                f"I bought the {item} {days} days ago.",
                f"The {item} was purchased {days} days ago.",
                f"It has been {days} days since I ordered the {item}.",
                f"My {item} order is {days} days old.",
                f"I received the {item} {days} days ago.",
            ],
            "product",
            split,
            item=item,
            days=days,
        ),
        widen(
            rng,
            [
                "This is urgent, please respond today.",
                "I need this fixed immediately.",
                "Please treat this as a high priority.",
                "It is urgent for my work.",
                "I need an answer as soon as possible, it is urgent.",
            ]
            if urgent
            else [
                "There is no rush on this.",
                "Whenever you have time is fine.",
                "It is not urgent.",
                "No hurry, just wanted to let you know.",
                "Take your time with this one.",
            ],
            TRAIN_CUES["urgent"]["yes" if urgent else "no"],
            split,
        ),
        widen(
            rng,
            [
                "I would like a full refund.",
                "Please refund my money.",
                "I am asking for my money back.",
                "I want a refund for this purchase.",
                "Could you process a refund?",
            ]
            if refund
            else [
                "I do not want a refund, just a fix.",
                "A refund is not necessary.",
                "I am not asking for my money back.",
                "Please do not refund me, I want it solved.",
                "I would rather keep the product than get a refund.",
            ],
            TRAIN_CUES["refund"]["yes" if refund else "no"],
            split,
        ),
    ]
    greeting = pick(
        rng,
        ["Hi support,", "Hello team,", "Dear customer service,", "Hey,", "Good afternoon,"],
        split,
    )
    closing = pick(
        rng,
        [
            f"Cheers,\n{name}",
            f"Thanks,\n{name}",
            f"Regards,\n{name}",
            f"Best,\n{name}",
            f"Many thanks,\n{name}",
        ],
        split,
    )
    form = [("Customer", name), ("Product", item), ("Days since purchase", str(days))]
    gold = {
        "category": category,
        "customer": name,
        "product": item,
        "days_since_purchase": days,
        "urgent": urgent,
        "refund_requested": refund,
        "refund_eligible": refund and days <= 30,
        "priority": "high"
        if urgent
        else ("medium" if category in ("billing", "technical") else "low"),
    }
    return _assemble(rng, split, facts, greeting=greeting, closing=closing, form=form), gold


TICKET_QUESTIONS = [
    {"id": "category", "text": "Which team should handle the ticket?",
     "schema": {"enum": ["billing", "technical", "shipping", "account"]}},
    {"id": "customer", "text": "What is the customer's full name?",
     "schema": {"type": "string", "minLength": 3, "maxLength": 24}},
    {"id": "product", "text": "Which product is it about?",
     "schema": {"type": "string", "minLength": 3, "maxLength": 20}},
    {"id": "days_since_purchase", "text": "How many days ago was the purchase?",
     "schema": {"type": "integer", "minimum": 0, "maximum": 365}},
    {"id": "urgent", "text": "Is the customer asking for urgent handling?",
     "schema": {"type": "boolean"}},
    {"id": "refund_requested", "text": "Does the customer want a refund?",
     "schema": {"type": "boolean"}},
    {"id": "refund_eligible", "text": "Is a refund due (requested within 30 days of purchase)?",
     "schema": {"type": "boolean"}},
    {"id": "priority", "text": "What priority should the ticket get?",
     "schema": {"enum": ["low", "medium", "high"]}},
]  # fmt: skip

DOMAINS = {
    "claims": Domain("claims", CLAIM_QUESTIONS, _claim),
    "loans": Domain("loans", LOAN_QUESTIONS, _loan),
    "tickets": Domain("tickets", TICKET_QUESTIONS, _ticket),
}
# Which answers restate the document and which are derived from several facts.
DERIVED = {"over_limit", "eligible", "within_income", "approve", "refund_eligible", "priority"}
# Answers implied by others, checked by the "joint vs separate" benchmark.
DEPENDENCIES: dict[str, Callable[[dict[str, Any]], bool]] = {
    "eligible": lambda a: a["eligible"] == (a["policy_active"] and not a["over_limit"]),
    "over_limit": lambda a: a["over_limit"] == (a["amount"] > a["policy_limit"]),
    "approve": lambda a: a["approve"] == (a["employed"] and not a["prior_default"] and a["within_income"]),
    "within_income": lambda a: a["within_income"] == (a["requested"] <= a["income"]),
    "refund_eligible": lambda a: a["refund_eligible"] == (a["refund_requested"] and a["days_since_purchase"] <= 30),
}  # fmt: skip
# The answers each dependency reads.
DEPENDENCY_INPUTS: dict[str, set[str]] = {
    "eligible": {"policy_active", "over_limit"},
    "over_limit": {"amount", "policy_limit"},
    "approve": {"employed", "prior_default", "within_income"},
    "within_income": {"requested", "income"},
    "refund_eligible": {"refund_requested", "days_since_purchase"},
}


def sample_document(
    rng: random.Random, split: Split, domain: str | None = None, min_q: int = 4, max_q: int = 9
) -> tuple[str, str, list[dict[str, Any]], dict[str, Any]]:
    """(domain, document, questions, gold answers): 4–9 of the domain's questions (nine make
    two blocks), in their defined order, with the gold value of each."""
    name = domain or rng.choice(sorted(DOMAINS))
    spec = DOMAINS[name]
    text, gold = spec.sample(rng, split)
    count = rng.randint(min_q, min(max_q, len(spec.questions)))
    chosen = sorted(rng.sample(range(len(spec.questions)), count))
    questions = [spec.questions[i] for i in chosen]
    return name, text, questions, {q["id"]: gold[q["id"]] for q in questions}


def derived_drill(
    rng: random.Random, split: Split, weights: dict[str, float] | None = None
) -> tuple[str, list[dict[str, Any]], dict[str, Any], set[str]]:
    """(document, questions, gold answers, given): one derived question of `DEPENDENCY_INPUTS`
    asked after exactly its inputs, whose answers are given (never masked in training).
    `weights` (by derived question, default 1) chooses which derived question is drilled.
    A derived answer trained only with its inputs masked learns to answer from the document's
    words (the bundled model's `over_limit` stayed at its majority value for every CPU stage);
    with the inputs' answers in the block it learns to read them (docs/bundled-model.md,
    "Comparisons"). The drill is bare on purpose: its one maskable slot carries the row's whole
    loss, where in a whole document it would carry one slot's share (a drill of eight questions
    left `over_limit` at its majority value after 500 steps)."""
    names = sorted(DEPENDENCY_INPUTS)
    chance = [1.0 if weights is None else weights.get(name, 1.0) for name in names]
    derived = rng.choices(names, weights=chance)[0]
    domain = next(d for d in DOMAINS.values() if any(q["id"] == derived for q in d.questions))
    text, gold = domain.sample(rng, split)
    given = set(DEPENDENCY_INPUTS[derived])
    questions = [q for q in domain.questions if q["id"] in given | {derived}]  # inputs first
    return text, questions, {q["id"]: gold[q["id"]] for q in questions}, given
