"""`windows.overlap` of at least `windows.tokens` is refused naming the option: it was accepted and
silently cut to a quarter of a window (`WindowPlanner.plan`), whatever was asked."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from helpers.jobdata import QUESTIONS

from decide import Decider
from decide.cli import main
from decide.jobs.spec import SpecError, Windows, parse_spec

MESSAGE = r"windows\.overlap: .*overlap \(64 tokens\) must be below windows\.tokens \(64\)"


@pytest.mark.parametrize("overlap", [64, 65, 1000])
def test_an_overlap_of_a_whole_window_is_refused(overlap: int) -> None:
    with pytest.raises(SpecError, match=r"job\.yaml: windows\.overlap: .*must be below "
                       r"windows\.tokens \(64\)"):  # fmt: skip
        parse_spec({"questions": QUESTIONS[:1], "windows": {"tokens": 64, "overlap": overlap}},
                   "job.yaml")  # fmt: skip


def test_overlaps_below_the_window_and_without_a_window_size_stand() -> None:
    assert Windows(tokens=64, overlap=63).overlap == 63  # shared: at most a quarter (docs)
    assert Windows(overlap=500).overlap == 500  # the model's room decides, per block
    # The default overlap (64) was not asked for: small windows share a quarter of theirs.
    assert parse_spec({"windows": {"tokens": 48}}).windows.overlap == 64


def test_decide_run_exits_2_naming_the_option(tmp_path: Path) -> None:
    docs = tmp_path / "in.parquet"
    pl.DataFrame({"doc_id": ["a"], "document": ["A car claim."]}).write_parquet(docs)
    (tmp_path / "job.yaml").write_text(
        "questions:\n  - {id: eligible, text: Is it eligible?, schema: {type: boolean}}\n"
        "windows: {tokens: 64, overlap: 64}\n"
    )
    out = tmp_path / "out"
    result = CliRunner().invoke(
        main, ["run", str(docs), "-o", str(out), "--spec", str(tmp_path / "job.yaml")]
    )
    assert result.exit_code == 2, result.output
    assert "windows.overlap" in result.output and "must be below windows.tokens" in result.output
    assert not out.exists()


def test_the_api_refuses_it_with_a_spec_error(tiny_checkpoint) -> None:
    model = tiny_checkpoint("bert", vocab="small", init_std=0.2)
    with pytest.raises(SpecError, match=MESSAGE):
        Decider(model, windows={"tokens": 64, "overlap": 64})
    assert Decider(model, windows={"tokens": 64, "overlap": 16})._spec.windows.overlap == 16
