"""Published checkpoints load as their authors wrote them (real config, generation config, tokenizer
config, chat template, special-token ids, tensor names and shard files; random weights at shrunk
sizes, `helpers/real_checkpoints.py`), `decide inspect` reports where every value came from, and a
job on the example claims decides its rows. Bad inputs are refused naming the file and field."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import polars as pl
import pytest
import torch
from click.testing import CliRunner
from helpers.real_checkpoints import NAMES, write_published
from safetensors.torch import load_file, save_file

from decide.cli import main
from decide.engine import ModelLoadError, load_config, load_model
from decide.engine import checkpoint as checkpoint_module

ROOT = Path(__file__).resolve().parents[2]

# name -> what `decide inspect` must report, each value with its source.
EXPECTED = {
    "llada-8b-instruct": {
        "mask id": "126336 <|mdm_mask|> (from config.json mask_token_id)",
        "end of turn": "126348 <|eot_id|> (from chat template turn end <|eot_id|>)",
        "stop ids": "126348 <|eot_id|>, 126081 <|endoftext|>",
        "context": "4096 tokens (from config.json max_sequence_length)",
        "block size": "-",
        "stored dtype": "BF16",
        "tokenizer": "tokenizer.json",
    },
    "dream-v0-instruct-7b": {
        "mask id": "151666 <|mask|> (from config.json mask_token_id)",
        "end of turn": "151645 <|im_end|> (from chat template turn end <|im_end|>)",
        "stop ids": "151645 <|im_end|>, 151643 <|endoftext|>",
        "context": "2048 tokens (from Dream's documented context",
        "block size": "-",
        "stored dtype": "BF16",
        "tokenizer": "vocab.json + merges.txt (DreamTokenizer)",
    },
    "sdar-4b-chat": {
        "mask id": "151669 <|MASK|> (from config.json mask_token_id)",
        "end of turn": "151645 <|im_end|> (from chat template turn end <|im_end|>)",
        "stop ids": "151645 <|im_end|>, 151643 <|endoftext|>",
        "context": "32768 tokens (from config.json max_position_embeddings)",
        "block size": "4 (from config.json block_size)",
        "stored dtype": "BF16",
        "tokenizer": "vocab.json + merges.txt (Qwen2Tokenizer)",
    },
    "fast-dllm-v2-7b": {
        "mask id": "151665 |<MASK>| (from additional_special_tokens |<MASK>|)",
        "end of turn": "151645 <|im_end|> (from chat template turn end <|im_end|>)",
        "stop ids": "151645 <|im_end|>, 151643 <|endoftext|>",
        "context": "32768 tokens (from config.json max_position_embeddings)",
        "block size": "32 (from config.json bd_size)",
        "stored dtype": "BF16",
        "tokenizer": "vocab.json + merges.txt (Qwen2Tokenizer)",
    },
}
CLAIMS_ROWS = 6  # of the 40 example claims: every family × 6 rows keeps CI within its budget


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("published")
    return {name: write_published(name, root / name) for name in NAMES}


def _copy(published: dict[str, Path], name: str, tmp_path: Path) -> Path:
    return Path(shutil.copytree(published[name], tmp_path / name))


def _inspect(model_dir: Path) -> dict[str, str]:
    result = CliRunner().invoke(main, ["inspect", str(model_dir)])
    assert result.exit_code == 0, result.output
    rows = {}
    for line in result.output.splitlines():
        key, _, value = line.partition("  ")
        rows[key.strip()] = value.strip()
    return rows


@pytest.mark.parametrize("name", NAMES)
def test_inspect_reports_each_value_with_its_source(published, name: str) -> None:
    rows = _inspect(published[name])
    for key, expected in EXPECTED[name].items():
        assert rows[key].startswith(expected), (key, rows[key])
    # dtype auto: what the safetensors headers say; fp32 on a CPU without bf16 instructions.
    assert "stored" in rows["dtype auto"] and "safetensors header" in rows["dtype auto"]


@pytest.mark.parametrize("name", NAMES)
def test_example_claims_decide_with_each_published_checkpoint(
    published, name: str, tmp_path: Path
) -> None:
    from decide.jobs.runner import run_job
    from decide.jobs.spec import load_spec

    claims = pl.read_parquet(ROOT / "examples" / "claims.parquet").head(CLAIMS_ROWS)
    claims.write_parquet(tmp_path / "claims.parquet")
    spec = load_spec(ROOT / "examples" / "claims.yaml")
    spec = spec.model_copy(update={"decoding": spec.decoding.model_copy(update={"max_steps": 4})})
    result = run_job(
        spec, [tmp_path / "claims.parquet"], tmp_path / "out", model=published[name],
        batch_size=6, progress=False,
    )  # fmt: skip
    frame = pl.read_parquet(tmp_path / "out" / "answers" / "*.parquet")
    assert result.ok == frame.height == CLAIMS_ROWS, frame["error"].to_list()
    schemas = {q.id: q.schema_ for q in spec.questions}
    for row in frame.iter_rows(named=True):
        answers = json.loads(row["answers_json"])
        assert set(answers) == set(schemas)
        for qid, value in answers.items():
            jsonschema.validate(value, schemas[qid])


def test_llada_template_renders_with_its_bos_token(published) -> None:
    """LLaDA's template starts with `bos_token + content`: the trial render at load gets the same
    variables as the real render, so the checkpoint loads and its prompt starts with the bos."""
    loaded = load_model(published["llada-8b-instruct"])
    prompt = loaded.tokenizer.chat_template.render([{"role": "user", "content": "hi"}])
    assert prompt.startswith("<|startoftext|><|start_header_id|>user<|end_header_id|>")


def test_answer_ends_with_the_turn_end_token(published) -> None:
    """The packed answer closes with `}` and the template's turn end (LLaDA: <|eot_id|>), not the
    tokenizer's eos."""
    from decide.jobs.pack import Packer
    from decide.jobs.questions import filler_id

    loaded = load_model(published["llada-8b-instruct"])
    packer = Packer.for_model(loaded.config, loaded.tokenizer, filler_id(loaded.tokenizer))
    assert packer.end_ids == [126348]


