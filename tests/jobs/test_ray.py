"""The Ray Data runner on a local cluster: the same answers as the local runner, one row per doc
id when an actor dies mid-job, a resume that redoes nothing, and a clear exit 2 without Ray."""

from __future__ import annotations

import builtins
import json
import os
import signal
import threading
import time
import warnings
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from helpers.jobdata import QUESTIONS, carried, long_text, write_docs

from decide.cli import main
from decide.jobs.runner import run_job
from decide.jobs.spec import parse_spec
from decide.schemas.span import in_document, number_in_document

ray = pytest.importorskip("ray", reason="Ray is the optional `ray` extra (also in `dev`)")
pytestmark = pytest.mark.timeout(600)
DOCS = 40


@pytest.fixture(scope="module")
def job(tiny_checkpoint, tmp_path_factory):
    root = tmp_path_factory.mktemp("ray")
    docs = write_docs(root / "in.parquet", DOCS, seed=31)
    frame = pl.read_parquet(docs).with_columns(pl.lit("x").alias("team"))
    # carried columns Python objects would change: nanoseconds, a date past year 9999
    frame = frame.with_columns(**{k: v for k, v in carried(frame.height).items() if k != "team"})
    amounts = pl.Series([f" Total ${1000 + 37 * i:,} claimed." for i in range(frame.height)])
    frame = frame.with_columns(pl.col("document") + amounts)
    frame = pl.concat([frame, frame.head(1)])  # one duplicated id
    frame.write_parquet(docs)
    model = tiny_checkpoint("Dream", vocab="small", init_std=0.2)
    # `city` answers with a span of its document, `amount` with a number it states: span slots
    # are built per row on the actors.
    questions = [{**q, "extract": True} if q["id"] in ("city", "amount") else q for q in QUESTIONS]
    spec = parse_spec({"questions": questions})
    run_job(spec, [docs], root / "local", model=model, batch_size=4, progress=False)
    return root, docs, model, spec


def _answers(out: Path) -> pl.DataFrame:
    return pl.read_parquet(out / "answers" / "*.parquet").sort("doc_id")


def test_ray_gives_the_same_answers_and_resume_redoes_nothing(cluster, job, capfd) -> None:
    from decide.jobs.ray_runner import run_job_ray

    root, docs, model, spec = job
    capfd.readouterr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run_job_ray(spec, [docs], root / "ray", model=model, batch_size=4, actors=2,
                             part_rows=7, progress=False)  # fmt: skip
    # Ray Data's INFO lines, progress bars and deprecation warnings reached the console before
    err = capfd.readouterr().err
    assert "INFO" not in err and "Running Dataset" not in err and "Parquet dataset" not in err
    ours = [str(w.message) for w in caught if w.filename.endswith("ray_runner.py")]
    assert not ours, ours  # how decide calls Ray Data (Ray's own internal ones are not ours)
    local, remote = _answers(root / "local"), _answers(root / "ray")
    assert remote["doc_id"].n_unique() == remote.height == DOCS
    # Evidence too: the extract answers' spans (documents read whole), and the windows count.
    same = ["doc_id", "status", "error", "answers_json", "team", "windows", "evidence"]
    same += ["stamp", "far", "nested"]
    inputs = pl.read_parquet(docs).unique("doc_id", keep="first").sort("doc_id")
    for name in ("stamp", "far", "nested"):
        assert remote[name].equals(inputs[name]) and remote.schema[name] == inputs.schema[name]
    assert remote.select(same).equals(local.select(same))
    assert remote["evidence"].drop_nulls().len() > 0
    tokens = ["doc_id", "value_tokens", "filler_tokens"]  # what the report's token figures sum
    assert remote.select(tokens).equals(local.select(tokens))
    assert result.failed == 1  # the duplicated id
    texts = dict(zip(*pl.read_parquet(docs).select("doc_id", "document"), strict=False))
    ok = remote.filter(pl.col("status") == "ok").select("doc_id", "answers_json")
    for row in ok.iter_rows(named=True):
        answers = json.loads(row["answers_json"])
        assert in_document(answers["city"], texts[row["doc_id"]])
        assert number_in_document(answers["amount"], texts[row["doc_id"]])
    manifest = json.loads((root / "ray" / "manifest.json").read_text())
    assert manifest["engine"] == "ray" and manifest["status"] == "complete"
    parts = sorted((root / "ray" / "answers").glob("part-*.parquet"))
    again = run_job_ray(spec, [docs], root / "ray", model=model, resume=True, progress=False)
    assert again.skipped == DOCS and again.nfe == 0
    assert sorted((root / "ray" / "answers").glob("part-*.parquet")) == parts


