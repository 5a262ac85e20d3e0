"""A learnt evidence ranker: which windows of a long document hold the answer to a question.

BM25 ranks a document's windows by the words they share with a question's text; it cannot know
that "the Receiving Party may disclose … to its employees who have a need to know" is what a
question about sharing with employees is answered by. Where training documents say where their
answers are written (evidence offsets), `decide train` fits, per question text, a logistic
regression over TF-IDF word uni- and bigrams of the documents' sentences
(`decide.train.evidence_ranker`), and the model directory carries it as `evidence_ranker.json`.

Contract.
- `sentences(text, start, end, min_words)`: the (start, end) offsets of the units (paragraphs,
  lines, sentences: `jobs.windows.boundaries`) of `text[start:end]` with at least `min_words`
  words; the ranker is fitted on and scores these.
- `Featurizer(vocabulary, idf)`: a text's TF-IDF row (lower-cased words of two or more word
  characters, their bigrams; 1 + log of a count, times idf, L2-normalised): the same features
  scikit-learn's `TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)` makes.
- `EvidenceRanker.knows(question_text)`: whether a scorer was fitted for that text (whitespace
  folded); `scores(document, windows, question_texts)`: per question text, per window, the
  evidence probability of its most evidence-like sentence (a window without such a sentence
  scores its whole text); the sentences are featurized once, as sparse rows, so memory grows
  with the document, not with its sentences × the vocabulary.
  `threshold` is the probability below which a window is taken not to hold the answer (chosen
  on validation documents when fitted); `windows.min_evidence` overrides it per job.
- `save(directory)` / `EvidenceRanker.load(directory)` (None when the file is absent). The file
  is plain JSON: the vocabulary, idf and per question its coefficients; no pickled objects.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .windows import TERM, Window, boundaries, word_count

FILE = "evidence_ranker.json"
FORMAT = 1
MIN_WORDS = 6  # units with fewer words ("(a)", "1.", a heading) are neither fitted nor scored


def fold(text: str) -> str:
    """A question text as the ranker keys it: whitespace runs folded, ends stripped."""
    return " ".join(text.split())


def sentences(text: str, start: int = 0, end: int | None = None, min_words: int = MIN_WORDS):
    """Offsets of the units of `text[start:end]` with at least `min_words` words."""
    end = len(text) if end is None else end
    part = text[start:end]
    cuts = boundaries(part)
    out = []
    for a, b in zip(cuts, [*cuts[1:], len(part)], strict=True):
        if word_count(part[a:b]) >= min_words:
            out.append((start + a, start + b))
    return out


def terms(text: str) -> list[str]:
    """A text's words (two or more word characters, lower-cased) and their bigrams."""
    words = TERM.findall(text.lower())
    return words + [f"{a} {b}" for a, b in itertools.pairwise(words)]


