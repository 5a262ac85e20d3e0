"""The job spec: what to ask about every document, how to decode, where things are.

Strict at the edge: unknown keys are errors (pydantic `extra="forbid"`), question ids are JSON
object keys (`^[A-Za-z_][A-Za-z0-9_]{0,63}$`), schemas are JSON Schema documents (objects or
booleans; per-row questions carry them as JSON text). A spec is read from JSON or YAML; every error
names the file and the field path, e.g. `questions.2.id`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from ruamel.yaml import YAML, YAMLError

QUESTION_ID = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"
MAX_QUESTIONS = 256  # per document; more than 8 are split into balanced blocks
BLOCK_QUESTIONS = 8  # at most this many questions share a block (`jobs.pack`)
SPEC_FORMAT = 1  # bump when the prompt or skeleton layout changes: it changes every answer


class SpecError(ValueError):
    """A job spec, a question or an input option is unusable (the CLI exits 2)."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


# `Question.unit`: lengths of time (`decide.schemas.written_durations`) or amounts per period
# (`decide.schemas.written_rates`); `decide.schemas.units.UNITS` spells the same list.
Unit = Literal["days", "weeks", "months", "years", "per_year", "per_month", "per_week"]


def absent_value(schema: Any, absent: Any = None) -> tuple[bool, Any]:
    """(declared, value) of a question with this schema and `absent:` (None when not set): the
    declared value, else null if the schema admits it."""
    if absent is not None:
        return True, absent
    from decide.schemas.drafts import validator_class

    return (True, None) if validator_class(schema)(schema).is_valid(None) else (False, None)


class Question(Strict):
    id: str = Field(pattern=QUESTION_ID)
    text: str = Field(min_length=1)
    schema_: dict[str, Any] | bool = Field(alias="schema")
    # Answer only with a span of the document (decide.schemas.span); changes answers, so it is
    # part of the fingerprint when set.
    extract: bool = False
    # Computed from other answers by this CEL expression (`jobs.derive`), never asked.
    derive: str | None = Field(None, min_length=1)
    # The answer meaning "not in this part of the document": a window that answers it loses to
    # a confident window that found something (`jobs.windows.combine`). Must be a value of the
    # schema; a schema that admits null has null as its absent value without it.
    absent: Any = Field(None)
    # A numeric extract question whose answer is a length of time or an amount per period: the
    # document's durations ("two weeks", "the day before yesterday") or amounts stated with a
    # period ("$1,400 a month") count as numbers it states, in this unit (`decide.schemas.units`).
    # Changes answers: part of the fingerprint when set.
    unit: Unit | None = None
    # Answer the absent value (`absent:`, or null) instead of a value decoded with a confidence
    # below this (`jobs.withhold`); overrides `decoding.absent_below`. Changes answers: part of
    # the fingerprint when set.
    absent_below: float | None = Field(None, gt=0.0, le=1.0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _not_both(self) -> Question:
        if self.extract and self.derive is not None:
            raise ValueError("a question is either extract or derive, not both")
        if self.unit is not None and not self.extract:
            raise ValueError(
                f"unit: {self.unit!r} needs extract: true (the document's numbers are read)"
            )
        if self.absent is not None:
            from decide.schemas.drafts import validator_class

            schema = self.schema_
            if not validator_class(schema)(schema).is_valid(self.absent):
                raise ValueError(f"absent: {self.absent!r} is not a value of the question's schema")
        if self.absent_below is not None:
            if self.derive is not None:
                raise ValueError("absent_below applies to decoded answers, not derived ones")
            if not absent_value(self.schema_, self.absent)[0]:
                raise ValueError(
                    "absent_below needs an absent value: declare `absent:` or let the schema "
                    "admit null"
                )
        return self

    @field_validator("schema_", mode="before")
    @classmethod
    def _parse_text(cls, value: Any) -> Any:
        # Per-row questions (parquet) carry the schema as JSON text.
        if isinstance(value, str):
            try:
                return json.loads(value)
            except json.JSONDecodeError as exc:
                raise ValueError(f"schema is not valid JSON text ({exc})") from exc
        return value

    @field_validator("extract", mode="before")
    @classmethod
    def _null_is_false(cls, value: Any) -> Any:
        # A per-row questions struct with an `extract` field has nulls where a row leaves it out.
        return False if value is None else value

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "text": self.text, "schema": self.schema_}
        if self.extract:
            out["extract"] = True
        if self.derive is not None:
            out["derive"] = self.derive
        if self.absent is not None:
            out["absent"] = self.absent
        if self.unit is not None:
            out["unit"] = self.unit
        if self.absent_below is not None:
            out["absent_below"] = self.absent_below
        return out


