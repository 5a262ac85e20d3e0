"""Tokenizer, special tokens and chat template of a model directory.

The tokenizer is `tokenizer.json` loaded with the `tokenizers` library (no `transformers`, no
hub), or built from `vocab.json` + `merges.txt` where a checkpoint ships only those
(`tokenizer_files.py`). Special tokens (bos, eos, pad, mask, unk, sep, cls) resolve in one order,
each with the file and field it came from: `tokenizer_config.json`, then `special_tokens_map.json`
(Hugging Face writes either as strings or as serialised `AddedToken` objects), then, for a key
neither names, a token the tokenizer itself marks special under that key's conventional name
(`[MASK]`, `[PAD]`, `[SEP]`, ... of classic BERT exports, whose configs name none). The chat
template (from `chat_template.jinja` or `tokenizer_config.json`) is untrusted input: it is checked
statically for any attribute or item whose name starts with an underscore, then rendered only
inside jinja2's immutable sandbox, always with the variables a real render gets (the special
tokens, `additional_special_tokens`, `tools=None`, `add_generation_prompt`), so a template that
works at run time is never refused at load and one that reaches for Python internals always is.
The sandbox offers what Hugging Face's does: `tojson` (with `ensure_ascii`, `indent`,
`separators`, `sort_keys`), `raise_exception`, `strftime_now` and the `{% generation %}` block
(rendered unchanged). Any error while rendering is a `ModelLoadError` naming the template file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

from jinja2 import TemplateError, UndefinedError, nodes
from jinja2.exceptions import SecurityError
from jinja2.ext import Extension, loopcontrols
from jinja2.parser import Parser
from jinja2.sandbox import ImmutableSandboxedEnvironment
from tokenizers import Tokenizer

from .errors import ModelLoadError, UnsafeTemplateError
from .tokenizer_files import read_json_object, read_tokenizer_files

SPECIAL_TOKEN_KEYS = (
    "bos_token", "eos_token", "pad_token", "mask_token", "unk_token", "sep_token", "cls_token",
)  # fmt: skip
# Conventional texts of special tokens, for tokenizers whose configs name none (classic BERT).
CONVENTIONAL_NAMES = {
    "mask_token": ("[MASK]", "<mask>"),
    "pad_token": ("[PAD]", "<pad>"),
    "unk_token": ("[UNK]", "<unk>"),
    "sep_token": ("[SEP]",),
    "cls_token": ("[CLS]",),
}
# A mask token among `additional_special_tokens` or the tokenizer's special tokens: the text
# without brackets and bars is "mask" or "mdm_mask" (`|<MASK>|`, `<|mask|>`, `<|mdm_mask|>`).
MASK_NAME = re.compile(r"^[\[<|]*(mdm_)?mask[\]>|]*$", re.IGNORECASE)
_TRIAL_CONVERSATION = [{"role": "user", "content": "Is this template safe?"}]
SENTINEL = "decide-turn-end-probe"


def _raise_exception(message: str) -> None:
    raise TemplateError(message)


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | str | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    """Hugging Face's `tojson` filter: `json.dumps` with its options, no HTML escaping."""
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


def _strftime_now(format: str) -> str:
    """Hugging Face's `strftime_now` global: the current local time, formatted."""
    return datetime.now().strftime(format)


class _GenerationTag(Extension):
    """Hugging Face's `{% generation %}...{% endgeneration %}` block, which marks the assistant's
    tokens for training masks; a render outputs its body unchanged (as Hugging Face's does when
    no assistant mask is asked for)."""

    tags: ClassVar[set[str]] = {"generation"}

    def parse(self, parser: Parser) -> nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        # A call block, as Hugging Face's: the body renders in its own scope.
        return nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller: Any) -> str:
        return caller()


class _StrictSandbox(ImmutableSandboxedEnvironment):
    """jinja2's sandbox returns a silent `Undefined` for an unsafe attribute, which renders as
    "" and lets a hostile template pass a trial render; here it raises at once."""

    def unsafe_undefined(self, obj: Any, attribute: str) -> Any:
        kind = type(obj).__name__
        raise SecurityError(f"access to attribute {attribute!r} of a {kind} is unsafe")


def _sandbox() -> ImmutableSandboxedEnvironment:
    env = _StrictSandbox(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[loopcontrols, _GenerationTag],
        autoescape=False,
    )
    # The helpers Hugging Face templates expect, with Hugging Face's signatures; plain functions,
    # nothing that reaches outside.
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


