"""Accuracy of a decision model on held-out data: synthetic documents and MAMS-ACSA val.

Synthetic documents come from the *test* split of `synthetic` (templates and entities never seen
in training). Questions whose answer is stated in the document and questions derived from several
facts (`synthetic.DERIVED`) are reported separately, with the share of documents whose every
answer is right and the number of violated dependencies (`synthetic.DEPENDENCIES`) among the
produced answers. Strings are compared without case or accents, because an uncased vocabulary (the
bundled model's) can spell neither; everything else must match exactly.

MAMS val: sentiment accuracy on the annotated aspects and mention accuracy (mentioned or not) over
all eight aspects, next to majority-class baselines taken from the train split.
"""

from __future__ import annotations

import random
import unicodedata
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from decide.jobs.calibrate import suggest_absent_below
from decide.jobs.calibration import schema_kind
from decide.jobs.decisions import Decision, DecisionEngine, Item
from decide.jobs.spec import Question

from . import cut, handwritten, mams, synthetic


def folded(text: str) -> str:
    """`text` without case or accents: what an uncased vocabulary (BERT's, the bundled model's)
    can spell of it ("Sofía Şahin" → "sofia sahin")."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def same(answer: Any, gold: Any) -> bool:
    if isinstance(answer, str) and isinstance(gold, str):
        return folded(answer) == folded(gold)
    return type(answer) is type(gold) and answer == gold


@dataclass
class Tally:
    right: int = 0
    total: int = 0

    def add(self, ok: bool) -> None:
        self.right += ok
        self.total += 1

    @property
    def rate(self) -> float:
        return self.right / self.total if self.total else float("nan")


@dataclass
class SyntheticReport:
    stated: Tally = field(default_factory=Tally)
    derived: Tally = field(default_factory=Tally)
    documents: Tally = field(default_factory=Tally)  # every answer right
    per_question: dict[str, Tally] = field(default_factory=dict)
    violations: int = 0  # dependency checks failed by the produced answers
    checks: int = 0
    failed_rows: int = 0
    nfe: int = 0
    answer_tokens: int = 0  # slot positions, filler included
    value_tokens: int = 0  # of those, the positions holding a value's token
    seconds: float = 0.0


def synthetic_documents(count: int, seed: int = 1234) -> list[tuple[str, list[dict], dict]]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        _, text, questions, gold = synthetic.sample_document(rng, "test")
        out.append((text, questions, gold))
    return out


# `extract=True` marks string questions only (names, cities, products); pass the JSON types to
# mark, e.g. ("string", "integer"), to extract amounts and counts as well.
Extract = bool | Collection[str]
EXTRACT_TYPES: dict[bool, set[str]] = {False: set(), True: {"string"}}


def _compile(engine: DecisionEngine, questions: Sequence[dict], extract: Extract = False) -> list:
    types = EXTRACT_TYPES[extract] if isinstance(extract, bool) else set(extract)
    if types:  # questions of these types answer with a span (a number) of their document
        questions = [{**q, "extract": _type(q["schema"]) in types} for q in questions]
    return engine.questions([Question.model_validate(q) for q in questions])


def _type(schema: Any) -> str | None:
    """A schema's single `type` (None for a list of types or none)."""
    kind = schema.get("type") if isinstance(schema, dict) else None
    return kind if isinstance(kind, str) else None


def _decide(engine: DecisionEngine, items: list[Item]) -> dict[Any, Decision]:
    return {d.doc_id: d for d in engine.decide(items)}


def score_synthetic(
    docs: list[tuple[str, list[dict], dict]], answers: list[dict[str, Any] | None]
) -> SyntheticReport:
    report = SyntheticReport()
    for (_, questions, gold), got in zip(docs, answers, strict=True):
        if got is None:
            report.failed_rows += 1
            got = {}
        all_right = True
        for q in questions:
            qid = q["id"]
            ok = qid in got and same(got[qid], gold[qid])
            all_right &= ok
            (report.derived if qid in synthetic.DERIVED else report.stated).add(ok)
            report.per_question.setdefault(qid, Tally()).add(ok)
        report.documents.add(all_right)
        for qid, check in synthetic.DEPENDENCIES.items():
            needed = {qid, *synthetic.DEPENDENCY_INPUTS[qid]}
            if needed <= set(got):
                report.checks += 1
                report.violations += not check(got)
    return report


