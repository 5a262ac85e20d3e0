"""Published checkpoints in the variants their users bring: configs re-saved by transformers 5
(RoPE settings nested in `rope_parameters`), chat templates using Hugging Face's full helper set
(`tojson` options, `strftime_now`, `{% generation %}`), and classic BERT releases that ship only
`vocab.txt`. Each loads as Hugging Face reads it, or is refused naming the file and field."""

from __future__ import annotations

import json
import shutil
from datetime import datetime
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from helpers.real_checkpoints import PUBLISHED, write_published

from decide.cli import main
from decide.engine import ModelLoadError, load_config, load_model
from decide.engine.errors import UnsafeTemplateError
from decide.engine.families import family_for
from decide.engine.random_configs import config_json
from decide.engine.tokenizer import ChatTemplate, load_tokenizer

ROOT = Path(__file__).resolve().parents[2]
BUNDLED = ROOT / "decide" / "model"
# Every published config kept in tests/data, with the RoPE theta its authors wrote (top level).
CONFIGS = sorted(p.parent.name for p in PUBLISHED.glob("*/config.json"))
MSGS = [
    {"role": "system", "content": "sys é"},
    {"role": "user", "content": 'hé "q" <b> ✓'},
    {"role": "assistant", "content": "yo"},
]


def _published_config(name: str) -> dict:
    return json.loads((PUBLISHED / name / "config.json").read_text())


def _parse(raw: dict) -> dict:
    return family_for(raw["model_type"], raw).parse(raw)


def _transformers5(raw: dict, **rope: object) -> dict:
    """`raw` as transformers 5 writes it: RoPE theta (and any factor) inside `rope_parameters`."""
    moved = {k: v for k, v in raw.items() if k not in ("rope_theta", "rope_scaling")}
    factor = moved.pop("partial_rotary_factor", None)
    nested = {"rope_type": "default", "rope_theta": raw["rope_theta"]}
    if "type" in rope:  # transformers 4's legacy spelling of `rope_type`
        del nested["rope_type"]
    if factor is not None:
        nested["partial_rotary_factor"] = factor
    return moved | {"rope_parameters": nested | rope}


# --- RoPE settings in either spelling ------------------------------------------------------------


@pytest.mark.parametrize("name", CONFIGS)
def test_rope_theta_nested_in_rope_parameters_is_read(name: str) -> None:
    """Before: a config carrying theta only in `rope_parameters` ran silently at theta 10000."""
    raw = _published_config(name)
    top = _parse(raw)
    nested = _parse(_transformers5(raw))
    assert top["rope_theta"] == nested["rope_theta"] == float(raw["rope_theta"]) != 10000.0
    assert top["rope_theta_source"] == "config.json rope_theta"
    assert nested["rope_theta_source"] == "config.json rope_parameters.rope_theta"
    assert nested == top | {"rope_theta_source": nested["rope_theta_source"]}
    # Both spellings at once are fine when they agree, an error when they do not.
    assert (
        _parse(_transformers5(raw) | {"rope_theta": raw["rope_theta"]})["rope_theta"]
        == (raw["rope_theta"])
    )
    with pytest.raises(
        ModelLoadError, match=r"config\.json: `rope_parameters\.rope_theta` = .* disagree"
    ):
        _parse(
            _transformers5(raw, rope_theta=raw["rope_theta"] / 2)
            | {"rope_theta": raw["rope_theta"]}
        )


