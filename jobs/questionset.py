"""One compiled set of questions: the only place where questions, rules and checks are compiled.

A `QuestionSet` is everything decide needs to ask one list of questions of any number of
documents: the compiled slots (`CompiledQuestion`), the spec's JSON Schema rules compiled against
them (refusing rules over derived or extract questions), the derived questions' plan, the CEL
checks, the extract kind of every extract question, the `jsonschema` validators of the decision
object, and `constraints`, the one method that builds a document's slot constraints.

`QuestionBook` compiles sets for one model and one job's rules and caches them by a stable
fingerprint of the questions (ids, texts, schemas, `extract`, `derive`, `absent`), so a job whose
rows share a handful of distinct question lists compiles each once. Everything that asks
questions builds them here: `decide validate`, the local and Ray runners, `Decider`, training and
the windows of long documents. A list that cannot be used raises `QuestionsRefused`, which says
at which stage (a question's schema, its derive expressions, the rules) and carries the
`FailureKind` a row refused for it gets; callers never read the message to classify it.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from decide.engine.config import ModelConfig
from decide.engine.tokenizer import TokenizerBundle
from decide.schemas import SchemaError
from decide.schemas.dates import DatePolicy, DocumentDates, date_format
from decide.schemas.drafts import Validator, normalize
from decide.schemas.nullable import value_schema
from decide.schemas.rules import RuleSet, compile_rules
from decide.schemas.span import DocumentNumbers, DocumentSpans, NoSpan, SpanSlot, extract_kind

from .checks import CheckPlan, plan_checks
from .derive import DerivePlan, plan_derived
from .extracted import MissingSpan
from .failures import FailureKind
from .questions import (
    CompiledQuestion,
    QuestionCompiler,
    refuse_ruled_derived,
    refuse_ruled_extract,
)
from .spec import JobSpec, Question


class Stage(str, Enum):
    """What part of a question list was refused."""

    schema = "schema"  # a question's schema does not compile (or is no extract schema)
    derive = "derive"  # a derive expression or a CEL check does not type check
    rules = "rules"  # the JSON Schema rules cannot be enforced over these questions


class QuestionsRefused(ValueError):
    """A question list that cannot be asked: `stage`, the question it concerns (None for rules
    and checks), the underlying error (`cause`, with its pointer) and the row's `kind`."""

    def __init__(self, stage: Stage, cause: Exception, question_id: str | None = None) -> None:
        super().__init__(str(cause))
        self.stage, self.cause, self.question_id = stage, cause, question_id

    @property
    def kind(self) -> FailureKind:
        return FailureKind.schema_refused if self.stage is Stage.rules else (
            FailureKind.invalid_questions)  # fmt: skip


