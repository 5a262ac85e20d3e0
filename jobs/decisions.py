"""From documents and questions to checked decisions: packing, sampling, decoding, validation.

`DecisionEngine` is the one path both the parquet runner and the Python API take. It packs each
document (`pack.Packer`), streams the requests through the engine's continuously batched sampler in
length-sorted windows (so documents of similar length share a forward), turns committed slot tokens
back into JSON values (`decide.schemas`), and validates every decision object again with
`jsonschema` against the questions' schemas plus the spec's rules. Derived questions (`derive:`)
are not packed: they are computed from the decoded answers (`jobs.derive`), after answers decoded
less sure than `absent_below` are given as absent (`jobs.withhold`). A document that cannot
be packed or decided becomes an error decision with a `FailureKind`; it never stops the others.
An answer that fails on its own (an extract question with no span, a derived answer with a
missing input) leaves the row ok and `partial`, with the reason in `errors`, unless
`partial_rows="error"`. A document too long for the model is, with `long_documents="windows"`,
pooled and decided in windows (`jobs.longdocs`), whose combined answers are concluded here like
any other (`DecisionEngine.conclude_withholding`).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from decide.engine.loader import LoadedModel
from decide.engine.requests import DecodeResult
from decide.engine.sampler import Sampler, SamplerConfig
from decide.schemas import DecodeMismatch, SchemaError
from decide.schemas.dates import DatePolicy
from decide.schemas.rules import RuledSlot
from decide.schemas.span import NoSpan, WrittenSpans

from .evidence import Evidence, locate
from .extracted import MissingSpan, as_written, copied
from .failures import FailureKind
from .pack import DocumentTooLong, InvalidText, PackedDocument, Packer, QuestionsDoNotFit
from .questions import CompiledQuestion
from .questionset import QuestionBook, QuestionSet, QuestionsRefused, Stage
from .rechoose import depends_on_checks, rechoose
from .spec import Decoding, JobSpec, Question, Windows
from .withhold import withhold

log = logging.getLogger("decide.jobs")
LOOKAHEAD = 8  # documents packed ahead per batch slot, sorted by length before decoding


@dataclass
class Decision:
    """The decision about one document (`status` "ok" or "error")."""

    doc_id: Any
    status: str
    answers: dict[str, Any] | None = None
    answers_json: str | None = None
    confidence: dict[str, float] | None = None
    error: str | None = None
    nfe: int = 0
    answer_tokens: int = 0  # slot positions this document's answers had, filler included
    value_tokens: int = 0  # of those, the positions that hold a value's token (not filler)
    truncated: bool = False
    narrowed: dict[str, int] = field(default_factory=dict)  # rule pointer -> slots narrowed
    extra: dict[str, Any] = field(default_factory=dict, repr=False)  # caller's carried data
    kind: FailureKind | None = None  # why it failed (None when ok)
    partial: bool = False  # ok, but some answers failed on their own (see `errors`)
    errors: dict[str, str | None] | None = None  # per question: None or why it has no answer
    # A document read in windows (`jobs.longdocs`): how many it was cut into (0: read whole)
    # and, per question, where the kept answer was read (`jobs.evidence.Evidence`).
    windows: int = 0
    evidence: dict[str, Any] | None = None
    # Answers given as absent because their confidence was below `absent_below`: per question,
    # the decoded value and its confidence (`jobs.withhold`).
    withheld: dict[str, dict[str, Any]] | None = None
    # The Python API with a spec's calibration (`Decider.from_spec`): the engine's confidences
    # (`confidence` is then calibrated), and with its `review_below` whether `decide run` would
    # send this row to review (None: no threshold).
    raw_confidence: dict[str, float] | None = None
    review: bool | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass
class Item:
    """One document to decide: its questions compiled, or the reason they could not be."""

    doc_id: Any
    document: str | None
    questions: QuestionSet | Sequence[CompiledQuestion]  # a list is compiled into a set
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    kind: FailureKind | None = None  # of `error` (invalid_questions when not given)


def document_seed(seed: int, doc_id: Any) -> int:
    """A per-document seed of its doc id: it does not depend on batching or input order."""
    digest = hashlib.sha256(f"{seed}\0{doc_id!r}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


class DecisionEngine:
    def __init__(
        self,
        loaded: LoadedModel,
        decoding: Decoding | None = None,
        *,
        batch_size: int = 16,
        instruction: str | None = None,
        long_documents: str = "error",
        rules: dict[str, Any] | list | None = None,
        partial_rows: str = "keep",
        dates: DatePolicy | None = None,
        windows: Windows | None = None,
    ) -> None:
        self.loaded = loaded
        self.partial_rows = partial_rows
        self.dates = dates or DatePolicy()
        self.decoding = decoding or Decoding()
        checks: list[tuple[str, str]] = []  # CEL rules, checked after decoding
        if isinstance(rules, list):
            checks = [
                (r["rule"], r["message"]) if isinstance(r, dict) else (r.rule, r.message)
                for r in rules
            ]
            rules = None
        self.rules = rules
        self.book = QuestionBook(
            loaded.config, loaded.tokenizer, rules=rules, checks=checks, dates=self.dates
        )
        self.compiler = self.book.compiler  # its vocabulary; compile through `questions`
        self.packer = Packer.for_model(
            loaded.config,
            loaded.tokenizer,
            self.book.filler_id,
            instruction=instruction,
            long_documents=long_documents,
        )
        self.batch_size = batch_size
        self.set_decoding(self.decoding)
        self.long = None  # decides documents too long for the model in windows
        if long_documents == "windows":
            from .longdocs import LongDocuments

            self.long = LongDocuments(self, windows)

    @classmethod
    def for_spec(
        cls, loaded: LoadedModel, spec: JobSpec, *, batch_size: int = 16
    ) -> DecisionEngine:
        """The engine a job spec describes (its decoding, instruction, long-document policy and
        windows, rules, partial rows and dates): the runners' and the API's one construction."""
        return cls(
            loaded,
            spec.decoding,
            batch_size=batch_size,
            instruction=spec.instruction,
            long_documents=spec.long_documents,
            rules=spec.rules,
            partial_rows=spec.partial_rows,
            dates=spec.dates.policy(),
            windows=spec.windows,
        )

    def set_decoding(self, decoding: Decoding, batch_size: int | None = None) -> None:
        """Decode with other settings from now on, keeping the compiled questions and their
        mask caches."""
        self.decoding = decoding
        self.packer.grow_slots = decoding.grow_slots
        self.batch_size = batch_size or self.batch_size
        self.sampler = Sampler(
            self.loaded.model,
            SamplerConfig(
                threshold=decoding.threshold,
                max_steps=decoding.max_steps,
                temperature=decoding.temperature,
                cache=decoding.cache,
                queries=decoding.in_block_cache,
                max_tokens_per_step=decoding.max_tokens_per_step,
                parallel_continuations=decoding.parallel_continuations,
                batch_size=self.batch_size,
            ),
        )

    def questions(self, questions: Sequence[Question | CompiledQuestion]) -> QuestionSet:
        """The compiled `QuestionSet` of `questions` (cached); raises `QuestionsRefused`."""
        return self.book.build(questions)

    def decide(self, items: Iterable[Item]) -> Iterator[Decision]:
        """Decisions for `items`, in completion order (match them by `doc_id`)."""
        side: deque[Decision] = deque()
        packed: dict[int, tuple[Item, QuestionSet, PackedDocument, dict[str, str]]] = {}
        source = iter(items)
        # Too long for the model: decided in windows (`jobs.longdocs`), a pool at a time.
        pool: list[tuple[Item, QuestionSet]] = []
        done = False

        def requests():
            nonlocal done
            window: list[tuple[Item, QuestionSet, PackedDocument, dict[str, str]]] = []
            for item in source:
                failed = self._guarded(item, self._pack, item, window, pool)
                if failed is not None:
                    side.append(failed)
                if len(window) >= LOOKAHEAD * self.batch_size:
                    yield from self._release(window, packed)
                    window = []
                if self.long is not None and len(pool) >= self.long.pool:
                    break  # decide the pool's windows, then go on with the rest
            else:
                done = True
            yield from self._release(window, packed)

        while not done:
            for result in self.sampler.decode(requests()):
                while side:
                    yield side.popleft()
                item, qset, doc, missing = packed.pop(result.request.key)
                yield self._guarded(item, self._finish, item, qset, doc, result, missing)
            while side:
                yield side.popleft()
            if pool:
                assert self.long is not None
                yield from self.long.decide(pool)
                pool.clear()

    def _pack(self, item: Item, window: list, pool: list | None = None) -> Decision | None:
        def failed(kind: FailureKind, message: str) -> Decision:
            return Decision(item.doc_id, "error", error=message, extra=item.extra, kind=kind)

        if item.error is not None:
            return failed(item.kind or FailureKind.invalid_questions, item.error)
        if item.document is None or not item.document.strip():
            what = "null" if item.document is None else "empty"
            return failed(FailureKind.empty_document, f"document is {what}")
        if not item.questions:
            return failed(FailureKind.no_questions, "no questions for this document")
        try:
            qset = self.questions(item.questions)
        except QuestionsRefused as exc:
            return failed(exc.kind, _refusal(exc))
        missing: dict[str, str] = {}  # extract questions without a span: answer-level errors
        while True:
            todo = [q for q in qset.asked if q.id not in missing]
            if not todo:
                return failed(FailureKind.no_span, "; ".join(missing.values()))
            try:
                prompt = self.packer.prompt(item.document, todo)
                doc = self.packer.pack(
                    item.document,
                    todo,
                    seed=document_seed(self.decoding.seed, item.doc_id),
                    constraints=qset.constraints(todo, prompt.parts, first=self.packer.grow_slots),
                    prompt=prompt,
                )
            except DocumentTooLong as exc:  # QuestionsDoNotFit too: windows ask block by block
                if self.long is not None and pool is not None:
                    pool.append((item, qset))  # long_documents: windows
                    return None
                kind = (
                    FailureKind.questions_do_not_fit
                    if isinstance(exc, QuestionsDoNotFit)
                    else FailureKind.document_too_long
                )
                return failed(kind, str(exc))
            except InvalidText as exc:
                return failed(FailureKind.invalid_text, str(exc))
            except SchemaError as exc:  # rules no answer of this document can satisfy
                return failed(FailureKind.schema_refused, f"rules: {exc}")
            except MissingSpan as exc:
                if self.partial_rows == "error":
                    return failed(FailureKind.no_span, str(exc))
                missing[exc.question_id] = str(exc)
                continue
            except NoSpan as exc:
                return failed(FailureKind.no_span, str(exc))
            window.append((item, qset, doc, missing))
            return None

    @staticmethod
    def _guarded(item: Item, work: Callable[..., Decision | None], *args: Any) -> Any:
        """`work(*args)` on one row; an exception it did not expect (a bug, or input no check
        foresaw) fails that row as `internal_error`, logged with its traceback, instead of
        stopping the job, which would stop again at the same row on every `--resume`."""
        try:
            return work(*args)
        except Exception as exc:
            log.exception("row %r: unexpected error (a bug)", item.doc_id)
            why = f"internal error (a bug): {type(exc).__name__}: {exc}"
            return Decision(item.doc_id, "error", extra=item.extra,
                            kind=FailureKind.internal_error, error=why)  # fmt: skip

    def _release(self, window: list, packed: dict) -> Iterator:
        window.sort(key=lambda entry: entry[2].request.length)
        for item, qset, doc, missing in window:
            key = id(doc)
            packed[key] = (item, qset, doc, missing)
            r = doc.request
            yield type(r)(prompt=r.prompt, blocks=r.blocks, key=key, seed=r.seed)

    def _finish(
        self,
        item: Item,
        qset: QuestionSet,
        doc: PackedDocument,
        result: DecodeResult,
        missing: dict[str, str] | None = None,
    ) -> Decision:
        def fresh() -> Decision:
            return Decision(
                item.doc_id,
                "error",
                nfe=result.nfe,
                answer_tokens=result.answer_tokens,
                value_tokens=result.value_tokens(self.packer.filler_id),
                truncated=doc.truncated,
                narrowed=_narrowed(doc),
                extra=item.extra,
            )

        decision = fresh()

        def failed(kind: FailureKind, message: str) -> Decision:
            decision.kind, decision.error = kind, message
            return decision

        if result.error is not None:
            slot_names = [q.id for group in doc.groups for q in group]
            kind = (
                FailureKind.rules_unsatisfiable
                if _rules_exhausted(doc)
                else FailureKind.model_error
            )
            return failed(
                kind, f"decoding failed: {result.error} (questions {', '.join(slot_names)})"
            )
        answers: dict[str, Any] = {}
        confidence: dict[str, float] = {}
        options = {}  # each answer's ranked options, decoded only if a rule is violated
        text = item.document or ""
        written: WrittenSpans | None = None  # built for the first extract answer
        for group, slot_results in zip(doc.groups, result.slots, strict=True):
            for question, slot_result in zip(group, slot_results, strict=True):
                if slot_result.ranked:
                    options[question.id] = (question, slot_result.ranked)
                try:
                    decoded = question.slot.decode(slot_result.tokens, self.packer.filler_id)
                except DecodeMismatch as exc:
                    # A bug, never an input problem: loud in the log, one error row, the job
                    # goes on.
                    log.exception("committed tokens do not decode (a bug): %s", exc)
                    return failed(
                        FailureKind.internal_error,
                        f"internal error decoding {question.id!r} (a bug): {exc}",
                    )
                value = decoded.value
                if question.extract and not copied(
                    value, text, question.schema, self.dates, question.unit
                ):
                    log.error("an extract answer is not in its document (a bug)")
                    return failed(
                        FailureKind.internal_error,
                        f"internal error: extract answer {value!r} of {question.id!r} is not "
                        "in the document (a bug)",
                    )
                if question.extract:
                    written = written or WrittenSpans(text)
                    value = as_written(value, written, question.schema, question.slot)
                answers[question.id] = value
                confidence[question.id] = slot_result.confidence
        asked_questions = [q for group in doc.groups for q in group]
        decision = self.conclude_withholding(
            asked_questions, item, qset, fresh, dict(answers), dict(confidence), missing
        )
        if decision.kind is not FailureKind.rule_violated:
            return self._spans(decision, doc, text, written)
        fallible = depends_on_checks(qset)

        def option(q: CompiledQuestion, tokens: Sequence[int]) -> Any:
            value = q.slot.decode(list(tokens), self.packer.filler_id).value
            if q.extract:
                value = as_written(value, written or WrittenSpans(text), q.schema, q.slot)
            return value

        ranked = {
            qid: [(option(q, tokens), p) for tokens, p in opts]
            for qid, (q, opts) in options.items()
            if qid in fallible
        }
        if ranked:
            better = rechoose(
                lambda a, c: self.conclude_withholding(
                    asked_questions, item, qset, fresh, a, c, missing
                ),
                qset, answers, confidence, ranked,
            )  # fmt: skip
            decision = better or decision
        return self._spans(decision, doc, text, written)

    def _spans(
        self, decision: Decision, doc: PackedDocument, text: str, written: WrittenSpans | None
    ) -> Decision:
        """A document read whole: per extract answer, the first span, number or date of the
        document it was copied from, as `Evidence` (window None, the whole document, the span);
        other answers have none. Nothing when no extract answer is in the text."""
        if not decision.ok or written is None or decision.answers is None:
            return decision
        found: dict[str, Any] = {}
        for question in (q for group in doc.groups for q in group if q.extract):
            span = locate(
                decision.answers.get(question.id), text, question.schema, self.dates,
                question.unit, spans=written,
            )  # fmt: skip
            if span is not None:
                found[question.id] = Evidence(None, 0, len(text), *span)
        decision.evidence = found or None
        return decision

    def conclude_withholding(
        self,
        questions: Sequence[CompiledQuestion],
        item: Item,
        qset: QuestionSet,
        fresh: Callable[[], Decision],
        answers: dict[str, Any],
        confidence: dict[str, float],
        missing: dict[str, str] | None = None,
        enforced: bool = True,
    ) -> Decision:
        """`conclude` after `absent_below` withheld the unsure answers of `questions`; when the
        absent answers break the rules or the decision's schema (a rule that wants a value), the
        decoded answers are concluded instead and nothing is withheld."""
        held_answers, held_confidence = dict(answers), dict(confidence)
        withheld = withhold(questions, held_answers, held_confidence, self.decoding.absent_below)
        if withheld:
            # Not `enforced`: an absent answer was not decoded under the rules.
            decision = self.conclude(
                item, qset, fresh(), held_answers, held_confidence, missing, enforced=False
            )
            if decision.kind not in (FailureKind.rule_violated, FailureKind.answer_invalid):
                decision.withheld = withheld if decision.ok else None
                return decision
        return self.conclude(item, qset, fresh(), answers, confidence, missing, enforced)

    def conclude(
        self,
        item: Item,
        qset: QuestionSet,
        decision: Decision,
        answers: dict[str, Any],
        confidence: dict[str, float],
        missing: dict[str, str] | None = None,
        enforced: bool = True,
    ) -> Decision:
        """The decision from the decoded answers: derived answers computed, the whole object
        validated (schemas and JSON Schema rules), CEL rules checked, partial answers noted.
        `enforced`: the rules were enforced while decoding (a produced value failing them is a
        bug), not only checked here (windows, `jobs.longdocs`)."""

        def failed(kind: FailureKind, message: str) -> Decision:
            decision.kind, decision.error = kind, message
            return decision

        plan = qset.plan
        if plan.order:
            values, conf, derive_errors = plan.evaluate(answers, confidence)
            answers.update(values)
            confidence.update(conf)
        else:
            derive_errors = {}
        errors = {**(missing or {}), **derive_errors}
        if errors and self.partial_rows == "error":
            first = next(q.id for q in qset.questions if q.id in errors)
            kind = FailureKind.derive_failed if first in derive_errors else FailureKind.no_span
            return failed(kind, f"question {first!r}: {errors[first]}")
        present = [q for q in qset.questions if q.id in answers]
        ordered = {q.id: answers[q.id] for q in present}
        validator = qset.validator([q.id for q in present])
        problems = sorted(validator.iter_errors(ordered), key=str)
        if problems:
            where = "/" + "/".join(str(p) for p in problems[0].absolute_path)
            failed(
                FailureKind.answer_invalid,
                f"answer fails validation at {where}: {problems[0].message}",
            )
            produced = {q.id for q in present if q.derive is None}
            if enforced and any(
                p.absolute_path and p.absolute_path[0] in produced for p in problems
            ):
                log.error("a produced value fails its schema (a bug): %s", decision.error)
            return decision
        violated = qset.checks.violated(ordered) if qset.checks is not None else None
        if violated is not None:
            check, why = violated
            return failed(FailureKind.rule_violated, f"rule /rules/{check.index} ({check.rule}) "
                          f"violated: {why}")  # fmt: skip
        decision.status = "ok"
        decision.answers = ordered
        decision.answers_json = json.dumps(ordered, separators=(",", ":"), ensure_ascii=False)
        decision.confidence = {q.id: confidence[q.id] for q in present}
        if errors:
            decision.partial = True
            decision.errors = {q.id: errors.get(q.id) for q in qset.questions}
        return decision


def _refusal(exc: QuestionsRefused) -> str:
    """The message of a row whose questions were refused."""
    return f"rules: {exc}" if exc.stage is Stage.rules else f"invalid questions: {exc}"


def _ruled_states(doc: PackedDocument) -> list[Any]:
    """The rule states of a document's slots (one per set of ruled slots)."""
    states = {
        id(slot.constraint.state): slot.constraint.state
        for block in doc.request.blocks
        for slot in block.slots
        if isinstance(slot.constraint, RuledSlot)
    }
    return list(states.values())


def _rules_exhausted(doc: PackedDocument) -> bool:
    """Whether decoding failed because no answer left satisfied the rules."""
    return any(state.exhausted for state in _ruled_states(doc))


def _narrowed(doc: PackedDocument) -> dict[str, int]:
    """Per rule, how many times it narrowed a slot of this document."""
    out: dict[str, int] = {}
    for state in _ruled_states(doc):
        for pointer, n in state.narrowed.items():
            out[pointer] = out.get(pointer, 0) + n
    return out
