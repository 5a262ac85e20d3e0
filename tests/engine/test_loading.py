"""Loading refuses broken or unsafe model directories with a message naming the file, field or
tensor at fault; good directories load in every supported layout and dtype."""

from __future__ import annotations

import json
import os
import pickle
import shutil
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load_file, save_file

from decide.cli import main
from decide.engine import ModelLoadError, UnsafeTemplateError, load_model, model_fingerprint


@pytest.fixture
def sdar_dir(tiny_checkpoint, tmp_path: Path) -> Path:
    """A private, writable copy of a tiny SDAR checkpoint."""
    return Path(shutil.copytree(tiny_checkpoint("sdar"), tmp_path / "model"))


def _edit_json(path: Path, **changes: object) -> None:
    data = json.loads(path.read_text())
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    path.write_text(json.dumps(data))


def test_every_model_type_loads_single_and_sharded(tiny_checkpoint) -> None:
    for model_type in ("llada", "Dream", "sdar", "Fast_dLLM_Qwen"):
        for shards in (1, 2):
            loaded = load_model(tiny_checkpoint(model_type, shards=shards))
            assert loaded.config.model_type == model_type
            assert loaded.config.mask_token_id == loaded.tokenizer.tokenizer.token_to_id("<|mask|>")


def test_missing_directory_and_files(sdar_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="no such model directory"):
        load_model(tmp_path / "absent")
    (sdar_dir / "tokenizer.json").rename(sdar_dir / "moved.json")
    with pytest.raises(ModelLoadError, match=r"tokenizer\.json is missing"):
        load_model(sdar_dir)
    (sdar_dir / "moved.json").rename(sdar_dir / "tokenizer.json")
    (sdar_dir / "model.safetensors").unlink()
    with pytest.raises(ModelLoadError, match=r"no weights \(expected model\.safetensors"):
        load_model(sdar_dir)
    (sdar_dir / "config.json").unlink()
    with pytest.raises(ModelLoadError, match=r"config\.json is missing"):
        load_model(sdar_dir)