def fingerprint(questions: Sequence[Question | CompiledQuestion]) -> str:
    """A stable digest of what a question list asks (ids, texts, schemas, extract, derive,
    absent, unit, absent_below)."""
    rows = [
        [q.id, q.text, q.schema_ if isinstance(q, Question) else q.schema, q.extract, q.derive]
        + ([q.absent] if q.absent is not None else [])
        + ([{"unit": q.unit}] if q.unit is not None else [])
        + ([{"absent_below": q.absent_below}] if q.absent_below is not None else [])
        for q in questions
    ]
    text = json.dumps(rows, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _as_resource(q: CompiledQuestion) -> Any:
    """A question's schema in the 2020-12 form it was compiled from (`decide.schemas.drafts`),
    as its own resource: its `#…` references resolve inside it, and a schema of another draft
    keeps that draft's meaning inside the 2020-12 decision schema."""
    # A derived question never compiles to a slot: its schema is normalised here.
    schema = normalize(q.schema).schema if q.slot is None else q.slot.language.normalized
    if not isinstance(schema, dict):
        return schema
    return {"$id": f"urn:decide:question:{q.id}", **schema}


def decision_validator(questions: Sequence[CompiledQuestion], rules: Any = None) -> Any:
    """The `jsonschema` validator of a decision object over `questions`: every one required, no
    other keys, each question's schema its own resource in its own draft's meaning, and the JSON
    Schema `rules` over the whole object."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {q.id: _as_resource(q) for q in questions},
        "required": [q.id for q in questions],
        "additionalProperties": False,
    }
    if rules is not None:
        schema = {"allOf": [schema, rules]}
    # The draft's own format checker (2020-12, where the formats decide compiles are RFC 3339's):
    # `FormatChecker()` merges every draft's checkers, and its `time` is draft 3's `%H:%M:%S`,
    # which refused every `10:10:10Z` the `time` grammar produces.
    return Validator(schema, format_checker=Validator.FORMAT_CHECKER)


@dataclass(eq=False)
class QuestionSet:
    """One compiled question list (see the module docstring); build it with `QuestionBook`."""

    questions: tuple[CompiledQuestion, ...]
    fingerprint: str
    ruleset: RuleSet | None  # the rules enforced while decoding (JSON Schema, CEL over finite ones)
    schema_rules: Any  # those rules as written (part of every decision schema)
    plan: DerivePlan
    checks: CheckPlan | None  # CEL rules: all checked after decoding, some enforced in `ruleset`
    # extract question id -> spans | numbers | numbers:<unit> | dates:<format>
    extract_kinds: dict[str, str]
    filler_id: int
    dates: DatePolicy
    _validators: dict[tuple[str, ...], Validator] = field(default_factory=dict)

    @property
    def asked(self) -> list[CompiledQuestion]:
        """The questions put to the model (all but the derived ones), in order."""
        return [q for q in self.questions if q.derive is None]

    def __len__(self) -> int:
        return len(self.questions)

    def __getitem__(self, index):  # a sequence of its questions
        return self.questions[index]

    def __iter__(self):
        return iter(self.questions)

    def validator(self, present: Sequence[str] | None = None) -> Validator:
        """The decision object's schema (every question required, no other keys, the rules) over
        the questions in `present` (default: all), cached."""
        ids = tuple(q.id for q in self.questions) if present is None else tuple(present)
        if ids not in self._validators:
            by_id = {q.id: q for q in self.questions}
            self._validators[ids] = decision_validator([by_id[i] for i in ids], self.schema_rules)
        return self._validators[ids]

    def constraints(
        self,
        todo: Sequence[CompiledQuestion],
        parts: tuple[str, ...],
        bind_rules: bool = True,
        first: bool = False,
        elsewhere: Sequence[CompiledQuestion] = (),
        fixed: dict[str, Any] | None = None,
    ) -> list:
        """One document's slot constraints, one per question of `todo` (asked questions, in
        order): bound to the rules where they mention the question (unless `bind_rules` is
        false; `elsewhere`: the ruled questions decoded in another request, a window's other
        blocks, `jobs.longdocs`; `fixed`: the values of those already decided), laid out
        short where `first` (`CompiledSlot.first_length`, for slots not bound to rules), a
        `SpanSlot` over the spans, numbers or dates of the `parts` of the document the prompt
        keeps for an extract question.
        Raises `SchemaError` for rules no answer can satisfy, `MissingSpan` (with the question
        id) for an extract question whose document offers nothing to copy."""
        out: list[Any]
        if self.ruleset is not None and bind_rules:
            out = self.ruleset.bind(
                [(q.id, q.slot) for q in todo],
                self.filler_id,
                [(q.id, q.slot) for q in elsewhere],
                fixed,
            )
        else:
            out = [q.slot.new_constraint(self.filler_id, first=first) for q in todo]
        extract = [q for q in todo if q.extract]
        if not extract:
            return out
        # One tokenization of the document's spans for all its span questions, cut at the
        # longest `maxLength` among them (none when one of them has no such bound); one list of
        # its numbers for all its numeric ones.
        limits = [_max_length(q.schema) for q in extract if self.extract_kinds[q.id] == "spans"]
        vocab = extract[0].slot.vocab
        built: dict[str, DocumentSpans | DocumentNumbers | DocumentDates] = {}
        for k, q in enumerate(todo):
            if not q.extract:
                continue  # extract questions are never ruled: `QuestionBook` refuses it
            kind = self.extract_kinds[q.id]
            if kind not in built:
                if kind == "spans":
                    built[kind] = DocumentSpans(
                        parts, vocab, None if None in limits else max(limits)
                    )
                elif kind == "numbers" or kind.startswith("numbers:"):
                    unit = kind.split(":", 1)[1] if ":" in kind else None
                    built[kind] = DocumentNumbers(parts, vocab, unit)
                else:
                    built[kind] = DocumentDates(parts, vocab, kind.split(":", 1)[1], self.dates)
            try:
                out[k] = SpanSlot(q.slot, self.filler_id, built[kind])
            except NoSpan as exc:
                raise MissingSpan(q.id, f"question {q.id!r} (extract): {exc}") from exc
        return out


def _max_length(schema: Any) -> int | None:
    """A span question's `maxLength` (of its non-null branch), None when it has none."""
    branch, _ = value_schema(schema)
    return branch.get("maxLength") if isinstance(branch, dict) else None


