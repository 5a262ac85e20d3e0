"""Why a document (or one answer) could not be decided, as a stable kind callers can branch on.

Every error `Decision` carries a `FailureKind` next to its message, set where the error is made,
so no caller parses messages. `DecisionError` is what the Python API raises for a single
document (`Decider.decide`); its message uses API wording (`long_documents="truncate"`, not the
CLI's `--truncate`). `decide_many` and the runners keep returning error decisions instead.
"""

from __future__ import annotations

from enum import Enum


class FailureKind(str, Enum):
    """The category of a failed document or answer (values are stable, lower_snake_case)."""

    document_too_long = "document_too_long"  # does not fit the model (no truncation asked)
    questions_do_not_fit = "questions_do_not_fit"  # the prompt and answers alone are too long
    empty_document = "empty_document"  # null, empty or whitespace only
    invalid_text = "invalid_text"  # not tokenizable (not valid Unicode)
    no_questions = "no_questions"  # nothing to ask of this document
    invalid_questions = "invalid_questions"  # per-row questions that cannot be parsed/compiled
    duplicate_doc_id = "duplicate_doc_id"  # the id appears more than once in the input
    null_doc_id = "null_doc_id"  # an input row without a doc_id (errors.parquet only)
    schema_refused = "schema_refused"  # a schema or rule cannot be enforced
    rules_unsatisfiable = "rules_unsatisfiable"  # no answers satisfy the rules
    answer_invalid = "answer_invalid"  # a decision object fails jsonschema validation
    no_span = "no_span"  # an extract question with no admissible span or number
    derive_failed = "derive_failed"  # a derived answer could not be computed
    rule_violated = "rule_violated"  # the answers violate a CEL rule checked after decoding
    model_error = "model_error"  # decoding failed
    internal_error = "internal_error"  # a bug (logged loudly)

    def __str__(self) -> str:
        return self.value


class DecisionError(RuntimeError):
    """A single document could not be decided (`Decider.decide`): `kind` says why, `decision`
    is the error decision (nfe, truncated, ... as far as it got)."""

    def __init__(self, kind: FailureKind, message: str, decision: object | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.decision = decision

    def __reduce__(self) -> tuple:
        """Pickled whole (a worker of a process pool raising it reached the caller as a
        `BrokenProcessPool`: unpickling called `DecisionError(message)`)."""
        return (type(self), (self.kind, self.message, self.decision))


# Command-line flags a runner message may name, and what the Python API calls them.
API_WORDS = (
    ("use --truncate", 'pass long_documents="truncate"'),
    ("--truncate", 'long_documents="truncate"'),
    ("--resume", "resume=True"),
    ("--force-calibration", "force_calibration=True"),
    ("--calibration and --review-below", "calibration and review_below in the spec"),
    ("the spec's ", "the "),  # the API has questions, not a spec
)


def api_message(message: str) -> str:
    """A runner error message in the Python API's words (options, not command-line flags)."""
    for flag, argument in API_WORDS:
        message = message.replace(flag, argument)
    return message
