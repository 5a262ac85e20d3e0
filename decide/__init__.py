"""decide: batches of related decision questions about documents, answered by diffusion LMs.

Public names: `Decider` (decide documents from Python), `Decision`, `DecisionError` (what
`Decider.decide` raises) and its `FailureKind`, `Question`, `JobSpec`,
`load_spec`, `questions_from_model` (one question per field of a Pydantic model), `run_job` (a
whole parquet job) and `JobResult`. They are imported on first use, so
`import decide.schemas` (or the CLI's `--help`) does not load torch and the model code.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
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


def __getattr__(name: str) -> Any:
    if name in __all__:
        from decide import api

        return getattr(api, name)
    raise AttributeError(f"module 'decide' has no attribute {name!r}")
