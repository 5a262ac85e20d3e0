"""`decide train` never continues the wrong run: a fresh run does not mix with an earlier one in its
output directory, a resume with nothing saved yet starts as the fresh run did (random weights for
--from-scratch), a checkpoint is written whole or not at all and a resume refuses one whose files
disagree, a resume is the same run (options, data), bad numbers are usage errors, -o is never the
starting checkpoint, the starting checkpoint's other files are carried over, and `decide merge`
leaves no training state that a resume would take for its own."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import polars as pl
import pytest
import torch
from click.testing import CliRunner
from helpers.claim_rows import KINDS, QUESTIONS
from safetensors.torch import load_file

from decide.cli import main
from decide.jobs.spec import SpecError
from decide.train import loop
from decide.train.bundled import PACKAGE_MODEL
from decide.train.data import train_from_parquet
from decide.train.loop import TrainConfig, train
from decide.train.merge import merge_checkpoints

CONFIG = TrainConfig(steps=4, batch_size=2, warmup=2, save_every=2, seed=3, bf16=False)
QUIET = {"progress": False, "log": lambda _: None}


@pytest.fixture(scope="module")
def base(tiny_checkpoint):
    return tiny_checkpoint("bert", vocab="small", init_std=0.1)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """(20-row parquet, 12-row parquet, spec) of claims with their gold decisions."""
    root = tmp_path_factory.mktemp("data")
    spec = root / "spec.yaml"
    spec.write_text(json.dumps({"questions": QUESTIONS}))
    paths = []
    for n in (20, 12):
        pl.DataFrame({
            "doc_id": [f"d{i}" for i in range(n)],
            "document": [f"My {KINDS[i % 4]} claim, number {i}. The policy is "
                         f"{'active' if i % 2 else 'lapsed'}." for i in range(n)],
            "gold": [json.dumps({"claim_type": KINDS[i % 4], "policy_active": bool(i % 2)})
                     for i in range(n)],
        }).write_parquet(root / f"rows{n}.parquet")  # fmt: skip
        paths.append(root / f"rows{n}.parquet")
    return paths[0], paths[1], spec


def _rows(rng):
    i = rng.randrange(8)
    return (f"My {KINDS[i % 4]} claim. The policy is {'active' if i % 2 else 'lapsed'}.",
            QUESTIONS, {"claim_type": KINDS[i % 4], "policy_active": bool(i % 2)})  # fmt: skip


def _weights(path) -> dict[str, torch.Tensor]:
    return load_file(str(path / "model.safetensors"))


def _same(a, b) -> bool:
    wa, wb = _weights(a), _weights(b)
    return set(wa) == set(wb) and all(torch.equal(wa[k], wb[k]) for k in wa)


def _interrupt_at(monkeypatch, at: int) -> None:
    """A Ctrl-C as optimizer step `at` begins (before any checkpoint when `at` < save_every)."""
    lr_at = loop.lr_at

    def stop(step, config):
        if step == at:
            raise KeyboardInterrupt
        return lr_at(step, config)

    monkeypatch.setattr(loop, "lr_at", stop)


def _cli(data_path, spec, base, out, *extra):
    return CliRunner().invoke(main, [
        "train", str(data_path), "--init", str(base), "-o", str(out), "--spec", str(spec),
        "--steps", "4", "--batch-size", "2", "--save-every", "2", "--seed", "3", "--no-bf16",
        "--no-progress", *extra])  # fmt: skip


def test_a_fresh_run_never_continues_an_earlier_runs_state(base, tmp_path, monkeypatch) -> None:
    """Bug 1. `decide train` without --resume refuses a directory that holds anything (as `decide
    run` and `decide merge` refuse one), leaving it as it was; `train()` (the recipe's loop, whose
    work directory it owns) removes the earlier run's state before it writes, so a resume of a
    run stopped before its first checkpoint starts as the run did instead of "resuming" the old
    one (which printed its old loss and wrote its old weights)."""
    old = tmp_path / "old"
    train(base, _rows, old, CONFIG, **QUIET)
    expected = tmp_path / "expected"
    fresh = train(base, _rows, expected, replace(CONFIG, seed=5), **QUIET)
    with monkeypatch.context() as m:
        _interrupt_at(m, 1)
        with pytest.raises(KeyboardInterrupt):
            train(base, _rows, old, replace(CONFIG, seed=5), **QUIET)
    summary = train(base, _rows, old, replace(CONFIG, seed=5), resume=True, **QUIET)
    assert summary["steps"] == 4 and _same(old, expected)
    assert summary["final_loss"] == fresh["final_loss"]  # not the old run's, as it printed


def test_the_command_refuses_a_used_output_without_resume(base, data, tmp_path) -> None:
    rows20, _, spec = data
    out = tmp_path / "out"
    assert _cli(rows20, spec, base, out).exit_code == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    again = _cli(rows20, spec, base, out, "--seed", "4")
    assert again.exit_code == 2 and "not empty" in again.output and "--resume" in again.output
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    refused = _cli(rows20, spec, base, other)
    assert refused.exit_code == 2 and "not empty" in refused.output
    assert [p.name for p in other.iterdir()] == ["notes.txt"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert _cli(rows20, spec, base, empty, "--steps", "2").exit_code == 0


def test_from_scratch_resumed_before_its_first_checkpoint_starts_from_the_same_random_weights(
    base, data, tmp_path, monkeypatch
) -> None:
    """Bug 2: the resume fine-tuned --init's pretrained weights instead."""
    rows20, _, spec = data
    run = {"spec_path": spec, "from_scratch": True, **QUIET}
    train_from_parquet(rows20, base, tmp_path / "whole", CONFIG, **run)
    with monkeypatch.context() as m:
        _interrupt_at(m, 1)
        with pytest.raises(KeyboardInterrupt):
            train_from_parquet(rows20, base, tmp_path / "cut", CONFIG, **run)
    assert not (tmp_path / "cut" / loop.STATE_JSON).exists()
    train_from_parquet(rows20, base, tmp_path / "cut", CONFIG, resume=True, **run)
    assert _same(tmp_path / "cut", tmp_path / "whole")
    assert not (tmp_path / "cut" / "scratch").exists()
    recorded = json.loads((tmp_path / "whole" / "train_config.json").read_text())
    assert recorded["from_scratch"] is True and recorded["data"]["rows"] == 20
    tuned = tmp_path / "tuned"
    train_from_parquet(rows20, base, tuned, CONFIG, spec_path=spec, **QUIET)
    assert not _same(tuned, tmp_path / "whole")
    assert json.loads((tuned / "train_config.json").read_text())["from_scratch"] is False


