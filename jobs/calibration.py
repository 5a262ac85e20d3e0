"""Calibration maps and their measures: pure numpy, no model, no files.

Contract. Input is, per answer, the confidence the engine committed it with (a float in (0, 1])
and, for fitting, whether it was right (0/1). A *map* turns a confidence into the probability that
the answer is right; it is monotone increasing, so it never reorders answers and never changes one.
Which map a question gets depends on its schema *kind* (`schema_kind`):

- finite kinds (boolean, enum, small integer ranges: the engine scores these as whole options) get
  a one-parameter **temperature**. The engine keeps only the committed option's probability p,
  not the scores of the other K − 1 options, so the map is multi-class temperature scaling under
  the assumption that the rest of the mass is spread evenly over them: with L = log(K − 1),
  logit(p') = (logit(p) + L) / T − L (for K = 2 plain σ(logit(p) / T); p = 1/K stays put),
  T fitted to Platt's smoothed targets, so that an all-right set does not get T near 0;
- every other kind (free strings, wide integers, numbers, objects, arrays) gets **Platt scaling**,
  p' = σ(a·logit(p) + b), fitted with Platt's smoothed targets: two parameters, a sane fit on a few
  dozen labels, where isotonic regression (PAV) needs hundreds per question to stop being a step
  function that promises 0 or 1 on small bins.

Fitting rule (`fit_maps`): a question with at least `MIN_LABELS` (50) labels gets a map of its
own; otherwise it uses the map of its kind, fitted on every label of that kind (all questions
pooled); a kind with fewer than `MIN_POOL` (20) labels is left uncalibrated (identity). Measures:
expected calibration error over 10 equal-mass bins (`ece`), Brier score, accuracy,
reliability bins and a risk–coverage table.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from decide.schemas.nullable import value_schema

MIN_LABELS = 50  # labels a question needs for a map of its own
MIN_POOL = 20  # labels a kind needs for a pooled map; below it: identity
BINS = 10  # equal-mass bins of the ECE and of the reliability diagram
SMALL_RANGE = 256  # integer ranges with at most this many values are finite slots
EPS = 1e-7  # confidences are clipped to [EPS, 1 - EPS] before the logit
FINITE_KINDS = ("boolean", "enum", "range")
KINDS = ("boolean", "enum", "range", "integer", "number", "string", "object", "array", "other")
THRESHOLDS = (0.0, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.99)  # risk–coverage table


def schema_kind(schema: Any) -> str:
    """The calibration kind of a question schema (one of `KINDS`)."""
    schema, _ = value_schema(schema)
    if not isinstance(schema, dict):
        return "other"
    values = schema.get("enum", [schema["const"]] if "const" in schema else None)
    if isinstance(values, list) and values:
        present = [v for v in values if v is not None]
        return "boolean" if present and all(isinstance(v, bool) for v in present) else "enum"
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        kind = kinds[0] if len(kinds) == 1 else None
    if kind == "integer":
        low = schema.get("minimum", _exclusive(schema.get("exclusiveMinimum"), 1))
        high = schema.get("maximum", _exclusive(schema.get("exclusiveMaximum"), -1))
        if low is not None and high is not None and high - low + 1 <= SMALL_RANGE:
            return "range"
        return "integer"
    if kind in ("boolean", "number", "string", "object", "array"):
        return kind
    return "other"


def _exclusive(bound: Any, step: int) -> Any:
    return None if not isinstance(bound, int | float) else math.floor(bound) + step


def is_finite(kind: str) -> bool:
    return kind in FINITE_KINDS


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(np.asarray(p, dtype=np.float64), EPS, 1.0 - EPS)
    return np.log(p) - np.log1p(-p)


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))  # stable for large |z|


@dataclass(frozen=True)
class Map:
    """A monotone confidence map: identity, temperature (σ(z / T)) or Platt (σ(a z + b))."""

    method: str = "identity"
    temperature: float = 1.0
    a: float = 1.0
    b: float = 0.0
    options: int = 2  # K of a temperature map: the question's number of options

    def __call__(self, confidence: Any) -> np.ndarray:
        p = np.asarray(confidence, dtype=np.float64)
        if self.method == "identity":
            return p
        z = _logit(p)
        if self.method == "temperature":
            return _tempered(z, self.temperature, _offset(self.options))
        return _sigmoid(self.a * z + self.b)

    def with_options(self, options: int | None) -> Map:
        if options is None or self.method != "temperature":
            return self
        return Map("temperature", temperature=self.temperature, options=options)

    def as_dict(self) -> dict[str, Any]:
        if self.method == "temperature":
            return {"method": "temperature", "temperature": self.temperature,
                    "options": self.options}  # fmt: skip
        if self.method == "platt":
            return {"method": "platt", "a": self.a, "b": self.b}
        return {"method": "identity"}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Map:
        method = data["method"]
        if method == "temperature":
            options = int(data.get("options", 2))
            return cls("temperature", temperature=float(data["temperature"]), options=options)
        if method == "platt":
            return cls("platt", a=float(data["a"]), b=float(data["b"]))
        return cls()


def _offset(options: Any) -> Any:
    return np.log(np.maximum(np.asarray(options, dtype=np.float64), 2.0) - 1.0)


def _tempered(z: np.ndarray, temperature: float, offset: Any) -> np.ndarray:
    return _sigmoid((z + offset) / temperature - offset)


def schema_options(schema: Any) -> int:
    """K, the number of values a finite question's schema admits (2 where unknown)."""
    schema, null_branch = value_schema(schema)
    if not isinstance(schema, dict):
        return 2
    values = schema.get("enum", [schema["const"]] if "const" in schema else None)
    if isinstance(values, list):
        return max(len(values) + (null_branch and None not in values), 2)
    kind = schema.get("type")
    nullable = null_branch or (isinstance(kind, list) and "null" in kind)
    base = schema_kind(schema)
    if base == "boolean":
        return 2 + nullable
    if base == "range":
        low = schema.get("minimum", _exclusive(schema.get("exclusiveMinimum"), 1))
        high = schema.get("maximum", _exclusive(schema.get("exclusiveMaximum"), -1))
        return max(int(high - low + 1) + nullable, 2)
    return 2


