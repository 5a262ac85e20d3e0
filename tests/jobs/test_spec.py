"""Job specs: strict at the edge, every error names the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from decide.jobs.spec import SpecError, load_spec, parse_questions, parse_spec, read_yaml

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
    """`max_steps` left out is 2 since 2026-12-07 (3 earlier that day, 4 from 2026-12-05, no cap
    before); a spec without it keeps its fingerprint, as do ones writing 2, 3 or 4;
    `max_steps: null` (no cap) and other caps differ. A spec limiting tokens per step (many
    small steps) gets no cap unless it sets one."""
    plain = parse_spec({"questions": [QUESTION]})
    assert plain.decoding.max_steps == 2
    assert plain.fingerprint() == "f79ed64016266f6e"
    for cap in (2, 3, 4):
        written = parse_spec({"questions": [QUESTION], "decoding": {"max_steps": cap}})
        assert written.decoding.max_steps == cap
        assert written.fingerprint() == "f79ed64016266f6e"
    uncapped = parse_spec({"questions": [QUESTION], "decoding": {"max_steps": None}})
    assert uncapped.decoding.max_steps is None
    assert uncapped.fingerprint() == "9a51f74b759cb162"
    five = parse_spec({"questions": [QUESTION], "decoding": {"max_steps": 5}})
    assert five.fingerprint() == "9769b66a5071e09a"
    one = parse_spec({"questions": [QUESTION], "decoding": {"max_tokens_per_step": 1}})
    assert one.decoding.max_steps is None
    assert one.fingerprint() == "3362958d27671b79"
    explicit = {"max_tokens_per_step": 1, "max_steps": None}
    assert parse_spec({"questions": [QUESTION], "decoding": explicit}).fingerprint() == (
        one.fingerprint()
    )
    capped = {"max_tokens_per_step": 1, "max_steps": 4}
    assert parse_spec({"questions": [QUESTION], "decoding": capped}).decoding.max_steps == 4
    assert parse_spec({"questions": [QUESTION], "decoding": capped}).fingerprint() == (
        "72e5b739b42b6f9a"
    )


def test_a_resumed_job_keeps_the_step_cap_it_started_with() -> None:
    """The manifest records the cap a job decodes with: a spec that leaves `max_steps` out adopts
    it (a job begun under the default of 4 finishes with 4), one that writes another is refused,
    and the fingerprint stays the spec's."""
    now = {"parallel_continuations": True}  # recorded by every job since that setting
    plain = parse_spec({"questions": [QUESTION]})
    assert plain.continuing(None) is plain
    assert plain.continuing({"threshold": 0.9, **now}) is plain  # older than max_steps
    for recorded in (4, None, 3):  # begun under an earlier default (or none): kept
        resumed = plain.continuing({"max_steps": recorded, "threshold": 0.9, **now})
        assert resumed.decoding.max_steps == recorded
        assert resumed.decoding.threshold == plain.decoding.threshold
        assert resumed.fingerprint() == plain.fingerprint()
        again = resumed.continuing({"max_steps": recorded, **now})
        assert again.decoding.max_steps == recorded
    four = parse_spec({"questions": [QUESTION], "decoding": {"max_steps": 4}})
    assert four.continuing({"max_steps": 4, **now}) is four
    with pytest.raises(SpecError, match=r"decided with max_steps 3 .* asks 4"):
        four.continuing({"max_steps": 3, **now})
    uncapped = parse_spec({"questions": [QUESTION], "decoding": {"max_steps": None}})
    with pytest.raises(SpecError, match=r"decided with max_steps 4 .* asks null"):
        uncapped.continuing({"max_steps": 4, **now})
    with pytest.raises(SpecError, match=r"/spec/decoding/max_steps: 0 is not a step cap"):
        plain.continuing({"max_steps": 0, **now})
    with pytest.raises(SpecError, match=r"/spec/decoding/max_steps: True is not a step cap"):
        plain.continuing({"max_steps": True, **now})