class CelRule(Strict):
    """A CEL rule checked after decoding (`jobs.checks`): a row violating it fails with
    `message`."""

    rule: str = Field(min_length=1)
    message: str = Field(min_length=1)


# Steps per unit (a bidirectional model's whole block, a block-causal model's model block)
# before the rest is committed greedily (docs/jobs.md, sampling): 2 since 2026-12-07
# (twenty-seventh session), 3 earlier that day, 4 from 2026-12-05, no cap before.
DEFAULT_MAX_STEPS = 2
# Caps fingerprints write as null, as they write a left-out one: the defaults since 2026-12-05
# (`JobSpec.fingerprint`), so a spec writing the default of its day keeps its fingerprint.
_DEFAULT_CAPS = (DEFAULT_MAX_STEPS, 3, 4)


# What a manifest may record for a decoding setting `JobSpec.continuing` keeps: a check, and what
# it names in the error.
_STEP_CAP: tuple[Callable[[Any], bool], str] = (
    lambda v: v is None or (type(v) is int and v >= 1),
    "a step cap",
)
_BOOLEAN: tuple[Callable[[Any], bool], str] = (lambda v: isinstance(v, bool), "true or false")


class Decoding(Strict):
    threshold: float = Field(0.9, gt=0.0, le=1.0, allow_inf_nan=False)
    # At most this many denoising steps per unit, then its open positions are committed
    # greedily (`engine.commit`); null: no cap. Left out, 2; with `max_tokens_per_step` set
    # (which asks for many small steps), no cap. A resumed job keeps the cap it started with
    # (`JobSpec.continuing`).
    max_steps: int | None = Field(DEFAULT_MAX_STEPS, ge=1)
    temperature: float = Field(0.0, ge=0.0, allow_inf_nan=False)
    seed: int = 0
    cache: bool = True
    # After a block's first forward, steps recompute only its open and newly committed
    # positions (`engine.sampler`; approximate); false: every step recomputes the whole block.
    in_block_cache: bool = True
    max_tokens_per_step: int | None = Field(None, ge=1)
    # Below the threshold, every answer whose value has begun also commits its most confident
    # next token, and a step makes one uncertain choice (`engine.commit`). On since 2026-12-07
    # (forwards per document 4.4 → 2.5 at threshold 0.9 without a cap, validation within a
    # point; docs/benchmarks.md); false: only the single most confident item (Fast-dLLM's rule).
    # A resumed job keeps the rule it started with (`JobSpec.continuing`).
    parallel_continuations: bool = True
    # Open-ended slots (free strings, unbounded numbers) are laid out with a few positions and
    # decided again with their whole length only when a value fills them (`engine.row_state`).
    # The tokens after a short slot keep their whole-layout positions. On by default since
    # 2026-12-05 (accuracy within 0.5 points, 1.3× faster at batch 16; docs/benchmarks.md); false:
    # every slot whole, as before. docs/jobs.md.
    grow_slots: bool = True
    # An answer decoded with a confidence below this becomes its question's absent value
    # (`absent:`, or null where the schema admits it; questions with neither keep theirs), the
    # value kept in the `withheld_json` column (`jobs.withhold`, docs/jobs.md). Off by default.
    absent_below: float | None = Field(None, gt=0.0, le=1.0, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _uncapped_with_a_token_limit(cls, data: Any) -> Any:
        if (
            isinstance(data, dict)
            and data.get("max_tokens_per_step") is not None
            and "max_steps" not in data
        ):
            return {**data, "max_steps": None}
        return data


class Dates(Strict):
    """How extract questions with `format: date` / `date-time` read dates (`schemas.dates`)."""

    order: Literal["refuse", "day_first", "month_first"] = "refuse"
    timezone: str | None = Field(None, pattern=r"^(?:Z|[+-]\d{2}:\d{2})$")

    def policy(self) -> Any:
        from decide.schemas.dates import DatePolicy

        return DatePolicy(self.order, self.timezone)


class Windows(Strict):
    """How a document too long for the model is read (`long_documents: windows`,
    `jobs.longdocs`): windows of at most `tokens` tokens (default: all the context a block's
    prompt leaves), sharing up to `overlap` tokens of whole sentences; with `top_k`, only the
    k windows BM25 ranks highest for a block's question texts are decided; a non-absent window
    answer at least `confident` beats an absent one (below 0.5 that includes the best other
    option of a window that answered absent: docs/jobs.md, long documents); `questions`: at
    most that many questions per block of a document read in windows (default 8, as whole; fewer
    questions leave each window more of the document); `evidence_ranker`, `min_evidence`: the
    model's learnt evidence ranker, below."""

    tokens: int | None = Field(None, ge=16)
    overlap: int = Field(64, ge=0)
    top_k: int | None = Field(None, ge=1)
    confident: float = Field(0.5, gt=0.0, le=1.0, allow_inf_nan=False)
    questions: int = Field(BLOCK_QUESTIONS, ge=1, le=BLOCK_QUESTIONS)
    # The model's learnt evidence ranker (`evidence_ranker.json`, jobs.evidence_ranker) ranks the
    # windows of the questions it was fitted for instead of BM25; a window whose evidence
    # probability for such a question is below `min_evidence` (default: the ranker's threshold,
    # chosen on validation documents; 0 reads every window) is not decided for it.
    evidence_ranker: bool = True
    min_evidence: float | None = Field(None, ge=0.0, le=1.0, allow_inf_nan=False)

    @field_validator("overlap")
    @classmethod
    def _overlap_below_tokens(cls, overlap: int, info: ValidationInfo) -> int:
        # Consecutive windows cannot share a whole window or more (they used to be clamped to a
        # quarter of one without a word, whatever was asked).
        tokens = info.data.get("tokens")
        if tokens is not None and overlap >= tokens:
            raise ValueError(
                f"overlap ({overlap} tokens) must be below windows.tokens ({tokens}); "
                f"consecutive windows share at most a quarter of a window ({tokens // 4} tokens)"
            )
        return overlap


class InputColumns(Strict):
    doc_id: str = "doc_id"
    document: str = "document"
    questions: str = "questions"


class JobSpec(Strict):
    questions: list[Question] = Field(default_factory=list, max_length=MAX_QUESTIONS)
    # A JSON Schema enforced while decoding, or a list of CEL rules checked after it.
    rules: dict[str, Any] | list[CelRule] | None = None
    instruction: str | None = None
    decoding: Decoding = Field(default_factory=Decoding)
    model: str | None = None
    input: InputColumns = Field(default_factory=InputColumns)
    output: str | None = None
    # A document too long for the model: read in windows (`jobs.longdocs`), or cut to its head
    # and tail, or an error row.
    long_documents: Literal["windows", "truncate", "error"] = "windows"
    windows: Windows = Field(default_factory=Windows)
    # A `decide calibrate` file: confidences become calibrated probabilities (never answers),
    # so neither is part of the fingerprint.
    calibration: str | None = None
    # Rows with any answer's (calibrated) confidence below this go to review.parquet.
    review_below: float | None = Field(None, gt=0.0, le=1.0, allow_inf_nan=False)
    # An answer that fails on its own (an extract question with no span, a derived answer with a
    # missing input) leaves the row ok and partial ("keep"), or fails the row ("error").
    partial_rows: Literal["keep", "error"] = "keep"
    dates: Dates = Field(default_factory=Dates)

    @field_validator("questions")
    @classmethod
    def _unique_ids(cls, questions: list[Question]) -> list[Question]:
        seen: set[str] = set()
        for q in questions:
            if q.id in seen:
                raise ValueError(f"question id {q.id!r} appears twice")
            seen.add(q.id)
        return questions

    @property
    def schema_rules(self) -> dict[str, Any] | None:
        """The JSON Schema rules (enforced while decoding), if the spec's rules are those."""
        return self.rules if isinstance(self.rules, dict) else None

    @property
    def cel_rules(self) -> list[CelRule]:
        """The CEL rules (checked after decoding), if the spec's rules are those."""
        return list(self.rules) if isinstance(self.rules, list) else []

    def fingerprint(self) -> str:
        """Identity of everything that changes answers (not model, paths or batch size)."""
        payload = {
            "format": SPEC_FORMAT,
            "questions": [q.as_dict() for q in self.questions],
            "rules": self.schema_rules
            if self.cel_rules == []
            else [r.model_dump() for r in self.cel_rules],
            "instruction": self.instruction,
            "decoding": self.decoding.model_dump(
                exclude={"grow_slots", "absent_below", "parallel_continuations"}
            ),
            "input": self.input.model_dump(),
            "long_documents": self.long_documents,
        }
        if not self.decoding.grow_slots:  # specs without it keep the fingerprint they had
            payload["grow_slots"] = False
        if self.decoding.absent_below is not None:  # likewise
            payload["absent_below"] = self.decoding.absent_below
        # Likewise when written; the rule a job decodes with is recorded in its manifest and kept
        # on resume (`continuing`), where one left out keeps this fingerprint.
        written = "parallel_continuations" in self.decoding.model_fields_set
        if written and not self.decoding.parallel_continuations:
            payload["parallel_continuations"] = False
        # A left-out cap is written as the null it was before 2026-12-05, and so is a default of
        # any day since (2, 3, 4), so specs keep their fingerprints across default changes (one
        # writing 3, or 2, before it was the default excepted). The cap a job decodes with is
        # recorded in its manifest and kept on resume (`continuing`), which tells these apart.
        # `max_steps: null`, no cap, differs.
        steps = self.decoding.max_steps
        limited = self.decoding.max_tokens_per_step is not None
        defaults = (None,) if limited else _DEFAULT_CAPS
        if "max_steps" not in self.decoding.model_fields_set or steps in defaults:
            payload["decoding"]["max_steps"] = None
        elif steps is None:
            payload["decoding"]["max_steps"] = "none"
        if self.partial_rows != "keep":  # specs without it keep the fingerprint they had
            payload["partial_rows"] = self.partial_rows
        if self.dates != Dates():
            payload["dates"] = self.dates.model_dump()
        if self.long_documents == "windows":
            windows = self.windows.model_dump()
            if windows["questions"] == BLOCK_QUESTIONS:  # specs without it keep their fingerprint
                del windows["questions"]
            if windows["evidence_ranker"]:  # likewise for the learnt evidence ranker's settings
                del windows["evidence_ranker"]
            if windows["min_evidence"] is None:
                del windows["min_evidence"]
            payload["windows"] = windows
        text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def continuing(self, recorded: dict[str, Any] | None) -> JobSpec:
        """This spec resuming a job whose manifest recorded `recorded` (its spec's `decoding`): a
        spec that leaves `max_steps` or `parallel_continuations` out keeps what the job started
        with (so a job begun under an earlier default is not finished under another; a manifest
        without `parallel_continuations` was written before it, without them); one that sets
        another value is refused. Its fingerprint is unchanged."""
        if recorded is None:
            return self
        update: dict[str, Any] = {}
        if "max_steps" in recorded:
            update["max_steps"] = self._kept("max_steps", recorded["max_steps"], _STEP_CAP)
        update["parallel_continuations"] = self._kept(
            "parallel_continuations", recorded.get("parallel_continuations", False), _BOOLEAN
        )
        current = self.decoding.model_dump()
        if all(current[k] == v for k, v in update.items()):
            return self
        decoding = Decoding.model_construct(
            _fields_set=set(self.decoding.model_fields_set), **{**current, **update}
        )
        return self.model_copy(update={"decoding": decoding})

    def _kept(self, key: str, began: Any, valid: tuple[Callable[[Any], bool], str]) -> Any:
        """The value of decoding setting `key` a resumed job goes on with, having begun with
        `began` (see `continuing`)."""
        now = getattr(self.decoding, key)
        if began == now and type(began) is type(now):
            return now
        if key in self.decoding.model_fields_set:
            raise SpecError(
                f"decoding.{key}: the job in this directory was decided with {key} "
                f"{json.dumps(began)} (manifest.json), this spec asks {json.dumps(now)}; "
                "resume with the same, or use a new directory"
            )
        check, what = valid
        if not check(began):
            raise SpecError(f"manifest.json: /spec/decoding/{key}: {began!r} is not {what}")
        return began


def _describe(error: ValidationError, prefix: tuple = ()) -> str:
    lines = []
    for item in error.errors():
        where = ".".join(str(p) for p in (*prefix, *item["loc"])) or "(top level)"
        hint = ""
        if item["type"] == "extra_forbidden" and item["loc"]:  # a misspelt key: the closest one
            hint = _closest_key(error.title, item["loc"])
        lines.append(f"{where}: {item['msg']}{hint}")
    return "; ".join(lines)


def _closest_key(model: str, loc: tuple) -> str:
    """ "; did you mean `questions`?" for an unknown key one of the keys allowed where it
    stands is close to (`model`: the validated model's name, `loc`: the key's location)."""
    import difflib

    models = {m.__name__: m for m in (JobSpec, Question, Decoding, Windows, InputColumns)}
    here: Any = models.get(model)
    for part in loc[:-1]:  # walk down to the model the key was given in
        if here is None:
            return ""
        if isinstance(part, int):
            continue
        field = here.model_fields.get(part)
        kind = getattr(field, "annotation", None)
        args = [a for a in getattr(kind, "__args__", ()) if isinstance(a, type)]
        here = next((t for t in [kind, *args] if isinstance(t, type) and t in models.values()),
                    None)  # fmt: skip
    if here is None:
        return ""
    keys = [f.alias or name for name, f in here.model_fields.items()]
    close = difflib.get_close_matches(str(loc[-1]), keys, n=1)
    return f"; did you mean `{close[0]}`?" if close else ""


def parse_spec(data: Any, origin: str = "spec") -> JobSpec:
    """Validate a spec given as a mapping (from JSON, YAML or Python)."""
    if isinstance(data, JobSpec):
        return data
    if not isinstance(data, dict):
        raise SpecError(f"{origin}: a job spec is a mapping, got {type(data).__name__}")
    try:
        spec = JobSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(f"{origin}: {_describe(exc)}") from exc
    check_derived(spec.questions, origin)
    if spec.cel_rules and spec.questions:
        from .checks import plan_checks
        from .derive import DeriveError

        try:
            # An id none of the spec's questions has may be a per-row question's: `decide run`
            # refuses it when no row asks it either (`runner.prepare`), validate warns of it.
            plan_checks(
                [(r.rule, r.message) for r in spec.cel_rules],
                [(q.id, q.schema_, q.derive) for q in spec.questions],
                unasked="skip",
            )
        except DeriveError as exc:
            raise SpecError(f"{origin}: rules: {exc}") from exc
    return spec


def check_derived(questions: list[Question], origin: str) -> None:
    """Refuse derive expressions that cannot run (`jobs.derive.plan_derived`), naming the
    question, the expression and its pointer."""
    if not any(q.derive is not None for q in questions):
        return
    from .derive import DeriveError, plan_derived

    try:
        plan_derived([(q.id, q.schema_, q.derive) for q in questions])
    except DeriveError as exc:
        raise SpecError(f"{origin}: {exc}") from exc


def read_yaml(text: str) -> Any:
    """YAML as version 1.2 reads it (ruamel.yaml's safe loader): `yes`, `no`, `on` and `off` are
    strings, as a user writing `enum: [yes, no, not_mentioned]` means them (PyYAML follows YAML
    1.1 and makes them booleans), only `true` / `false` are booleans, and a key given twice is
    an error instead of the last one silently winning."""
    return YAML(typ="safe", pure=True).load(text)


def _problem(exc: Exception) -> str:
    """A YAML error as its problem and where (ruamel's own text adds a page of advice)."""
    problem, mark = getattr(exc, "problem", None), getattr(exc, "problem_mark", None)
    if problem is None or mark is None:
        return str(exc)
    return f"{problem}, line {mark.line + 1}, column {mark.column + 1}"


def load_spec(path: str | Path) -> JobSpec:
    """Read a JSON or YAML job spec file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"{path}: cannot read the spec ({exc.strerror})") from exc
    except UnicodeDecodeError as exc:
        raise SpecError(f"{path}: not UTF-8 text") from exc
    try:
        data = json.loads(text) if path.suffix == ".json" else read_yaml(text)
    except (json.JSONDecodeError, YAMLError) as exc:
        raise SpecError(
            f"{path}: not valid {'JSON' if path.suffix == '.json' else 'YAML'} ({_problem(exc)})"
        ) from exc
    if isinstance(data, dict) and isinstance(data.get("questions"), list):
        data = {
            **data,
            "questions": [_bundled(q, i, path) for i, q in enumerate(data["questions"])],
        }
    spec = parse_spec(data, str(path))
    # A relative `model:` or `calibration:` is the spec's neighbour (the spec works from any
    # directory); one that is only there from the working directory, as read before 2026-12-07,
    # still is.
    for key in ("model", "calibration"):
        given = getattr(spec, key)
        if given is not None and not Path(given).expanduser().is_absolute():
            beside = path.parent / Path(given).expanduser()
            if beside.exists():
                spec = spec.model_copy(update={key: str(beside)})
    return spec


def _bundled(question: Any, index: int, path: Path) -> Any:
    """A spec file's question with the schema files its `$ref`s name (beside the spec) copied
    into its schema (`schemas.bundle`)."""
    from decide.schemas import SchemaError
    from decide.schemas.bundle import bundle, external_refs

    if not isinstance(question, dict) or not external_refs(question.get("schema")):
        return question
    try:
        return {**question, "schema": bundle(question["schema"], path.parent)}
    except SchemaError as exc:
        name = question.get("id")
        which = f"question {name!r}" if isinstance(name, str) else f"questions.{index}"
        raise SpecError(f"{path}: {which}: schema {exc}") from exc


def parse_questions(raw: Any, origin: str) -> list[Question]:
    """Questions from a per-row `questions` value (list of {id, text, schema-as-JSON-text})."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise SpecError(f"{origin}: questions must be a list, got {type(raw).__name__}")
    questions = []
    for i, item in enumerate(raw):
        try:
            questions.append(Question.model_validate(item))
        except ValidationError as exc:
            raise SpecError(f"{origin}: {_describe(exc, ('questions', i))}") from exc
    ids = [q.id for q in questions]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise SpecError(f"{origin}: question id(s) {', '.join(dupes)} appear more than once")
    if len(questions) > MAX_QUESTIONS:
        raise SpecError(f"{origin}: {len(questions)} questions, at most {MAX_QUESTIONS}")
    check_derived(questions, origin)
    return questions