@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize(
    ("rope", "message"),
    [
        (
            {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768},
            r"config\.json: `rope_parameters` = .*not supported \(RoPE scaling: rope_type 'yarn'",
        ),
        ({"type": "linear", "factor": 2.0}, r"`rope_parameters` = .*rope_type 'linear'"),
        ({"rope_type": "dynamic", "factor": 2.0}, r"`rope_parameters` = .*rope_type 'dynamic'"),
        ({"factor": 4.0}, r"`rope_parameters` = .*keys \['factor'\] change the default RoPE"),
        ({"mrope_section": [8, 12, 12]}, r"`rope_parameters` = .*keys \['mrope_section'\]"),
    ],
)
def test_scaled_rope_in_rope_parameters_is_refused(name: str, rope: dict, message: str) -> None:
    """Before: `rope_parameters: {rope_type: yarn, ...}` loaded silently as plain RoPE (for
    LLaDA even `rope_scaling` was never looked at)."""
    raw = _published_config(name)
    with pytest.raises(ModelLoadError, match=message):
        _parse(_transformers5(raw, **rope))
    legacy = raw | {"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}
    with pytest.raises(ModelLoadError, match=r"config\.json: `rope_scaling` = .*not supported"):
        _parse(legacy)
    # transformers 4's spelling of plain RoPE is plain RoPE.
    assert _parse(raw | {"rope_scaling": {"rope_type": "default"}}) == _parse(raw)


def test_partial_rotary_factor_in_either_spelling() -> None:
    """Families with partial RoPE read the factor from `rope_parameters` too; families without it
    refuse one other than 1 rather than rotate the whole head silently."""
    llada2 = _published_config("LLaDA2.0-mini")
    head_dim = llada2["head_dim"]
    quarter = _transformers5(llada2 | {"partial_rotary_factor": 0.25})
    assert _parse(quarter)["moe"].rotary_dim == head_dim // 4
    with pytest.raises(ModelLoadError, match=r"`rotary_dim`"):  # published rotary_dim is half
        _parse(quarter | {"rotary_dim": head_dim // 2})
    with pytest.raises(
        ModelLoadError, match=r"`rope_parameters\.partial_rotary_factor` = 0\.25 and"
    ):
        _parse(quarter | {"partial_rotary_factor": 0.5})
    hybrid = config_json(
        "qwen3_next",
        {"hidden_size": 64, "num_layers": 4, "num_heads": 4, "num_kv_heads": 2, "head_dim": 16,
         "intermediate_size": 96, "rope_theta": 1e6, "tie_word_embeddings": False,
         "attention_bias": False, "block_size": 4},
        vocab=1000, rows=1024,
    )  # fmt: skip
    assert hybrid["rope_parameters"]["partial_rotary_factor"] == 0.25
    parsed = _parse(hybrid)
    assert parsed["hybrid"].rotary_dim == 4 and parsed["rope_theta"] == 1e6
    with pytest.raises(ModelLoadError, match=r"`rope_parameters` = .*rope_type 'yarn'"):
        _parse(hybrid | {"rope_parameters": hybrid["rope_parameters"] | {"rope_type": "yarn"}})
    for name in ("sdar-4b-chat", "llada-8b-instruct"):
        raw = _published_config(name)
        with pytest.raises(
            ModelLoadError, match=r"`rope_parameters\.partial_rotary_factor` = 0\.5 is"
        ):
            _parse(_transformers5(raw, partial_rotary_factor=0.5))
        assert (
            _parse(_transformers5(raw, partial_rotary_factor=1.0))["rope_theta"]
            == raw["rope_theta"]
        )


def test_rope_theta_must_be_a_positive_number() -> None:
    raw = _published_config("sdar-4b-chat")
    with pytest.raises(ModelLoadError, match=r"`rope_parameters\.rope_theta` must be a number"):
        _parse(_transformers5(raw, rope_theta="1000000"))
    with pytest.raises(ModelLoadError, match=r"`rope_theta` must be positive"):
        _parse(raw | {"rope_theta": 0})
    moe = _published_config("LLaDA-MoE-7B-A1B-Instruct")  # LLaDA-MoE's theta has no default
    del moe["rope_theta"]
    with pytest.raises(ModelLoadError, match=r"required field `rope_theta` is missing"):
        _parse(moe)
    sdar = {k: v for k, v in raw.items() if k != "rope_theta"}
    assert _parse(sdar)["rope_theta_source"] == "default (config.json sets no rope_theta)"


@pytest.fixture(scope="module")
def sdar(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_published("sdar-4b-chat", tmp_path_factory.mktemp("published") / "sdar")


def _variant(source: Path, tmp_path: Path, name: str, config: dict | None = None) -> Path:
    target = Path(shutil.copytree(source, tmp_path / name))
    if config is not None:
        (target / "config.json").write_text(json.dumps(config))
    return target


def test_a_transformers5_config_runs_at_its_theta(sdar: Path, tmp_path: Path) -> None:
    """The whole model: SDAR re-saved by transformers 5 gives the published spelling's logits,
    not those of theta 10000."""
    raw = json.loads((sdar / "config.json").read_text())
    nested = _variant(sdar, tmp_path, "t5", _transformers5(raw))
    plain = _variant(sdar, tmp_path, "t10k", raw | {"rope_theta": 10000.0})
    ids = torch.randint(0, 151000, (1, 12), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        logits = {p.name: load_model(p, dtype="fp32").model(ids) for p in (sdar, nested, plain)}
    assert torch.equal(logits["t5"], logits[sdar.name])
    assert not torch.allclose(logits["t10k"], logits[sdar.name])
    assert load_config(nested)[1].rope_theta_source == "config.json rope_parameters.rope_theta"
    yarn = _variant(sdar, tmp_path, "yarn", _transformers5(raw, rope_type="yarn", factor=4.0))
    result = CliRunner().invoke(main, ["inspect", str(yarn)])
    assert result.exit_code == 2, result.output
    assert "config.json: `rope_parameters`" in result.output and "yarn" in result.output


# --- chat templates: Hugging Face's helpers, errors named -----------------------------------------


def test_tojson_takes_hugging_faces_arguments() -> None:
    """Before: `tojson(ensure_ascii=...)` (and `separators`, `sort_keys`) raised a bare TypeError
    out of inspect, run and Decider."""
    data = {"b": "é ✓", "a": [1, 2]}
    source = (
        "{{ data | tojson }}|{{ data | tojson(ensure_ascii=True) }}|"
        "{{ data | tojson(indent=2, sort_keys=True) }}|{{ data | tojson(separators=(',', ':')) }}"
        "|{{ data | tojson(False, 1, (',', ': '), True) }}"
    )
    template = ChatTemplate.compile(source, "t.jinja", {"data": data})
    expected = "|".join(
        [
            json.dumps(data, ensure_ascii=False),
            json.dumps(data, ensure_ascii=True),
            json.dumps(data, ensure_ascii=False, indent=2, sort_keys=True),
            json.dumps(data, ensure_ascii=False, separators=(",", ":")),
            json.dumps(data, ensure_ascii=False, indent=1, separators=(",", ": "), sort_keys=True),
        ]
    )
    assert template.render(MSGS) == expected


def test_strftime_now_and_the_generation_block() -> None:
    """Before: `strftime_now` was refused as undefined and `{% generation %}` did not parse."""
    before = datetime.now().strftime("%Y-%m-%d %H")
    stamped = ChatTemplate.compile("{{ strftime_now('%Y-%m-%d %H') }}", "t.jinja").render(MSGS)
    assert stamped in (before, datetime.now().strftime("%Y-%m-%d %H"))
    source = (
        "{% for m in messages %}<|{{ m.role }}|>{% if m.role == 'assistant' %}{% generation %}"
        "{{ m.content }}<|end|>{% endgeneration %}{% else %}{{ m.content }}<|end|>{% endif %}"
        "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
    )
    template = ChatTemplate.compile(source, "t.jinja")
    assert template.render(MSGS, add_generation_prompt=False) == (
        '<|system|>sys é<|end|><|user|>hé "q" <b> ✓<|end|><|assistant|>yo<|end|>'
    )
    assert template.turn_end(["<|end|>"]) == "<|end|>"
    # The block is no way around the sandbox.
    with pytest.raises(UnsafeTemplateError, match=r"Python internals"):
        ChatTemplate.compile("{% generation %}{{ messages.__class__ }}{% endgeneration %}", "t")
    with pytest.raises(UnsafeTemplateError, match=r"refused by the sandbox"):
        ChatTemplate.compile(
            "{% generation %}{{ messages | attr('__class__') }}{% endgeneration %}", "t"
        )


def test_templates_render_as_hugging_face_renders_them() -> None:
    transformers_utils = pytest.importorskip("transformers.utils.chat_template_utils")
    sources = [
        "{{ messages | tojson(ensure_ascii=True, sort_keys=True, separators=(',', ':')) }}",
        "{{ messages | tojson(indent=2) }}{{ strftime_now('%Y') }}",
        "{% for m in messages %}{% generation %}{% set x = m.role %}{{ x }}{% endgeneration %}"
        "[{{ x }}]{% endfor %}",
        (PUBLISHED / "sdar-4b-chat" / "chat_template.jinja").read_text(),
    ]
    for source in sources:
        for prompt in (True, False):
            ours = ChatTemplate.compile(source, "t.jinja").render(
                MSGS, add_generation_prompt=prompt
            )
            theirs = transformers_utils._compile_jinja_template(source).render(
                messages=MSGS, add_generation_prompt=prompt, tools=None, documents=None
            )
            assert ours == theirs, source


def test_any_render_error_names_the_template_file() -> None:
    """Before: only jinja's own errors were caught; a helper's TypeError escaped as a traceback."""
    with pytest.raises(
        ModelLoadError, match=r"^t\.jinja: chat template failed to render \(TypeError"
    ) as info:
        ChatTemplate.compile("{{ messages | tojson(no_such_option=1) }}", "t.jinja")
    assert isinstance(info.value.__cause__, TypeError)
    with pytest.raises(ModelLoadError, match=r"t\.jinja: .*\(TypeError") as info:
        ChatTemplate.compile("{{ strftime_now(5) }}", "t.jinja")
    assert isinstance(info.value.__cause__, TypeError)
    # An error only a real conversation reaches is named at run time too.
    late = ChatTemplate.compile(
        "{% if messages | length > 2 %}{{ messages[0].content / 2 }}{% endif %}ok", "t.jinja"
    )
    assert late.render(MSGS[:1]) == "ok"
    with pytest.raises(ModelLoadError, match=r"t\.jinja: chat template failed") as info:
        late.render(MSGS)
    assert isinstance(info.value.__cause__, TypeError)


def test_published_checkpoint_with_hugging_face_template_helpers(
    sdar: Path, tmp_path: Path
) -> None:
    model_dir = _variant(sdar, tmp_path, "tpl")
    template = model_dir / "chat_template.jinja"
    published = template.read_text()
    template.write_text(
        "{%- set today = strftime_now('%d %b %Y') %}"
        + published.replace(
            "tool | tojson", "tool | tojson(ensure_ascii=False, sort_keys=True)"
        ).replace(
            "{{- message.content }}", "{% generation %}{{- message.content }}{% endgeneration %}"
        )
    )
    tokenizer = load_config(model_dir)[2]
    assert tokenizer.chat_template.render(MSGS[1:2]) == load_config(sdar)[2].chat_template.render(
        MSGS[1:2]
    )
    template.write_text("{{ messages | tojson(indent=[]) }}")
    result = CliRunner().invoke(main, ["inspect", str(model_dir)])
    assert result.exit_code == 2, result.output  # before: 1, with a traceback
    assert "chat_template.jinja: chat template failed to render (TypeError" in result.output


# --- BERT releases with only vocab.txt ------------------------------------------------------------

VARIED = (
    "Hello   WORLD! The claim is naïve Café Ürünler — 日本語 中文字 한국어 e\u0301 don't \t tabs\r\n"
    "CRLF ΑΒΓ 😀 [MASK] [mask] [CLS]x[SEP] unaffable electroencephalographically "
    + "a" * 120
    + " co-operate; x=y*z/2 ‘quotes’ «guillemets» \u00a0nbsp\u200bzw \x00ctrl Straße ﬁ ½ Ⅻ"
)
NUMBERS = "1234567890 3.14159 2nd 21st $12,500.00"


def _vocab_txt_dir(path: Path, tokenizer_config: dict | None = None) -> Path:
    """The bundled model's vocabulary as a classic BERT release ships it: vocab.txt only."""
    vocab = json.loads((BUNDLED / "tokenizer.json").read_text())["model"]["vocab"]
    assert sorted(vocab.values()) == list(range(len(vocab)))
    path.mkdir(parents=True, exist_ok=True)
    lines = "".join(f"{t}\n" for t, _ in sorted(vocab.items(), key=lambda kv: kv[1]))
    (path / "vocab.txt").write_text(lines, encoding="utf-8")
    if not (path / "config.json").is_file():
        (path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    config = json.loads((BUNDLED / "tokenizer_config.json").read_text())
    (path / "tokenizer_config.json").write_text(json.dumps(config | (tokenizer_config or {})))
    return path


def test_vocab_txt_builds_the_bert_wordpiece(tmp_path: Path) -> None:
    """Before: refused with a message that did not mention vocab.txt. The WordPiece built from it
    encodes as the bundled tokenizer.json does (which adds one step vocab.txt cannot express:
    digits split one by one), marks the special tokens, and puts [CLS]/[SEP] around a text."""
    from tokenizers import Tokenizer

    ours = load_tokenizer(_vocab_txt_dir(tmp_path / "bert"))
    assert ours.source == "vocab.txt (BERT WordPiece, lowercased)"
    bundled = Tokenizer.from_file(str(BUNDLED / "tokenizer.json"))
    assert ours.encode(VARIED) == bundled.encode(VARIED, add_special_tokens=False).ids
    assert ours.tokenizer.encode(VARIED).ids == bundled.encode(VARIED).ids
    assert ours.vocab_size == bundled.get_vocab_size(with_added_tokens=True)
    assert ours.special_id("mask_token") == 103 and ours.special_id("sep_token") == 102
    assert {"[MASK]", "[CLS]", "[SEP]", "[PAD]", "[UNK]"} <= set(ours.special_texts())
    assert ours.encode("[MASK]") == [103]
    assert ours.encode_literal("a [MASK] b", 0, 10) == ours.encode("a [ mask ] b")
    assert ours.decode(ours.encode("Hello world")) == "hello world"


@pytest.mark.parametrize(
    "options",
    [{}, {"do_lower_case": False}, {"do_lower_case": True, "strip_accents": False},
     {"do_lower_case": False, "strip_accents": True}, {"tokenize_chinese_chars": False}],
)  # fmt: skip
def test_vocab_txt_matches_transformers_bert_tokenizer(tmp_path: Path, options: dict) -> None:
    transformers = pytest.importorskip("transformers")
    model_dir = _vocab_txt_dir(tmp_path / "bert", options)
    ours = load_tokenizer(model_dir)
    reference = transformers.BertTokenizer.from_pretrained(str(model_dir))
    for text in (VARIED, NUMBERS, "", "[PAD][UNK]"):
        assert ours.encode(text) == reference.encode(text, add_special_tokens=False), text
        assert ours.tokenizer.encode(text).ids == reference.encode(text), text
    assert ours.vocab_size == len(reference)


def test_a_bert_release_with_vocab_txt_loads(tmp_path: Path) -> None:
    from decide.engine.random_checkpoint import write_random_checkpoint

    model_dir = write_random_checkpoint(
        tmp_path / "bert", "bert", tokenizer_json=BUNDLED / "tokenizer.json", num_layers=2,
        hidden_size=64, num_heads=4, intermediate_size=96,
    )  # fmt: skip
    (model_dir / "tokenizer.json").unlink()
    _vocab_txt_dir(model_dir, {"do_lower_case": True})
    loaded = load_model(model_dir)
    assert loaded.config.mask_token_id == 103 and loaded.tokenizer.source.startswith("vocab.txt")


def test_vocab_txt_of_another_tokenizer_is_refused_by_name(tmp_path: Path) -> None:
    model_dir = _vocab_txt_dir(tmp_path / "other", {"tokenizer_class": "XLMRobertaTokenizer"})
    with pytest.raises(
        ModelLoadError, match=r"`tokenizer_class` 'XLMRobertaTokenizer' is not one .* vocab\.txt"
    ):
        load_tokenizer(model_dir)
    (model_dir / "config.json").write_text(json.dumps({"model_type": "llada"}))
    (model_dir / "tokenizer_config.json").write_text("{}")
    with pytest.raises(ModelLoadError, match=r"vocab\.txt is there, but neither .*'llada'"):
        load_tokenizer(model_dir)
    (model_dir / "vocab.txt").unlink()
    with pytest.raises(ModelLoadError, match=r"no vocab\.json \+ merges\.txt .*nor vocab\.txt"):
        load_tokenizer(model_dir)
    (model_dir / "config.json").write_text(json.dumps({"model_type": "bert"}))
    _vocab_txt_dir(model_dir, {"do_lower_case": "yes"})
    with pytest.raises(ModelLoadError, match=r"tokenizer_config\.json: `do_lower_case` must be"):
        load_tokenizer(model_dir)
    _vocab_txt_dir(model_dir, {"unk_token": "<unk>"})
    with pytest.raises(ModelLoadError, match=r"vocab\.txt: the unknown token '<unk>'"):
        load_tokenizer(model_dir)
