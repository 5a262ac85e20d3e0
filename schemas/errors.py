"""Errors raised while turning JSON Schemas into slot constraints.

Every refusal names the JSON pointer of the offending schema location and the keyword at fault, so
`decide validate` can tell a user exactly what to change. `UnsupportedSchema` means the schema is
well formed but cannot be expressed exactly (we refuse rather than loosen); `MalformedSchema` means
the schema itself is invalid. `DecodeMismatch` is raised when committed tokens decode to a value
that `jsonschema` rejects: that is a bug in this package, never a user error.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote


class SchemaError(ValueError):
    """A schema that cannot be compiled; `pointer` is a JSON pointer into the question schema."""

    def __init__(self, pointer: str, keyword: str, message: str) -> None:
        self.pointer = pointer
        self.keyword = keyword
        self.message = message
        super().__init__(f"{pointer or '#'}: {keyword}: {message}")


class UnsupportedSchema(SchemaError):
    """Well-formed schema whose language cannot be expressed exactly as a slot automaton."""


class EmptySchema(UnsupportedSchema):
    """A well-formed schema that no value satisfies (its constraints contradict each other)."""


class MalformedSchema(SchemaError):
    """Schema that is not valid draft 2020-12 (wrong keyword types, dangling `$ref`, bad regex)."""


class UnsupportedTokenizer(ValueError):
    """A tokenizer whose token → text mapping this package cannot reproduce exactly."""


class DecodeMismatch(AssertionError):
    """Committed tokens decoded to text the schema rejects: a bug, never a user error."""


def child(pointer: str, *parts: str | int) -> str:
    """JSON pointer of a sub-location, escaping `~` and `/` as RFC 6901 requires."""
    out = pointer
    for part in parts:
        out += "/" + str(part).replace("~", "~0").replace("/", "~1")
    return out


def pointed_at(root: Any, pointer: str) -> Any:
    """What the JSON pointer `pointer` ("/a/0", URI-escaped parts allowed, "" the root) names
    in `root`; `LookupError` when it names nothing."""
    found = root
    for raw in pointer.split("/")[1:]:
        part = unquote(raw).replace("~1", "/").replace("~0", "~")
        if isinstance(found, dict) and part in found:
            found = found[part]
        elif isinstance(found, list) and part.isdigit() and int(part) < len(found):
            found = found[int(part)]
        else:
            raise LookupError(pointer)
    return found
