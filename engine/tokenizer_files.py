"""The tokenizer files of a model directory, as published: `tokenizer.json`, or a byte-level BPE
built from `vocab.json` + `merges.txt` plus its added tokens, or BERT's WordPiece built from
`vocab.txt`.

Checkpoints of the Qwen family (Dream, SDAR, Fast-dLLM v2) are often published without a
`tokenizer.json`: their authors ship the slow tokenizer's files (`vocab.json`, `merges.txt`) and
list the added tokens in `tokenizer_config.json` (`added_tokens_decoder`: id → content and flags)
or in the older `added_tokens.json` (content → id). Those files are turned into a `tokenizers`
tokenizer here, with the pre-tokenizer of the class `tokenizer_config.json` names
(`tokenizer_class`): Qwen2's split pattern with NFC normalisation for `Qwen2Tokenizer` and
`DreamTokenizer`, GPT-2's for `GPT2Tokenizer`. Any other class is refused by name, since guessing
a pre-tokenizer would give wrong ids silently. Added tokens keep their published ids and their
`special` flags; an added token whose id is not the next free one is refused (naming the file),
since a gap would shift every later id.

Classic BERT checkpoints ship only `vocab.txt` (one token a line, the line number its id). It is
built as `transformers`' `BertTokenizer` (the fast one) builds it: WordPiece with `##`
continuations and at most 100 characters a word, `BertNormalizer` (clean text, Chinese characters
split, lowercase from `tokenizer_config.json` `do_lower_case`, default true, accents stripped as
`strip_accents` says, by default when lowercasing), `BertPreTokenizer`, the special tokens
(`[UNK]`, `[SEP]`, `[PAD]`, `[CLS]`, `[MASK]` or the config's) marked special at their vocab ids,
and the `[CLS] $A [SEP]` post-processor. Only for `tokenizer_class` `BertTokenizer(Fast)`, or none
with `config.json` `model_type` "bert"; any other class is refused by name.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenizers import (
    AddedToken,
    Regex,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
)

from .errors import ModelLoadError

QWEN2_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN2_CLASSES = ("Qwen2Tokenizer", "Qwen2TokenizerFast", "DreamTokenizer")
GPT2_CLASSES = ("GPT2Tokenizer", "GPT2TokenizerFast")
BERT_CLASSES = ("BertTokenizer", "BertTokenizerFast")
# BertTokenizer's special tokens and their defaults (the order `transformers` registers them in).
BERT_SPECIALS = {
    "unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]",
    "mask_token": "[MASK]",
}  # fmt: skip


@dataclass(frozen=True)
class TokenizerFiles:
    tokenizer: Tokenizer
    source: str  # e.g. "tokenizer.json" or "vocab.json + merges.txt (Qwen2Tokenizer)"


def read_json_object(path: Path) -> dict[str, Any]:
    """A JSON object from `path`, or {} when the file is absent; errors name the file."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ModelLoadError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise ModelLoadError(f"{path}: expected a JSON object")
    return data


def read_tokenizer_files(model_dir: Path, tokenizer_config: dict[str, Any]) -> TokenizerFiles:
    """The directory's tokenizer: `tokenizer.json` when present, else built from the slow files."""
    path = model_dir / "tokenizer.json"
    if path.is_file():
        try:
            tokenizer = Tokenizer.from_file(str(path))
        except Exception as exc:  # the Rust side raises a bare Exception for every parse error
            raise ModelLoadError(f"{path}: not a `tokenizers` tokenizer ({exc})") from exc
        return TokenizerFiles(tokenizer, "tokenizer.json")
    vocab_path, merges_path = model_dir / "vocab.json", model_dir / "merges.txt"
    if not vocab_path.is_file() or not merges_path.is_file():
        if (model_dir / "vocab.txt").is_file():
            return _bert_wordpiece(model_dir, model_dir / "vocab.txt", tokenizer_config)
        present = [p.name for p in (vocab_path, merges_path) if p.is_file()]
        found = f" (only {present[0]} is there)" if present else ""
        raise ModelLoadError(
            f"{model_dir}: tokenizer.json is missing, and there is no vocab.json + merges.txt "
            f"(byte-level BPE) nor vocab.txt (BERT WordPiece) to build it from{found}"
        )
    tokenizer_class = tokenizer_config.get("tokenizer_class")
    tokenizer = _byte_level_bpe(model_dir, vocab_path, merges_path, tokenizer_class)
    _add_published_tokens(model_dir, tokenizer, tokenizer_config)
    return TokenizerFiles(tokenizer, f"vocab.json + merges.txt ({tokenizer_class})")