def _private_access(ast: nodes.Template) -> str | None:
    """The first `x._name` / `x['_name']` in a template, if any (the sandbox's first line)."""
    for node in ast.find_all((nodes.Getattr, nodes.Getitem)):
        if isinstance(node, nodes.Getattr):
            name = node.attr
        elif isinstance(node.arg, nodes.Const) and isinstance(node.arg.value, str):
            name = node.arg.value
        else:
            continue
        if name.startswith("_"):
            return name
    return None


@dataclass(frozen=True)
class ChatTemplate:
    """A chat template compiled in the sandbox. `render` returns the prompt text.

    `variables` are what every render passes besides the conversation: the special tokens by
    their config keys and `additional_special_tokens`, as Hugging Face's `apply_chat_template`
    passes them, so the trial render at load and the real render see the same names."""

    source: str
    origin: str  # the file it came from, for error messages
    variables: Mapping[str, Any] = field(default_factory=dict)
    _template: Any = field(default=None, repr=False, compare=False)

    @classmethod
    def compile(
        cls, source: str, origin: str, variables: Mapping[str, Any] | None = None
    ) -> ChatTemplate:
        env = _sandbox()
        try:
            ast = env.parse(source)
        except TemplateError as exc:
            raise ModelLoadError(f"{origin}: chat template does not parse ({exc})") from exc
        private = _private_access(ast)
        if private is not None:
            raise UnsafeTemplateError(
                f"{origin}: chat template reaches for Python internals (`{private}`); refused"
            )
        template = cls(
            source=source,
            origin=origin,
            variables=dict(variables or {}),
            _template=env.from_string(source),
        )
        template.render(_TRIAL_CONVERSATION)  # the sandbox's second line: a real render
        return template

    def render(
        self,
        messages: Sequence[Mapping[str, Any]],
        add_generation_prompt: bool = True,
    ) -> str:
        context = {"tools": None, "documents": None, **self.variables}
        try:
            return self._template.render(
                messages=list(messages), add_generation_prompt=add_generation_prompt, **context
            )
        except SecurityError as exc:
            raise UnsafeTemplateError(
                f"{self.origin}: chat template refused by the sandbox ({exc})"
            ) from exc
        except UndefinedError as exc:
            given = ", ".join(sorted(["messages", "add_generation_prompt", *context]))
            raise ModelLoadError(
                f"{self.origin}: chat template needs a variable decide does not provide ({exc}); "
                f"a render gets {given}"
            ) from exc
        except TemplateError as exc:
            raise ModelLoadError(f"{self.origin}: chat template failed to render ({exc})") from exc
        except Exception as exc:  # a helper's TypeError, a bad slice, ...: the template's fault
            raise ModelLoadError(
                f"{self.origin}: chat template failed to render ({type(exc).__name__}: {exc})"
            ) from exc

    def turn_end(self, special_texts: Sequence[str]) -> str | None:
        """The special token that closes an assistant turn (`<|eot_id|>`, `<|im_end|>`), read
        off a render of a short conversation; None when no special token follows the answer."""
        rendered = self.render(
            [*_TRIAL_CONVERSATION, {"role": "assistant", "content": SENTINEL}],
            add_generation_prompt=False,
        )
        at = rendered.rfind(SENTINEL)
        if at < 0:
            return None
        rest = rendered[at + len(SENTINEL) :].lstrip()
        matches = [t for t in special_texts if t and rest.startswith(t)]
        return max(matches, key=len) if matches else None


