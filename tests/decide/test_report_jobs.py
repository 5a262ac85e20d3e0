"""Reports of real jobs: a job interrupted and resumed reports the same figures as one run
uninterrupted; an input without rows decides nothing and still gets a valid output and report;
refused runs leave nothing behind; `decide report` does not import torch; the manifest of the
previous format loads through `Manifest`, and a broken one is refused naming the field."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner
from helpers.jobdata import QUESTIONS, run_interrupted, write_docs

from decide.cli import main
from decide.jobs import runner
from decide.jobs.manifest import Manifest, ManifestError
from decide.jobs.spec import parse_spec
from decide.report import build_report, validate_report, write_report


@pytest.fixture(scope="module")
def model(tiny_checkpoint) -> Path:
    return tiny_checkpoint("bert", vocab="small", init_std=0.2)


def _same(a: Any, b: Any, where: str = "") -> None:
    """`a == b`, floats to the last bits: a mean sums its floats in the order the rows were
    written, and a resumed job writes them in another order."""
    if isinstance(a, float) and isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-12), (where, a, b)
    elif isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            _same(a[key], b[key], f"{where}/{key}")
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{where}/{i}")
    else:
        assert a == b, (where, a, b)


def _figures(report: dict[str, Any]) -> dict[str, Any]:
    """What a report says about the job's rows (not when or how fast it ran)."""
    kept = {k: report[k] for k in ("counts", "questions", "confidence", "lowest_confidence",
                                   "failures", "rules")}  # fmt: skip
    kept["throughput"] = {k: v for k, v in report["throughput"].items()
                          if k != "documents_per_second"}  # fmt: skip
    return kept


def test_a_resumed_job_reports_what_an_uninterrupted_one_does(
    model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = write_docs(tmp_path / "in.parquet", 14, seed=4)
    spec = parse_spec({"questions": QUESTIONS})
    # One document at a time: the resumed run batches exactly as the uninterrupted one, so every
    # confidence, and with it every figure, is the same float.
    options = dict(model=model, batch_size=1, part_rows=3, progress=False)
    runner.run_job(spec, [docs], tmp_path / "full", **options)
    full = build_report(tmp_path / "full")

    run_interrupted(monkeypatch, 7, spec, [docs], tmp_path / "resumed", **options)
    assert Manifest.read(tmp_path / "resumed").status == "aborted"
    again = runner.run_job(spec, [docs], tmp_path / "resumed", resume=True, **options)
    assert again.skipped == 7
    resumed = build_report(tmp_path / "resumed")
    validate_report(resumed)
    _same(_figures(resumed), _figures(full))
    throughput = full["throughput"]
    parts = pl.read_parquet(tmp_path / "full" / "answers" / "*.parquet")
    assert throughput["answer_tokens"] == parts["value_tokens"].sum() > 0
    assert throughput["forward_passes"] == parts["nfe"].sum()
    assert throughput["answer_tokens_per_forward_pass"] == (
        throughput["answer_tokens"] / throughput["forward_passes"]
    )
    # The answer slots are longer than most answers: filler is counted apart, and every slot
    # position is one or the other.
    assert throughput["filler_tokens"] > 0
    assert (parts["value_tokens"] + parts["filler_tokens"] > parts["value_tokens"]).any()


def test_an_input_without_rows_decides_nothing_and_reports_it(model: Path, tmp_path: Path) -> None:
    docs = write_docs(tmp_path / "in.parquet", 3, seed=1)
    pl.read_parquet(docs).head(0).write_parquet(docs)
    (tmp_path / "spec.json").write_text(json.dumps({"questions": QUESTIONS}))
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["run", str(docs), "--spec", str(tmp_path / "spec.json"),
                                       "--model", str(model), "-o", str(out), "--no-progress"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "decided 0 of 0 documents" in result.output
    answers = pl.read_parquet(out / "answers" / "*.parquet")
    assert answers.height == 0
    assert [f.name for f in answers.schema["answers"].fields] == [q["id"] for q in QUESTIONS]
    assert pl.read_parquet(out / "errors.parquet").height == 0
    assert Manifest.read(out).status == "complete"
    report = json.loads((out / "report.json").read_text())
    validate_report(report)
    assert report["counts"]["decided"] == report["counts"]["total"] == 0
    assert report["throughput"]["answer_tokens_per_forward_pass"] is None
    assert [q["answered"] for q in report["questions"]] == [0] * len(QUESTIONS)
    assert (out / "report.html").is_file()
    assert CliRunner().invoke(main, ["report", str(out)]).exit_code == 0


def test_refused_runs_leave_nothing_behind(model: Path, tmp_path: Path) -> None:
    docs = write_docs(tmp_path / "in.parquet", 3)
    huge = [{**q, "text": "Read every clause twice. " * 400} for q in QUESTIONS[:3]]
    specs = {
        "huge": {"questions": huge},  # refused once the model is loaded
        "format": {
            "questions": [{"id": "x", "text": "X?", "schema": {"type": "string", "format": "ipv6"}}]
        },
    }
    for name, content in specs.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(content))
        for out in (tmp_path / f"out-{name}", tmp_path / "deeper" / name / "out"):
            result = CliRunner().invoke(main, ["run", str(docs), "--spec",
                                               str(tmp_path / f"{name}.json"), "--model",
                                               str(model), "-o", str(out)])  # fmt: skip
            assert result.exit_code == 2, result.output
            assert not out.exists() and not (tmp_path / "deeper").exists(), name
    bad_model = CliRunner().invoke(main, ["run", str(docs), "--spec", str(tmp_path / "huge.json"),
                                          "--model", str(tmp_path), "-o", str(tmp_path / "o")])  # fmt: skip
    assert bad_model.exit_code == 2 and not (tmp_path / "o").exists()
    # An output directory that was there before is left there, empty.
    (tmp_path / "mine").mkdir()
    kept = CliRunner().invoke(main, ["run", str(docs), "--spec", str(tmp_path / "huge.json"),
                                     "--model", str(model), "-o", str(tmp_path / "mine")])  # fmt: skip
    assert kept.exit_code == 2 and list((tmp_path / "mine").iterdir()) == []


def test_decide_report_does_not_import_torch(model: Path, tmp_path: Path) -> None:
    docs = write_docs(tmp_path / "in.parquet", 4)
    runner.run_job(parse_spec({"questions": QUESTIONS}), [docs], tmp_path / "out", model=model,
                   progress=False)  # fmt: skip
    code = (
        "import sys; import decide.report; assert 'torch' not in sys.modules, 'import'; "
        "from decide.cli import main; sys.argv = ['decide', 'report', sys.argv[1]]\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    assert not exc.code, exc.code\n"
        "assert 'torch' not in sys.modules, 'report'"
    )
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "out")],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / "report.html").is_file()