def _byte_level_bpe(
    model_dir: Path, vocab_path: Path, merges_path: Path, tokenizer_class: object
) -> Tokenizer:
    if tokenizer_class not in QWEN2_CLASSES + GPT2_CLASSES:
        raise ModelLoadError(
            f"{model_dir / 'tokenizer_config.json'}: `tokenizer_class` {tokenizer_class!r} is "
            "not one decide can build from vocab.json + merges.txt (supported: "
            f"{', '.join(QWEN2_CLASSES + GPT2_CLASSES)}); add the checkpoint's tokenizer.json"
        )
    vocab = read_json_object(vocab_path)
    if not vocab or not all(isinstance(v, int) for v in vocab.values()):
        raise ModelLoadError(f"{vocab_path}: expected a non-empty object of token → id")
    merges = []
    for number, line in enumerate(merges_path.read_text(encoding="utf-8").splitlines(), 1):
        if not line or line.startswith("#version"):
            continue
        pair = line.split(" ")
        if len(pair) != 2:
            raise ModelLoadError(f"{merges_path}:{number}: expected two tokens, got {line!r}")
        merges.append((pair[0], pair[1]))
    bpe = models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False)
    tokenizer = Tokenizer(bpe)
    if tokenizer_class in QWEN2_CLASSES:
        tokenizer.normalizer = normalizers.NFC()
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
    else:
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer


def _read_bert_vocab(path: Path) -> dict[str, int]:
    """vocab.txt as `transformers` reads it: a token a line (universal newlines, the line end
    stripped), its line number the id; a token listed twice keeps its last line."""
    try:
        with path.open(encoding="utf-8") as handle:
            lines = handle.readlines()
    except UnicodeDecodeError as exc:
        raise ModelLoadError(f"{path}: not UTF-8 text ({exc})") from exc
    vocab = {line.rstrip("\n"): index for index, line in enumerate(lines)}
    if not vocab:
        raise ModelLoadError(f"{path}: the vocabulary is empty")
    return vocab


def _bert_option(tokenizer_config: dict[str, Any], origin: Path, key: str, default: Any) -> Any:
    value = tokenizer_config.get(key, default)
    if value is not None and not isinstance(value, bool):
        raise ModelLoadError(f"{origin}: `{key}` must be true or false, got {value!r}")
    return value


def _bert_wordpiece(
    model_dir: Path, vocab_path: Path, tokenizer_config: dict[str, Any]
) -> TokenizerFiles:
    """BERT's WordPiece from vocab.txt, as `transformers`' BertTokenizer builds it."""
    origin = model_dir / "tokenizer_config.json"
    tokenizer_class = tokenizer_config.get("tokenizer_class")
    model_type = read_json_object(model_dir / "config.json").get("model_type")
    if tokenizer_class is not None and tokenizer_class not in BERT_CLASSES:
        raise ModelLoadError(
            f"{origin}: `tokenizer_class` {tokenizer_class!r} is not one decide can build from "
            f"vocab.txt (supported: {', '.join(BERT_CLASSES)}); add the checkpoint's "
            "tokenizer.json"
        )
    if tokenizer_class is None and model_type != "bert":
        raise ModelLoadError(
            f"{model_dir}: tokenizer.json is missing; vocab.txt is there, but neither "
            "tokenizer_config.json `tokenizer_class` nor config.json `model_type` "
            f"({model_type!r}) names BertTokenizer, the one decide builds from vocab.txt; add "
            "the checkpoint's tokenizer.json"
        )
    vocab = _read_bert_vocab(vocab_path)
    names = {}
    for key, default in BERT_SPECIALS.items():
        value = tokenizer_config.get(key, default)
        text = value.get("content") if isinstance(value, dict) else value
        if text is not None and not isinstance(text, str):
            raise ModelLoadError(f"{origin}: `{key}` {value!r} is neither text nor an AddedToken")
        names[key] = text
    unk = names["unk_token"]
    if unk not in vocab:
        raise ModelLoadError(
            f"{vocab_path}: the unknown token {unk!r} (`unk_token`) is not in the vocabulary"
        )
    lowercase = _bert_option(tokenizer_config, origin, "do_lower_case", True)
    tokenizer = Tokenizer(models.WordPiece(vocab, unk_token=unk, max_input_chars_per_word=100))
    tokenizer.normalizer = normalizers.BertNormalizer(
        clean_text=True,
        handle_chinese_chars=_bert_option(tokenizer_config, origin, "tokenize_chinese_chars", True),
        strip_accents=_bert_option(tokenizer_config, origin, "strip_accents", None),
        lowercase=lowercase,
    )
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece(prefix="##")
    _add_published_tokens(model_dir, tokenizer, tokenizer_config, register_existing=True)
    # The named special tokens that are in the vocabulary are special at their ids (one the
    # vocabulary lacks is refused later, if a config names it, by `tokenizer._special_tokens`).
    specials = [t for t in names.values() if t is not None and t in vocab]
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    cls, sep = names["cls_token"], names["sep_token"]
    if cls in vocab and sep in vocab:
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{cls}:0 $A:0 {sep}:0",
            pair=f"{cls}:0 $A:0 {sep}:0 $B:1 {sep}:1",
            special_tokens=[(cls, vocab[cls]), (sep, vocab[sep])],
        )
    case = "lowercased" if lowercase else "cased"
    return TokenizerFiles(tokenizer, f"vocab.txt (BERT WordPiece, {case})")


