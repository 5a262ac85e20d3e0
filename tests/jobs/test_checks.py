"""CEL rules (`rules: [{rule, message}]`) checked after decoding: refused at spec load when
unusable, and a row whose answers violate one fails with its message and kind `rule_violated`."""

from __future__ import annotations

import json

import polars as pl
import pytest
from click.testing import CliRunner
from helpers.jobdata import write_docs

from decide.cli import main
from decide.jobs.runner import run_job
from decide.jobs.spec import SpecError, parse_spec

QUESTIONS = [
    {"id": "amount", "text": "Amount?", "schema": {"type": "integer", "minimum": 0, "maximum": 9}},
    {"id": "limit", "text": "Limit?", "schema": {"type": "integer", "minimum": 0, "maximum": 9}},
    {"id": "active", "text": "Active?", "schema": {"type": "boolean"}},
    {"id": "over", "text": "Over?", "derive": "amount > limit", "schema": {"type": "boolean"}},
]  # fmt: skip
RULES = [
    {"rule": "amount <= limit + 1", "message": "amount far over the limit"},
    {"rule": "active || !over", "message": "an inactive policy over its limit"},  # a derived id
]


def test_unusable_rules_are_refused_at_spec_load() -> None:
    for rule, expected in (("amount <= limt", "'limt', which is not a question id"),
                           ("amount + 1", "gives int, a rule must give a bool"),
                           ("amount <=", "cannot parse")):  # fmt: skip
        bad = [RULES[0], {"rule": rule, "message": "m"}]
        with pytest.raises(SpecError, match="/rules/1/rule") as info:
            parse_spec({"questions": QUESTIONS, "rules": bad})
        assert expected in str(info.value)
    assert parse_spec({"questions": QUESTIONS, "rules": RULES}).schema_rules is None


def test_rows_violating_a_rule_fail_with_its_message(tiny_checkpoint, tmp_path) -> None:
    model = tiny_checkpoint("bert", vocab="small", init_std=0.2)
    path = write_docs(tmp_path / "in.parquet", 24, seed=2)
    spec = parse_spec({"questions": QUESTIONS, "rules": RULES})
    run_job(spec, [path], tmp_path / "out", model=model, batch_size=8, progress=False)
    free = tmp_path / "free"
    run_job(parse_spec({"questions": QUESTIONS}), [path], free, model=model, batch_size=8,
            progress=False)  # fmt: skip
    checked = pl.read_parquet(tmp_path / "out" / "answers" / "*.parquet").sort("doc_id")
    unchecked = pl.read_parquet(free / "answers" / "*.parquet").sort("doc_id")
    failed = 0
    for row, plain in zip(checked.iter_rows(named=True), unchecked.iter_rows(named=True),
                          strict=True):  # fmt: skip
        a = json.loads(plain["answers_json"])  # the same answers, not checked
        first = 0 if a["amount"] > a["limit"] + 1 else 1 if a["over"] and not a["active"] else None
        if first is None:
            assert row["status"] == "ok" and row["answers_json"] == plain["answers_json"]
        else:
            failed += 1
            assert row["status"] == "error" and row["error_kind"] == "rule_violated"
            assert row["error"] == (f"rule /rules/{first} ({RULES[first]['rule']}) violated: "
                                    f"{RULES[first]['message']}")  # fmt: skip
    assert 0 < failed < checked.height  # the random model violates them sometimes, not always
    model_dir = str(model)
    (tmp_path / "spec.json").write_text(json.dumps({"questions": QUESTIONS, "rules": RULES}))
    out = CliRunner().invoke(main, ["validate", str(tmp_path / "spec.json"), "--model", model_dir])
    assert out.exit_code == 0, out.output
    assert "rule /rules/1: active || !over (CEL, checked after decoding" in out.output
