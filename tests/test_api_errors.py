"""Mistakes in calls to the Python API (`decide.api`) give clear errors in the API's own words:
one string given to `decide_many`, a document that is not text, paths given as `str`, a spec
file's path where a `JobSpec` goes, a job's output directory already used (`resume=True`, not
`--resume`) and `part_rows` below 1 (the bound `decide run --part-rows` keeps)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.jobdata import QUESTIONS, read_answers, write_docs

from decide import Decider, DecisionError, load_spec, run_job
from decide.jobs.spec import SpecError, parse_spec

QS = QUESTIONS[:2]  # an enum and a boolean: quick to decide


@pytest.fixture(scope="module")
def model(tiny_checkpoint) -> Path:
    return tiny_checkpoint("bert", vocab="small", init_std=0.2)


@pytest.fixture(scope="module")
def decider(model: Path) -> Decider:
    return Decider(model, batch_size=4)


def test_decide_many_refuses_one_string(decider: Decider) -> None:
    with pytest.raises(TypeError, match=r"decide_many: .*iterable or a mapping of documents, "
                                        r"not one str.*use decide\(") as raised:  # fmt: skip
        decider.decide_many("A car claim in Boston.", QS)
    assert "AttributeError" not in repr(raised.value)
    with pytest.raises(TypeError, match="not one bytes"):
        decider.decide_many(b"A car claim.", QS)
    with pytest.raises(TypeError, match=r"decide_many: document 1 must be a str, got int"):
        decider.decide_many(["A car claim.", 7], QS)
    with pytest.raises(TypeError, match=r"decide_many: document 'b' must be a str, got bytes"):
        decider.decide_many({"a": "A car claim.", "b": b"bytes"}, QS)
    assert len(decider.decide_many(["A car claim.", None], QS)) == 2  # None: a null document


@pytest.mark.parametrize(("document", "name"), [(123, "int"), (b"A car claim.", "bytes"),
                                                (["A car claim."], "list")])  # fmt: skip
def test_decide_refuses_a_document_that_is_not_text(decider: Decider, document, name) -> None:
    with pytest.raises(TypeError, match=rf"decide: document must be a str, got {name}\b"):
        decider.decide(document, QS)


def test_decide_of_none_is_still_a_null_document(decider: Decider) -> None:
    with pytest.raises(DecisionError, match="document is null"):
        decider.decide(None, QS)  # type: ignore[arg-type]


def test_run_job_takes_str_paths_and_a_spec_path(model: Path, tmp_path: Path) -> None:
    docs = write_docs(tmp_path / "in.parquet", 3, seed=3)
    (tmp_path / "job.json").write_text(json.dumps({"questions": QS}))
    options = {"model": model, "progress": False, "report": False}
    result = run_job(str(tmp_path / "job.json"), str(docs), str(tmp_path / "out"), **options)
    assert result.total == 3 and result.output == tmp_path / "out"
    assert read_answers(tmp_path / "out").height == 3
    spec = load_spec(tmp_path / "job.json")
    result = run_job(spec, [str(docs)], str(tmp_path / "out2"), **options)
    assert result.total == 3
    # The output directory now holds a job: the error names the API's argument, not the flag.
    with pytest.raises(
        SpecError, match="output directory is not empty; pass resume=True"
    ) as raised:
        run_job(spec, docs, tmp_path / "out", **options)
    assert "--resume" not in str(raised.value)
    run_job(spec, docs, tmp_path / "out", resume=True, **options)  # as the error says


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((12, "in.parquet", "out"), r"run_job: spec must be a JobSpec \(load_spec\('job.yaml'\)\) "
                                    r"or a path to a spec file, got int"),
        ((None, 3, "out"), r"run_job: inputs must be a path \(str or os.PathLike\) or a sequence "
                           r"of paths, got int"),
        ((None, b"in.parquet", "out"), r"run_job: inputs .* got bytes"),
        ((None, ["in.parquet", 3], "out"), r"run_job: inputs\[1\] must be a path .* got int"),
        ((None, "in.parquet", 5), r"run_job: output must be a path .* got int"),
    ],
)  # fmt: skip
def test_run_job_names_the_argument_of_the_wrong_type(args, match, tmp_path: Path) -> None:
    spec, inputs, output = args
    spec = parse_spec({"questions": QS}, "spec") if spec is None else spec
    with pytest.raises(TypeError, match=match):
        run_job(spec, inputs, output)


@pytest.mark.parametrize("option", ["part_rows", "batch_size"])
@pytest.mark.parametrize("value", [0, -1])
def test_run_job_refuses_counts_below_one(option: str, value: int, tmp_path: Path) -> None:
    docs = write_docs(tmp_path / "in.parquet", 2)
    with pytest.raises(ValueError, match=rf"run_job: {option} must be at least 1, got {value}"):
        run_job(parse_spec({"questions": QS}, "spec"), [docs], tmp_path / "out", **{option: value})
    assert not (tmp_path / "out").exists()


def test_a_decision_error_crosses_a_process_pool(decider: Decider) -> None:
    """Unpickling called `DecisionError(message)`: one empty document in a worker broke the
    whole pool (`BrokenProcessPool`)."""
    import copy
    import pickle

    with pytest.raises(DecisionError) as info:
        decider.decide("", QUESTIONS[:1])
    again = pickle.loads(pickle.dumps(info.value))
    assert (again.kind, again.message) == (info.value.kind, info.value.message)
    assert again.decision.doc_id == info.value.decision.doc_id
    assert copy.deepcopy(info.value).kind is info.value.kind


def test_questions_may_be_a_generator_and_none_is_named(decider: Decider) -> None:
    """A generator was used up by a type check: "at least one question is needed"."""
    text = "My car was hit in Leeds."
    from_list = decider.decide(text, QUESTIONS[:2])
    from_generator = decider.decide(text, (q for q in QUESTIONS[:2]))
    assert from_generator.answers == from_list.answers
    with pytest.raises(SpecError, match="questions: expected a list of questions"):
        decider.decide(text, 5)
    # None: no questions given (a Decider made with `from_spec` asks its spec's)
    with pytest.raises(TypeError, match="no questions given, and this Decider has none"):
        decider.decide(text, None)


@pytest.mark.parametrize(
    ("options", "match"),
    [({"batch_size": "16"}, "batch_size must be an int"), ({"batch_size": True}, "batch_size"),
     ({"batch_size": 2.5}, "batch_size"), ({"windows": 5}, "windows must be a mapping"),
     ({"dates": "day_first"}, "dates must be a mapping")],
)  # fmt: skip
def test_decider_options_of_the_wrong_type_are_named(model: Path, options, match) -> None:
    """They gave raw errors ("'<' not supported", "'int' object is not iterable") after the
    model was loaded, or at the first decision."""
    with pytest.raises(TypeError, match=match):
        Decider(model, **options)


def test_decider_options_are_checked_before_the_model_loads(monkeypatch) -> None:
    """A bad option (threshold 1.5, an unknown decoding key, overlap >= tokens) raised only after
    the model had loaded (seconds for a large one); now before anything is loaded."""
    from decide import api

    def no_load(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(api, "load_model", no_load)
    for options in (
        {"threshold": 1.5},
        {"thresold": 0.5},
        {"windows": {"tokens": 64, "overlap": 64}},
    ):
        with pytest.raises(SpecError, match="Decider options"):
            Decider("no/such/model", **options)


def test_a_long_lived_decider_keeps_a_bounded_cache(decider: Decider, monkeypatch) -> None:
    """Every new question text compiled and kept its set for ever (600 MB over 200 calls)."""
    from decide.jobs import questionset

    monkeypatch.setattr(questionset, "SETS_KEPT", 3)
    monkeypatch.setattr(questionset, "COMPILED_KEPT", 4)
    book = decider.engine.book
    for i in range(8):
        question = {"id": "q", "text": f"Does it mention product {i}?",
                    "schema": {"type": "boolean"}}  # fmt: skip
        decider.decide("Product 3 broke.", [question])
        assert len(book._sets) <= 3 and len(book._compiled) <= 4


def test_a_missing_text_as_pandas_writes_it_is_a_null_document(decider: Decider) -> None:
    """NaN (how a pandas column writes a missing text) raised TypeError for the whole batch,
    while None gave its own error row."""
    import numpy as np

    missing = [float("nan"), np.float64("nan"), np.float32("nan")]
    decisions = decider.decide_many(["My car was hit.", *missing, None], QS)
    assert decisions[0].ok
    assert [d.kind for d in decisions[1:]] == [decisions[-1].kind] * 4
    assert not decisions[-1].ok
    with pytest.raises(DecisionError):
        decider.decide(float("nan"), QS)


def test_questions_that_fit_no_document_are_a_usage_error(decider: Decider) -> None:
    """Each document came back as its own `questions_do_not_fit` error, as if the documents
    were at fault; `decide run` refuses such questions up front."""
    too_many = [{"id": f"q{i}", "text": f"Is statement number {i} about the claim true? " * 20,
                 "schema": {"type": "string", "maxLength": 30}} for i in range(16)]  # fmt: skip
    with pytest.raises(SpecError, match="the 16 questions do not fit the model, whatever"):
        decider.decide_many(["a car", "a boat"], too_many)
    assert decider.decide_many(["a car"], QS)[0].ok