def test_vocab_merges_tokenizer_matches_transformers(published) -> None:
    """The tokenizer built from vocab.json + merges.txt gives the ids of the published tokenizer
    class (transformers' Qwen2Tokenizer on the same files) on a fixed awkward text."""
    transformers = pytest.importorskip("transformers")
    text = (
        "Hello   world!\n\n  The claim is $12,500.00 — naïve café 日本語 123456 <|im_end|> "
        "<MASK> <|MASK|> e\u0301 don't  \t tabs\r\nCRLF ΑΒΓ 😀"
    )
    for name in ("sdar-4b-chat", "dream-v0-instruct-7b", "fast-dllm-v2-7b"):
        ours = load_config(published[name])[2]
        reference = transformers.Qwen2Tokenizer.from_pretrained(str(published[name]))
        assert ours.encode(text) == reference.encode(text, add_special_tokens=False), name
        assert ours.vocab_size == len(reference), name


def test_template_needing_a_variable_we_do_not_provide(published, tmp_path: Path) -> None:
    model_dir = _copy(published, "fast-dllm-v2-7b", tmp_path)
    (model_dir / "chat_template.jinja").write_text("{{ system_prefix + messages[0]['content'] }}")
    with pytest.raises(ModelLoadError, match=r"chat_template\.jinja.*needs a variable") as info:
        load_model(model_dir)
    assert "system_prefix" in str(info.value)


def test_no_tokenizer_files(published, tmp_path: Path) -> None:
    model_dir = _copy(published, "sdar-4b-chat", tmp_path)
    (model_dir / "merges.txt").unlink()
    with pytest.raises(ModelLoadError, match=r"no vocab\.json \+ merges\.txt.*only vocab\.json"):
        load_config(model_dir)
    (model_dir / "vocab.json").unlink()
    with pytest.raises(ModelLoadError, match=r"tokenizer\.json is missing, and there is no"):
        load_config(model_dir)


