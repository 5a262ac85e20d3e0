"""Tokenizer and chat template of a model directory.

`tokenizer.json` is loaded with the `tokenizers` library (no `transformers`, no hub). Special
tokens (bos, eos, pad, mask, unk) are read from `tokenizer_config.json`, where Hugging Face writes
them either as strings or as serialised `AddedToken` objects. The chat template (from
`chat_template.jinja` or `tokenizer_config.json`) is untrusted input: it is checked statically for
any attribute or item whose name starts with an underscore, then rendered only inside jinja2's
immutable sandbox; a template that reaches for Python internals is refused when the model loads.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jinja2 import TemplateError, nodes
from jinja2.exceptions import SecurityError
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment
from tokenizers import Tokenizer

from .errors import ModelLoadError, UnsafeTemplateError

SPECIAL_TOKEN_KEYS = ("bos_token", "eos_token", "pad_token", "mask_token", "unk_token")
_TRIAL_CONVERSATION = [{"role": "user", "content": "Is this template safe?"}]


def _raise_exception(message: str) -> None:
    raise TemplateError(message)


class _StrictSandbox(ImmutableSandboxedEnvironment):
    """jinja2's sandbox returns a silent `Undefined` for an unsafe attribute, which renders as
    "" and lets a hostile template pass a trial render; here it raises at once."""

    def unsafe_undefined(self, obj: Any, attribute: str) -> Any:
        kind = type(obj).__name__
        raise SecurityError(f"access to attribute {attribute!r} of a {kind} is unsafe")


def _sandbox() -> ImmutableSandboxedEnvironment:
    env = _StrictSandbox(
        trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols], autoescape=False
    )
    # The helpers Hugging Face templates expect; plain functions, nothing that reaches outside.
    env.filters["tojson"] = lambda value, indent=None: json.dumps(
        value, ensure_ascii=False, indent=indent
    )
    env.globals["raise_exception"] = _raise_exception
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
    """A chat template compiled in the sandbox. `render` returns the prompt text."""

    source: str
    origin: str  # the file it came from, for error messages
    _template: Any = field(repr=False, compare=False)

    @classmethod
    def compile(cls, source: str, origin: str) -> ChatTemplate:
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
        template = cls(source=source, origin=origin, _template=env.from_string(source))
        template.render(_TRIAL_CONVERSATION)  # the sandbox's second line: a real render
        return template

    def render(
        self,
        messages: Sequence[Mapping[str, Any]],
        add_generation_prompt: bool = True,
        **extra: Any,
    ) -> str:
        try:
            return self._template.render(
                messages=list(messages), add_generation_prompt=add_generation_prompt, **extra
            )
        except SecurityError as exc:
            raise UnsafeTemplateError(
                f"{self.origin}: chat template refused by the sandbox ({exc})"
            ) from exc
        except TemplateError as exc:
            raise ModelLoadError(f"{self.origin}: chat template failed to render ({exc})") from exc


def _token_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    raise ModelLoadError(
        f"tokenizer_config.json: special token {value!r} is neither text nor an AddedToken"
    )


@dataclass(frozen=True)
class TokenizerBundle:
    """The tokenizer, its special tokens and the chat template of one model directory."""

    tokenizer: Tokenizer
    special_tokens: Mapping[str, str]  # e.g. {"eos_token": "<|endoftext|>"}
    chat_template: ChatTemplate | None

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size(with_added_tokens=True)

    def special_id(self, key: str) -> int | None:
        """Id of a special token by its config key (`mask_token`, `eos_token`, ...), if any."""
        text = self.special_tokens.get(key)
        return None if text is None else self.tokenizer.token_to_id(text)

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`, without special tokens added around it."""
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False)


def load_tokenizer(model_dir: Path) -> TokenizerBundle:
    path = model_dir / "tokenizer.json"
    if not path.is_file():
        raise ModelLoadError(f"{model_dir}: tokenizer.json is missing")
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:  # the Rust side raises a bare Exception for every parse error
        raise ModelLoadError(f"{path}: not a `tokenizers` tokenizer ({exc})") from exc
    # Some exported tokenizers pad or truncate every encoding (MiniLM's pads to 128 and cuts
    # there): lengths are the packer's business, a silent cut would drop document text.
    tokenizer.no_padding()
    tokenizer.no_truncation()

    config: dict[str, Any] = {}
    config_path = model_dir / "tokenizer_config.json"
    if config_path.is_file():
        try:
            config = json.loads(config_path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ModelLoadError(f"{config_path}: not valid JSON ({exc})") from exc
        if not isinstance(config, dict):
            raise ModelLoadError(f"{config_path}: expected a JSON object")
    special = {k: t for k in SPECIAL_TOKEN_KEYS if (t := _token_text(config.get(k))) is not None}
    for key, text in special.items():
        if tokenizer.token_to_id(text) is None:
            raise ModelLoadError(f"{config_path}: `{key}` {text!r} is not in tokenizer.json")

    template = None
    jinja_path = model_dir / "chat_template.jinja"
    if jinja_path.is_file():
        template = ChatTemplate.compile(jinja_path.read_text(encoding="utf-8"), str(jinja_path))
    elif config.get("chat_template") is not None:
        source = config["chat_template"]
        if isinstance(source, list):  # named templates: [{"name": ..., "template": ...}]
            named = {t.get("name"): t.get("template") for t in source if isinstance(t, dict)}
            source = named.get("default")
        if not isinstance(source, str):
            raise ModelLoadError(f"{config_path}: `chat_template` has no usable default template")
        template = ChatTemplate.compile(source, f"{config_path} (chat_template)")
    return TokenizerBundle(tokenizer=tokenizer, special_tokens=special, chat_template=template)