def test_a_document_read_in_windows_keeps_its_windows_and_evidence_on_ray(
    cluster, tiny_checkpoint, tmp_path
) -> None:
    from decide.jobs.ray_runner import run_job_ray

    text = long_text(300)
    middle = len(text) // 2
    docs = ["short claim, code ZX100", f"{text[:middle]} Code ZX417 applies. {text[middle:]}"]
    pl.DataFrame({"doc_id": ["s", "l"], "document": docs}).write_parquet(tmp_path / "in.parquet")
    spec = parse_spec({"questions": [
        {"id": "kind", "text": "What kind of claim is it?",
         "schema": {"enum": ["auto", "home", "none"]}, "absent": "none"},
        {"id": "code", "text": "Which clause code applies?", "extract": True,
         "schema": {"type": "string", "pattern": "^[Zz][Xx][0-9]{3}$"}},
    ]})  # fmt: skip
    model = tiny_checkpoint("bert", vocab="small", init_std=0.2)
    run_job(spec, [tmp_path / "in.parquet"], tmp_path / "local", model=model, progress=False)
    run_job_ray(spec, [tmp_path / "in.parquet"], tmp_path / "ray", model=model, actors=1,
                progress=False)  # fmt: skip
    local, remote = _answers(tmp_path / "local"), _answers(tmp_path / "ray")
    same = ["doc_id", "status", "answers_json", "windows", "evidence"]
    assert remote.select(same).equals(local.select(same))
    rows = {r["doc_id"]: r for r in remote.iter_rows(named=True)}
    assert rows["l"]["windows"] > 1 and rows["s"]["windows"] == 0
    code = rows["l"]["evidence"]["code"]
    assert docs[1][code["span_start"] : code["span_end"]] == "ZX417"
    assert rows["s"]["evidence"]["code"]["window"] is None


def test_an_actor_killed_mid_job_is_replaced(cluster, job) -> None:
    from decide.jobs.ray_runner import run_job_ray

    root, docs, model, spec = job
    out = root / "killed"
    killed: list[int] = []

    def actor_pids() -> list[int]:
        """Ray names an actor's worker process after its class (`ray::MapWorker(...)`)."""
        pids = []
        for proc in Path("/proc").iterdir():
            try:
                title = (proc / "cmdline").read_bytes().decode(errors="replace")
            except OSError:  # the process ended, or is not ours to read
                continue
            if proc.name.isdigit() and title.startswith("ray::") and "DeciderActor" in title:
                pids.append(int(proc.name))
        return pids

    def kill_one_actor() -> None:
        """Kill the actor once the first part is written: mid-job on a fast machine too (a fixed
        2-second wait once outlived the whole job and found no actor left to kill)."""
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not killed:
            pids = actor_pids()
            if pids and list((out / "answers").glob("part-*.parquet")):
                os.kill(pids[0], signal.SIGKILL)
                killed.append(pids[0])
                return
            time.sleep(0.005)

    killer = threading.Thread(target=kill_one_actor, daemon=True)
    killer.start()
    run_job_ray(spec, [docs], out, model=model, batch_size=2, actors=1, part_rows=5,
                progress=False)  # fmt: skip
    killer.join(timeout=5)
    assert killed, "no actor was found to kill"
    answers = _answers(out)
    assert answers["doc_id"].n_unique() == answers.height == DOCS
    assert answers.select("doc_id", "answers_json").equals(
        _answers(root / "local").select("doc_id", "answers_json")
    )


def test_without_ray_engine_ray_exits_2(job, tmp_path, monkeypatch) -> None:
    _, docs, model, _ = job
    (tmp_path / "job.json").write_text(json.dumps({"questions": QUESTIONS}))
    real_import = builtins.__import__

    def no_ray(name, *args, **kwargs):
        if name == "ray" or name.startswith("ray."):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    result = CliRunner().invoke(main, ["run", str(docs), "-o", str(tmp_path / "out"), "--spec",
                                       str(tmp_path / "job.json"), "--model", str(model),
                                       "--engine", "ray"])  # fmt: skip
    assert result.exit_code == 2
    assert 'pip install "decide[ray]"' in result.output


def test_questions_that_cannot_fit_are_refused_before_the_cluster_starts(job, tmp_path) -> None:
    from decide.jobs.ray_runner import run_job_ray
    from decide.jobs.spec import SpecError

    _, docs, model, _ = job
    huge = parse_spec({"questions": [{**q, "text": "Read every clause twice. " * 400}
                                     for q in QUESTIONS[:3]]})  # fmt: skip
    with pytest.raises(SpecError, match="questions do not fit the model, whatever the document"):
        run_job_ray(huge, [docs], tmp_path / "out", model=model, progress=False)
    assert not list((tmp_path / "out").rglob("*.parquet"))  # nothing decided, nothing written
    assert not (tmp_path / "out" / "manifest.json").exists()