# manifest.json as the runner wrote it before `Manifest` (a calibrated job with a review queue).
PREVIOUS = {
    "status": "complete", "started": "2026-11-30T10:00:00+00:00",
    "fingerprints": {"model": "0123456789abcdef", "spec": "fedcba9876543210"},
    "model": "/models/bundled", "model_type": "bert", "inputs": ["/data/in.parquet"],
    "spec": {"questions": [{"id": "eligible", "text": "Eligible?", "schema": {"type": "boolean"},
                            "extract": False, "derive": None}],
             "decoding": {"threshold": 0.9, "max_steps": None, "seed": 0},
             "input": {"doc_id": "id", "document": "text", "questions": "questions"},
             "rules": None, "long_documents": "error", "output": None},
    "engine": "local", "batch_size": 16, "device": "cpu",
    "calibration": {"review_below": 0.6, "path": "cal.json", "sha256": "ab" * 32,
                    "forced": False, "model_fingerprint": "0123456789abcdef",
                    "spec_fingerprint": "fedcba9876543210", "metrics": {"ece": 0.05},
                    "reliability": [{"low": 0.0, "high": 0.1, "confidence": 0.05,
                                     "accuracy": 0.0, "count": 3}],
                    "reliability_before": []},
    "counts": {"total": 5, "ok": 4, "error": 1, "invalid_rows": 0, "resumed": 0,
               "failures": {"document is empty": 1}},
    "rules": {"declared": False, "narrowed": {}},
    "seconds": 1.5, "finished": "2026-11-30T10:00:02+00:00",
    "review": {"below": 0.6, "calibrated": True, "rows": 1, "ok_rows": 4, "share": 0.25,
               "accepted_answers": 3, "expected_accuracy_accepted": 0.9},
    "throughput": {"documents": 5, "nfe": 20, "answer_tokens": 80},
}  # fmt: skip


def test_the_previous_manifest_loads_and_a_broken_one_names_its_field(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text(json.dumps(PREVIOUS))
    manifest = Manifest.read(tmp_path)
    assert manifest.spec.input.doc_id == "id" and manifest.spec.questions[0].text == "Eligible?"
    assert manifest.calibration is not None and manifest.calibration.sha256 == "ab" * 32
    assert manifest.throughput is not None and manifest.throughput.answer_tokens == 80

    # Written back, nothing of the earlier format is lost or renamed (new fields are added).
    def contained(old: Any, new: Any) -> bool:
        if isinstance(old, dict):
            return isinstance(new, dict) and all(k in new and contained(v, new[k])
                                                 for k, v in old.items())  # fmt: skip
        return old == new

    assert contained(PREVIOUS, json.loads(manifest.dump()))
    broken = json.loads(json.dumps(PREVIOUS))
    broken["counts"]["ok"] = "four"
    (tmp_path / "manifest.json").write_text(json.dumps(broken))
    with pytest.raises(ManifestError, match=r"manifest\.json: /counts/ok: "):
        Manifest.read(tmp_path)
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(ManifestError, match="unreadable manifest"):
        Manifest.read(tmp_path)
    result = CliRunner().invoke(main, ["report", str(tmp_path)])
    assert result.exit_code == 2 and "unreadable manifest" in result.output


def test_write_report_rebuilds_a_report_of_a_job_run_without_one(
    model: Path, tmp_path: Path
) -> None:
    docs = write_docs(tmp_path / "in.parquet", 5)
    runner.run_job(parse_spec({"questions": QUESTIONS}), [docs], tmp_path / "out", model=model,
                   progress=False)  # fmt: skip
    assert not (tmp_path / "out" / "report.json").exists()  # the runner writes no report
    report = write_report(tmp_path / "out")
    assert report["counts"]["decided"] == 5 and (tmp_path / "out" / "report.html").is_file()