def evaluate_synthetic(
    engine: DecisionEngine,
    docs: list[tuple[str, list[dict], dict]],
    joint: bool = True,
    extract: Extract = False,
) -> SyntheticReport:
    """Decide every document (all its questions in one block, or each question alone); with
    `extract`, every string question answers with a span of its document (or every question of
    the JSON types `extract` lists: a span or a number the document states)."""
    import time

    started = time.monotonic()
    items = []
    for i, (text, questions, _) in enumerate(docs):
        compiled = _compile(engine, questions, extract)
        if joint:
            items.append(Item((i, None), text, compiled))
        else:
            items.extend(Item((i, q.id), text, [q]) for q in compiled)
    decided = _decide(engine, items)
    answers: list[dict[str, Any] | None] = []
    nfe = tokens = values = 0
    for i, (_, questions, _) in enumerate(docs):
        keys = [(i, None)] if joint else [(i, q["id"]) for q in questions]
        merged: dict[str, Any] | None = {}
        for key in keys:
            d = decided[key]
            nfe += d.nfe
            tokens += d.answer_tokens
            values += d.value_tokens
            if d.ok and merged is not None:
                merged.update(d.answers or {})
            else:
                merged = None
        answers.append(merged)
    report = score_synthetic(docs, answers)
    report.nfe, report.answer_tokens, report.value_tokens = nfe, tokens, values
    report.seconds = time.monotonic() - started
    return report


@dataclass
class MamsReport:
    sentiment: Tally = field(default_factory=Tally)  # all 8 aspects asked, 4 answers each
    mention: Tally = field(default_factory=Tally)
    # Only the annotated aspects asked, each of the 3 sentiments: the aspect-category sentiment
    # protocol of published MAMS-ACSA figures (the aspect is given, its sentiment is asked).
    sentiment_given_aspect: Tally = field(default_factory=Tally)
    sentiment_baseline: Tally = field(default_factory=Tally)
    mention_baseline: Tally = field(default_factory=Tally)
    majority_sentiment: str = ""
    failed_rows: int = 0  # failed decisions of both passes (all aspects; aspect given)


def evaluate_mams(engine: DecisionEngine, limit: int | None = None) -> MamsReport:
    train = mams.load("train")
    counts = Counter(v for _, g in train for v in g.values() if v != "not_mentioned")
    majority = counts.most_common(1)[0][0]
    reviews = mams.load("val")[:limit]
    compiled = _compile(engine, mams.QUESTIONS)
    decided = _decide(engine, [Item(i, text, compiled) for i, (text, _) in enumerate(reviews)])
    report = MamsReport(majority_sentiment=majority)
    for i, (_, gold) in enumerate(reviews):
        d = decided[i]
        if not d.ok:
            report.failed_rows += 1
        got = d.answers or {}
        for aspect, truth in gold.items():
            pred = got.get(aspect)
            mentioned = truth != "not_mentioned"
            report.mention.add(pred is not None and (pred != "not_mentioned") == mentioned)
            report.mention_baseline.add(not mentioned)  # majority: not mentioned
            if mentioned:
                report.sentiment.add(pred == truth)
                report.sentiment_baseline.add(truth == majority)
    sentiment_only = {q["id"]: {**q, "schema": {"enum": mams.SENTIMENTS}} for q in mams.QUESTIONS}
    given = []
    for i, (text, gold) in enumerate(reviews):
        annotated = [sentiment_only[a] for a, v in gold.items() if v != "not_mentioned"]
        if annotated:
            given.append(Item(i, text, _compile(engine, annotated)))
    for i, d in _decide(engine, given).items():
        report.failed_rows += not d.ok
        got = d.answers or {}
        for aspect, truth in reviews[i][1].items():
            if truth != "not_mentioned":
                report.sentiment_given_aspect.add(got.get(aspect) == truth)
    return report