def test_a_resumed_job_keeps_the_commit_rule_it_started_with() -> None:
    """`parallel_continuations` (on by default) is kept across a resume as the step cap is: a
    manifest written before the setting existed decoded without them, so the job finishes
    without them; a spec that writes another value than the job's is refused. Specs that leave
    it out or write the default keep the fingerprint they had before it existed."""
    plain = parse_spec({"questions": [QUESTION]})
    assert plain.decoding.parallel_continuations is True
    assert plain.fingerprint() == "f79ed64016266f6e"  # as before the setting
    written = parse_spec({"questions": [QUESTION], "decoding": {"parallel_continuations": True}})
    assert written.fingerprint() == plain.fingerprint()
    off = parse_spec({"questions": [QUESTION], "decoding": {"parallel_continuations": False}})
    assert off.fingerprint() != plain.fingerprint()

    older = plain.continuing({"max_steps": 3, "threshold": 0.9})  # a manifest from before it
    assert older.decoding.parallel_continuations is False
    assert older.decoding.max_steps == 3
    assert older.fingerprint() == plain.fingerprint()
    assert older.continuing({"max_steps": 3, "parallel_continuations": False}) is older
    assert plain.continuing({"max_steps": 2, "parallel_continuations": True}) is plain
    assert off.continuing({"max_steps": 2, "parallel_continuations": False}) is off
    with pytest.raises(SpecError, match=r"parallel_continuations false .* asks true"):
        written.continuing({"max_steps": 3})
    with pytest.raises(SpecError, match=r"parallel_continuations true .* asks false"):
        off.continuing({"max_steps": 3, "parallel_continuations": True})
    with pytest.raises(SpecError, match=r"parallel_continuations: 'yes' is not true or false"):
        plain.continuing({"parallel_continuations": "yes"})


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
        # NaN passed every bound ("should be less than or equal to 1" at best), infinity too
        ({"questions": [QUESTION], "review_below": float("nan")}, "review_below: Input should be a finite"),
        ({"questions": [QUESTION], "decoding": {"temperature": float("inf")}}, "temperature: Input should be a finite"),
    ],
)  # fmt: skip
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

    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    blocks = [b for b in re.findall(r"```yaml\n(.*?)```", readme, re.S) if "decoding:" in b]
    assert len(blocks) == 1
    spec = parse_spec(read_yaml(blocks[0]), "README.md")
    assert {"arbitration", "over_limit"} <= {q.id for q in spec.questions}
    # Read as its writer means it: `yes` and `no` are the enum's strings, not booleans.
    arbitration = next(q for q in spec.questions if q.id == "arbitration")
    assert arbitration.schema_ == {"enum": ["yes", "no", "not_mentioned"]}


def test_yaml_specs_are_read_as_yaml_1_2(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(
        "questions:\n"
        "  - {id: a, text: A?, schema: {enum: [yes, no, on, off]}}\n"
        "  - {id: b, text: B?, schema: {type: boolean}, absent: false}\n"
        "decoding: {grow_slots: true}\n"
    )
    spec = load_spec(path)
    assert spec.questions[0].schema_ == {"enum": ["yes", "no", "on", "off"]}
    assert spec.questions[1].absent is False
    path.write_text("questions:\n  - {id: a, text: A?, schema: {type: string}}\nquestions: []\n")
    with pytest.raises(
        SpecError,
        match=r"job.yaml: not valid YAML \(found duplicate key \"questions\" .*line 3, column 1\)",
    ):
        load_spec(path)


def test_a_relative_model_is_found_beside_the_spec(tmp_path: Path, monkeypatch) -> None:
    """`model: ../ck/m` in jobs/spec.yaml worked only from jobs/: from elsewhere it was "no such
    model directory". One found only from the working directory (read so before) still is. The
    same for `calibration:`."""
    (tmp_path / "ck" / "m").mkdir(parents=True)
    (tmp_path / "jobs").mkdir()
    spec = tmp_path / "jobs" / "spec.yaml"
    spec.write_text("model: ../ck/m\nquestions:\n  - {id: a, text: A?, schema: {type: boolean}}\n")
    monkeypatch.chdir(tmp_path)
    assert Path(load_spec("jobs/spec.yaml").model).resolve() == (tmp_path / "ck" / "m").resolve()
    (tmp_path / "here").mkdir()
    spec.write_text("model: here\nquestions:\n  - {id: a, text: A?, schema: {type: boolean}}\n")
    assert load_spec(spec).model == "here"  # not beside the spec: as given, from the cwd
    # `calibration:` too (it was read from the working directory only: "cannot read")
    (tmp_path / "jobs" / "cal.json").write_text("{}")
    spec.write_text(
        "calibration: cal.json\nquestions:\n  - {id: a, text: A?, schema: {type: boolean}}\n"
    )
    assert Path(load_spec(spec).calibration).resolve() == (tmp_path / "jobs" / "cal.json").resolve()
    assert load_spec(spec).fingerprint() == parse_spec(read_yaml(spec.read_text())).fingerprint()


def test_a_misspelt_key_says_which_it_may_be() -> None:
    """ "questoins: Extra inputs are not permitted" left the user to find the spelling."""
    with pytest.raises(
        SpecError, match=r"questoins: Extra inputs are not permitted; did you mean `questions`\?"
    ):
        parse_spec({"questoins": []}, "job.yaml")
    bad = {
        "questions": [{"id": "a", "text": "A?", "schema": {}, "extrct": True}],
        "decoding": {"treshold": 0.5},
        "windows": {"overlapp": 3},
        "zzz": 1,
    }
    with pytest.raises(SpecError) as info:
        parse_spec(bad, "job.yaml")
    message = str(info.value)
    assert "questions.0.extrct: Extra inputs are not permitted; did you mean `extract`?" in message
    assert "decoding.treshold: Extra inputs are not permitted; did you mean `threshold`?" in message
    assert "windows.overlapp: Extra inputs are not permitted; did you mean `overlap`?" in message
    assert "zzz: Extra inputs are not permitted;" not in message  # nothing close: no guess