def _nll(p: np.ndarray, y: np.ndarray) -> float:
    p = np.clip(p, 1e-12, 1 - 1e-12)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log1p(-p)))


def smoothed_targets(correct: Any) -> np.ndarray:
    """Platt's targets: (N₊ + 1)/(N₊ + 2) for a right answer, 1/(N₋ + 2) for a wrong one. Fitted to
    hard 0/1 labels, a set with no wrong answer (or no right one) is best fitted by a map that
    promises certainty: a temperature near 0 that made a 0.6 answer 0.97 and hid it from review."""
    y = np.asarray(correct, dtype=np.float64)
    positives = float(y.sum())
    negatives = len(y) - positives
    return np.where(y > 0.5, (positives + 1) / (positives + 2), 1 / (negatives + 2))


def fit_temperature(confidence: Any, correct: Any, options: Any = 2) -> Map:
    """T minimising the log loss of the tempered confidences against Platt's smoothed targets
    (`smoothed_targets`; `options`: K per answer, or one K for all), by golden-section search on
    log T."""
    z, y = _logit(confidence), smoothed_targets(correct)
    offset = _offset(np.broadcast_to(np.asarray(options), z.shape))
    lo, hi = math.log(0.02), math.log(100.0)
    ratio = (math.sqrt(5) - 1) / 2

    def loss(log_t: float) -> float:
        return _nll(_tempered(z, math.exp(log_t), offset), y)

    c, d = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    fc, fd = loss(c), loss(d)
    for _ in range(80):
        if fc < fd:
            hi, d, fd = d, c, fc
            c = hi - ratio * (hi - lo)
            fc = loss(c)
        else:
            lo, c, fc = c, d, fd
            d = lo + ratio * (hi - lo)
            fd = loss(d)
    single = np.unique(np.asarray(options)).size == 1
    k = int(np.asarray(options).flat[0]) if single and np.asarray(options).size else 2
    return Map("temperature", temperature=math.exp((lo + hi) / 2), options=k)


