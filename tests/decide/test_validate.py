"""`decide validate SPEC`: per question supported (slot length) or refused (pointer, keyword)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from decide.cli import main


def test_validate_reports_each_question(tiny_checkpoint, tmp_path) -> None:
    model = str(tiny_checkpoint("sdar"))
    good = {"questions": [
        {"id": "kind", "text": "Kind?", "schema": {"enum": ["auto", "home"]}},
        {"id": "n", "text": "N?", "schema": {"type": "integer", "minimum": 0, "maximum": 999}},
        {"id": "who", "text": "Who?", "schema": {"type": "string", "maxLength": 20}, "extract": True},
        {"id": "sum", "text": "Sum?", "schema": {"type": "integer", "minimum": 0}, "extract": True},
    ]}  # fmt: skip
    bad = {"questions": [
        *good["questions"],
        {"id": "host", "text": "Host?", "schema": {"type": "string", "format": "ipv6"}},
        {"id": "none", "text": "?", "schema": {"type": "integer", "minimum": 5, "maximum": 1}},
        {"id": "late", "text": "?", "schema": {"type": "boolean"}, "extract": True},
    ]}  # fmt: skip
    (tmp_path / "good.json").write_text(json.dumps(good))
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    ok = CliRunner().invoke(main, ["validate", str(tmp_path / "good.json"), "--model", model])
    assert ok.exit_code == 0, ok.output
    lines = {line.split()[0]: line for line in ok.output.splitlines() if line.strip()}
    assert "supported" in lines["kind"] and "2 values" in lines["kind"]
    assert "supported" in lines["n"]
    assert "supported" in lines["who"] and "extract: spans of each document" in lines["who"]
    assert "supported" in lines["sum"] and "extract: numbers of each document" in lines["sum"]
    assert "all 4 questions supported" in ok.output
    (tmp_path / "one.json").write_text(json.dumps({"questions": good["questions"][:1]}))
    one = CliRunner().invoke(main, ["validate", str(tmp_path / "one.json"), "--model", model])
    assert one.exit_code == 0 and "the question is supported" in one.output, one.output
    refused = CliRunner().invoke(main, ["validate", str(tmp_path / "bad.json"), "--model", model])
    assert refused.exit_code == 2
    lines = {line.split()[0]: line for line in refused.output.splitlines() if line.strip()}
    assert "refused" in lines["host"] and "/format format" in lines["host"]
    assert "refused" in lines["none"] and "no value satisfies" in lines["none"]
    assert "refused" in lines["late"]
    assert "/type extract: extract answers are strings or numbers" in lines["late"]
    assert "3 of 7 questions refused: host, none, late" in refused.output
    missing = CliRunner().invoke(main, ["validate", str(tmp_path / "nope.json"), "--model", model])
    assert missing.exit_code == 2 and "cannot read" in missing.output


def test_validate_refuses_rules_over_an_extract_question(tiny_checkpoint, tmp_path) -> None:
    town = {"id": "town", "text": "Town?", "extract": True, "schema": {"enum": ["Boston", "Rome"]}}
    ok = {"id": "ok", "text": "OK?", "schema": {"type": "boolean"}}
    rules = {"if": {"properties": {"town": {"const": "Boston"}}},
             "then": {"properties": {"ok": {"const": True}}}}  # fmt: skip
    (tmp_path / "spec.json").write_text(json.dumps({"questions": [town, ok], "rules": rules}))
    model = str(tiny_checkpoint("sdar"))
    result = CliRunner().invoke(main, ["validate", str(tmp_path / "spec.json"), "--model", model])
    assert result.exit_code == 2
    assert "rules refused: /if/properties/town: extract: rules cannot constrain" in result.output


def test_validate_says_how_long_documents_are_read(tiny_checkpoint, tmp_path) -> None:
    """17 questions on a 512-position model: no document fits with all of them, so each block
    is read in windows whose size validate states (smaller for a block with more questions);
    with `long_documents: error` or `truncate` it says that instead."""
    model = str(tiny_checkpoint("bert", vocab="small", init_std=0.2))
    questions = [{"id": f"h{i}", "text": f"Does clause {i} hold, in the contract's own words?",
                  "schema": {"enum": ["yes", "no", "nm"]}, "absent": "nm"} for i in range(17)]  # fmt: skip
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"questions": questions}))
    ok = CliRunner().invoke(main, ["validate", str(path), "--model", model])
    assert ok.exit_code == 0, ok.output
    assert "no document fits with all the questions at once" in ok.output
    blocks = [line for line in ok.output.splitlines() if line.startswith("longer documents, block")]
    assert [b.split("(")[1].split(")")[0] for b in blocks] == [
        "h0 .. h5",
        "h6 .. h11",
        "h12 .. h16",
    ]
    sizes = [int(b.split("windows of up to ")[1].split()[0]) for b in blocks]
    assert sizes[2] > sizes[0] > 32  # five questions leave more room than six
    # `windows.questions: 2`: nine blocks of at most two, each window larger
    path.write_text(json.dumps({"questions": questions, "windows": {"questions": 2}}))
    out = CliRunner().invoke(main, ["validate", str(path), "--model", model]).output
    pairs = [line for line in out.splitlines() if line.startswith("longer documents, block")]
    assert len(pairs) == 9 and "(h0 .. h1)" in pairs[0] and "(h16)" in pairs[8]
    assert int(pairs[0].split("windows of up to ")[1].split()[0]) > sizes[2]
    # one block: no block to name, no earlier answers to hold
    path.write_text(json.dumps({"questions": questions[:3]}))
    out = CliRunner().invoke(main, ["validate", str(path), "--model", model]).output
    assert "longer documents: windows of up to " in out and "block" not in out, out
    for policy, said in (("error", "are error rows"), ("truncate", "keep their head and tail")):
        path.write_text(json.dumps({"questions": questions[:3], "long_documents": policy}))
        out = CliRunner().invoke(main, ["validate", str(path), "--model", model]).output
        assert "tokens are read whole" in out and said in out and "block 1" not in out


def test_validate_says_which_questions_the_evidence_ranker_reads(tiny_checkpoint, tmp_path):
    """A model with a learnt evidence ranker: validate names the questions whose windows it
    chooses and the probability a window needs; `evidence_ranker: false` turns it off."""
    import shutil

    from helpers.evidence import PETS
    from helpers.evidence import rows as evidence_rows

    from decide.train.evidence_ranker import fit

    model = tmp_path / "model"
    shutil.copytree(tiny_checkpoint("bert", vocab="small", init_std=0.2), model)
    ranker = fit(evidence_rows(range(9)))
    ranker.save(model)
    late = {"id": "late", "text": "Was the report late?", "schema": {"type": "boolean"}}
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"questions": [PETS, late], "windows": {"top_k": 2}}))
    out = CliRunner().invoke(main, ["validate", str(path), "--model", str(model)]).output
    said = ("the 2 best of those whose evidence probability reaches 0.5 (the model's learnt "
            "evidence ranker) for pets")  # fmt: skip
    assert said in out, out
    path.write_text(json.dumps({"questions": [PETS, late],
                                "windows": {"top_k": 2, "evidence_ranker": False}}))  # fmt: skip
    out = CliRunner().invoke(main, ["validate", str(path), "--model", str(model)]).output
    assert "the 2 BM25 ranks first" in out and "evidence ranker" not in out, out


def test_validate_says_what_absent_below_may_withhold(tiny_checkpoint, tmp_path) -> None:
    spec = {
        "questions": [
            {"id": "city", "text": "City?", "schema": {"type": ["string", "null"]},
             "absent_below": 0.5},
            {"id": "kind", "text": "Kind?", "schema": {"enum": ["auto", "none"]}, "absent": "none"},
            {"id": "n", "text": "N?", "schema": {"type": "integer", "minimum": 0, "maximum": 9}},
        ],
        "decoding": {"absent_below": 0.9},
    }  # fmt: skip
    (tmp_path / "job.json").write_text(json.dumps(spec))
    model = str(tiny_checkpoint("bert", vocab="small"))
    result = CliRunner().invoke(main, ["validate", str(tmp_path / "job.json"), "--model", model])
    assert result.exit_code == 0, result.output
    assert "absent_below: city answers null when decoded less sure than 0.5\n" in result.output
    assert 'kind answers "none" when decoded less sure than 0.9 (the job\'s' in result.output
    assert "absent_below: n has no absent value" in result.output