def _add_published_tokens(
    model_dir: Path,
    tokenizer: Tokenizer,
    tokenizer_config: dict[str, Any],
    *,
    register_existing: bool = False,
) -> None:
    """Added tokens at their published ids: `added_tokens_decoder` of tokenizer_config.json (what
    `transformers` reads first), else `added_tokens.json`, marked special where listed as such.
    A token the vocabulary already holds at that id is skipped, or, with `register_existing`
    (BERT, whose vocab.txt holds its special tokens), registered as an added token there."""
    decoder = tokenizer_config.get("added_tokens_decoder")
    origin = model_dir / "tokenizer_config.json"
    entries: list[tuple[int, str, bool]] = []
    if isinstance(decoder, dict) and decoder:
        for key, value in decoder.items():
            if not isinstance(value, dict) or not isinstance(value.get("content"), str):
                raise ModelLoadError(f"{origin}: `added_tokens_decoder`[{key!r}] has no content")
            try:
                token_id = int(key)
            except ValueError as exc:
                raise ModelLoadError(
                    f"{origin}: `added_tokens_decoder` key {key!r} is not a token id"
                ) from exc
            entries.append((token_id, value["content"], bool(value.get("special", True))))
    else:
        origin = model_dir / "added_tokens.json"
        special = set(_listed_special(model_dir, tokenizer_config))
        for content, token_id in read_json_object(origin).items():
            if not isinstance(token_id, int) or isinstance(token_id, bool):
                raise ModelLoadError(f"{origin}: id of {content!r} must be an integer")
            entries.append((token_id, content, content in special))
    for token_id, content, special in sorted(entries):
        existing = tokenizer.token_to_id(content)
        if existing is not None:
            if existing != token_id:
                raise ModelLoadError(
                    f"{origin}: added token {content!r} has id {token_id}, but vocab.json "
                    f"gives it {existing}"
                )
            if not register_existing:
                continue
        expected = tokenizer.get_vocab_size(with_added_tokens=True)
        if existing is None and token_id != expected:
            raise ModelLoadError(
                f"{origin}: added token {content!r} has id {token_id}, but the next free id "
                f"after vocab.json and the earlier added tokens is {expected}"
            )
        token = AddedToken(content, special=special, normalized=False)
        if special:
            tokenizer.add_special_tokens([token])
        else:
            tokenizer.add_tokens([token])


def _listed_special(model_dir: Path, tokenizer_config: dict[str, Any]) -> list[str]:
    """Token texts the configs name as special (named keys and `additional_special_tokens`)."""
    names: list[str] = []
    for config in (tokenizer_config, read_json_object(model_dir / "special_tokens_map.json")):
        for key, value in config.items():
            values = value if key == "additional_special_tokens" else [value]
            if key.endswith("_token") or key == "additional_special_tokens":
                for item in values if isinstance(values, list) else []:
                    text = item.get("content") if isinstance(item, dict) else item
                    if isinstance(text, str):
                        names.append(text)
    return names