def test_a_checkpoint_cut_while_a_file_is_written_keeps_the_last_whole_one(
    base, tmp_path, monkeypatch
) -> None:
    """Bug 3: weights were written in place, so a signal while writing them left a torn file."""
    config = replace(CONFIG, steps=6)
    train(base, _rows, tmp_path / "whole", config, **QUIET)
    train(base, _rows, tmp_path / "two", replace(config, stop_at=2), **QUIET)
    saves = []
    save_file = loop.save_file

    def torn(tensors, filename, metadata=None):
        if "model.safetensors" in str(filename):
            saves.append(filename)
            if len(saves) == 3:  # at step 4, after the start's and step 2's
                with open(filename, "wb") as handle:
                    handle.write(b"\x00" * 100)
                raise KeyboardInterrupt
        return save_file(tensors, filename, metadata=metadata)

    out = tmp_path / "cut"
    with monkeypatch.context() as m:
        m.setattr(loop, "save_file", torn)
        with pytest.raises(KeyboardInterrupt):
            train(base, _rows, out, config, **QUIET)
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")]  # no temporary left
    assert _same(out, tmp_path / "two")
    assert json.loads((out / loop.STATE_JSON).read_text())["step"] == 2
    train(base, _rows, out, config, resume=True, **QUIET)
    assert _same(out, tmp_path / "whole")


