"""Job specs: strict at the edge, every error names the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from decide.jobs.spec import SpecError, load_spec, parse_questions, parse_spec

QUESTION = {"id": "eligible", "text": "Is it eligible?", "schema": {"type": "boolean"}}


def test_yaml_and_json_specs_load(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(
        "questions:\n  - id: eligible\n    text: Is it eligible?\n    schema: {type: boolean}\n"
        "decoding: {threshold: 0.8, seed: 3}\n"
    )
    (tmp_path / "job.json").write_text(json.dumps({"questions": [QUESTION]}))
    a, b = load_spec(tmp_path / "job.yaml"), load_spec(tmp_path / "job.json")
    assert a.questions[0].schema_ == {"type": "boolean"}
    assert a.decoding.threshold == 0.8 and b.decoding.threshold == 0.9
    assert a.fingerprint() != b.fingerprint()  # decoding settings change answers


def test_fingerprints_of_specs_written_before_new_settings_stay_the_same() -> None:
    """A job started before a setting existed resumes: its spec's fingerprint (values computed
    at 58b8508, before `windows.questions`) does not change; setting it does."""
    assert parse_spec({"questions": [QUESTION]}).fingerprint() == "f79ed64016266f6e"
    top = {"questions": [QUESTION], "windows": {"top_k": 3}}
    assert parse_spec(top).fingerprint() == "dd1281bc6ad3c80f"
    assert parse_spec({**top, "windows": {"top_k": 3, "questions": 8}}).fingerprint() == (
        "dd1281bc6ad3c80f"
    )
    assert parse_spec({**top, "windows": {"top_k": 3, "questions": 2}}).fingerprint() != (
        "dd1281bc6ad3c80f"
    )
    # the learnt evidence ranker's settings (2026-12-06): at their defaults, the same
    ranker = {"top_k": 3, "evidence_ranker": True, "min_evidence": None}
    assert parse_spec({**top, "windows": ranker}).fingerprint() == "dd1281bc6ad3c80f"
    for changed in ({"evidence_ranker": False}, {"min_evidence": 0.2}):
        spec = {**top, "windows": {"top_k": 3, **changed}}
        assert parse_spec(spec).fingerprint() != "dd1281bc6ad3c80f"
    # `grow_slots` (default true since it exists as a default): a spec without it keeps its
    # fingerprint; turning it off changes answers, so the fingerprint.
    grow = {"questions": [QUESTION], "decoding": {"grow_slots": True}}
    assert parse_spec(grow).fingerprint() == "f79ed64016266f6e"
    grow["decoding"]["grow_slots"] = False
    assert parse_spec(grow).fingerprint() != "f79ed64016266f6e"


def test_the_default_step_cap_keeps_old_fingerprints_and_no_cap_is_its_own() -> None:
    """`max_steps` left out is 4 since 2026-12-05 (it was no cap); a spec without it keeps its
    fingerprint, as does one writing 4; `max_steps: null` (no cap) now differs. A spec limiting
    tokens per step (many small steps) gets no cap unless it sets one."""
    plain = parse_spec({"questions": [QUESTION]})
    assert plain.decoding.max_steps == 4
    assert plain.fingerprint() == "f79ed64016266f6e"
    four = parse_spec({"questions": [QUESTION], "decoding": {"max_steps": 4}})
    assert four.fingerprint() == "f79ed64016266f6e"
    uncapped = parse_spec({"questions": [QUESTION], "decoding": {"max_steps": None}})
    assert uncapped.decoding.max_steps is None
    assert uncapped.fingerprint() not in ("f79ed64016266f6e", four.fingerprint())
    assert parse_spec({"questions": [QUESTION], "decoding": {"max_steps": 2}}).fingerprint() not in (
        "f79ed64016266f6e", uncapped.fingerprint())  # fmt: skip
    one = parse_spec({"questions": [QUESTION], "decoding": {"max_tokens_per_step": 1}})
    assert one.decoding.max_steps is None
    explicit = {"max_tokens_per_step": 1, "max_steps": None}
    assert parse_spec({"questions": [QUESTION], "decoding": explicit}).fingerprint() == (
        one.fingerprint()
    )
    capped = {"max_tokens_per_step": 1, "max_steps": 4}
    assert parse_spec({"questions": [QUESTION], "decoding": capped}).decoding.max_steps == 4
    assert parse_spec({"questions": [QUESTION], "decoding": capped}).fingerprint() != (
        one.fingerprint()
    )


@pytest.mark.parametrize(
    ("data", "where"),
    [
        ({"questions": [QUESTION], "thresold": 0.5}, "thresold"),
        ({"questions": [{**QUESTION, "id": "9lives"}]}, "questions.0.id"),
        ({"questions": [{**QUESTION, "id": "a-b"}]}, "questions.0.id"),
        ({"questions": [QUESTION, QUESTION]}, "appears twice"),
        ({"questions": [{**QUESTION, "text": ""}]}, "questions.0.text"),
        ({"questions": [QUESTION], "decoding": {"threshold": 1.5}}, "decoding.threshold"),
        ({"questions": [QUESTION], "decoding": {"temp": 1}}, "decoding.temp"),
        ({"questions": [QUESTION], "long_documents": "skip"}, "long_documents"),
        ({"questions": [{"id": "a", "text": "t"}]}, "questions.0.schema"),
    ],
)
def test_bad_specs_name_the_field(data: dict, where: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_spec(data, "job.yaml")
    assert where in str(info.value) and "job.yaml" in str(info.value)


def test_unreadable_spec_files(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="cannot read"):
        load_spec(tmp_path / "missing.yaml")
    (tmp_path / "bad.yaml").write_text("questions: [\n")
    with pytest.raises(SpecError, match="not valid YAML"):
        load_spec(tmp_path / "bad.yaml")
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(SpecError, match="a job spec is a mapping"):
        load_spec(tmp_path / "list.json")


def test_per_row_questions_take_schema_as_json_text() -> None:
    raw = [{"id": "a", "text": "A?", "schema": '{"enum": ["x", "y"]}'}]
    assert parse_questions(raw, "row 3")[0].schema_ == {"enum": ["x", "y"]}
    with pytest.raises(SpecError, match=r"row 3: questions\.0\.schema"):
        parse_questions([{"id": "a", "text": "A?", "schema": "{not json"}], "row 3")
    with pytest.raises(SpecError, match="appear more than once"):
        parse_questions(raw + raw, "row 3")


def test_the_readme_spec_example_is_a_valid_spec() -> None:
    import re

    import yaml

    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    blocks = [b for b in re.findall(r"```yaml\n(.*?)```", readme, re.S) if "decoding:" in b]
    assert len(blocks) == 1
    spec = parse_spec(yaml.safe_load(blocks[0]), "README.md")
    assert {"arbitration", "over_limit"} <= {q.id for q in spec.questions}