def fit_platt(confidence: Any, correct: Any, ridge: float = 1e-2) -> Map:
    """(a, b) of σ(a·logit(p) + b) by damped Newton steps on the log loss, with Platt's smoothed
    targets ((N₊ + 1)/(N₊ + 2) and 1/(N₋ + 2)) and a ridge pulling (a, b) towards (1, 0), so that
    a separable, one-class or saturated set (confidences of 1.0) still gives a sane map."""
    z, t = _logit(confidence), smoothed_targets(correct)
    x = np.stack([z, np.ones_like(z)], axis=1)
    prior = np.array([1.0, 0.0])

    def loss(w: np.ndarray) -> float:
        q = np.clip(_sigmoid(x @ w), 1e-12, 1 - 1e-12)
        data = -np.mean(t * np.log(q) + (1 - t) * np.log1p(-q))
        return float(data + 0.5 * ridge * np.sum((w - prior) ** 2))

    def newton(w: np.ndarray, free: np.ndarray) -> np.ndarray:
        current = loss(w)
        for _ in range(100):
            q = _sigmoid(x @ w)
            grad = (x.T @ (q - t) / len(t) + ridge * (w - prior))[free]
            hess = (x * (q * (1 - q))[:, None]).T @ x / len(t) + ridge * np.eye(2)
            step = np.zeros(2)
            step[free] = np.linalg.solve(hess[np.ix_(free, free)], grad)
            scale = 1.0
            while scale > 1e-6 and loss(w - scale * step) > current:
                scale /= 2
            w, previous = w - scale * step, current
            current = loss(w)
            if previous - current < 1e-12:
                break
        return w

    w = newton(prior.copy(), np.array([True, True]))
    if w[0] < 0:
        # Labels on which higher confidence is less often right: the best *increasing* map
        # (a map must never reorder) is the constant one, the set's smoothed accuracy.
        w = newton(np.array([0.0, w[1]]), np.array([False, True]))
    return Map("platt", a=float(w[0]), b=float(w[1]))


def fit_map(kind: str, confidence: Any, correct: Any, options: Any = 2) -> Map:
    """The map of `kind`'s method (temperature for finite kinds, else Platt) fitted to labels."""
    if len(np.asarray(confidence)) == 0:
        return Map()
    if is_finite(kind):
        return fit_temperature(confidence, correct, options)
    return fit_platt(confidence, correct)


@dataclass
class Fitted:
    """Maps per question and per kind, and where each question's map came from."""

    questions: dict[str, dict[str, Any]]  # qid -> {kind, labels, fitted_on, map}
    kinds: dict[str, dict[str, Any]]  # kind -> {labels, map}

    def map_for(self, qid: str, kind: str | None = None, options: int | None = None) -> Map:
        """The question's map; for a question not fitted, its kind's map (with the question's
        number of options, `options`); else identity."""
        if qid in self.questions:
            return Map.from_dict(self.questions[qid]["map"])
        if kind is not None and kind in self.kinds:
            return Map.from_dict(self.kinds[kind]["map"]).with_options(options)
        return Map()