def test_a_resume_refuses_a_checkpoint_whose_files_hold_different_steps(
    base, tmp_path, monkeypatch
) -> None:
    """Bug 3: stopped after the step-4 weights were written and before its state, the resume
    continued step 2's optimizer state over step 4's weights, silently."""
    config = replace(CONFIG, steps=6)
    out = tmp_path / "cut"
    save_state = loop._save_state

    def stopped(out_dir, optimizer, step, history):
        if step == 4:
            raise KeyboardInterrupt
        return save_state(out_dir, optimizer, step, history)

    with monkeypatch.context() as m:
        m.setattr(loop, "_save_state", stopped)
        with pytest.raises(KeyboardInterrupt):
            train(base, _rows, out, config, **QUIET)
    state = (out / loop.STATE_JSON).read_bytes()
    with pytest.raises(SpecError, match=r"step 2.*step 4"):
        train(base, _rows, out, config, resume=True, **QUIET)
    assert (out / loop.STATE_JSON).read_bytes() == state


def test_a_resume_must_be_the_same_run(base, data, tmp_path) -> None:
    """Bug 4: other data, seed, batch size or learning rate were continued silently and
    train_config.json rewritten."""
    rows20, rows12, spec = data
    out = tmp_path / "out"
    assert _cli(rows20, spec, base, out, "--stop-at", "2").exit_code == 0
    recorded = (out / "train_config.json").read_bytes()
    for extra, named in (
        (["--seed", "4"], "seed (3 in the run, 4 now)"),
        (["--batch-size", "3"], "batch_size"),
        (["--lr", "1e-3"], "lr"),
        (["--steps", "6"], "steps"),
        (["--from-scratch"], "from_scratch"),
        (["--init", str(tmp_path / "elsewhere")], "init"),
    ):
        if extra[0] == "--init":
            shutil.copytree(base, tmp_path / "elsewhere")
        result = _cli(rows20, spec, base, out, "--resume", *extra)
        assert result.exit_code == 2 and named in result.output, (extra, result.output)
    other = _cli(rows12, spec, base, out, "--resume")
    assert other.exit_code == 2 and "training data" in other.output
    assert (out / "train_config.json").read_bytes() == recorded
    # The same rows read from another file, a new time budget or more workers: the same run.
    moved = tmp_path / "moved.parquet"
    shutil.copyfile(rows20, moved)
    result = _cli(moved, spec, base, out, "--resume", "--minutes", "30", "--workers", "1")
    assert result.exit_code == 0, result.output
    whole = tmp_path / "whole"
    assert _cli(rows20, spec, base, whole).exit_code == 0
    assert _same(out, whole)


BAD_NUMBERS = [["--steps", "0"], ["--steps", "-3"], ["--lr", "0"], ["--lr", "-1e-4"],
               ["--batch-size", "0"], ["--minutes", "0"]]  # fmt: skip


@pytest.mark.parametrize("extra", BAD_NUMBERS)
def test_bad_numbers_are_usage_errors_before_anything_is_written(
    base, data, tmp_path, extra
) -> None:
    """Bug 6: `--steps 0` trained 1000 steps and `--lr 0` at 2e-4 (`x or default`), `--steps -3`
    wrote an untrained copy, `--batch-size 0` a traceback after a model-looking directory."""
    rows20, _, spec = data
    result = _cli(rows20, spec, base, tmp_path / "out", "--stop-at", "1", *extra)
    assert result.exit_code == 2, result.output
    assert not (tmp_path / "out").exists()


def test_given_steps_and_lr_are_used_as_given(base, data, tmp_path) -> None:
    rows20, _, spec = data
    out = tmp_path / "out"
    assert _cli(rows20, spec, base, out, "--steps", "1", "--lr", "1e-6").exit_code == 0
    recorded = json.loads((out / "train_config.json").read_text())
    assert (recorded["steps"], recorded["lr"]) == (1, 1e-6)


