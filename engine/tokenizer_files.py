"""The tokenizer files of a model directory, as published: `tokenizer.json`, or a byte-level BPE
built from `vocab.json` + `merges.txt` plus its added tokens.

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
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

from .errors import ModelLoadError

QWEN2_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN2_CLASSES = ("Qwen2Tokenizer", "Qwen2TokenizerFast", "DreamTokenizer")
GPT2_CLASSES = ("GPT2Tokenizer", "GPT2TokenizerFast")


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
        present = [p.name for p in (vocab_path, merges_path) if p.is_file()]
        found = f" (only {present[0]} is there)" if present else ""
        raise ModelLoadError(
            f"{model_dir}: tokenizer.json is missing, and there is no vocab.json + merges.txt "
            f"to build it from{found}"
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


def _add_published_tokens(
    model_dir: Path, tokenizer: Tokenizer, tokenizer_config: dict[str, Any]
) -> None:
    """Added tokens at their published ids: `added_tokens_decoder` of tokenizer_config.json (what
    `transformers` reads first), else `added_tokens.json`, marked special where listed as such."""
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
            continue
        expected = tokenizer.get_vocab_size(with_added_tokens=True)
        if token_id != expected:
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