@dataclass
class HandwrittenReport:
    """Answers and documents right per domain group of the hand-written documents."""

    answers: dict[str, Tally] = field(default_factory=dict)  # by group ("trained", "new")
    documents: dict[str, Tally] = field(default_factory=dict)  # every asked answer right
    per_question: dict[str, Tally] = field(default_factory=dict)  # "domain/question"
    per_domain: dict[str, Tally] = field(default_factory=dict)  # answers, by domain
    failed_rows: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)  # id, why it failed
    misses: list[tuple[str, str, Any, Any]] = field(default_factory=list)  # id, q, got, gold


def _decided_documents(
    engine: DecisionEngine,
    documents: Sequence[handwritten.Document],
    questions_of: Callable[[handwritten.Document], list[dict[str, Any]]],
    report: HandwrittenReport | UnstatedReport,
) -> list[tuple[handwritten.Document, dict[str, Any], dict[str, float]]]:
    """Each document decided with `questions_of(document)` in one block: its answers and their
    confidences (empty for a failed row, counted in `report.failed_rows` and listed with its
    error in `report.failures`)."""
    items = [
        Item(i, doc.text, engine.questions([Question.model_validate(q) for q in questions_of(doc)]))
        for i, doc in enumerate(documents)
    ]
    decided = _decide(engine, items)
    out = []
    for i, doc in enumerate(documents):
        if not decided[i].ok:
            report.failed_rows += 1
            report.failures.append((doc.id, str(decided[i].error)))
        out.append((doc, decided[i].answers or {}, decided[i].confidence or {}))
    return out


def group_of(domain: str) -> str:
    return "trained" if handwritten.DOMAINS[domain].trained else "new"


def evaluate_handwritten(
    engine: DecisionEngine, documents: Sequence[handwritten.Document], derive: bool = False
) -> HandwrittenReport:
    """Decide every document with its asked questions in one block, as a user's job would (its
    string and integer questions `extract: true`); strings are compared without case or
    accents. With `derive`, the derived answers are `derive:` rules over their inputs (asked
    too, not scored unless asked), as `examples/claims.yaml` does, instead of asked of the
    model."""

    def asked(doc: handwritten.Document) -> list[dict[str, Any]]:
        if derive:
            return handwritten.DOMAINS[doc.domain].derived_questions(doc.questions)
        return doc.questions

    report = HandwrittenReport()
    for doc, got, _ in _decided_documents(engine, documents, asked, report):
        group = group_of(doc.domain)
        all_right = True
        for qid, gold in doc.gold.items():
            ok = qid in got and same(got[qid], gold)
            all_right &= ok
            report.answers.setdefault(group, Tally()).add(ok)
            report.per_domain.setdefault(doc.domain, Tally()).add(ok)
            report.per_question.setdefault(f"{doc.domain}/{qid}", Tally()).add(ok)
            if not ok:
                report.misses.append((doc.id, qid, got.get(qid), gold))
        report.documents.setdefault(group, Tally()).add(all_right)
    return report


@dataclass
class UnstatedReport:
    """Hand-written documents asked every fact of their domain as optional questions, plus one
    question of another domain: stated facts right, and facts the document does not state (and
    the other domain's question) answered null, by domain group."""

    stated: dict[str, Tally] = field(default_factory=dict)
    unstated: dict[str, Tally] = field(default_factory=dict)  # facts the document leaves null
    foreign: dict[str, Tally] = field(default_factory=dict)  # the other domain's question
    documents: dict[str, Tally] = field(default_factory=dict)  # every answer right
    failed_rows: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)  # id, why it failed
    misses: list[tuple[str, str, Any, Any]] = field(default_factory=list)  # id, q, got, gold
    # Per question ("domain/id", not the other domain's): (answer, its confidence, gold), for
    # choosing `absent_below` (`absent_below_chosen`).
    decoded: dict[str, list[tuple[Any, float, Any]]] = field(default_factory=dict)


