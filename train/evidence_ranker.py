"""Fitting the learnt evidence ranker (`decide.jobs.evidence_ranker`) from documents whose
answers' evidence offsets are known.

Contract. `fit(rows, validation=(), ...)` takes `LongRow`s (a document, its questions, and per
question the `[start, end]` offsets where the document states the answer; a question with no
offsets in a row is one that row does not answer). Every unit of every training document with
at least `min_words` words (`jobs.evidence_ranker.sentences`) is one example per question: it is
evidence when at least half of it lies inside that question's evidence spans. The vocabulary is
the word uni- and bigrams found in at least `min_df` units; idf is scikit-learn's smoothed one.
Per question text, a class-balanced L2 logistic regression (scikit-learn, `C`) is fitted; a
question with no evidence in any row gets no scorer. `threshold`: the probability, on the grid
0.05 … 0.95, at which "the document's most evidence-like unit reaches it" best tells the
validation rows that answer a question from those that do not (nearest 0.5 on ties); 0.5
without validation rows. Deterministic for its inputs.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np

from decide.jobs.evidence_ranker import (
    MIN_WORDS,
    EvidenceRanker,
    Featurizer,
    Scorer,
    fold,
    sentences,
    terms,
)

from .windows import LongRow

MIN_DF = 2
C = 1.0
GRID = [round(0.05 * i, 2) for i in range(1, 20)]


def inside(unit: tuple[int, int], spans: Sequence[tuple[int, int]]) -> bool:
    """Whether at least half of `unit` lies inside `spans`."""
    start, end = unit
    covered = sum(max(0, min(end, b) - max(start, a)) for a, b in spans)
    return 2 * covered >= end - start


def fit(
    rows: Sequence[LongRow],
    validation: Sequence[LongRow] = (),
    *,
    min_words: int = MIN_WORDS,
    min_df: int = MIN_DF,
    c: float = C,
) -> EvidenceRanker:
    try:
        from scipy.sparse import csr_matrix
        from sklearn.linear_model import LogisticRegression
    except ImportError as exc:  # pragma: no cover - scikit-learn is in the train extra
        raise RuntimeError(
            "fitting an evidence ranker needs scikit-learn: pip install 'decide[train]'"
        ) from exc
    texts: dict[str, str] = {}
    for row in rows:
        for q in row.questions:
            if row.evidence.get(q["id"]):
                texts.setdefault(q["id"], fold(q["text"]))
    if not texts:
        raise ValueError("no row has evidence offsets: nothing to fit an evidence ranker on")
    units: list[str] = []
    labels: dict[str, list[int]] = {qid: [] for qid in texts}
    for row in rows:
        asked = {q["id"] for q in row.questions}
        for unit in sentences(row.text, min_words=min_words):
            units.append(row.text[unit[0] : unit[1]])
            for qid in texts:
                spans = row.evidence.get(qid, ()) if qid in asked else ()
                labels[qid].append(int(inside(unit, spans)))
    df = Counter(term for unit in units for term in set(terms(unit)))
    vocabulary = {t: i for i, t in enumerate(sorted(t for t, n in df.items() if n >= min_df))}
    n = len(units)
    idf = np.array([math.log((1 + n) / (1 + df[t])) + 1.0 for t in vocabulary])
    featurizer = Featurizer(vocabulary, idf)
    values, index, owner = featurizer.sparse(units)
    x = csr_matrix((values, (owner, index)), shape=(n, len(vocabulary)))
    scorers = {}
    for qid, text in texts.items():
        y = np.asarray(labels[qid])
        if y.min() == y.max():
            continue  # evidence nowhere (or everywhere) among the units: nothing to learn
        model = LogisticRegression(C=c, class_weight="balanced", max_iter=5000)
        model.fit(x, y)
        scorers[text] = Scorer(model.coef_[0].astype(np.float64), float(model.intercept_[0]))
    about = {"rows": len(rows), "units": n, "min_df": min_df, "C": c,
             "validation_rows": len(validation)}  # fmt: skip
    ranker = EvidenceRanker(featurizer, scorers, 0.5, min_words, about)
    if validation:
        ranker.threshold = _threshold(ranker, validation)
        ranker.about["threshold_chosen_on"] = "validation rows"
    return ranker


def _threshold(ranker: EvidenceRanker, rows: Sequence[LongRow]) -> float:
    """The grid value whose "the best unit reaches it" best tells answered from unanswered."""
    best: list[tuple[float, bool]] = []
    for row in rows:
        units = [row.text[a:b] for a, b in sentences(row.text, min_words=ranker.min_words)]
        for q in row.questions:
            if ranker.knows(q["text"]) and units:
                top = float(ranker.probabilities(units, q["text"]).max())
                best.append((top, bool(row.evidence.get(q["id"]))))
    if not best:
        return 0.5

    def right(tau: float) -> int:
        return sum((top >= tau) == answered for top, answered in best)

    return max(GRID, key=lambda tau: (right(tau), -abs(tau - 0.5)))
