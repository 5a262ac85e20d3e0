"""`decide validate SPEC` refuses what `decide run` refuses, in the same words: questions that do
not fit the model whatever the document (and neither says that `--truncate` would help), a
`unit` on a question that is not numeric; `if`/`then`/`else` pass `--strict` without a warning."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from helpers.jobdata import write_docs

from decide.cli import main


@pytest.fixture(scope="module")
def model(tiny_checkpoint) -> str:
    return str(tiny_checkpoint("bert", vocab="small", init_std=0.2))  # 512 positions


def _error(output: str) -> str:
    return next(line for line in output.splitlines() if line.startswith("error: "))


# Sixteen questions whose answers alone (32-token slots) outgrow the model's 512 positions.
TOO_MANY = [
    {"id": f"q{i}", "text": f"Is statement number {i} about the claim true or false in the document?",
     "schema": {"type": "string", "maxLength": 30}}
    for i in range(1, 17)
]  # fmt: skip


@pytest.mark.parametrize("long_documents", ["windows", "error", "truncate"])
def test_validate_refuses_questions_that_fit_no_document_as_run_does(
    model, tmp_path, long_documents
) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"questions": TOO_MANY, "long_documents": long_documents}))
    checked = CliRunner().invoke(main, ["validate", str(spec), "--model", model])
    assert checked.exit_code == 2, checked.output
    docs = write_docs(tmp_path / "in.parquet", 2)
    args = ["run", str(docs), "-o", str(tmp_path / "out"), "--spec", str(spec), "--model", model]
    ran = CliRunner().invoke(main, args)
    assert ran.exit_code == 2, ran.output
    error = _error(ran.output)
    assert _error(checked.output) == error
    assert "the spec's 16 questions do not fit the model, whatever the document" in error
    assert "--truncate" not in error and "no truncation of the document can make it fit" in error
    if long_documents == "windows":
        assert "read in windows, the questions and answers of block 1 alone need" in error


def test_validate_refuses_a_unit_on_a_string_question_in_its_table(model, tmp_path) -> None:
    spec = tmp_path / "spec.json"
    question = {"id": "a", "text": "How long?", "extract": True, "unit": "days",
                "schema": {"type": "string"}}  # fmt: skip
    spec.write_text(json.dumps({"questions": [question]}))
    result = CliRunner().invoke(main, ["validate", str(spec), "--model", model])
    assert result.exit_code == 2, result.output
    (row,) = [line for line in result.output.splitlines() if line.startswith("a ")]
    assert row.split()[1] == "refused"
    assert "/type unit: days needs a schema of numbers or integers" in row
    assert "unit: unit" not in result.output
    assert _error(result.output) == "error: 1 of 1 questions refused: a"


def test_if_then_else_pass_strict_without_a_warning(model, tmp_path) -> None:
    spec = tmp_path / "spec.json"
    schema = {"type": "integer", "minimum": 0, "maximum": 9, "if": {"maximum": 3},
              "then": {"minimum": 1}, "else": {"minimum": 6}}  # fmt: skip
    spec.write_text(json.dumps({"questions": [{"id": "n", "text": "How many?", "schema": schema}]}))
    for extra in ([], ["--strict"]):
        result = CliRunner().invoke(main, ["validate", str(spec), "--model", model, *extra])
        assert result.exit_code == 0, result.output
        assert "warning" not in result.output and "unknown keyword" not in result.output
        assert "7 values" in result.output  # 1, 2, 3, 6, 7, 8, 9: then/else applied


def test_validate_says_when_windows_only_check_the_rules(model, tmp_path) -> None:
    """Questions the rules link share a window's block and are bound in every window; more of
    them than a block holds (`windows.questions`) are bound only block by block and checked on
    the combined answers, and validate said "enforced while decoding" without a word about it."""
    booleans = [{"id": f"b{i}", "text": f"Fact {i}?", "schema": {"type": "boolean"}}
                for i in range(9)]  # fmt: skip
    line = "rules and longer documents: the rules link b0, b1, b8, more questions than a window"
    for rule, said in (("b0 || b8", False), ("b0 || b1 || b8", True)):
        spec = tmp_path / "spec.json"
        spec.write_text(json.dumps({"questions": booleans, "windows": {"questions": 2},
                                    "rules": [{"rule": rule, "message": "m"}]}))  # fmt: skip
        result = CliRunner().invoke(main, ["validate", str(spec), "--model", model])
        assert result.exit_code == 0, result.output
        assert (line in result.output) is said, result.output


def test_validate_warns_of_a_rule_over_no_question_of_the_spec(model, tmp_path) -> None:
    """It may be a per-row question's id (run refuses it when no row asks it): a warning, and
    the rule is not said to be enforced over questions the spec does not have."""
    questions = [{"id": "police", "text": "Police?", "schema": {"type": "boolean"}}]
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"questions": questions,
                                "rules": [{"rule": "!b0 || police", "message": "m"}]}))  # fmt: skip
    result = CliRunner().invoke(main, ["validate", str(spec), "--model", model])
    assert result.exit_code == 0, result.output
    assert "warning: rule /rules/0: !b0 || police reads 'b0', no question of this spec" in (
        result.output
    )
    assert "enforced while decoding" not in result.output