def fit_maps(
    labels: Mapping[str, tuple[Iterable[float], Iterable[int]]],
    kinds: Mapping[str, str],
    options: Mapping[str, int] | None = None,
    *,
    min_labels: int = MIN_LABELS,
    min_pool: int = MIN_POOL,
) -> Fitted:
    """Fit the maps of every question in `labels` (qid -> (confidences, correct)) under the rule
    in the module docstring; `kinds` gives each question's schema kind, `options` its number of
    options K (finite kinds; 2 where not given)."""
    k = {q: (options or {}).get(q, 2) for q in labels}
    arrays = {q: (np.asarray(list(c), float), np.asarray(list(y), float)) for q, (c, y) in
              labels.items()}  # fmt: skip
    pooled: dict[str, dict[str, Any]] = {}
    for kind in sorted({kinds[q] for q in arrays}):
        members = [q for q in arrays if kinds[q] == kind]
        conf = np.concatenate([arrays[q][0] for q in members])
        right = np.concatenate([arrays[q][1] for q in members])
        each = np.concatenate([np.full(len(arrays[q][0]), k[q]) for q in members])
        chosen = fit_map(kind, conf, right, each) if len(conf) >= min_pool else Map()
        pooled[kind] = {"labels": len(conf), "map": chosen.as_dict()}
    questions: dict[str, dict[str, Any]] = {}
    for qid, (conf, right) in arrays.items():
        kind = kinds[qid]
        own = len(conf) >= min_labels
        if own:
            chosen = fit_map(kind, conf, right, k[qid]).as_dict()
        else:
            chosen = Map.from_dict(pooled[kind]["map"]).with_options(k[qid]).as_dict()
        fitted_on = "question" if own else ("kind" if pooled[kind]["labels"] >= min_pool else
                                            "none")  # fmt: skip
        questions[qid] = {"kind": kind, "labels": len(conf), "fitted_on": fitted_on,
                          "map": chosen}  # fmt: skip
    return Fitted(questions, pooled)


def _bins(confidence: np.ndarray, bins: int) -> list[np.ndarray]:
    order = np.argsort(confidence, kind="stable")
    return [b for b in np.array_split(order, min(bins, len(order))) if len(b)]


def ece(confidence: Any, correct: Any, bins: int = BINS) -> float:
    """Expected calibration error over `bins` equal-mass bins (sorted by confidence)."""
    c, y = np.asarray(confidence, float), np.asarray(correct, float)
    if not len(c):
        return float("nan")
    return float(sum(abs(c[b].mean() - y[b].mean()) * len(b) for b in _bins(c, bins)) / len(c))


def brier(confidence: Any, correct: Any) -> float:
    c, y = np.asarray(confidence, float), np.asarray(correct, float)
    return float(np.mean((c - y) ** 2)) if len(c) else float("nan")


def measures(confidence: Any, correct: Any) -> dict[str, Any]:
    """ECE, Brier score, accuracy, mean confidence and the number of answers."""
    c, y = np.asarray(confidence, float), np.asarray(correct, float)
    return {
        "answers": len(c),
        "ece": ece(c, y),
        "brier": brier(c, y),
        "accuracy": float(y.mean()) if len(y) else float("nan"),
        "mean_confidence": float(c.mean()) if len(c) else float("nan"),
    }


def reliability(confidence: Any, correct: Any, bins: int = BINS) -> list[dict[str, Any]]:
    """Equal-mass bins: confidence range, mean confidence (expected) and accuracy (observed)."""
    c, y = np.asarray(confidence, float), np.asarray(correct, float)
    return [
        {
            "low": float(c[b].min()),
            "high": float(c[b].max()),
            "confidence": float(c[b].mean()),
            "accuracy": float(y[b].mean()),
            "count": len(b),
        }
        for b in _bins(c, bins)
    ]


def risk_coverage(
    confidence: Any, correct: Any | None = None, thresholds: Iterable[float] = THRESHOLDS
) -> list[dict[str, Any]]:
    """Per threshold t: the share of answers with confidence ≥ t (coverage), their mean
    confidence (expected accuracy) and, given labels, their observed accuracy."""
    c = np.asarray(confidence, float)
    y = None if correct is None else np.asarray(correct, float)
    rows = []
    for t in thresholds:
        kept = c >= t
        n = int(kept.sum())
        row: dict[str, Any] = {
            "threshold": float(t),
            "coverage": n / len(c) if len(c) else 0.0,
            "expected_accuracy": float(c[kept].mean()) if n else None,
        }
        if y is not None:
            row["accuracy"] = float(y[kept].mean()) if n else None
        rows.append(row)
    return rows
