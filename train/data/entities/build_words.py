"""Rebuild `words.json`: ordinary English words that training documents use as product names,
so the model learns to copy whatever noun a customer writes, not one of a short list (the
held-out test products are words it never saw as answers: "monitor", "speaker"; a model trained
on 54 nouns answered "monitors", "speakers"). Names and cities do not use it: as names, ordinary
words taught a model that a name may be any word of the document.

The words are the whole-word entries of BERT's uncased WordPiece vocabulary (Apache-2.0, as
shipped with all-MiniLM-L6-v2 and in decide/model/tokenizer.json; see LICENSE-words): lower-case
letters only, 4 to 10 of them, past the 1,004 most frequent words (ids below 3000: "the", "and",
"which" are poor product names and would teach the model that one may run into the next
words), and never a word of a held-out test entity. Each is one word piece, as most test
entities are.

    python train/data/entities/build_words.py [path/to/tokenizer.json]
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from decide.train import synthetic

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]


def held_out_words() -> set[str]:
    words: set[str] = set()
    for kind in ("first", "last", "cities", "products"):
        for entity in synthetic.entity_list(kind).held_out:
            words.update(entity.casefold().split())
    return words


def main() -> None:
    default = ROOT / "decide" / "model" / "tokenizer.json"
    source = Path(sys.argv[1]) if len(sys.argv) > 1 else default
    vocab = json.loads(source.read_text())["model"]["vocab"]
    excluded = held_out_words()
    words = sorted(
        w
        for w, i in vocab.items()
        if i >= 3000 and re.fullmatch(r"[a-z]{4,10}", w) and w not in excluded
    )
    (HERE / "words.json").write_text(json.dumps(words, separators=(",", ":")) + "\n")
    print(f"{len(words):,} words -> {HERE / 'words.json'}")


if __name__ == "__main__":
    main()
