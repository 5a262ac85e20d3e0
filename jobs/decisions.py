"""From documents and questions to checked decisions: packing, sampling, decoding, validation.

`DecisionEngine` is the one path both the parquet runner and the Python API take. It packs each
document (`pack.Packer`), streams the requests through the engine's continuously batched sampler in
length-sorted windows (so documents of similar length share a forward), turns committed slot tokens
back into JSON values (`decide.schemas`), and validates every decision object again with
`jsonschema` against the questions' schemas plus the spec's rules. Derived questions (`derive:`)
are not packed: they are computed from the decoded answers (`jobs.derive`). A document that cannot
be packed or decided becomes an error decision with a `FailureKind`; it never stops the others.
An answer that fails on its own (an extract question with no span, a derived answer with a
missing input) leaves the row ok and `partial`, with the reason in `errors`, unless
`partial_rows="error"`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker

from decide.engine.loader import LoadedModel
from decide.engine.requests import DecodeResult
from decide.engine.sampler import Sampler, SamplerConfig
from decide.schemas import DecodeMismatch, SchemaError
from decide.schemas.dates import DatePolicy, DocumentDates, date_format
from decide.schemas.drafts import normalize
from decide.schemas.rules import RuledSlot, RuleSet, compile_rules
from decide.schemas.span import (
    DocumentNumbers,
    DocumentSpans,
    NoSpan,
    SpanSlot,
    extract_kind,
)

from .checks import CheckPlan, plan_checks
from .derive import DerivePlan, plan_derived
from .extracted import MissingSpan, copied
from .failures import FailureKind
from .pack import DocumentTooLong, InvalidText, PackedDocument, Packer
from .questions import (
    CompiledQuestion,
    QuestionCompiler,
    asked,
    refuse_ruled_derived,
    refuse_ruled_extract,
)
from .spec import Decoding

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

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass
class Item:
    """One document to decide: its questions compiled, or the reason they could not be."""

    doc_id: Any
    document: str | None
    questions: Sequence[CompiledQuestion]
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    kind: FailureKind | None = None  # of `error` (invalid_questions when not given)


FAILURE_REASONS = (
    (re.compile(r"^document needs \d+ tokens"), "document too long"),
    (re.compile(r"^duplicate doc_id"), "duplicate doc_id"),
    (re.compile(r"^doc_id is null|: doc_id is null$"), "doc_id is null"),
    (re.compile(r"^the questions and answers alone need"), "questions do not fit"),
)


def failure_reason(error: str) -> str:
    """A stable category for an error message (for counts): known patterns, else the text before
    the first colon."""
    for pattern, reason in FAILURE_REASONS:
        if pattern.search(error):
            return reason
    return error.split(":", 1)[0].strip()[:80]


def _value_tokens(result: DecodeResult, filler: int) -> int:
    """Committed positions of a document's answer slots that hold a value's token (not filler)."""
    return sum(t != filler for group in result.slots for slot in group for t in slot.tokens)


def document_seed(seed: int, doc_id: Any) -> int:
    """A per-document seed that does not depend on batching or input order."""
    digest = hashlib.sha256(f"{seed}\0{doc_id!r}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def _as_resource(q: CompiledQuestion) -> Any:
    """A question's schema in the 2020-12 form it was compiled from (`decide.schemas.drafts`),
    as its own resource: its `#…` references resolve inside it, and a schema of another draft
    keeps that draft's meaning inside the 2020-12 decision schema."""
    # A derived question never compiles to a slot: its schema is normalised here.
    schema = normalize(q.schema).schema if q.slot is None else q.slot.language.normalized
    if not isinstance(schema, dict):
        return schema
    return {"$id": f"urn:decide:question:{q.id}", **schema}


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
    ) -> None:
        self.loaded = loaded
        self.partial_rows = partial_rows
        self.dates = dates or DatePolicy()
        self.decoding = decoding or Decoding()
        self.compiler = QuestionCompiler(loaded.config, loaded.tokenizer)
        self.packer = Packer.for_model(
            loaded.config,
            loaded.tokenizer,
            self.compiler.filler_id,
            instruction=instruction,
            long_documents=long_documents,
        )
        self.checks: list[tuple[str, str]] = []  # CEL rules, checked after decoding
        if isinstance(rules, list):
            self.checks = [
                (r["rule"], r["message"]) if isinstance(r, dict) else (r.rule, r.message)
                for r in rules
            ]
            rules = None
        self.rules = rules
        self._validators: dict[tuple, Draft202012Validator] = {}
        self._rulesets: dict[tuple, RuleSet] = {}
        self._plans: dict[tuple, DerivePlan] = {}
        self._checks: dict[tuple, CheckPlan] = {}
        self.batch_size = batch_size
        self.set_decoding(self.decoding)

    def set_decoding(self, decoding: Decoding, batch_size: int | None = None) -> None:
        """Decode with other settings from now on, keeping the compiled questions and their
        mask caches."""
        self.decoding = decoding
        self.batch_size = batch_size or self.batch_size
        self.sampler = Sampler(
            self.loaded.model,
            SamplerConfig(
                threshold=decoding.threshold,
                max_steps=decoding.max_steps,
                temperature=decoding.temperature,
                cache=decoding.cache,
                max_tokens_per_step=decoding.max_tokens_per_step,
                batch_size=self.batch_size,
            ),
        )

    def ruleset(self, questions: Sequence[CompiledQuestion]) -> RuleSet | None:
        """The spec's rules compiled for this set of questions (cached); `SchemaError` if they
        use anything that cannot be enforced while decoding."""
        if self.rules is None:
            return None
        key = tuple((q.id, json.dumps(q.schema, sort_keys=True), q.extract) for q in questions)
        if key not in self._rulesets:
            refuse_ruled_derived(self.rules, questions)
            questions = asked(questions)
            ruleset = compile_rules(
                self.rules, {q.id: q.schema for q in questions}, {q.id: q.slot for q in questions}
            )
            refuse_ruled_extract(ruleset, list(questions))
            self._rulesets[key] = ruleset
        return self._rulesets[key]

    def plan(self, questions: Sequence[CompiledQuestion]) -> DerivePlan:
        """The derived questions among `questions`, checked and ordered (cached)."""
        key = tuple((q.id, json.dumps(q.schema, sort_keys=True), q.derive) for q in questions)
        if key not in self._plans:
            self._plans[key] = plan_derived([(q.id, q.schema, q.derive) for q in questions])
        return self._plans[key]

    def check_plan(self, questions: Sequence[CompiledQuestion]) -> CheckPlan:
        """The spec's CEL rules checked against this set of questions (cached)."""
        key = tuple((q.id, json.dumps(q.schema, sort_keys=True), q.derive) for q in questions)
        if key not in self._checks:
            triples = [(q.id, q.schema, q.derive) for q in questions]
            self._checks[key] = plan_checks(self.checks, triples)
        return self._checks[key]

    def validator(self, questions: Sequence[CompiledQuestion]) -> Draft202012Validator:
        key = tuple(json.dumps([q.id, q.schema], sort_keys=True) for q in questions)
        if key not in self._validators:
            schema: dict[str, Any] = {
                "type": "object",
                "properties": {q.id: _as_resource(q) for q in questions},
                "required": [q.id for q in questions],
                "additionalProperties": False,
            }
            if self.rules is not None:
                schema = {"allOf": [schema, self.rules]}
            self._validators[key] = Draft202012Validator(schema, format_checker=FormatChecker())
        return self._validators[key]

    def decide(self, items: Iterable[Item]) -> Iterator[Decision]:
        """Decisions for `items`, in completion order (match them by `doc_id`)."""
        side: deque[Decision] = deque()
        packed: dict[int, tuple[Item, PackedDocument, dict[str, str]]] = {}

        def requests():
            window: list[tuple[Item, PackedDocument, dict[str, str]]] = []
            for item in items:
                failed = self._pack(item, window)
                if failed is not None:
                    side.append(failed)
                if len(window) >= LOOKAHEAD * self.batch_size:
                    yield from self._release(window, packed)
                    window = []
            yield from self._release(window, packed)

        for result in self.sampler.decode(requests()):
            while side:
                yield side.popleft()
            item, doc, missing = packed.pop(result.request.key)
            yield self._finish(item, doc, result, missing)
        while side:
            yield side.popleft()

    def _pack(self, item: Item, window: list) -> Decision | None:
        def failed(kind: FailureKind, message: str) -> Decision:
            return Decision(item.doc_id, "error", error=message, extra=item.extra, kind=kind)

        if item.error is not None:
            return failed(item.kind or FailureKind.invalid_questions, item.error)
        if item.document is None or not item.document.strip():
            what = "null" if item.document is None else "empty"
            return failed(FailureKind.empty_document, f"document is {what}")
        if not item.questions:
            return failed(FailureKind.no_questions, "no questions for this document")
        missing: dict[str, str] = {}  # extract questions without a span: answer-level errors
        while True:
            todo = [q for q in asked(item.questions) if q.id not in missing]
            if not todo:
                return failed(FailureKind.no_span, "; ".join(missing.values()))
            try:
                self.plan(item.questions)
                self.check_plan(item.questions)
                ruleset = self.ruleset(item.questions)
                constraints = None
                if ruleset is not None:
                    pairs = [(q.id, q.slot) for q in todo]
                    constraints = ruleset.bind(pairs, self.packer.filler_id)
                if any(q.extract for q in todo):
                    constraints = partial(self._spans, todo, constraints)
                doc = self.packer.pack(
                    item.document,
                    todo,
                    seed=document_seed(self.decoding.seed, item.doc_id),
                    constraints=constraints,
                )
            except DocumentTooLong as exc:
                alone = str(exc).startswith("the questions and answers alone need")
                kind = FailureKind.questions_do_not_fit if alone else FailureKind.document_too_long
                return failed(kind, str(exc))
            except InvalidText as exc:
                return failed(FailureKind.invalid_text, str(exc))
            except SchemaError as exc:
                return failed(FailureKind.schema_refused, f"rules: {exc}")
            except MissingSpan as exc:
                if self.partial_rows == "error":
                    return failed(FailureKind.no_span, str(exc))
                missing[exc.question_id] = str(exc)
                continue
            except NoSpan as exc:
                return failed(FailureKind.no_span, str(exc))
            except ValueError as exc:  # DeriveError: a per-row question set that cannot derive
                return failed(FailureKind.invalid_questions, f"invalid questions: {exc}")
            window.append((item, doc, missing))
            return None

    def _spans(
        self, questions: list[CompiledQuestion], constraints: list | None, parts: tuple[str, ...]
    ) -> list:
        """The document's constraints with a `SpanSlot` for every extract question, over the
        spans (or numbers) of the parts of the document its prompt keeps (all of it unless
        truncated)."""
        filler = self.packer.filler_id
        out = constraints or [q.slot.new_constraint(filler) for q in questions]
        extract = [q for q in questions if q.extract]
        kinds = {q.id: extract_kind(q.schema) for q in extract}
        vocab = extract[0].slot.vocab
        # One tokenization of the document's spans for all its span questions, cut at the
        # longest `maxLength` among them (none when one of them has no such bound); one list of
        # its numbers for all its numeric ones.
        limits = [
            q.schema.get("maxLength") if isinstance(q.schema, dict) else None
            for q in extract
            if kinds[q.id] == "spans"
        ]
        built: dict[str, DocumentSpans | DocumentNumbers | DocumentDates] = {}
        for k, q in enumerate(questions):
            if q.extract:  # never ruled: `ruleset()` refuses rules over extract questions
                kind = kinds[q.id]
                if kind == "dates":
                    kind = f"dates:{date_format(q.schema)}"
                if kind not in built:
                    if kind == "spans":
                        limit = None if None in limits else max(limits)
                        built[kind] = DocumentSpans(parts, vocab, limit)
                    elif kind == "numbers":
                        built[kind] = DocumentNumbers(parts, vocab)
                    else:
                        built[kind] = DocumentDates(parts, vocab, kind[6:], self.dates)
                try:
                    out[k] = SpanSlot(q.slot, filler, built[kind])
                except NoSpan as exc:
                    raise MissingSpan(q.id, f"question {q.id!r} (extract): {exc}") from exc
        return out

    def _release(self, window: list, packed: dict) -> Iterator:
        window.sort(key=lambda entry: entry[1].request.length)
        for item, doc, missing in window:
            key = id(doc)
            packed[key] = (item, doc, missing)
            r = doc.request
            yield type(r)(prompt=r.prompt, blocks=r.blocks, key=key, seed=r.seed)

    def _finish(
        self,
        item: Item,
        doc: PackedDocument,
        result: DecodeResult,
        missing: dict[str, str] | None = None,
    ) -> Decision:
        decision = Decision(
            item.doc_id,
            "error",
            nfe=result.nfe,
            answer_tokens=result.answer_tokens,
            value_tokens=_value_tokens(result, self.packer.filler_id),
            truncated=doc.truncated,
            narrowed=_narrowed(doc),
            extra=item.extra,
        )

        def failed(kind: FailureKind, message: str) -> Decision:
            decision.kind, decision.error = kind, message
            return decision

        if result.error is not None:
            slot_names = [q.id for group in doc.groups for q in group]
            kind = (
                FailureKind.rules_unsatisfiable
                if "satisfies the rules" in result.error
                else FailureKind.model_error
            )
            return failed(
                kind, f"decoding failed: {result.error} (questions {', '.join(slot_names)})"
            )
        answers: dict[str, Any] = {}
        confidence: dict[str, float] = {}
        text = item.document or ""
        for group, slot_results in zip(doc.groups, result.slots, strict=True):
            for question, slot_result in zip(group, slot_results, strict=True):
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
                if question.extract and not copied(value, text, question.schema, self.dates):
                    log.error("an extract answer is not in its document (a bug)")
                    return failed(
                        FailureKind.internal_error,
                        f"internal error: extract answer {value!r} of {question.id!r} is not "
                        "in the document (a bug)",
                    )
                answers[question.id] = decoded.value
                confidence[question.id] = slot_result.confidence
        plan = self.plan(item.questions)
        if plan.order:
            values, conf, derive_errors = plan.evaluate(answers, confidence)
            answers.update(values)
            confidence.update(conf)
        else:
            derive_errors = {}
        errors = {**(missing or {}), **derive_errors}
        if errors and self.partial_rows == "error":
            first = next(q.id for q in item.questions if q.id in errors)
            kind = FailureKind.derive_failed if first in derive_errors else FailureKind.no_span
            return failed(kind, f"question {first!r}: {errors[first]}")
        present = [q for q in item.questions if q.id in answers]
        ordered = {q.id: answers[q.id] for q in present}
        problems = sorted(self.validator(present).iter_errors(ordered), key=str)
        if problems:
            where = "/" + "/".join(str(p) for p in problems[0].absolute_path)
            failed(
                FailureKind.answer_invalid,
                f"answer fails validation at {where}: {problems[0].message}",
            )
            produced = {q.id for q in present if q.derive is None}
            if any(p.absolute_path and p.absolute_path[0] in produced for p in problems):
                log.error("a produced value fails its schema (a bug): %s", decision.error)
            return decision
        violated = self.check_plan(item.questions).violated(ordered) if self.checks else None
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
            decision.errors = {q.id: errors.get(q.id) for q in item.questions}
        return decision


def _narrowed(doc: PackedDocument) -> dict[str, int]:
    """Per rule, how many times it narrowed a slot of this document."""
    states = {
        id(slot.constraint.state): slot.constraint.state
        for block in doc.request.blocks
        for slot in block.slots
        if isinstance(slot.constraint, RuledSlot)
    }
    out: dict[str, int] = {}
    for state in states.values():
        for pointer, n in state.narrowed.items():
            out[pointer] = out.get(pointer, 0) + n
    return out
