"""The Python API: `Decider` for pipelines, `run_job` for whole parquet jobs.

    >>> from decide import Decider
    >>> decider = Decider()                      # the bundled model; or Decider("path/to/model")
    >>> d = decider.decide(text, [{"id": "eligible", "text": "Is the claim eligible?",
    ...                            "schema": {"type": "boolean"}}])
    >>> d.answers["eligible"], d.confidence["eligible"]

`decide` raises `DecisionError` (with a `FailureKind` in `.kind`) when its one document cannot
be decided. `decide_many` decides many documents against the same questions, batched, and returns
the decisions in input order: a document that cannot be decided comes back with
`status == "error"`, a `kind` and a reason instead of raising. Every answer is valid against its
schema; a question with `derive:` is computed from the other answers, never asked.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from decide.engine import load_model
from decide.jobs import runner
from decide.jobs.decisions import Decision, DecisionEngine, Item
from decide.jobs.failures import DecisionError, FailureKind, api_message
from decide.jobs.models import resolve_device, resolve_model_path
from decide.jobs.questionset import QuestionSet, QuestionsRefused, spec_refusal
from decide.jobs.runner import JobResult
from decide.jobs.spec import JobSpec, Question, SpecError, load_spec, parse_spec

from .report import write_report

QuestionLike = Question | Mapping[str, Any]


def _questions(questions: Sequence[QuestionLike]) -> list[Question]:
    spec = parse_spec(
        {"questions": [q if isinstance(q, Question) else dict(q) for q in questions]}, "questions"
    )
    if not spec.questions:
        raise SpecError("questions: at least one question is needed")
    return spec.questions


class Decider:
    """A loaded model ready to decide documents. Options are those of a job spec's `decoding`
    (`threshold`, `max_steps`, `temperature`, `seed`, `cache`) plus batching, long-document
    policy (`long_documents`, `windows` as the spec's `windows:`), `partial_rows` and `dates`
    (`{"order": "day_first"}`, as the spec's `dates:`)."""

    def __init__(
        self,
        model: str | Path | None = None,
        *,
        device: str = "auto",
        dtype: str = "auto",
        batch_size: int = 16,
        long_documents: str = "windows",
        instruction: str | None = None,
        rules: dict[str, Any] | None = None,
        partial_rows: str = "keep",
        dates: Mapping[str, Any] | None = None,
        windows: Mapping[str, Any] | None = None,
        **decoding: Any,
    ) -> None:
        self.loaded = load_model(
            resolve_model_path(model), device=resolve_device(device), dtype=dtype
        )
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
        )
        self.engine = DecisionEngine.for_spec(self.loaded, spec, batch_size=batch_size)

    def _compile(self, questions: Sequence[QuestionLike]) -> QuestionSet:
        try:
            return self.engine.questions(_questions(questions))
        except QuestionsRefused as exc:
            raise SpecError(spec_refusal(exc)) from exc

    def decide(self, document: str, questions: Sequence[QuestionLike]) -> Decision:
        """Decide one document; raises `DecisionError` (`.kind`, `.message`, `.decision`) when
        it cannot be decided. A partial decision (`partial`, see `errors`) is returned."""
        decision = self.decide_many([document], questions)[0]
        if not decision.ok:
            kind = decision.kind or FailureKind.internal_error
            message = api_message(decision.error or "the document could not be decided")
            decision.error = message
            raise DecisionError(kind, message, decision)
        return decision

    def decide_many(
        self,
        documents: Iterable[str] | Mapping[Any, str],
        questions: Sequence[QuestionLike],
    ) -> list[Decision]:
        """Decide many documents against the same questions; decisions come back in input
        order (a mapping's keys become the decisions' `doc_id`, else the position)."""
        compiled = self._compile(questions)
        pairs = (
            list(documents.items())
            if isinstance(documents, Mapping)
            else list(enumerate(documents))
        )
        by_id = {
            d.doc_id: d
            for d in self.engine.decide(Item(key, text, compiled) for key, text in pairs)
        }
        decisions = [by_id[key] for key, _ in pairs]
        for d in decisions:
            if d.error is not None:
                d.error = api_message(d.error)
        return decisions


def run_job(
    spec: JobSpec, inputs: list[Path], output: Path, *, report: bool = True, **options: Any
) -> JobResult:
    """Decide every row of `inputs` into `output` (`decide.jobs.runner.run_job`, same options),
    then write report.json and report.html as `decide run` does (unless `report=False`)."""
    result = runner.run_job(spec, inputs, output, **options)
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
    "run_job",
]