def test_missing_shard_is_named(tiny_checkpoint, tmp_path: Path) -> None:
    model_dir = Path(shutil.copytree(tiny_checkpoint("Dream", shards=2), tmp_path / "m"))
    (model_dir / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(ModelLoadError, match=r"shard file 'model-00002-of-00002\.safetensors'"):
        load_model(model_dir)


def test_unknown_model_type_lists_supported(sdar_dir: Path) -> None:
    _edit_json(sdar_dir / "config.json", model_type="gpt2")
    with pytest.raises(ModelLoadError) as info:
        load_model(sdar_dir)
    message = str(info.value)
    assert "'gpt2'" in message
    for supported in ("llada", "Dream", "sdar", "Fast_dLLM_Qwen"):
        assert supported in message


def test_shape_mismatch_names_tensor_and_file(sdar_dir: Path) -> None:
    _edit_json(sdar_dir / "config.json", intermediate_size=161)
    with pytest.raises(ModelLoadError) as info:
        load_model(sdar_dir)
    assert "model.safetensors" in str(info.value)
    assert "mlp." in str(info.value) and "[160, 96]" in str(info.value)


def test_missing_and_unexpected_tensors(sdar_dir: Path) -> None:
    tensors = load_file(str(sdar_dir / "model.safetensors"))
    removed = tensors.pop("model.layers.1.self_attn.k_norm.weight")
    save_file(tensors, str(sdar_dir / "model.safetensors"))
    with pytest.raises(
        ModelLoadError, match=r"lacks tensor\(s\) model\.layers\.1\.self_attn\.k_norm"
    ):
        load_model(sdar_dir)
    tensors["model.layers.1.self_attn.k_norm.weight"] = removed
    tensors["model.layers.9.extra.weight"] = torch.zeros(2)
    save_file(tensors, str(sdar_dir / "model.safetensors"))
    with pytest.raises(ModelLoadError, match=r"unexpected tensor\(s\) model\.layers\.9\.extra"):
        load_model(sdar_dir)


class _Detonator:
    """Unpickling this creates a file: proof that a pickle was (or was not) loaded."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_pickled_weights_are_refused_and_never_opened(sdar_dir: Path, tmp_path: Path) -> None:
    marker = tmp_path / "pickle-ran"
    (sdar_dir / "model.safetensors").unlink()
    for name in ("pytorch_model.bin", "weights.pt"):
        (sdar_dir / name).write_bytes(pickle.dumps(_Detonator(marker)))
    with pytest.raises(ModelLoadError) as info:
        load_model(sdar_dir)
    assert "pytorch_model.bin" in str(info.value) and "safetensors only" in str(info.value)
    assert not marker.exists()


def test_python_files_in_model_dir_are_never_run(tiny_checkpoint, tmp_path: Path) -> None:
    model_dir = Path(shutil.copytree(tiny_checkpoint("llada"), tmp_path / "m"))
    marker = tmp_path / "code-ran"
    for name in ("modeling_llada.py", "configuration_llada.py", "__init__.py"):
        (model_dir / name).write_text(f"open({str(marker)!r}, 'w').close()\n")
    _edit_json(model_dir / "config.json", auto_map={"AutoModel": "modeling_llada.LLaDAModelLM"})
    load_model(model_dir)
    assert not marker.exists()


@pytest.mark.parametrize(
    "template",
    [
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        "{{ messages['__class__'] }}",
        "{{ (messages|attr('__cla' ~ 'ss__')) }}",
        "{% if false %}{{ cycler.__init__.__globals__.os }}{% endif %}ok",
        "{{ messages.append({'role': 'x'}) }}",
    ],
)
def test_template_reaching_python_internals_is_refused(sdar_dir: Path, template: str) -> None:
    _edit_json(sdar_dir / "tokenizer_config.json", chat_template=template)
    with pytest.raises(UnsafeTemplateError, match=r"tokenizer_config\.json"):
        load_model(sdar_dir)


def test_chat_template_renders_in_sandbox(tiny_checkpoint) -> None:
    loaded = load_model(tiny_checkpoint("sdar"))
    text = loaded.tokenizer.chat_template.render([{"role": "user", "content": "Is it late?"}])
    assert text == "<|im_start|>user\nIs it late?<|im_end|>\n<|im_start|>assistant\n"


def test_chat_template_jinja_file_wins(sdar_dir: Path) -> None:
    (sdar_dir / "chat_template.jinja").write_text("[{{ messages[0]['content'] }}]")
    loaded = load_model(sdar_dir)
    assert loaded.tokenizer.chat_template.render([{"role": "user", "content": "q"}]) == "[q]"


def _unmark_special(model_dir: Path, text: str) -> None:
    data = json.loads((model_dir / "tokenizer.json").read_text())
    for token in data["added_tokens"]:
        if token["content"] == text:
            token["special"] = False
    (model_dir / "tokenizer.json").write_text(json.dumps(data))


def test_mask_id_resolution_order(tiny_checkpoint, tmp_path: Path) -> None:
    llada = Path(shutil.copytree(tiny_checkpoint("llada"), tmp_path / "llada"))
    mask = load_model(llada).config.mask_token_id
    assert load_model(llada).config.mask_token_source == "config.json mask_token_id"
    _edit_json(llada / "config.json", mask_token_id=None)
    # No config field, no mask_token: a token the tokenizer marks special and names a mask.
    config = load_model(llada).config
    assert (config.mask_token_id, config.mask_token_source) == (
        mask, "tokenizer special token <|mask|>"
    )  # fmt: skip
    _unmark_special(llada, "<|mask|>")
    with pytest.raises(ModelLoadError, match="no mask token id") as info:
        load_model(llada)
    assert "126336" in str(info.value)  # the family default, outside this tiny vocabulary
    (llada / "special_tokens_map.json").write_text(
        json.dumps({"additional_special_tokens": ["<|im_start|>", "<|mask|>"]})
    )
    assert load_model(llada).config.mask_token_source == "additional_special_tokens <|mask|>"
    (llada / "generation_config.json").write_text(json.dumps({"mask_token_id": mask}))
    assert load_model(llada).config.mask_token_source == "generation_config.json mask_token_id"
    (llada / "special_tokens_map.json").write_text(json.dumps({"mask_token": "<|mask|>"}))
    assert load_model(llada).config.mask_token_source == "special_tokens_map.json mask_token"
    _edit_json(llada / "tokenizer_config.json", mask_token="<|mask|>")
    config = load_model(llada).config
    assert config.mask_token_source == "tokenizer_config.json mask_token"
    _edit_json(llada / "config.json", mask_token_id=7)
    assert load_model(llada).config.mask_token_id == 7


def test_family_default_mask_id_when_it_fits(sdar_dir: Path) -> None:
    # A checkpoint with the real SDAR vocabulary size and no mask token anywhere.
    _edit_json(sdar_dir / "tokenizer_config.json", mask_token=None)
    _unmark_special(sdar_dir, "<|mask|>")
    _edit_json(sdar_dir / "config.json", vocab_size=151936)
    with pytest.raises(ModelLoadError, match="embed_tokens"):  # weights are still 50k rows
        load_model(sdar_dir)
    from decide.engine import load_config

    _, config, _ = load_config(sdar_dir)
    assert (config.mask_token_id, config.mask_token_source) == (151669, "sdar default")


def test_fingerprint_follows_content_not_location(tiny_checkpoint, tmp_path: Path) -> None:
    original = tiny_checkpoint("Dream")
    copy = Path(shutil.copytree(original, tmp_path / "copy"))
    assert model_fingerprint(copy) == model_fingerprint(original)
    tensors = load_file(str(copy / "model.safetensors"))
    tensors["model.norm.weight"] = tensors["model.norm.weight"] + 1
    save_file(tensors, str(copy / "model.safetensors"), metadata={"format": "pt"})
    assert model_fingerprint(copy) != model_fingerprint(original)


def test_inspect_cli(tiny_checkpoint, tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(main, ["inspect", str(tiny_checkpoint("Fast_dLLM_Qwen", shards=2))])
    assert result.exit_code == 0, result.output
    for expected in (
        "fast_dllm",
        "block_causal",
        "shifted by one",
        "block size         4",
        "parameters",
        "F32",
        "model-00001-of-00002.safetensors",
    ):
        assert expected in result.output
    bad = runner.invoke(main, ["inspect", str(tmp_path / "nothing")])
    assert bad.exit_code == 2
    assert "no such model directory" in bad.output
    os.makedirs(tmp_path / "empty")
    assert runner.invoke(main, ["inspect", str(tmp_path / "empty")]).exit_code == 2


def test_tokenizer_padding_and_truncation_are_switched_off(sdar_dir: Path) -> None:
    tokenizer = json.loads((sdar_dir / "tokenizer.json").read_text())
    tokenizer["truncation"] = {
        "direction": "Right",
        "max_length": 8,
        "strategy": "LongestFirst",
        "stride": 0,
    }
    tokenizer["padding"] = {
        "strategy": {"Fixed": 64},
        "direction": "Right",
        "pad_to_multiple_of": None,
        "pad_id": 0,
        "pad_type_id": 0,
        "pad_token": "!",
    }
    (sdar_dir / "tokenizer.json").write_text(json.dumps(tokenizer))
    loaded = load_model(sdar_dir)
    text = "one two three four five six seven eight nine ten eleven twelve"
    ids = loaded.tokenizer.encode(text)
    assert loaded.tokenizer.decode(ids) == text  # neither cut at 8 nor padded to 64