class QuestionBook:
    """Compiles question lists for one model and one job's rules into cached `QuestionSet`s."""

    def __init__(
        self,
        config: ModelConfig,
        tokenizer: TokenizerBundle,
        *,
        rules: Any = None,
        checks: Sequence[tuple[str, str]] = (),
        dates: DatePolicy | None = None,
    ) -> None:
        self.compiler = QuestionCompiler(config, tokenizer)
        self.rules = rules  # JSON Schema rules, enforced while decoding
        self.checks = list(checks)  # CEL rules (rule, message)
        self.dates = dates or DatePolicy()
        # Least recently used first, bounded: a long-lived `Decider` asked ever new question
        # texts grew without end (600 MB more over 200 calls).
        self._sets: OrderedDict[str, QuestionSet] = OrderedDict()
        self._compiled: OrderedDict[str, CompiledQuestion] = OrderedDict()

    @classmethod
    def for_spec(
        cls, config: ModelConfig, tokenizer: TokenizerBundle, spec: JobSpec
    ) -> QuestionBook:
        """The book of a job spec's rules (JSON Schema or CEL) and dates."""
        checks = [(r.rule, r.message) for r in spec.cel_rules]
        return cls(config, tokenizer, rules=spec.schema_rules, checks=checks,
                   dates=spec.dates.policy())  # fmt: skip

    @property
    def filler_id(self) -> int:
        return self.compiler.filler_id

    def compile(self, question: Question) -> CompiledQuestion:
        """One question (cached by its fingerprint); `QuestionsRefused` at stage `schema`."""
        key = fingerprint([question])
        found = self._compiled.get(key)
        if found is None:
            try:
                found = self.compiler.compile(question)
            except SchemaError as exc:
                raise QuestionsRefused(Stage.schema, exc, question.id) from exc
        _keep(self._compiled, key, found, COMPILED_KEPT)
        return found

    def build(self, questions: Sequence[Question | CompiledQuestion]) -> QuestionSet:
        """The compiled set of `questions` (cached by fingerprint). Raises `QuestionsRefused`."""
        key = fingerprint(questions)
        found = self._sets.get(key)
        if found is None:
            compiled = tuple(
                q if isinstance(q, CompiledQuestion) else self.compile(q) for q in questions
            )
            found = self._assemble(compiled, key)
        _keep(self._sets, key, found, SETS_KEPT)
        return found

    def _assemble(self, questions: tuple[CompiledQuestion, ...], key: str) -> QuestionSet:
        triples = [(q.id, q.schema, q.derive) for q in questions]
        try:
            plan = plan_derived(triples)
            # A rule over a question this list does not ask does not apply to it (docs/jobs.md):
            # a typo is refused against every id the job asks (`JobSpec` for its own questions).
            checks = plan_checks(self.checks, triples, unasked="skip") if self.checks else None
        except ValueError as exc:  # DeriveError, with the expression's pointer
            raise QuestionsRefused(Stage.derive, exc) from exc
        ruleset = None
        asked = [q for q in questions if q.derive is None]
        finite = {q.id: 0 if q.extract else len(q.slot.values or ()) for q in asked}
        value_rules = checks.enforcement(finite)[0] if checks is not None else []
        if (self.rules is not None or value_rules) and asked:
            try:
                if self.rules is not None:
                    refuse_ruled_derived(self.rules, questions)
                ruleset = compile_rules(
                    self.rules,
                    {q.id: q.schema for q in asked},
                    {q.id: q.slot for q in asked},
                    value_rules,
                )
                refuse_ruled_extract(ruleset, asked)
            except SchemaError as exc:
                raise QuestionsRefused(Stage.rules, exc) from exc
        kinds = {}
        for q in questions:
            if q.extract:
                kind = extract_kind(q.schema, q.slot)
                if kind == "dates":
                    kind = f"dates:{date_format(q.schema)}"
                elif q.unit is not None:
                    kind = f"numbers:{q.unit}"
                kinds[q.id] = kind
        return QuestionSet(
            questions, key, ruleset, self.rules, plan, checks, kinds, self.filler_id, self.dates
        )


_CACHE_LOCK = threading.Lock()  # one `Decider` may be called from several threads
SETS_KEPT = 256  # question sets a book keeps compiled (per-row jobs reuse a few)
COMPILED_KEPT = 1024  # compiled questions it keeps


def _keep(cache: OrderedDict, key: str, value: Any, limit: int) -> None:
    """`value` as the most recently used entry of `cache`, the least recently used dropped past
    `limit`."""
    with _CACHE_LOCK:
        cache[key] = value
        cache.move_to_end(key)
        while len(cache) > limit:
            cache.popitem(last=False)


def row_refusal(exc: QuestionsRefused, origin: str) -> str:
    """The error of a row whose own questions were refused, at any stage, naming its row and
    column (`origin`, as `jobs.spec.parse_questions` names them): `invalid questions: <origin>:
    <why>`, or `rules: <why> (<origin>)` for rules that cannot be enforced over them."""
    if exc.stage is Stage.rules:
        return f"rules: {exc} ({origin})"
    return f"invalid questions: {origin}: {exc}"


def spec_refusal(exc: QuestionsRefused) -> str:
    """The usage error of a spec whose questions were refused."""
    if exc.stage is Stage.schema:
        return f"question {exc.question_id!r}: schema refused: {exc}"
    return f"rules refused: {exc}" if exc.stage is Stage.rules else f"spec: {exc}"


__all__ = [
    "QuestionBook",
    "QuestionSet",
    "QuestionsRefused",
    "Stage",
    "fingerprint",
    "row_refusal",
    "spec_refusal",
]
