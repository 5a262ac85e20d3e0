"""Documents too long for the model, decided in windows (`long_documents: windows`).

Contract. `LongDocuments.decide(pool)` decides a pool of documents (each with its compiled
`QuestionSet`) that `Packer.prompt` refused (the document, or the questions with the whole
document, do not fit the model's context):

1. **A block's prompt holds only its own questions.** The asked questions are split into
   balanced blocks of at most `windows.questions` (default eight, as a document read whole:
   17 → 6/6/5; with 2, 17 → 9 blocks, and each window holds more of the document). Blocks are
   decided in order; block k's prompt holds its questions and, after the document text, the compact
   answers kept for blocks 1..k-1 (`Answers so far: {"id":value,...}`), so later blocks see and
   can agree with them, as long as they take at most a quarter of the room the document would
   have without them (else absent answers are left out first, then the oldest). Each window's
   answer is its own JSON object of the block's questions.
2. **Windows.** For each block the document is cut into windows of the tokens its prompt leaves,
   on sentence boundaries, sharing `windows.overlap` tokens of whole sentences
   (`jobs.window_plan.WindowPlanner`, which training uses too). With `windows.top_k` only the k
   windows that BM25 ranks highest for the block's question texts are decided. The windows of
   every document of the pool, for one block, go through the sampler as one stream of requests,
   so they share forward passes (continuous batching).
3. **Combination**, per question (`jobs.windows.combine`): with an absent value (`absent:`, or
   null where the schema admits it) an absent window answer loses to a non-absent one of
   confidence ≥ `windows.confident`; otherwise the most confident answer wins.
4. **Rules.** The questions the rules link share a block where they fit one
   (`WindowPlanner.groups`), and every window decodes its block under the rules: ruled
   questions of earlier blocks hold the answers kept for them, those of later blocks are left
   free (any value the rules allow). Windows answer independently, so after each block the
   answers kept for the ruled questions are the choice the rules allow that gives up the least
   confidence (`RuleSet.cheapest`, exact over the rules' cases; `_rule_first`). The combined
   object is validated with the whole decision schema, rules and CEL rules
   (`DecisionEngine.conclude`). If it fails, the choices of one value per question are tried
   best first (`jobs.windows.combinations`, at most `ENFORCE_TRIES`); the first that passes is
   kept, else the row fails as it would whole.
5. **Evidence** (`jobs.evidence`): per answer, the offsets of the window it was kept from and,
   for extract answers, of the span in the original document; `Decision.windows` is the number
   of windows the document was cut into (the most over its blocks).

Forward passes (`nfe`) of a windowed document are the sum over its windows. Memory is bounded:
the document's token offsets are one int array (`token_starts`), requests are made lazily as the
sampler takes them, and each window leaves only its answers, confidences and offsets.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from decide.engine.requests import DecodeRequest
from decide.schemas import DecodeMismatch, SchemaError
from decide.schemas.span import WrittenSpans

from .evidence import Evidence, locate
from .evidence_ranker import EvidenceRanker
from .extracted import MissingSpan, as_written, copied
from .failures import FailureKind
from .questions import CompiledQuestion
from .window_plan import NoRoom, WindowPlanner, absent_of, linked_by_rules
from .windows import (
    ENFORCE_TRIES,
    Candidate,
    Window,
    combinations,
    combine,
    ranked,
    same_value,
    segment,
    token_starts,
)

if TYPE_CHECKING:
    from .decisions import Decision, DecisionEngine, Item
    from .questionset import QuestionSet

log = logging.getLogger("decide.jobs")
POOL_BATCHES = 4  # documents pooled per batch slot before their windows are decided


@dataclass
class _Doc:
    item: Item
    qset: QuestionSet
    starts: np.ndarray
    groups: list[list[CompiledQuestion]]
    candidates: dict[str, list[Candidate]] = field(default_factory=dict)
    kept: dict[str, Candidate] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    nfe: int = 0
    answer_tokens: int = 0
    value_tokens: int = 0  # of `answer_tokens`, the positions holding a value's token
    windows: int = 0
    failure: tuple[FailureKind, str] | None = None


class LongDocuments:
    def __init__(self, engine: DecisionEngine, settings: Any = None) -> None:
        self.engine = engine
        self.packer = engine.packer
        self.planner = WindowPlanner(
            engine.packer, settings, EvidenceRanker.load(engine.loaded.path)
        )
        self.settings = self.planner.settings
        self.pool = POOL_BATCHES * engine.batch_size

    def _offsets(self, text: str) -> list[tuple[int, int]]:
        return self.packer.tokenizer.tokenizer.encode(text, add_special_tokens=False).offsets

    def decide(self, pool: list[tuple[Item, QuestionSet]]) -> Iterator[Decision]:
        """The decisions of a pool of documents and their compiled questions, in pool order."""
        docs = []
        for item, qset in pool:
            assert item.document is not None  # empty documents fail before packing
            starts = token_starts(self._offsets, item.document)
            groups = self.planner.groups(qset.asked, linked_by_rules(qset))
            docs.append(_Doc(item, qset, starts, groups))
        for block in range(max(len(d.groups) for d in docs)):
            self._stage(docs, block)
        for doc in docs:
            yield self.engine._guarded(doc.item, self._finish, doc)

    def _stage(self, docs: list[_Doc], block: int) -> None:
        """Decide block `block` on the windows of every document, in one stream."""
        engine, filler = self.engine, self.packer.filler_id
        placed: dict[int, tuple[_Doc, Window, list[CompiledQuestion]]] = {}

        def requests() -> Iterator[DecodeRequest]:
            for d in docs:
                if d.failure is None and block < len(d.groups):
                    for window, questions, (prompt, blocks, seed) in self._requests(d, block):
                        placed[id(window)] = (d, window, questions)
                        yield DecodeRequest(prompt, blocks, key=id(window), seed=seed)

        for result in engine.sampler.decode(requests()):
            d, window, questions = placed.pop(result.request.key)
            d.nfe += result.nfe
            d.answer_tokens += result.answer_tokens
            d.value_tokens += result.value_tokens(filler)
            if d.failure is not None:
                continue
            if result.error is not None:
                kind = FailureKind.model_error
                d.failure = (kind, f"decoding failed on characters {window.start}-{window.end}: "
                             f"{result.error}")  # fmt: skip
                continue
            text = d.item.document[window.start : window.end]
            written: WrittenSpans | None = None  # the window's spans, once an answer needs them
            for q, slot in zip(questions, result.slots[0], strict=True):
                try:
                    value = q.slot.decode(slot.tokens, filler).value
                except DecodeMismatch as exc:
                    log.exception("committed tokens do not decode (a bug): %s", exc)
                    d.failure = (FailureKind.internal_error,
                                 f"internal error decoding {q.id!r} (a bug): {exc}")  # fmt: skip
                    break
                span = None
                if q.extract:
                    if not copied(value, text, q.schema, engine.dates, q.unit):
                        why = f"extract answer {value!r} of {q.id!r} is not in its window"
                        d.failure = (FailureKind.internal_error, f"internal error: {why} (a bug)")
                        break
                    written = written or WrittenSpans(text)
                    value = as_written(value, written, q.schema, q.slot)
                    where = locate(value, text, q.schema, engine.dates, q.unit, written)
                    span = None if where is None else (window.start + where[0],
                                                       window.start + where[1])  # fmt: skip
                found = d.candidates.setdefault(q.id, [])
                found.append(Candidate(value, slot.confidence, window, span))
                runner_up = self._runner_up(q, slot.ranked, value, filler)
                if runner_up is not None:
                    found.append(Candidate(runner_up[0], runner_up[1], window, None))
        for d in docs:
            if d.failure is None and block < len(d.groups):
                for q in d.groups[block]:
                    kept = combine(d.candidates.get(q.id, []), absent_of(q),
                                   self.settings.confident)  # fmt: skip
                    if kept is not None:
                        d.kept[q.id] = kept
                        d.missing.pop(q.id, None)
                ruleset = d.qset.ruleset
                if ruleset is not None:  # the kept answers jointly, as the rules allow
                    for qid, values in self._ranked(d, set(ruleset.cells)).items():
                        d.kept[qid] = values[0]

    def _ranked(self, d: _Doc, only: set[str] | None = None) -> dict[str, list[Candidate]]:
        """The distinct answers of each kept question (of those in `only`), best first
        (`windows.ranked`), the ruled ones led by the cheapest choice the rules allow
        (`_rule_first`)."""
        by_question = {q.id: q for q in d.qset.asked}
        values = {
            qid: ranked(d.candidates[qid], absent_of(by_question[qid]), self.settings.confident)
            for qid in d.kept
            if only is None or qid in only
        }
        return _rule_first(d.qset.ruleset, values)

    @staticmethod
    def _runner_up(
        q: CompiledQuestion, ranked: Sequence[tuple[Sequence[int], float]], value: Any, filler: int
    ) -> tuple[Any, float] | None:
        """For a window that answered a question's absent value, the best option that is not
        absent and its probability in that window (finite slots decided as one option), else
        None. It is below the absent answer's, so it can only be kept when `windows.confident`
        is set below 0.5: then `confident` is a threshold on the probability that some window
        found an answer, not only on the answers windows chose."""
        declared, absent = absent_of(q)
        if not declared or not ranked or not same_value(value, absent):
            return None
        for tokens, p in ranked:
            option = q.slot.decode(list(tokens), filler).value
            if not same_value(option, absent):
                return option, p
        return None

    def _requests(self, d: _Doc, block: int) -> Iterator[tuple[Window, list, tuple]]:
        """The window requests of one document for one block, made as the sampler takes them."""
        text = d.item.document
        questions = d.groups[block]
        by_id = {q.id: q for q in d.qset.asked}
        kept = {qid: c.value for qid, c in d.kept.items()}
        absent = {qid: absent_of(by_id[qid]) == (True, value) for qid, value in kept.items()}
        try:
            plan = self.planner.plan(text, d.starts, questions, kept, absent, f"block {block + 1}")
        except NoRoom as exc:
            d.failure = (FailureKind.questions_do_not_fit, str(exc))
            return
        d.windows = max(d.windows, len(plan.windows))
        reads = self.planner.reads(text, plan.windows, questions)
        for qid, best in reads.unread.items():  # no window is likely to hold its answer
            _, value = absent_of(by_id[qid])
            d.candidates.setdefault(qid, []).append(Candidate(value, 1.0 - best, None))
        for window, asked in reads.windows:
            yield from self._window(d, block, window, asked, plan.earlier)

    def _window(
        self, d: _Doc, block: int, window: Window, questions: list, earlier: dict
    ) -> Iterator[tuple[Window, list, tuple]]:
        engine = self.engine
        text = d.item.document[window.start : window.end]
        todo = list(questions)
        constraints = None
        # The rules are bound in every window: the questions they link share a block where
        # they fit one (`WindowPlanner.groups`); ruled questions of earlier blocks hold the
        # answers kept for them, those of later blocks are left free (any value the rules
        # allow), and the combined answers are checked again.
        ruleset = d.qset.ruleset
        here = {q.id for q in todo}
        elsewhere = [] if ruleset is None else [
            q for q in d.qset.asked if q.id in ruleset.cells and q.id not in here
        ]  # fmt: skip
        fixed = {q.id: d.kept[q.id].value for q in elsewhere if q.id in d.kept}
        while ruleset is not None or any(q.extract for q in todo):
            try:
                constraints = d.qset.constraints(
                    todo,
                    (text,),
                    first=self.packer.grow_slots,
                    elsewhere=elsewhere,
                    fixed=fixed,
                )
                break
            except MissingSpan as exc:  # no span here: this window cannot answer it
                d.missing.setdefault(exc.question_id, str(exc))
                todo = [q for q in todo if q.id != exc.question_id]
            except SchemaError as exc:  # as for a document read whole (`jobs.decisions`)
                d.failure = (FailureKind.schema_refused, f"rules: {exc}")
                return
        if not todo:
            return
        blocks, _ = self.packer.blocks(todo, constraints)
        prompt = self.planner.prompt(text, todo, earlier)
        # Counted with every slot at its whole length: room for the slots that grow.
        over = len(prompt) + self.packer.answer_length(todo) - self.packer.max_length
        if over > 0:  # re-tokenized longer than counted: split it in two and try again
            starts = d.starts[(d.starts >= window.start) & (d.starts < window.end)]
            half = max(1, (window.tokens - over) // 2)
            for part in segment(d.item.document[: window.end], starts, half, 0):
                piece = Window(window.index, part.start, part.end, part.tokens)
                yield from self._window(d, block, piece, questions, earlier)
            return
        from .decisions import document_seed

        seed = document_seed(engine.decoding.seed, (d.item.doc_id, block, window.start))
        yield window, todo, (prompt, blocks, seed)

    def _finish(self, d: _Doc) -> Decision:
        from .decisions import Decision

        item = d.item

        def fresh() -> Decision:
            return Decision(item.doc_id, "error", nfe=d.nfe, answer_tokens=d.answer_tokens,
                            value_tokens=d.value_tokens, extra=item.extra,
                            windows=d.windows)  # fmt: skip

        if d.failure is not None:
            decision = fresh()
            decision.kind, decision.error = d.failure
            return decision
        missing = {qid: why for qid, why in d.missing.items() if qid not in d.kept}
        if self.engine.partial_rows == "error" and missing:
            first = next(q.id for q in d.qset.questions if q.id in missing)
            decision = fresh()
            decision.kind, decision.error = FailureKind.no_span, missing[first]
            return decision
        if not d.kept:
            decision = fresh()
            decision.kind = FailureKind.no_span
            decision.error = "; ".join(missing.values()) or "no window could be decided"
            return decision
        values = self._ranked(d)
        first: Decision | None = None
        for choice in combinations(values, ENFORCE_TRIES):
            answers = {qid: c.value for qid, c in choice.items()}
            confidence = {qid: c.confidence for qid, c in choice.items()}
            decision = self.engine.conclude_withholding(
                d.qset.asked, item, d.qset, fresh, answers, confidence, missing, enforced=False
            )
            if first is None:
                first = decision
            if decision.ok or decision.kind not in (
                FailureKind.answer_invalid,
                FailureKind.rule_violated,
            ):
                break
        else:
            decision = first  # no choice satisfies the rules: the combined answers' failure
        assert decision is not None
        if decision.ok:
            withheld = decision.withheld or {}
            decision.evidence = {
                qid: None if c.window is None or qid in withheld else Evidence(
                    c.window.index, c.window.start, c.window.end, *(c.span or (None,) * 2)
                )
                for qid, c in choice.items()
            }  # fmt: skip
        return decision


def _rule_first(ruleset: Any, values: dict[str, list[Candidate]]) -> dict[str, list[Candidate]]:
    """`values` (each question's distinct answers, best first) with each ruled question's list
    led by its answer in the cheapest choice the rules allow (`RuleSet.cheapest`): an answer
    gives up -log of its confidence, the first at least cost. Ruled questions not in `values`
    are free. Unchanged when there are no rules, when some answer falls in no case of the rules
    (its combination is judged whole afterwards), or when no choice satisfies them."""
    if ruleset is None:
        return values
    costs: dict[str, list[float]] = {}
    picks: dict[str, list[int]] = {}
    for qid in ruleset.cells:
        answers = values.get(qid)
        if not answers:
            continue
        cells = len(ruleset.cells[qid])
        costs[qid], picks[qid] = [np.inf] * cells, [-1] * cells
        spent = [-np.log(max(c.confidence, 1e-300)) for c in answers]
        least = min(spent)
        for i, answer in enumerate(answers):
            holding = ruleset.holding(qid, answer.value)
            if not any(holding):
                return values
            cell = holding.index(True)
            cost = least if i == 0 else max(spent[i], least + 1e-9 * i)
            if cost < costs[qid][cell]:
                costs[qid][cell], picks[qid][cell] = cost, i
    chosen = ruleset.cheapest(costs)
    if chosen is None:
        return values
    out = dict(values)
    for qid, cell in chosen.items():
        if qid in picks:
            i = picks[qid][cell]
            out[qid] = [values[qid][i], *values[qid][:i], *values[qid][i + 1 :]]
    return out