def test_output_that_is_the_starting_checkpoint_is_refused(
    base, data, tmp_path, monkeypatch
) -> None:
    """Bug 7: `--init X -o X` crashed (FileNotFoundError); spelled differently it overwrote X."""
    rows20, _, spec = data
    start = tmp_path / "start"
    shutil.copytree(base, start)
    before = {p.name: p.read_bytes() for p in start.iterdir()}
    monkeypatch.chdir(tmp_path)
    for init, out, extra in (
        (start, start, []),
        (start, "start", []),
        ("start", tmp_path / "start" / ".." / "start", ["--resume"]),
        (start, "./start", ["--from-scratch"]),
    ):
        result = _cli(rows20, spec, init, out, *extra)
        assert result.exit_code == 2 and "starting checkpoint" in result.output, result.output
    assert {p.name: p.read_bytes() for p in start.iterdir()} == before
    with pytest.raises(SpecError, match="starting checkpoint"):
        train(start, _rows, tmp_path / "start", CONFIG, **QUIET)


def test_a_fine_tune_carries_the_starting_checkpoints_other_files(
    base, tmp_path, monkeypatch
) -> None:
    """Bug 8: evidence_ranker.json, LICENSE and NOTICE were dropped. Never carried: the start's
    own training state, which a resume would take for the new run's."""
    start = tmp_path / "start"
    train(base, _rows, start, CONFIG, **QUIET)  # a finished run: train_* files beside the model
    shutil.copyfile(PACKAGE_MODEL / "evidence_ranker.json", start / "evidence_ranker.json")
    (start / "LICENSE").write_text("licence of the start")
    (start / "NOTICE").write_text("notice of the start")
    out = tmp_path / "out"
    with monkeypatch.context() as m:
        _interrupt_at(m, 1)
        with pytest.raises(KeyboardInterrupt):
            train(start, _rows, out, CONFIG, **QUIET)
    for name in ("evidence_ranker.json", "LICENSE", "NOTICE"):
        assert (out / name).read_bytes() == (start / name).read_bytes(), name
    assert not (out / loop.STATE_JSON).exists() and not (out / loop.STATE_WEIGHTS).exists()
    assert not (out / "train_summary.json").exists()
    train(start, _rows, out, CONFIG, resume=True, **QUIET)
    assert json.loads((out / loop.STATE_JSON).read_text())["step"] == 4
    assert not _same(out, start)


def test_a_merge_carries_no_training_state(base, data, tmp_path) -> None:
    """Bug 9: the merge copied A's train_state.json and train_config.json (not its tensors), so
    `decide train --resume -o MERGED` crashed with a traceback."""
    rows20, _, spec = data
    a = tmp_path / "a"
    assert _cli(rows20, spec, base, a).exit_code == 0
    (a / "LICENSE").write_text("licence of a")
    merged = merge_checkpoints(a, base, 0.5, tmp_path / "merged")
    names = {p.name for p in merged.iterdir()}
    assert not {n for n in names if n.startswith("train_")} - {"train_summary.json"}
    assert "LICENSE" in names and "tokenizer.json" in names
    resumed = _cli(rows20, spec, base, merged, "--resume")
    assert resumed.exit_code == 2 and "no training run" in resumed.output, resumed.output


def test_a_finished_run_keeps_no_optimizer_state(base, tmp_path) -> None:
    """A finished run left train_state.safetensors (Adam's moments, twice the fp32 weights: 182
    MB beside a 91 MB model for the bundled shape) in the model directory a user ships; a run
    stopped early keeps it, to be resumed, and drops it once it finishes. A resume of a finished
    run has nothing to do and leaves the weights as they are."""
    out = tmp_path / "out"
    train(base, _rows, out, replace(CONFIG, stop_at=2), **QUIET)  # stopped early: resumable
    assert (out / loop.STATE_WEIGHTS).is_file()
    summary = train(base, _rows, out, CONFIG, resume=True, **QUIET)
    assert not (out / loop.STATE_WEIGHTS).exists()
    assert json.loads((out / loop.STATE_JSON).read_text())["complete"] is True
    weights = _weights(out)
    said = []
    again = train(base, _rows, out, CONFIG, resume=True, progress=False, log=said.append)
    assert again == summary and any("complete" in line for line in said)
    assert all(torch.equal(weights[k], v) for k, v in _weights(out).items())
    whole = tmp_path / "whole"  # the same run without the stop: the same weights
    train(base, _rows, whole, CONFIG, **QUIET)
    assert _same(out, whole) and not (whole / loop.STATE_WEIGHTS).exists()
