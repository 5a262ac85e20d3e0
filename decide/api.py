"""The Python API: `Decider` for pipelines, `run_job` for whole parquet jobs.

    >>> from decide import Decider
    >>> decider = Decider()                      # the bundled model; or Decider("path/to/model")
    >>> d = decider.decide(text, [{"id": "eligible", "text": "Is the claim eligible?",
    ...                            "schema": {"type": "boolean"}}])
    >>> d.answers["eligible"], d.confidence["eligible"]

`decide` raises `DecisionError` (with a `FailureKind` in `.kind`) when its one document cannot
be decided (`None`, a null document, is one that cannot). `decide_many` decides many documents
against the same questions, batched, and returns the decisions in input order: a document that
cannot be decided comes back with `status == "error"`, a `kind` and a reason instead of raising.
Every answer is valid against its schema; a question with `derive:` is computed from the other
answers, never asked. A document that is neither a `str` nor `None`, or one string given to
`decide_many`, raises `TypeError`. `run_job` takes a `JobSpec` or a spec file's path, and `str`
or `os.PathLike` paths.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from decide.engine import load_model
from decide.jobs import runner
from decide.jobs.checks import unknown_rule_id
from decide.jobs.decisions import Decision, DecisionEngine, Item
from decide.jobs.failures import DecisionError, FailureKind, api_message
from decide.jobs.models import resolve_device, resolve_model_path
from decide.jobs.questionset import QuestionSet, QuestionsRefused, spec_refusal
from decide.jobs.runner import JobResult
from decide.jobs.spec import JobSpec, Question, SpecError, load_spec, parse_spec

from .report import write_report

QuestionLike = Question | Mapping[str, Any]
# Or a model class with `model_json_schema()` (Pydantic 2), or an object schema (their fields).
Questions = Sequence[QuestionLike] | type | Mapping[str, Any]
# What a property's schema may carry for its question (Pydantic's `json_schema_extra`).
QUESTION_KEYS = ("extract", "absent", "absent_below", "unit", "derive")


def questions_from_model(model: type | Mapping[str, Any]) -> list[dict[str, Any]]:
    """One question per property of a Pydantic model class (its `model_json_schema()`) or of a
    JSON Schema of an object: `id` the property's name, `text` its `description` (else its
    `title`, else its name), `schema` the property's schema with the model's `$defs` (or
    `definitions`) it refers to beside it, so references to enums and nested models resolve.
    `extract`, `absent`, `absent_below`, `unit` and `derive` in a property's schema
    (`json_schema_extra`) move to its question. Validate a decision with
    `Model.model_validate(decision.answers)`."""
    schema = model.model_json_schema() if hasattr(model, "model_json_schema") else model
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(properties, Mapping) or not properties:
        raise SpecError(
            f"questions: {getattr(model, '__name__', 'the schema')} has no properties to ask "
            "(a Pydantic model class or a JSON Schema of an object is expected)"
        )
    shared = {k: schema[k] for k in ("$defs", "definitions", "$schema") if k in schema}
    out = []
    for name, prop in properties.items():
        prop = dict(prop) if isinstance(prop, Mapping) else prop
        question: dict[str, Any] = {"id": name}
        if isinstance(prop, dict):
            question["text"] = prop.get("description") or prop.get("title") or name
            question.update({k: prop.pop(k) for k in QUESTION_KEYS if k in prop})
            question["schema"] = {**prop, **_defs_used(prop, shared)}
        else:  # a boolean schema
            question.update(text=name, schema=prop)
        out.append(question)
    return out


def _defs_used(prop: dict[str, Any], shared: dict[str, Any]) -> dict[str, Any]:
    """`shared` (the model's `$defs` or `definitions`, and `$schema`) with only the definitions
    `prop` refers to, directly or through other definitions (`#/$defs/Name`); all of them where
    a reference is not of that form, so nothing it needs is dropped."""
    out = {k: v for k, v in shared.items() if k == "$schema"}
    for key in ("$defs", "definitions"):
        defs = shared.get(key)
        if not isinstance(defs, Mapping):
            continue
        prefix = f"#/{key}/"
        used: set[str] = set()
        todo: list[Any] = [prop]
        while todo:
            node = todo.pop()
            if isinstance(node, Mapping):
                ref = node.get("$ref")
                if isinstance(ref, str) and ref.startswith("#/"):
                    target = ref[len(prefix) :].split("/", 1)[0] if ref.startswith(prefix) else None
                    if target not in defs:
                        used = set(defs)  # a reference elsewhere: keep every definition
                        break
                    if target not in used:
                        used.add(target)
                        todo.append(defs[target])
                todo.extend(node.values())
            elif isinstance(node, list):
                todo.extend(node)
        if used:
            out[key] = {k: v for k, v in defs.items() if k in used}
    return out


def _questions(questions: Questions) -> list[Question]:
    if isinstance(questions, type) or (
        isinstance(questions, Mapping) and "properties" in questions
    ):
        questions = questions_from_model(questions)
    if isinstance(questions, JobSpec):
        raise SpecError("questions: got a whole job spec; pass its questions (spec.questions) "
                        "and give its decoding options to Decider(...)")  # fmt: skip
    if not isinstance(questions, str | bytes | Mapping | Sequence) and isinstance(
        questions, Iterable
    ):
        questions = list(questions)  # a generator: read once, here
    if (
        isinstance(questions, str | bytes | Mapping)
        or not isinstance(questions, Sequence)
        or not all(isinstance(q, Question | Mapping) for q in questions)
    ):
        got = type(questions).__name__
        raise SpecError("questions: expected a list of questions (dicts or Question), a "
                        f"Pydantic model class or an object schema, got {got}")  # fmt: skip
    spec = parse_spec(
        {"questions": [q if isinstance(q, Question) else dict(q) for q in questions]}, "questions"
    )
    if not spec.questions:
        raise SpecError("questions: at least one question is needed")
    return spec.questions


class Decider:
    """A loaded model ready to decide documents. Options are those of a job spec's `decoding`
    (`threshold`, `max_steps`, `temperature`, `seed`, `cache`, `absent_below`) plus batching,
    long-document policy (`long_documents`, `windows` as the spec's `windows:`), `partial_rows`,
    `dates` (`{"order": "day_first"}`, as the spec's `dates:`) and `rules` (the spec's `rules:`,
    a JSON Schema or a list of CEL rules: one naming an id none of a call's questions has
    raises `SpecError`)."""

    def __init__(
        self,
        model: str | Path | None = None,
        *,
        device: str = "auto",
        dtype: str = "auto",
        batch_size: int = 16,
        long_documents: str = "windows",
        instruction: str | None = None,
        rules: dict[str, Any] | list[dict[str, Any]] | None = None,
        partial_rows: str = "keep",
        dates: Mapping[str, Any] | None = None,
        windows: Mapping[str, Any] | None = None,
        **decoding: Any,
    ) -> None:
        _check_batch_size(batch_size, "Decider")
        for name, value in (("dates", dates), ("windows", windows)):
            if value is not None and not isinstance(value, Mapping):
                raise TypeError(f"Decider: {name} must be a mapping (as the spec's `{name}:`), "
                                f"got {type(value).__name__}")  # fmt: skip
        spec = parse_spec(
            {
                "decoding": decoding,
                "long_documents": long_documents,
                "instruction": instruction,
                "rules": rules,
                "partial_rows": partial_rows,
                "dates": dict(dates or {}),
                "windows": dict(windows or {}),
            },
            "Decider options",
        )  # checked before the model loads: a bad option costs no load
        self._start(spec, resolve_model_path(model), device, dtype, batch_size)

    def _start(self, spec: JobSpec, path: Path, device: str, dtype: str, batch_size: int) -> None:
        """Load the model at `path` and make the engine `spec` describes."""
        self.loaded = load_model(path, device=resolve_device(device), dtype=dtype)
        self.engine = DecisionEngine.for_spec(self.loaded, spec, batch_size=batch_size)
        self._spec = spec
        self._fitting: set[str] = set()  # question sets found to fit the model
        self._questions: list[Question] | None = None  # asked when a call gives none
        self._confidence: Any = None  # the spec's calibration and review threshold

    @classmethod
    def from_spec(
        cls,
        spec: JobSpec | PathLike,
        model: str | Path | None = None,
        *,
        device: str = "auto",
        dtype: str = "auto",
        batch_size: int = 16,
        force_calibration: bool = False,
    ) -> Decider:
        """A Decider that decides as `decide run --spec` does: the spec's model (unless `model`
        is given), decoding, instruction, rules, long-document policy and windows, partial rows
        and dates; `decide`/`decide_many` ask the spec's questions when a call gives none. A
        spec's `calibration` maps each decision's `confidence` (the engine's stays in
        `raw_confidence`), refused as `decide run` refuses it when fitted for another model or
        spec (unless `force_calibration`); with `review_below`, `Decision.review` says whether
        `decide run` would send the row to review. `spec` is a `JobSpec` or a spec file."""
        from decide.engine.loader import model_fingerprint
        from decide.jobs.calibrate import ConfidencePlan

        if not isinstance(spec, JobSpec | str | os.PathLike):
            raise TypeError("Decider.from_spec: spec must be a JobSpec (load_spec('job.yaml')) "
                            f"or a path to a spec file, got {type(spec).__name__}")  # fmt: skip
        _check_batch_size(batch_size, "Decider.from_spec")
        spec = _job_spec(spec)
        self = cls.__new__(cls)
        path = resolve_model_path(model if model is not None else spec.model)
        self._start(spec, path, device, dtype, batch_size)
        self._questions = list(spec.questions) or None
        if spec.calibration is not None or spec.review_below is not None:
            fingerprints = {"model": model_fingerprint(path), "spec": spec.fingerprint()}
            try:
                self._confidence = ConfidencePlan(
                    spec.calibration, spec.review_below, fingerprints,
                    {q.id: q.schema_ for q in spec.questions}, force=force_calibration,
                )  # fmt: skip
            except SpecError as exc:
                raise SpecError(api_message(str(exc))) from exc
        return self

    def _asked(self, questions: Questions | None, what: str) -> Questions:
        if questions is not None:
            return questions
        if self._questions is None:
            raise TypeError(f"{what}: no questions given, and this Decider has none of its own "
                            "(Decider.from_spec gives it a spec's)")  # fmt: skip
        return self._questions

    def _compile(self, questions: Questions) -> QuestionSet:
        asked = _questions(questions)
        try:
            qset = self.engine.questions(asked)
        except QuestionsRefused as exc:
            raise SpecError(spec_refusal(exc)) from exc
        if qset.fingerprint not in self._fitting:
            # A rule over an id none of these questions has applies to none of them: a typo
            # would switch it off silently, so it is refused, as `decide run` refuses one.
            unknown = unknown_rule_id(runner.rule_ids(self._spec), {q.id for q in asked},
                                      "this call")  # fmt: skip
            if unknown is not None:
                raise SpecError(unknown)
            # Questions that fit no document are a usage error, as `decide run` makes them,
            # not one `questions_do_not_fit` error decision per document.
            try:
                runner.check_questions(self._spec.model_copy(update={"questions": asked}),
                                       self.engine.book, self.engine.packer)  # fmt: skip
            except SpecError as exc:
                raise SpecError(api_message(str(exc))) from exc
            self._fitting.add(qset.fingerprint)
        return qset

    def decide(self, document: str, questions: Questions | None = None) -> Decision:
        """Decide one document; raises `DecisionError` (`.kind`, `.message`, `.decision`) when
        it cannot be decided. A partial decision (`partial`, see `errors`) is returned.
        `questions` may also be a Pydantic model class or an object schema: one question per
        property (`questions_from_model`). A document that is neither a `str` nor `None` (a
        null document, which cannot be decided) raises `TypeError`. Without `questions`, the
        spec's (`Decider.from_spec`)."""
        _check_document(None if _missing(document) else document, "decide: document")
        decision = self.decide_many([document], self._asked(questions, "decide"))[0]
        if not decision.ok:
            kind = decision.kind or FailureKind.internal_error
            message = api_message(decision.error or "the document could not be decided")
            decision.error = message
            raise DecisionError(kind, message, decision)
        return decision

    def decide_many(
        self,
        documents: Iterable[str] | Mapping[Any, str],
        questions: Questions | None = None,
    ) -> list[Decision]:
        """Decide many documents against the same questions; decisions come back in input
        order (a mapping's keys become the decisions' `doc_id`, else the position; with
        `temperature > 0` each document is sampled with a seed of its `doc_id`, so pass a
        mapping for samples that do not move with a document's place in a list). One string
        instead of many documents, or a document that is neither a `str` nor `None`, raises
        `TypeError`. Without `questions`, the spec's (`Decider.from_spec`)."""
        questions = self._asked(questions, "decide_many")
        if isinstance(documents, str | bytes | bytearray):
            raise TypeError(
                "decide_many: takes an iterable or a mapping of documents, not one "
                f"{type(documents).__name__} (it would decide each character as a document); "
                "use decide(document, questions) for a single document, or pass [document]"
            )
        if not isinstance(documents, Iterable):
            raise TypeError(
                "decide_many: documents must be an iterable or a mapping of str, got "
                f"{type(documents).__name__}"
            )
        pairs = (
            list(documents.items())
            if isinstance(documents, Mapping)
            else list(enumerate(documents))
        )
        # A missing text as pandas gives it (NaN, `pd.NA`) is a null document, as None is; a
        # numpy key (`dict(zip(array, texts))`) is the Python value it holds, so it names and
        # seeds its document as that value does in a parquet job.
        pairs = [(_plain(key), None if _missing(text) else text) for key, text in pairs]
        for key, text in pairs:
            _check_document(text, f"decide_many: document {key!r}")
        compiled = self._compile(questions)
        by_id = {
            d.doc_id: d
            for d in self.engine.decide(Item(key, text, compiled) for key, text in pairs)
        }
        decisions = [by_id[key] for key, _ in pairs]
        for d in decisions:
            if d.error is not None:
                d.error = api_message(d.error)
            if self._confidence is not None:  # the spec's calibration and review threshold
                self._confidence.decision(d, {q.id: q.schema for q in compiled.questions})
        return decisions


def _check_batch_size(batch_size: Any, what: str) -> None:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise TypeError(f"{what}: batch_size must be an int of at least 1, got {batch_size!r}")


def _plain(key: Any) -> Any:
    """A numpy scalar key (`np.int64(7)`, `np.str_("a")`) as the Python value it holds: its
    `repr`, which seeds a sampled document (`document_seed`), is not that value's."""
    return key.item() if isinstance(key, np.integer | np.floating | np.str_ | np.bool_) else key


def _missing(value: Any) -> bool:
    """NaN (a float, or numpy's) or pandas' `NA`: how a DataFrame column writes a missing text."""
    if isinstance(value, float | np.floating):
        return bool(np.isnan(value))
    return type(value).__name__ == "NAType"


def _check_document(document: Any, what: str) -> None:
    """A document is text (`str`); `None` is a null document (decided as an error row, as a
    null in a parquet job); anything else is a mistake in the caller's code."""
    if document is not None and not isinstance(document, str):
        hint = " (decode bytes first, e.g. data.decode('utf-8'))" if isinstance(
            document, bytes | bytearray) else ""  # fmt: skip
        raise TypeError(f"{what} must be a str, got {type(document).__name__}{hint}")


PathLike = str | os.PathLike


def _path(value: Any, what: str) -> Path:
    if isinstance(value, str | os.PathLike):
        if value == "":
            raise ValueError(f"run_job: {what} is an empty path")
        return Path(value)
    raise TypeError(f"run_job: {what} must be a path (str or os.PathLike), got "
                    f"{type(value).__name__}")  # fmt: skip


def _input_paths(inputs: Any) -> list[Path]:
    """`inputs` as the runner takes them: one path, or a sequence of paths."""
    if isinstance(inputs, str | os.PathLike):
        return [_path(inputs, "inputs")]
    if isinstance(inputs, bytes | bytearray | Mapping) or not isinstance(inputs, Iterable):
        raise TypeError("run_job: inputs must be a path (str or os.PathLike) or a sequence of "
                        f"paths, got {type(inputs).__name__}")  # fmt: skip
    return [_path(p, f"inputs[{i}]") for i, p in enumerate(inputs)]


def _job_spec(spec: Any) -> JobSpec:
    if isinstance(spec, JobSpec):
        return spec
    if isinstance(spec, str | os.PathLike):
        return load_spec(spec)  # a path to a spec file, as `decide run --spec` takes
    raise TypeError("run_job: spec must be a JobSpec (load_spec('job.yaml')) or a path to a "
                    f"spec file, got {type(spec).__name__}")  # fmt: skip


# Options `decide run` bounds (`--batch-size`, `--part-rows`): at least 1.
COUNT_OPTIONS = ("batch_size", "part_rows")


def run_job(
    spec: JobSpec | PathLike,
    inputs: PathLike | Sequence[PathLike],
    output: PathLike,
    *,
    report: bool = True,
    **options: Any,
) -> JobResult:
    """Decide every row of `inputs` into `output` (`decide.jobs.runner.run_job`, same options),
    then write report.json and report.html as `decide run` does (unless `report=False`).
    `spec` is a `JobSpec` or the path of a spec file (`load_spec`); `inputs` one path or a
    sequence of paths; paths are `str` or `os.PathLike`. Arguments of the wrong type raise
    `TypeError`, `batch_size` or `part_rows` below 1 `ValueError`, and the runner's usage errors
    `SpecError` (a `ValueError`) in the API's words (`resume=True`, not `--resume`)."""
    spec = _job_spec(spec)
    paths, output = _input_paths(inputs), _path(output, "output")
    for name in COUNT_OPTIONS:
        if name not in options:
            continue
        value = options[name]
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"run_job: {name} must be an int, got {type(value).__name__}")
        if value < 1:
            raise ValueError(f"run_job: {name} must be at least 1, got {value}")
    try:
        result = runner.run_job(spec, paths, output, **options)
    except SpecError as exc:
        if len(exc.args) == 1 and isinstance(exc.args[0], str):
            exc.args = (api_message(exc.args[0]),)  # same error (and type), the API's words
        raise
    if report:
        write_report(output)
    return result


__all__ = [
    "Decider",
    "Decision",
    "DecisionError",
    "FailureKind",
    "JobResult",
    "JobSpec",
    "Question",
    "load_spec",
    "questions_from_model",
    "run_job",
]