def _token_text(value: Any, origin: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    raise ModelLoadError(f"{origin}: special token {value!r} is neither text nor an AddedToken")


@dataclass(frozen=True)
class TokenizerBundle:
    """The tokenizer, its special tokens and the chat template of one model directory."""

    tokenizer: Tokenizer
    special_tokens: Mapping[str, str]  # e.g. {"eos_token": "<|endoftext|>"}
    chat_template: ChatTemplate | None
    # Where each special token came from ("tokenizer_config.json eos_token", ...).
    special_sources: Mapping[str, str] = field(default_factory=dict)
    additional_special_tokens: tuple[str, ...] = ()
    source: str = "tokenizer.json"  # the file(s) the tokenizer was read or built from

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size(with_added_tokens=True)

    def special_id(self, key: str) -> int | None:
        """Id of a special token by its config key (`mask_token`, `eos_token`, ...), if any."""
        text = self.special_tokens.get(key)
        return None if text is None else self.tokenizer.token_to_id(text)

    def special_texts(self) -> list[str]:
        """Every token the tokenizer marks special, and the configured special tokens."""
        marked = [
            t.content for t in self.tokenizer.get_added_tokens_decoder().values() if t.special
        ]
        return [*marked, *self.special_tokens.values(), *self.additional_special_tokens]

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`, without special tokens added around it."""
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def encode_literal(self, text: str, start: int, end: int) -> list[int]:
        """Token ids of `text` in which `text[start:end]` (a user message: documents, questions)
        is literal: a special or added token's text there (`<|eot_id|>`, `<|mdm_mask|>`,
        `[MASK]` written in a document) is read as the ordinary characters it is, never as the
        control token, so a document cannot end the user's turn or plant mask tokens. Text
        without any encodes exactly as `encode` does."""
        encoding = self.tokenizer.encode(text, add_special_tokens=False)
        added = self._added_ids
        hits = [
            (a, b)
            for tid, (a, b) in zip(encoding.ids, encoding.offsets, strict=True)
            if tid in added and start <= a and b <= end and b > a
        ]
        if not hits:
            return list(encoding.ids)
        out: list[int] = []
        at = 0
        for a, b in hits:
            out += self.encode(text[at:a])
            out += self._plain.encode(text[a:b], add_special_tokens=False).ids
            at = b
        return out + self.encode(text[at:])

    @cached_property
    def _added_ids(self) -> frozenset[int]:
        return frozenset(self.tokenizer.get_added_tokens_decoder())

    @cached_property
    def _plain(self) -> Tokenizer:
        """The tokenizer without its added tokens: their texts read as ordinary characters."""
        spec = json.loads(self.tokenizer.to_str())
        spec["added_tokens"], spec["post_processor"] = [], None
        return Tokenizer.from_str(json.dumps(spec))

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False)


def _special_tokens(
    model_dir: Path, tokenizer: Tokenizer, configs: Sequence[tuple[str, dict[str, Any]]]
) -> tuple[dict[str, str], dict[str, str], tuple[str, ...]]:
    """Special tokens by key with their sources, and `additional_special_tokens`, resolved in the
    order of `configs`, then from the tokenizer's own special tokens (see the module docstring)."""
    special: dict[str, str] = {}
    sources: dict[str, str] = {}
    additional: list[str] = []
    for name, config in configs:
        origin = str(model_dir / name)
        for key in SPECIAL_TOKEN_KEYS:
            text = _token_text(config.get(key), origin)
            if key in special or text is None:
                continue
            if tokenizer.token_to_id(text) is None:
                raise ModelLoadError(f"{origin}: `{key}` {text!r} is not in the vocabulary")
            special[key], sources[key] = text, f"{name} {key}"
        listed = config.get("additional_special_tokens") or []
        for item in listed if isinstance(listed, list) else []:
            text = _token_text(item, origin)
            if text is not None and text not in additional:
                additional.append(text)
    marked = {t.content for t in tokenizer.get_added_tokens_decoder().values() if t.special}
    for key, names in CONVENTIONAL_NAMES.items():
        found = [n for n in names if n in marked]
        if key not in special and found:
            special[key], sources[key] = found[0], f"tokenizer special token {found[0]}"
    return special, sources, tuple(additional)


def load_tokenizer(model_dir: Path) -> TokenizerBundle:
    config_path = model_dir / "tokenizer_config.json"
    config = read_json_object(config_path)
    files = read_tokenizer_files(model_dir, config)
    tokenizer = files.tokenizer
    # Some exported tokenizers pad or truncate every encoding (MiniLM's pads to 128 and cuts
    # there): lengths are the packer's business, a silent cut would drop document text.
    tokenizer.no_padding()
    tokenizer.no_truncation()
    special, sources, additional = _special_tokens(
        model_dir,
        tokenizer,
        [
            ("tokenizer_config.json", config),
            ("special_tokens_map.json", read_json_object(model_dir / "special_tokens_map.json")),
        ],
    )
    variables: dict[str, Any] = {**special, "additional_special_tokens": list(additional)}

    template = None
    jinja_path = model_dir / "chat_template.jinja"
    if jinja_path.is_file():
        source = jinja_path.read_text(encoding="utf-8")
        template = ChatTemplate.compile(source, str(jinja_path), variables)
    elif config.get("chat_template") is not None:
        source = config["chat_template"]
        if isinstance(source, list):  # named templates: [{"name": ..., "template": ...}]
            named = {t.get("name"): t.get("template") for t in source if isinstance(t, dict)}
            source = named.get("default")
        if not isinstance(source, str):
            raise ModelLoadError(f"{config_path}: `chat_template` has no usable default template")
        template = ChatTemplate.compile(source, f"{config_path} (chat_template)", variables)
    return TokenizerBundle(
        tokenizer=tokenizer,
        special_tokens=special,
        chat_template=template,
        special_sources=sources,
        additional_special_tokens=additional,
        source=files.source,
    )
