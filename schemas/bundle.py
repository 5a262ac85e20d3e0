"""Question schemas that `$ref` other files, bundled into one schema.

A job spec's question may point at a schema file beside it (`schema: {$ref: kind.json}`, or
`shared/defs.json#/$defs/address` from inside another schema), as schemas kept in a repository
are written. The compiler resolves local references only (`#…`), so the spec loader bundles:
every referenced file (JSON, or YAML by its `.yaml`/`.yml` suffix, resolved against the file
that names it; the spec's directory for the spec) is copied once under the root's `$defs`
(`definitions` for drafts before 2019-09), keyed by its path relative to the spec's directory,
and every reference into it is rewritten to point there: the JSON Schema 2020-12 "bundling" of
§9.3, by path. A copied file loses its own `$schema` and root `$id`, and must be written in the
question's draft. Network references (`https://…`) stay refused: nothing is fetched.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from .drafts import draft_of
from .errors import MalformedSchema, UnsupportedSchema, child

VALUES = ("enum", "const", "default", "examples")  # instances, not schemas: never rewritten
OLD_DRAFTS = ("draft-04", "draft-06", "draft-07")  # whose definitions live under `definitions`


def external_refs(schema: Any) -> bool:
    """Whether `schema` has a `$ref` to another document (not `#…`)."""
    if isinstance(schema, list):
        return any(external_refs(x) for x in schema)
    if not isinstance(schema, dict):
        return False
    for key, value in schema.items():
        if key in VALUES:
            continue
        if key == "$ref" and isinstance(value, str) and not value.startswith("#"):
            return True
        if external_refs(value):
            return True
    return False


def bundle(schema: Any, base: Path) -> Any:
    """`schema` with the files its `$ref`s name (relative to directory `base`) copied in and the
    references rewritten to local ones; `schema` itself when it names none. `SchemaError` with
    the pointer of the `$ref` (in `schema`, or `file.json#/pointer` inside a copied file) for a
    file that cannot be read or parsed, a fragment it lacks, a network reference, a draft other
    than the question's, or a `$defs` name already taken."""
    if not external_refs(schema):
        return schema
    return _Bundler(schema, base).run()


class _Bundler:
    def __init__(self, schema: dict[str, Any], base: Path) -> None:
        self.root = schema
        self.base = base
        self.draft = draft_of(schema)
        self.container = "definitions" if self.draft in OLD_DRAFTS else "$defs"
        self.keys: dict[Path, str] = {}  # a copied file → its key under the container
        self.copies: dict[str, Any] = {}
        self.raw: dict[str, Any] = {}  # each copied file as read

    def run(self) -> dict[str, Any]:
        out = self._rewrite(self.root, self.base, "", None)
        taken = out.get(self.container, {})
        if not isinstance(taken, dict):
            raise MalformedSchema(f"/{self.container}", self.container, "must be an object")
        for key in self.copies:
            if key in taken:
                raise UnsupportedSchema(
                    child("", self.container, key), "$ref",
                    f"a referenced file is bundled under this name, which the schema already "
                    f"uses: rename the definition or the file {key!r}",
                )  # fmt: skip
        return {**out, self.container: {**taken, **self.copies}}

    def _rewrite(self, schema: Any, here: Path, ptr: str, key: str | None) -> Any:
        """`schema` (of the file in directory `here`, copied under `key`; None: the question's
        own) with its references rewritten."""
        if isinstance(schema, list):
            return [self._rewrite(x, here, child(ptr, i), key) for i, x in enumerate(schema)]
        if not isinstance(schema, dict):
            return schema
        out = {}
        for name, value in schema.items():
            if name in VALUES:
                out[name] = value
            elif name == "$ref" and isinstance(value, str):
                out[name] = self._ref(value, here, child(ptr, name), key)
            else:
                out[name] = self._rewrite(value, here, child(ptr, name), key)
        return out

    def _ref(self, ref: str, here: Path, ptr: str, key: str | None) -> str:
        shown = ptr if key is None else f"{key}#{ptr}"  # where the reference is written
        if ref.startswith("#"):  # local to its own document
            fragment = ref[1:]
            if key is None or (fragment and not fragment.startswith("/")):
                return ref  # the question's own, or an $anchor (anchors are document-wide)
            return "#" + child("", self.container, key) + fragment
        parts = urlsplit(ref)
        if parts.scheme or parts.netloc:
            raise UnsupportedSchema(shown, "$ref", f"{ref!r} is not a file beside the spec: only "
                                    "local references and relative file paths are supported, "
                                    "nothing is fetched")  # fmt: skip
        path = (here / unquote(parts.path)).resolve()
        target = self._copy(path, shown, ref)
        fragment = unquote(parts.fragment)
        if fragment and not fragment.startswith("/"):
            why = "an $anchor in another file is not supported; use a JSON pointer"
            raise UnsupportedSchema(shown, "$ref", f"{ref!r}: {why} (file.json#/$defs/name)")
        if fragment:
            found: Any = self.raw[target]
            for raw in fragment.split("/")[1:]:
                part = raw.replace("~1", "/").replace("~0", "~")
                if isinstance(found, dict) and part in found:
                    found = found[part]
                elif isinstance(found, list) and part.isdigit() and int(part) < len(found):
                    found = found[int(part)]
                else:
                    raise MalformedSchema(shown, "$ref", f"{ref!r}: {path.name} has nothing at "
                                          f"#{fragment}")  # fmt: skip
        return "#" + child("", self.container, target) + fragment

    def _copy(self, path: Path, shown: str, ref: str) -> str:
        """The key of file `path` under the container, copying it in the first time."""
        if path in self.keys:
            return self.keys[path]
        key = Path(os.path.relpath(path, self.base)).as_posix()
        self.keys[path] = key
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise MalformedSchema(shown, "$ref", f"{ref!r}: cannot read {path} "
                                  f"({exc.strerror or exc})") from exc  # fmt: skip
        except UnicodeDecodeError as exc:
            raise MalformedSchema(shown, "$ref", f"{ref!r}: {path} is not UTF-8 text") from exc
        yaml = path.suffix.lower() in (".yaml", ".yml")
        try:
            if yaml:  # YAML 1.2, as the spec is read (`jobs.spec.read_yaml`)
                from ruamel.yaml import YAML

                data = YAML(typ="safe", pure=True).load(text)
            else:
                data = json.loads(text)
        except Exception as exc:  # json.JSONDecodeError; ruamel's errors share no base class
            kind = "YAML" if yaml else "JSON"
            raise MalformedSchema(shown, "$ref", f"{ref!r}: {path} is not valid {kind} "
                                  f"({exc})") from exc  # fmt: skip
        if not isinstance(data, dict | bool):
            raise MalformedSchema(shown, "$ref", f"{ref!r}: {path} holds no schema (a JSON "
                                  f"object or boolean), but a {type(data).__name__}")  # fmt: skip
        if isinstance(data, dict):
            try:
                draft = draft_of(data, self.draft)
            except UnsupportedSchema as exc:
                raise UnsupportedSchema(f"{key}#/$schema", "$schema", exc.message) from exc
            if draft != self.draft:
                raise UnsupportedSchema(shown, "$ref", f"{ref!r}: {path.name} is written in "
                                        f"draft {draft}, the question in {self.draft}: write "
                                        "them in one draft")  # fmt: skip
            data = {k: v for k, v in data.items() if k not in ("$schema", "$id")}
        self.raw[key] = data
        self.copies[key] = None  # taken before recursing: a cycle of files refers to itself
        self.copies[key] = self._rewrite(data, path.parent, "", key)
        return key
