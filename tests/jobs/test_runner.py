"""End to end: parquet in, checked decisions out, on tiny random checkpoints of every model type.

Random models decide nonsense, but every answer must still validate against its schema, outputs
must be one row per doc id, deterministic, batch-independent and resumable after SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from helpers.jobdata import MODEL_TYPES, QUESTIONS, check_output, read_answers, spec, write_docs

from decide.cli import main
from decide.engine import load_model
from decide.jobs.runner import run_job
from decide.jobs.spec import SpecError, parse_spec


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_every_answer_validates(model_type, models, tmp_path) -> None:
    docs = write_docs(tmp_path / "in.parquet", 60, seed=1)
    result = run_job(
        parse_spec(spec()),
        [docs],
        tmp_path / "out",
        model=models[model_type],
        batch_size=8,
        progress=False,
    )
    frame = check_output(tmp_path / "out", {f"doc-{i:05d}" for i in range(60)})
    assert result.ok == frame.filter(pl.col("status") == "ok").height == 60
    assert result.exit_code == 0
    # Typed answers: the struct mirrors the schemas.
    answers = frame.schema["answers"]
    fields = {f.name: f.dtype for f in answers.fields}
    assert fields["amount"] == pl.Int64 and fields["eligible"] == pl.Boolean
    assert fields["kind"] == pl.String and isinstance(fields["contact"], pl.Struct)


def test_gpt2_vocabulary_end_to_end(tiny_checkpoint, tmp_path) -> None:
    docs = write_docs(tmp_path / "in.parquet", 24, seed=9)
    model = tiny_checkpoint("Fast_dLLM_Qwen", init_std=0.2)
    run_job(parse_spec(spec()), [docs], tmp_path / "out", model=model, batch_size=8, progress=False)
    check_output(tmp_path / "out", {f"doc-{i:05d}" for i in range(24)})


@pytest.mark.parametrize("model_type", ["sdar", "llada"])
def test_batched_equals_one_at_a_time_and_seed_gives_same_bytes(model_type, models, tmp_path):
    docs = write_docs(tmp_path / "in.parquet", 12, seed=3)
    job = parse_spec(spec())
    outs = {}
    for name, batch in (("one", 1), ("batched", 6), ("again", 6)):
        run_job(
            job, [docs], tmp_path / name, model=models[model_type], batch_size=batch, progress=False
        )
        outs[name] = read_answers(tmp_path / name).select("doc_id", "answers_json", "confidence")
    assert outs["one"]["answers_json"].to_list() == outs["batched"]["answers_json"].to_list()
    assert outs["batched"].equals(outs["again"])


def test_sampling_is_seeded_per_document(models, tmp_path) -> None:
    docs = write_docs(tmp_path / "in.parquet", 10, seed=4)
    sampled = parse_spec(spec(decoding={"temperature": 1.0, "seed": 7}))
    for name, batch in (("a", 2), ("b", 5)):
        run_job(
            sampled,
            [docs],
            tmp_path / name,
            model=models["Dream"],
            batch_size=batch,
            progress=False,
        )
    a, b = read_answers(tmp_path / "a"), read_answers(tmp_path / "b")
    assert a["answers_json"].to_list() == b["answers_json"].to_list()
    check_output(tmp_path / "a", {f"doc-{i:05d}" for i in range(10)})


def test_bad_rows_become_error_rows(models, tmp_path) -> None:
    ids = ["a", "b", "c", "d", "d", "e", None, "f"]
    docs = ["fine text", "", None, "one", "two", "x " * 9000, "no id", "nine questions"]
    per_row = [None] * 7 + [
        [{"id": f"q{i}", "text": f"Q{i}?", "schema": '{"type": "boolean"}'} for i in range(9)]
    ]
    bad_schema = [{"id": "z", "text": "Z?", "schema": '{"type": "string", "format": "ipv6"}'}]
    per_row[0] = bad_schema
    pl.DataFrame(
        {"doc_id": ids, "document": docs, "questions": per_row, "note": list("12345678")},
        schema_overrides={
            "questions": pl.List(
                pl.Struct({"id": pl.String, "text": pl.String, "schema": pl.String})
            )
        },
    ).write_parquet(tmp_path / "in.parquet")
    result = run_job(
        parse_spec(spec(long_documents="error")),  # windows: tests/jobs/test_windows_decide.py
        [tmp_path / "in.parquet"],
        tmp_path / "out",
        model=models["sdar"],
        progress=False,
    )
    frame = read_answers(tmp_path / "out")
    errors = dict(zip(frame["doc_id"].to_list(), frame["error"].to_list(), strict=True))
    assert "invalid questions" in errors["a"] and "/format" in errors["a"]
    assert errors["b"] == "document is empty" and errors["c"] == "document is null"
    assert errors["d"].startswith("duplicate doc_id (at in.parquet row 3, in.parquet row 4)")
    assert "use --truncate" in errors["e"]
    assert errors["f"] is None  # nine per-row questions: split into two blocks, decided
    f_row = frame.filter(pl.col("doc_id") == "f").row(0, named=True)
    assert list(json.loads(f_row["answers_json"])) == [f"q{i}" for i in range(9)]
    assert f_row["note"] == "8"  # other columns are carried through untouched
    invalid = pl.read_parquet(tmp_path / "out" / "errors.parquet")
    assert "in.parquet row 6: doc_id is null" in invalid["error"].to_list()
    # errors.parquet says why each row failed, as the parts' error_kind does.
    kinds = dict(zip(invalid["doc_id"].to_list(), invalid["error_kind"].to_list(), strict=True))
    assert kinds == {
        "a": "invalid_questions", "b": "empty_document", "c": "empty_document",
        "d": "duplicate_doc_id", "e": "document_too_long", None: "null_doc_id",
    }  # fmt: skip
    assert result.invalid == 1 and result.exit_code == 1


def test_a_refused_per_row_question_neither_names_nor_types_a_column(models, tmp_path) -> None:
    """A row's question with a bad id, or a schema that does not compile, fails that row only:
    the answers struct has no field for the bad id, the refused schema does not turn the good
    rows' number column into JSON text, an integer and a number question of one id share
    Float64, and the report is written (it used to fail its own schema on the bad id)."""
    from decide.report import write_report

    def q(qid: str, schema: dict, extract: bool = False) -> dict:
        return {"id": qid, "text": "What is the total?", "schema": json.dumps(schema),
                "extract": extract}  # fmt: skip

    number, integer = {"type": "number"}, {"type": "integer", "minimum": 0}
    rows = {
        "good": [q("total", number)],
        "bad_id": [q("9x", {"type": "boolean"})],
        "misspelt": [q("total", {"type": "integer", "maximm": 10})],
        "whole": [q("total", integer)],
    }
    pl.DataFrame({"doc_id": list(rows), "document": ["The total is 744 dollars."] * 4,
                  "questions": list(rows.values())}).write_parquet(tmp_path / "in.parquet")  # fmt: skip
    result = run_job(parse_spec({"questions": QUESTIONS[:1]}),
                     [tmp_path / "in.parquet"], tmp_path / "out", model=models["sdar"],
                     progress=False)  # fmt: skip
    frame = read_answers(tmp_path / "out")
    struct = frame.schema["answers"]
    assert set(struct.to_schema()) == {QUESTIONS[0]["id"], "total"}
    assert struct.to_schema()["total"] == pl.Float64
    status = dict(zip(frame["doc_id"], frame["status"], strict=True))
    assert status == {"good": "ok", "bad_id": "error", "misspelt": "error", "whole": "ok"}
    assert result.exit_code == 1
    report = write_report(tmp_path / "out")
    assert report["counts"]["ok"] == 2 and (tmp_path / "out" / "report.html").is_file()


@pytest.mark.parametrize(
    "lists", [[[], []], [], [[{"id": "q", "text": "Q?", "schema": '{"type": "bogus"}'}]]]
)
def test_a_job_that_asks_no_question_is_refused(models, tmp_path, lists) -> None:
    """A spec without questions whose rows ask none (empty lists, no rows, or only questions
    that do not compile): the answers struct had no field, which parquet cannot hold, so the job
    aborted with a polars traceback (exit 3) and again on every --resume. Now exit 2, nothing
    written."""
    kind = pl.List(pl.Struct({"id": pl.String, "text": pl.String, "schema": pl.String}))
    pl.DataFrame({"doc_id": [f"d{i}" for i in range(len(lists))],
                  "document": ["The total is 744 dollars."] * len(lists), "questions": lists},
                 schema={"doc_id": pl.String, "document": pl.String,
                         "questions": kind}).write_parquet(tmp_path / "in.parquet")  # fmt: skip
    with pytest.raises(SpecError, match="no question to ask: the spec has none"):
        run_job(parse_spec({"questions": []}), [tmp_path / "in.parquet"], tmp_path / "out",
                model=models["sdar"], progress=False)  # fmt: skip
    assert not (tmp_path / "out").exists()


def test_per_row_questions_take_the_spec_questions_other_keys(models, tmp_path) -> None:
    """Fields of the questions struct beyond id, text, schema and extract are read as the spec's
    question keys (`unit`, `absent`, `absent_below`), as the README says; a bad one fails its
    row naming it."""
    police = {
        "id": "police",
        "text": "Police report?",
        "schema": json.dumps({"enum": ["yes", "no", "unknown"]}),
        "extract": False,
        "unit": None,
        "absent": "unknown",
        "absent_below": 0.99,
    }
    days = {
        "id": "days",
        "text": "Days since purchase?",
        "schema": json.dumps({"type": "integer"}),
        "extract": True,
        "unit": "days",
        "absent": None,
        "absent_below": None,
    }
    bad = {**police, "absent": "maybe"}
    pl.DataFrame({"doc_id": ["a", "b"], "document": ["I bought it two weeks ago."] * 2,
                  "questions": [[police, days], [bad]]}).write_parquet(tmp_path / "in.parquet")  # fmt: skip
    run_job(parse_spec({"questions": []}), [tmp_path / "in.parquet"], tmp_path / "out",
            model=models["sdar"], progress=False)  # fmt: skip
    rows = {r["doc_id"]: r for r in read_answers(tmp_path / "out").iter_rows(named=True)}
    assert rows["a"]["status"] == "ok" and rows["a"]["answers"]["days"] == 14  # unit: days
    assert (
        rows["b"]["error_kind"] == "invalid_questions" and "absent: 'maybe'" in rows["b"]["error"]
    )


def test_usage_errors_exit_2_naming_the_problem(models, tmp_path) -> None:
    docs = write_docs(tmp_path / "in.parquet", 3)
    model = str(models["llada"])
    pl.DataFrame({"id": ["x"], "document": ["t"]}).write_parquet(tmp_path / "noid.parquet")
    (tmp_path / "text.parquet").write_text("this is not parquet")
    (tmp_path / "rows.csv").write_text("doc_id,document\n1,text\n")
    (tmp_path / "a-file").write_text("")
    hostname = {"id": "x", "text": "X?", "schema": {"type": "string", "format": "ipv6"}}
    specs = {
        "job": spec(),
        "bad": spec(questions=[*QUESTIONS[:2], hostname]),
        "none": {"questions": []},
        "other": spec(decoding={"threshold": 0.5}),
        "typo": spec(rules={"if": {"properties": {"nope": {"const": 1}}}}),
        # Questions whose own text outgrows the model's 4,096 positions: no document can fit.
        "huge": spec(
            questions=[{**q, "text": "Read every clause twice. " * 400} for q in QUESTIONS[:3]]
        ),
    }
    for name, content in specs.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(content))

    def run(inputs: Path, out: str, spec_name: str = "job", *extra: str):
        args = ["run", str(inputs), "-o", str(tmp_path / out)]
        args += ["--spec", str(tmp_path / f"{spec_name}.json"), "--model", model, *extra]
        return CliRunner().invoke(main, args)

    cases = [
        (tmp_path / "noid.parquet", "o1", "job", "no doc_id column 'doc_id'"),
        (tmp_path / "text.parquet", "o2", "job", "not a readable parquet file"),
        # the spec given where the inputs go (`decide run job.yaml in.parquet`)
        (tmp_path / "job.json", "o12", "job", "a job spec is passed with --spec"),
        # a CSV where parquet goes: how to convert it
        (
            tmp_path / "rows.csv",
            "o13",
            "job",
            "decide reads parquet only: convert it first, e.g. "
            'python -c "import polars as pl; pl.read_csv(',
        ),
        (docs, "o3", "bad", "/format"),
        (docs, "o4", "none", "no questions"),
        (docs, "a-file/out", "job", "a-file"),
        (docs, "o5", "missing", "cannot read"),
        (tmp_path / "nothere.parquet", "o6", "job", "no such input file"),
        (docs, "o8", "typo", "/if/properties/nope: 'nope' is not the id of any question"),
        (docs, "o9", "huge", "the spec's 3 questions do not fit the model, whatever the document"),
    ]
    for inputs, out, spec_name, message in cases:
        result = run(inputs, out, spec_name)
        assert result.exit_code == 2, (out, result.output)
        assert message in result.output, (message, result.output)
    local = run(docs, "o11", "job", "--actors", "4")  # silently one local engine before
    assert local.exit_code == 2 and "--actors: Ray options, with --engine local" in local.output
    twice = run(docs, "o10", "job", str(docs))  # every row would be its own duplicate
    assert twice.exit_code == 2 and "given twice" in twice.output, twice.output
    # A usage error found after the output directory was checked leaves nothing in the way.
    bad_model = CliRunner().invoke(main, ["run", str(docs), "-o", str(tmp_path / "o7"), "--spec",
                                          str(tmp_path / "job.json"), "--model", str(tmp_path)])  # fmt: skip
    assert bad_model.exit_code == 2 and "config.json is missing" in bad_model.output
    first = run(docs, "o7")
    assert first.exit_code == 0, first.output
    assert "answers: " in first.output
    again = run(docs, "o7")
    assert again.exit_code == 2 and "--resume" in again.output
    foreign = run(docs, "o7", "other", "--resume")
    assert foreign.exit_code == 2 and "another spec" in foreign.output
    # The job recorded the default step cap (2): resuming with another is refused (`--max-steps
    # 0` is no cap), with the same one it resumes.
    uncapped = run(docs, "o7", "job", "--resume", "--max-steps", "0")
    assert uncapped.exit_code == 2 and "decided with max_steps 2" in uncapped.output
    four = run(docs, "o7", "job", "--resume", "--max-steps", "4")
    assert (
        four.exit_code == 2
        and "decided with max_steps 2 (manifest.json), this spec asks 4" in four.output
    )
    assert run(docs, "o7", "job", "--resume", "--max-steps", "2").exit_code == 0
    assert read_answers(tmp_path / "o7").height == 3  # nothing committed was lost
    # A job begun under the earlier default (4, as its manifest records) is finished with 4 by a
    # spec that leaves the cap out; its fingerprint is the one the job has.
    manifest_path = tmp_path / "o7" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["spec"]["decoding"]["max_steps"] = 4
    manifest_path.write_text(json.dumps(manifest))
    # A resume names the job's own inputs (other files are another job): rows are left to
    # decide when the last part is lost, as a run killed before writing it would leave them.
    parts = sorted((tmp_path / "o7" / "answers").glob("part-*.parquet"))
    parts[-1].unlink()
    resumed = run(docs, "o7", "job", "--resume")
    assert resumed.exit_code == 0 and "decided 3 of 3" in resumed.output, resumed.output
    manifest = json.loads(manifest_path.read_text())
    assert manifest["spec"]["decoding"]["max_steps"] == 4
    assert manifest["fingerprints"]["spec"] == parse_spec(spec()).fingerprint()
    assert read_answers(tmp_path / "o7").height == 3
    more = write_docs(tmp_path / "more.parquet", 5)
    other = run(more, "o7", "job", "--resume")
    assert other.exit_code == 2 and "more.parquet is not one of them" in other.output


def test_sigkill_then_resume_gives_one_row_per_doc_identical_to_uninterrupted(models, tmp_path):
    docs = write_docs(tmp_path / "in.parquet", 120, seed=5)
    (tmp_path / "job.json").write_text(json.dumps(spec()))
    model = str(models["Dream"])
    base = [
        sys.executable,
        "-m",
        "decide",
        "run",
        str(docs),
        "--spec",
        str(tmp_path / "job.json"),
        "--model",
        model,
        "--batch-size",
        "4",
        "--part-rows",
        "8",
        "--no-progress",
    ]
    subprocess.run([*base, "-o", str(tmp_path / "full")], check=True, capture_output=True)
    proc = subprocess.Popen([*base, "-o", str(tmp_path / "killed")], stderr=subprocess.PIPE)
    parts = tmp_path / "killed" / "answers"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and len(list(parts.glob("part-*.parquet"))) < 3:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    written = len(list(parts.glob("part-*.parquet")))
    assert 3 <= written < 15, "the run must be killed part-way"
    resumed = subprocess.run(
        [*base, "-o", str(tmp_path / "killed"), "--resume"], capture_output=True, text=True
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "from an earlier run" in resumed.stdout
    full = read_answers(tmp_path / "full")
    again = check_output(tmp_path / "killed", {f"doc-{i:05d}" for i in range(120)})
    assert again.select("doc_id", "answers_json", "nfe").equals(
        full.select("doc_id", "answers_json", "nfe")
    )
    # Confidences are products of float32 probabilities: the resumed run batches the remaining
    # documents differently, which moves each factor by float rounding, and a slot multiplies
    # tens of them (1.3e-5 relative seen on an AVX2 CPU). A confidence from another document or
    # another answer differs by orders of magnitude, so 1e-4 still catches a mix-up.
    for a, b in zip(again["confidence"].to_list(), full["confidence"].to_list(), strict=True):
        assert a.keys() == b.keys()
        assert all(abs(a[k] - b[k]) <= 1e-4 * max(abs(b[k]), 1e-30) for k in a)


def test_python_api(models) -> None:
    from decide import Decider

    decider = Decider(models["bert"], batch_size=4)
    one = decider.decide("A car was hit.", QUESTIONS[:3])
    assert one.ok and set(one.answers) == {"kind", "eligible", "amount"}
    many = decider.decide_many({"x": "water in the basement", "y": ""}, QUESTIONS[:2])
    assert [d.doc_id for d in many] == ["x", "y"]
    assert many[0].ok and many[1].error == "document is empty"
    # A loaded job spec, or one question without its list, says what is expected instead.
    with pytest.raises(SpecError, match=r"pass its questions \(spec.questions\)"):
        decider.decide("A car was hit.", parse_spec({"questions": QUESTIONS[:2]}))
    with pytest.raises(SpecError, match="expected a list of questions"):
        decider.decide("A car was hit.", QUESTIONS[0])
    loaded = load_model(models["bert"])
    assert loaded.config.family == "bert"
