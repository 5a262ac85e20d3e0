"""Question schemas in a spec file that `$ref` schema files beside it (`schemas.bundle`): the
files are copied under the root's `$defs` (`definitions` in old drafts) and the references made
local, so the compiler, `jsonschema` and the fingerprint see one schema; every failure names the
question and the `$ref`'s pointer. Before, `schema: {$ref: kind.json}` was refused: "only local
'#…' references are supported"."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from decide.jobs.spec import SpecError, load_spec
from decide.schemas.bundle import bundle


def _write(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def _spec(tmp_path: Path, schema: object, name: str = "jobs/spec.yaml") -> Path:
    spec = tmp_path / name
    spec.parent.mkdir(parents=True, exist_ok=True)
    spec.write_text(json.dumps({"questions": [{"id": "q", "text": "Q?", "schema": schema}]}))
    return spec


def test_files_beside_the_spec_are_bundled(tmp_path: Path, monkeypatch) -> None:
    jobs = tmp_path / "jobs"
    _write(jobs / "kind.json", {"enum": ["auto", "home"]})
    # a file in a subdirectory, referring to a sibling by its own directory and to itself
    _write(jobs / "common" / "claim.json", {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://example.com/claim.json",
        "type": "object",
        "properties": {"kind": {"$ref": "../kind.json"}, "amount": {"$ref": "#/$defs/money"},
                       "parts": {"type": "array", "items": {"$ref": "part.json"}, "maxItems": 2}},
        "required": ["kind", "amount"],
        "additionalProperties": False,
        "$defs": {"money": {"type": "integer", "minimum": 0, "maximum": 999}},
    })  # fmt: skip
    _write(jobs / "common" / "part.json", {"enum": ["roof", "door"]})
    spec = _spec(tmp_path, {"$ref": "common/claim.json"})
    monkeypatch.chdir(tmp_path)  # the spec's directory, not the working one, is the base
    schema = load_spec("jobs/spec.yaml").questions[0].schema_
    assert "common/claim.json" in schema["$defs"] and "kind.json" in schema["$defs"]
    assert schema["$ref"] == "#/$defs/common~1claim.json"
    claim = schema["$defs"]["common/claim.json"]
    assert "$schema" not in claim and "$id" not in claim
    assert claim["properties"]["amount"]["$ref"] == "#/$defs/common~1claim.json/$defs/money"
    validator = jsonschema.Draft202012Validator(schema)
    assert validator.is_valid({"kind": "home", "amount": 12, "parts": ["roof"]})
    assert not validator.is_valid({"kind": "boat", "amount": 12})
    assert not validator.is_valid({"kind": "home", "amount": 1000})
    assert not validator.is_valid({"kind": "home", "amount": 1, "parts": ["window"]})
    # the fingerprint holds the files' contents: changing one is another spec
    before = load_spec(spec).fingerprint()
    _write(jobs / "kind.json", {"enum": ["auto", "home", "travel"]})
    assert load_spec(spec).fingerprint() != before


def test_a_bundled_question_compiles_and_decides(tmp_path: Path) -> None:
    """Through the real compiler: the question is as if written inline."""
    from decide.api import Decider

    _write(tmp_path / "jobs" / "kind.json", {"enum": ["auto", "home", "travel"]})
    spec = load_spec(_spec(tmp_path, {"$ref": "kind.json"}))
    decision = Decider().decide("My car was hit in the parking lot.", spec.questions)
    assert decision.ok and decision.answers["q"] in ("auto", "home", "travel")


def test_old_drafts_bundle_under_definitions_and_fragments_resolve(tmp_path: Path) -> None:
    draft7 = "http://json-schema.org/draft-07/schema#"
    _write(tmp_path / "defs.yaml", {})  # YAML by its suffix
    (tmp_path / "defs.yaml").write_text(
        f"$schema: '{draft7}'\ndefinitions:\n  status: {{enum: [open, closed]}}\n"
    )
    schema = bundle({"$schema": draft7, "$ref": "defs.yaml#/definitions/status"}, tmp_path)
    assert schema["$ref"] == "#/definitions/defs.yaml/definitions/status"
    assert jsonschema.Draft7Validator(schema).is_valid("open")
    assert not jsonschema.Draft7Validator(schema).is_valid("pending")
    # a schema without external references is returned as it is
    plain = {"$ref": "#/$defs/a", "$defs": {"a": {"type": "boolean"}}}
    assert bundle(plain, tmp_path) is plain


def test_a_recursive_tree_across_files(tmp_path: Path) -> None:
    _write(tmp_path / "node.json", {
        "type": "object", "additionalProperties": False, "required": ["name"],
        "properties": {"name": {"enum": ["a", "b"]},
                       "kids": {"type": "array", "maxItems": 1, "items": {"$ref": "node.json"}}},
    })  # fmt: skip
    schema = bundle({"$ref": "node.json"}, tmp_path)
    validator = jsonschema.Draft202012Validator(schema)
    assert validator.is_valid({"name": "a", "kids": [{"name": "b", "kids": []}]})
    assert not validator.is_valid({"name": "a", "kids": [{"name": "c"}]})


@pytest.mark.parametrize(
    ("schema", "files", "message"),
    [
        ({"$ref": "missing.json"}, {}, r"/\$ref: \$ref: 'missing.json': cannot read .*missing"),
        ({"$ref": "bad.json"}, {"bad.json": "{not json"}, r"'bad.json': .*bad.json is not valid JSON"),
        ({"$ref": "list.json"}, {"list.json": "[1, 2]"}, r"holds no schema .* but a list"),
        ({"$ref": "https://example.com/s.json"}, {}, r"not a file beside the spec.*nothing is fetched"),
        ({"$ref": "k.json#/$defs/nope"}, {"k.json": '{"$defs": {}}'}, r"k.json has nothing at #/\$defs/nope"),
        ({"$ref": "k.json#name"}, {"k.json": "{}"}, r"an \$anchor in another file"),
        ({"$ref": "old.json"}, {"old.json": '{"$schema": "http://json-schema.org/draft-07/schema#"}'},
         r"old.json is written in draft draft-07, the question in 2020-12"),
        ({"properties": {"a": {"$ref": "k.json"}}, "$defs": {"k.json": {}}}, {"k.json": "{}"},
         r"/\$defs/k.json: \$ref: .*already uses"),
        ({"$ref": "outer.json"}, {"outer.json": '{"$ref": "missing.json"}'},
         r"outer.json#/\$ref: \$ref: 'missing.json': cannot read"),
    ],
)  # fmt: skip
def test_what_cannot_be_bundled_is_refused_with_its_pointer(
    tmp_path: Path, schema: object, files: dict[str, str], message: str
) -> None:
    for name, text in files.items():
        (tmp_path / "jobs" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "jobs" / name).write_text(text)
    with pytest.raises(SpecError, match=r"spec.yaml: question 'q': schema .*" + message):
        load_spec(_spec(tmp_path, schema))
