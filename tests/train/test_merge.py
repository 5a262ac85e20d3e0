"""`decide merge`: weight interpolation of two checkpoints of one model (the bundled model is
stage 7 and stage 9a at 0.5)."""

from __future__ import annotations

import json
import os
import shutil

import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load_file, save_file

from decide.cli import main
from decide.engine import ModelLoadError, load_model
from decide.engine.random_checkpoint import write_random_checkpoint
from decide.train.merge import merge_checkpoints


@pytest.fixture(scope="module")
def pair(tmp_path_factory, small_tokenizer_json):
    root = tmp_path_factory.mktemp("merge")
    make = dict(tokenizer_json=small_tokenizer_json, init_std=0.1)
    a = write_random_checkpoint(root / "a", "bert", seed=0, **make)
    b = write_random_checkpoint(root / "b", "bert", seed=1, **make)
    (a / "train_summary.json").write_text(json.dumps({"steps": 7}))
    return a, b


def _weights(path) -> dict[str, torch.Tensor]:
    return load_file(str(path / "model.safetensors"))


def test_merge_interpolates_every_tensor_and_loads(pair, tmp_path) -> None:
    a, b = pair
    out = merge_checkpoints(a, b, 0.25, tmp_path / "m")
    wa, wb, wm = _weights(a), _weights(b), _weights(out)
    assert wm.keys() == wa.keys()
    differ = 0
    for name, t in wm.items():
        assert t.dtype == wa[name].dtype
        assert torch.allclose(t, 0.75 * wa[name] + 0.25 * wb[name], atol=1e-6), name
        differ += not torch.equal(wa[name], wb[name])
    assert differ > 10  # the two parents really differ, so the check above means something
    assert (out / "tokenizer.json").read_bytes() == (a / "tokenizer.json").read_bytes()
    summary = json.loads((out / "train_summary.json").read_text())
    assert summary["merge"]["weight"] == 0.25 and summary["a"] == {"steps": 7}
    assert summary["b"] is None
    load_model(out)  # a real checkpoint the engine accepts
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o777 & ~umask
    assert (out / "model.safetensors").stat().st_mode & 0o777 == 0o666 & ~umask


def test_merge_ends_give_the_parents_and_keep_a_dtype(pair, tmp_path, small_tokenizer_json) -> None:
    a, b = pair
    for weight, parent in ((0.0, a), (1.0, b)):
        out = merge_checkpoints(a, b, weight, tmp_path / f"w{weight}")
        wo, wp = _weights(out), _weights(parent)
        assert all(torch.equal(wo[k], wp[k]) for k in wp)
    half = write_random_checkpoint(
        tmp_path / "half", "bert", seed=0, init_std=0.1, tokenizer_json=small_tokenizer_json,
        dtype=torch.bfloat16,
    )  # fmt: skip
    out = merge_checkpoints(half, b, 0.5, tmp_path / "bf16")
    assert {t.dtype for t in _weights(out).values()} == {torch.bfloat16}


def test_merge_refuses_different_models_and_never_overwrites(
    pair, tmp_path, small_tokenizer_json
) -> None:
    a, b = pair
    wider = write_random_checkpoint(
        tmp_path / "wider", "bert", hidden_size=128, tokenizer_json=small_tokenizer_json
    )
    with pytest.raises(ModelLoadError, match=r"config.json differs in .*hidden_size"):
        merge_checkpoints(a, wider, 0.5, tmp_path / "x")
    retokenized = tmp_path / "retokenized"
    shutil.copytree(b, retokenized)
    tokenizer = json.loads((b / "tokenizer.json").read_text())
    tokenizer["model"]["vocab"] = {w + "x": i for w, i in tokenizer["model"]["vocab"].items()}
    (retokenized / "tokenizer.json").write_text(json.dumps(tokenizer))
    with pytest.raises(ModelLoadError, match=r"different tokenizer\.json"):
        merge_checkpoints(a, retokenized, 0.5, tmp_path / "y")
    counted = {}
    for name, parent in (("ca", a), ("cb", b)):  # an integer tensor, as the engine refuses
        counted[name] = tmp_path / name
        shutil.copytree(parent, counted[name])
        tensors = _weights(parent) | {"steps": torch.tensor([3])}
        save_file(tensors, str(counted[name] / "model.safetensors"))
    with pytest.raises(ModelLoadError, match=r"'steps' has dtype .*expected floating point"):
        merge_checkpoints(counted["ca"], counted["cb"], 0.5, tmp_path / "w")
    with pytest.raises(ValueError, match=r"weight must lie in \[0, 1\]"):
        merge_checkpoints(a, b, 1.5, tmp_path / "z")
    assert not (tmp_path / "x").exists() and not (tmp_path / "z").exists()

    out = merge_checkpoints(a, b, 0.5, tmp_path / "m")
    before = (out / "model.safetensors").read_bytes()
    with pytest.raises(FileExistsError, match="already holds a model"):
        merge_checkpoints(a, b, 0.9, out)
    assert (out / "model.safetensors").read_bytes() == before


def test_merge_command(pair, tmp_path) -> None:
    a, b = pair
    runner = CliRunner()
    ok = runner.invoke(
        main, ["merge", str(a), str(b), "-o", str(tmp_path / "m"), "--weight", "0.5"]
    )
    assert ok.exit_code == 0, ok.output
    assert "model written to" in ok.output
    assert json.loads((tmp_path / "m" / "train_summary.json").read_text())["merge"]["weight"] == 0.5
    again = runner.invoke(main, ["merge", str(a), str(b), "-o", str(tmp_path / "m")])
    assert again.exit_code == 2 and "already holds a model" in again.output
    bad = runner.invoke(main, ["merge", str(a), str(b), "-o", str(tmp_path / "n"), "--weight", "2"])
    assert bad.exit_code == 2 and not (tmp_path / "n").exists()