def unstated_questions(domain: str) -> list[dict[str, Any]]:
    """Every fact question of `domain` (as the hand-written evaluation asks it: strings and
    integers extracted) and the other domain's question (`handwritten.FOREIGN`, id
    `other_<id>`), all optional."""
    own = handwritten.DOMAINS[domain]
    other_domain, other_id = handwritten.FOREIGN[domain]
    other = handwritten.DOMAINS[other_domain].question(other_id)
    asked = [q for q in own.questions if q["id"] in own.facts]
    asked.append({**other, "id": f"other_{other_id}"})
    return [handwritten.nullable(q) for q in asked]


def _score_optional(
    report: UnstatedReport,
    decided: list[tuple[handwritten.Document, dict[str, Any], dict[str, float]]],
    gold_of: Callable[[handwritten.Document], dict[str, Any]],
) -> UnstatedReport:
    """Tally optional answers: a gold None must be answered null, anything else its gold value;
    `other_*` questions (another domain's) are tallied as `foreign`."""
    for doc, got, confidence in decided:
        group = group_of(doc.domain)
        all_right = True
        for qid, want in gold_of(doc).items():
            answer = got.get(qid, "(no answer)")
            ok = answer is None if want is None else same(answer, want)
            all_right &= ok
            kind = (
                report.foreign
                if qid.startswith("other_")
                else report.unstated
                if want is None
                else report.stated
            )
            kind.setdefault(group, Tally()).add(ok)
            if not ok:
                report.misses.append((doc.id, qid, answer, want))
            if qid in confidence and not qid.startswith("other_"):
                decoded = (answer, confidence[qid], want)
                report.decoded.setdefault(f"{doc.domain}/{qid}", []).append(decoded)
        report.documents.setdefault(group, Tally()).add(all_right)
    return report


def evaluate_unstated(
    engine: DecisionEngine, documents: Sequence[handwritten.Document]
) -> UnstatedReport:
    """Decide each document with `unstated_questions` of its domain in one block; a stated fact
    must be its gold answer, an unstated one and the other domain's question null."""

    def gold_of(doc: handwritten.Document) -> dict[str, Any]:
        gold = {k: doc.answers.get(k) for k in handwritten.DOMAINS[doc.domain].facts}
        return {**gold, f"other_{handwritten.FOREIGN[doc.domain][1]}": None}

    report = UnstatedReport()
    decided = _decided_documents(
        engine, documents, lambda doc: unstated_questions(doc.domain), report
    )
    return _score_optional(report, decided, gold_of)


def evaluate_cut(
    engine: DecisionEngine,
    documents: Sequence[handwritten.Document],
    absent_below: Mapping[str, float] | None = None,
) -> UnstatedReport:
    """Every checkable cut of each document (`cut.cuts`: the sentences writing one fact taken
    out) decided with its stated and absent facts as optional questions in one block: a stated
    fact must be its gold answer, an absent one (the cut fact, and any the cut or the writer
    left out) null. `foreign` stays empty. `absent_below`: per question ("domain/id") the
    threshold its question is asked with (`jobs.withhold`)."""
    report = UnstatedReport()
    cut_documents = [found.as_document() for found in cut.cuts(list(documents))]
    thresholds = absent_below or {}

    def asked(doc: handwritten.Document) -> list[dict[str, Any]]:
        return [
            {**q, "absent_below": thresholds[key]} if (key := f"{doc.domain}/{q['id']}")
            in thresholds else q
            for q in doc.questions
        ]  # fmt: skip

    decided = _decided_documents(engine, cut_documents, asked, report)
    return _score_optional(report, decided, lambda doc: doc.gold)


def absent_below_chosen(report: UnstatedReport, min_labels: int = 50) -> dict[str, float]:
    """Per question of `report` ("domain/id"), the `absent_below` `decide calibrate` would
    suggest from its answers (`jobs.calibrate.suggest_absent_below`: its own labels when it has
    `min_labels`, else its schema kind's); questions where no threshold helps are left out."""
    kinds = {}
    for key in report.decoded:
        domain, qid = key.split("/", 1)
        kinds[key] = schema_kind(handwritten.DOMAINS[domain].question(qid)["schema"])
    decoded = {key: [(*item, None) for item in items] for key, items in report.decoded.items()}
    suggested = suggest_absent_below(decoded, kinds, min_labels)
    return {key: s["threshold"] for key, s in suggested.items() if s["threshold"] is not None}
