"""Documents as pandas and numpy hand them to `decide_many`: a numpy key (`dict(zip(array,
texts))`) used to stay a numpy scalar, whose `repr` (`np.str_('a')`, numpy 2) seeded its
sampled document differently from the same id in a parquet job; categorical texts and their
missing values (NaN) decide as plain ones."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers.jobdata import QUESTIONS

from decide import Decider
from decide.jobs import decisions

QS = QUESTIONS[:2]
TEXTS = ["A car claim in Boston.", "Water damage at home."]


@pytest.fixture(scope="module")
def decider(tiny_checkpoint) -> Decider:
    model: Path = tiny_checkpoint("bert", vocab="small", init_std=0.2)
    return Decider(model, batch_size=4, temperature=0.7, seed=3)


def test_numpy_keys_name_and_seed_documents_as_their_values(decider, monkeypatch) -> None:
    seeded: list[object] = []
    seed = decisions.document_seed

    def spy(base: int, doc_id: object) -> int:
        seeded.append(doc_id)
        return seed(base, doc_id)

    monkeypatch.setattr(decisions, "document_seed", spy)
    keys = np.array(["a", "b"])
    got = decider.decide_many(dict(zip(keys, TEXTS, strict=True)), QS)
    assert [(d.doc_id, type(d.doc_id)) for d in got] == [("a", str), ("b", str)]
    numbered = decider.decide_many(dict(zip(np.arange(7, 9), TEXTS, strict=True)), QS)
    assert [(d.doc_id, type(d.doc_id)) for d in numbered] == [(7, int), (8, int)]
    assert seeded and all(type(k) in (str, int) for k in seeded)
    plain = decider.decide_many({"a": TEXTS[0], "b": TEXTS[1]}, QS)
    assert [d.answers_json for d in got] == [d.answers_json for d in plain]


def test_categorical_texts_decide_as_plain_ones(decider) -> None:
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"id": ["x", "y", "z"], "text": [TEXTS[0], None, TEXTS[1]]})
    frame = frame.astype("category")
    got = decider.decide_many(dict(zip(frame["id"], frame["text"], strict=True)), QS)
    assert [d.doc_id for d in got] == ["x", "y", "z"]
    assert [d.status for d in got] == ["ok", "error", "ok"]
    assert got[1].error == "document is null"