class Featurizer:
    def __init__(self, vocabulary: dict[str, int], idf: np.ndarray) -> None:
        self.vocabulary = vocabulary
        self.idf = np.asarray(idf, dtype=np.float64)

    def rows(self, texts: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Each text's (feature indices, L2-normalised TF-IDF values)."""
        out = []
        for text in texts:
            counts: dict[int, int] = {}
            for term in terms(text):
                index = self.vocabulary.get(term)
                if index is not None:
                    counts[index] = counts.get(index, 0) + 1
            index = np.fromiter(counts, dtype=np.int64, count=len(counts))
            tf = np.fromiter(counts.values(), dtype=np.float64, count=len(counts))
            values = (1.0 + np.log(tf)) * self.idf[index]
            norm = math.sqrt(float(values @ values)) if len(values) else 0.0
            out.append((index, values / norm if norm else values))
        return out

    def sparse(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The rows of `texts` as CSR arrays (values, feature indices, row of each entry): memory
        grows with the words, not with texts × vocabulary."""
        rows = self.rows(texts)
        values = np.concatenate([v for _, v in rows]) if rows else np.zeros(0)
        index = np.concatenate([i for i, _ in rows]) if rows else np.zeros(0, dtype=np.int64)
        owner = np.repeat(np.arange(len(rows)), [len(i) for i, _ in rows])
        return values, index, owner

    def dense(self, texts: Sequence[str]) -> np.ndarray:
        """The rows of `texts` as a dense (texts × vocabulary) matrix (small inputs, tests)."""
        matrix = np.zeros((len(texts), len(self.idf)))
        values, index, owner = self.sparse(texts)
        matrix[owner, index] = values
        return matrix


@dataclass
class Scorer:
    coef: np.ndarray  # one weight per vocabulary entry
    intercept: float


class EvidenceRanker:
    def __init__(
        self,
        featurizer: Featurizer,
        scorers: dict[str, Scorer],
        threshold: float,
        min_words: int = MIN_WORDS,
        about: dict[str, Any] | None = None,
    ) -> None:
        self.featurizer = featurizer
        self.scorers = {fold(text): scorer for text, scorer in scorers.items()}
        self.threshold = threshold
        self.min_words = min_words
        self.about = dict(about or {})

    def knows(self, question_text: str) -> bool:
        return fold(question_text) in self.scorers

    def probabilities(self, texts: Sequence[str], question_text: str) -> np.ndarray:
        """The evidence probability of each text for the question."""
        return self._probabilities(self.featurizer.sparse(texts), len(texts), question_text)

    def _probabilities(self, rows: tuple, count: int, question_text: str) -> np.ndarray:
        scorer = self.scorers[fold(question_text)]
        values, index, owner = rows
        logits = np.full(count, scorer.intercept)
        np.add.at(logits, owner, values * scorer.coef[index])
        return 1.0 / (1.0 + np.exp(-logits))

    def scores(
        self, document: str, windows: Sequence[Window], question_texts: Sequence[str]
    ) -> dict[str, np.ndarray]:
        """Per question text, per window, the evidence probability of the window's most
        evidence-like unit (the units are read once for all the questions)."""
        units, owner = [], []
        for i, w in enumerate(windows):
            found = sentences(document, w.start, w.end, self.min_words)
            for a, b in found or [(w.start, w.end)]:
                units.append(document[a:b])
                owner.append(i)
        rows = self.featurizer.sparse(units)
        out = {}
        for text in question_texts:
            best = np.zeros(len(windows))
            if units:
                p = self._probabilities(rows, len(units), text)
                np.maximum.at(best, np.asarray(owner), p)
            out[text] = best
        return out

    def save(self, directory: Path | str) -> Path:
        path = Path(directory) / FILE
        vocabulary = sorted(self.featurizer.vocabulary, key=self.featurizer.vocabulary.get)
        body = {
            "format": FORMAT,
            "min_words": self.min_words,
            "threshold": self.threshold,
            "about": self.about,
            "vocabulary": vocabulary,
            "idf": [float(f"{v:.7g}") for v in self.featurizer.idf],
            "questions": {
                text: {
                    "intercept": float(s.intercept),
                    "coef": [float(f"{v:.6g}") for v in s.coef],
                }
                for text, s in sorted(self.scorers.items())
            },
        }
        path.write_text(json.dumps(body, ensure_ascii=False, separators=(",", ":")) + "\n")
        return path

    @classmethod
    def load(cls, directory: Path | str) -> EvidenceRanker | None:
        path = Path(directory) / FILE
        if not path.is_file():
            return None
        body = json.loads(path.read_text())
        if body.get("format") != FORMAT:
            raise ValueError(f"{path}: format {body.get('format')!r}, this decide reads {FORMAT}")
        vocabulary = {term: i for i, term in enumerate(body["vocabulary"])}
        featurizer = Featurizer(vocabulary, np.asarray(body["idf"]))
        scorers = {
            text: Scorer(np.asarray(q["coef"], dtype=np.float64), float(q["intercept"]))
            for text, q in body["questions"].items()
        }
        for text, scorer in scorers.items():
            if len(scorer.coef) != len(vocabulary):
                raise ValueError(
                    f"{path}: question {text!r} has {len(scorer.coef)} weights for "
                    f"{len(vocabulary)} vocabulary entries"
                )
        return cls(featurizer, scorers, float(body["threshold"]), int(body["min_words"]),
                   body.get("about"))  # fmt: skip