def test_mask_token_absent_from_the_vocabulary(published, tmp_path: Path) -> None:
    model_dir = _copy(published, "llada-8b-instruct", tmp_path)
    config = json.loads((model_dir / "config.json").read_text())
    config["mask_token_id"] = 126400  # an embedding row no token has
    (model_dir / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match=r"config\.json `mask_token_id` = 126400 is not a"):
        load_config(model_dir)
    sdar = _copy(published, "sdar-4b-chat", tmp_path)
    tokenizer_config = json.loads((sdar / "tokenizer_config.json").read_text())
    tokenizer_config["mask_token"] = "<|no_such_mask|>"
    (sdar / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    with pytest.raises(ModelLoadError, match=r"tokenizer_config\.json: `mask_token`"):
        load_config(sdar)


def test_mixed_dtype_shards(published, tmp_path: Path) -> None:
    model_dir = _copy(published, "dream-v0-instruct-7b", tmp_path)
    shard = model_dir / "model-00004-of-00004.safetensors"
    tensors = {k: v.float() for k, v in load_file(str(shard)).items()}
    save_file(tensors, str(shard), metadata={"format": "pt"})
    with pytest.raises(ModelLoadError, match=r"mixed dtypes.*model-00004-of-00004") as info:
        load_model(model_dir)
    assert "bfloat16" in str(info.value) and "float32" in str(info.value)
    assert load_model(model_dir, dtype="bf16").dtype == torch.bfloat16  # explicit: cast all


def test_index_names_a_tensor_no_shard_holds(published, tmp_path: Path) -> None:
    model_dir = _copy(published, "sdar-4b-chat", tmp_path)
    index_path = model_dir / "model.safetensors.index.json"
    index = json.loads(index_path.read_text())
    moved = "model.layers.1.mlp.up_proj.weight"
    shards = sorted(set(index["weight_map"].values()))
    index["weight_map"][moved] = next(s for s in shards if s != index["weight_map"][moved])
    index_path.write_text(json.dumps(index))
    with pytest.raises(ModelLoadError, match=rf"weight_map.*{moved}.*but it lies in"):
        load_model(model_dir)
    index["weight_map"]["model.layers.1.mlp.extra.weight"] = shards[0]
    index_path.write_text(json.dumps(index))
    with pytest.raises(ModelLoadError, match=r"model\.layers\.1\.mlp\.extra\.weight.*no shard"):
        load_model(model_dir)


def test_sizes_that_disagree_with_the_tensors_load_nothing(
    published, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A config whose sizes disagree is refused from the headers, before any tensor is read."""
    model_dir = _copy(published, "dream-v0-instruct-7b", tmp_path)
    config = json.loads((model_dir / "config.json").read_text())
    config["intermediate_size"] = 80
    (model_dir / "config.json").write_text(json.dumps(config))
    reads = []
    original = checkpoint_module.TensorSource.get
    monkeypatch.setattr(
        checkpoint_module.TensorSource,
        "get",
        lambda self, *a: reads.append(a) or original(self, *a),
    )
    with pytest.raises(ModelLoadError, match=r"mlp\.\w+_proj\.weight' has shape .* implies"):
        load_model(model_dir)
    assert reads == []


@pytest.mark.parametrize("prefix", ["bert.", ""])
def test_classic_bert_masked_lm_layouts(tmp_path: Path, prefix: str) -> None:
    """bert-base-uncased as Google's conversion publishes it: LayerNorm `gamma`/`beta`, a
    tokenizer_config.json that names no special tokens (`[MASK]` is special only inside
    tokenizer.json), with or without the `bert.` prefix. It loads to the same weights as the
    `weight`/`bias` layout, finds its mask, pad and end tokens, and decides claims."""
    from decide.jobs.runner import run_job
    from decide.jobs.spec import load_spec

    bundled_tokenizer = ROOT / "decide" / "model" / "tokenizer.json"
    from decide.engine.random_checkpoint import write_random_checkpoint

    modern = write_random_checkpoint(
        tmp_path / "modern", "bert", tokenizer_json=bundled_tokenizer, num_layers=2,
        hidden_size=64, num_heads=4, intermediate_size=96,
    )  # fmt: skip
    (modern / "tokenizer.json").write_bytes(bundled_tokenizer.read_bytes())
    (modern / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
    classic = Path(shutil.copytree(modern, tmp_path / "classic"))
    tensors = load_file(str(classic / "model.safetensors"))
    renamed = {}
    for name, tensor in tensors.items():
        if "LayerNorm." in name:
            name = name.replace(".weight", ".gamma").replace(".bias", ".beta")
        if not prefix:
            name = name.removeprefix("bert.")
        renamed[name] = tensor
    assert any(n.endswith(".gamma") for n in renamed)
    save_file(renamed, str(classic / "model.safetensors"), metadata={"format": "pt"})

    ours, reference = load_model(classic), load_model(modern)
    assert ours.config.mask_token_id == 103
    assert ours.config.mask_token_source == "tokenizer special token [MASK]"
    assert ours.tokenizer.special_tokens["pad_token"] == "[PAD]"
    assert ours.config.end_of_turn_ids[0] == 102  # [SEP], its sep_token
    for (name, a), (_, b) in zip(
        ours.model.state_dict().items(), reference.model.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), name

    # Both spellings at once are an error, not a silent pick.
    renamed["bert.embeddings.LayerNorm.weight" if prefix else "embeddings.LayerNorm.weight"] = (
        tensors["bert.embeddings.LayerNorm.weight"].clone()
    )
    save_file(renamed, str(classic / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(ModelLoadError, match=r"embeddings\.LayerNorm\.weight.*appears"):
        load_model(classic)

    claims = pl.read_parquet(ROOT / "examples" / "claims.parquet").head(3)
    claims.write_parquet(tmp_path / "claims.parquet")
    result = run_job(
        load_spec(ROOT / "examples" / "claims.yaml"), [tmp_path / "claims.parquet"],
        tmp_path / "out", model=modern, progress=False,
    )  # fmt: skip
    assert result.ok == 3


def test_a_hugging_face_cache_snapshot_loads(published, tmp_path: Path) -> None:
    """`snapshot_download` links every file of `snapshots/<rev>/` to `../../blobs/<hash>`: the
    sharded checkpoints were refused ("shard ... lies outside the model directory") because the
    shard's resolved path was judged, not the name the index writes."""
    import hashlib

    source = published["sdar-4b-chat"]
    assert (source / "model.safetensors.index.json").is_file()
    repo = tmp_path / "models--JetLM--SDAR-4B-Chat"
    snapshot, blobs = repo / "snapshots" / "abc123", repo / "blobs"
    snapshot.mkdir(parents=True)
    blobs.mkdir()
    for file in source.iterdir():
        blob = blobs / hashlib.sha256(file.read_bytes()).hexdigest()
        shutil.copyfile(file, blob)
        (snapshot / file.name).symlink_to(Path("../../blobs") / blob.name)
    loaded = load_model(snapshot)
    direct = load_model(source)
    for name, tensor in direct.model.state_dict().items():
        assert torch.equal(tensor, loaded.model.state_dict()[name]), name
    assert _inspect(snapshot)["mask id"] == EXPECTED["sdar-4b-chat"]["mask id"]
    # an index naming a path outside the directory is still refused
    index = json.loads((source / "model.safetensors.index.json").read_text())
    index["weight_map"] = {k: f"../{v}" for k, v in index["weight_map"].items()}
    bad = _copy(published, "sdar-4b-chat", tmp_path / "bad")
    (bad / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(ModelLoadError, match="lies outside the model directory"):
        load_model(bad)
