"""CEL rules (`rules: [{rule, message}]`): refused at spec load when unusable; one over finite
asked questions is enforced while decoding (never violated); one reading a derived or wide
answer is checked after decoding: a violating row takes the most confident other options of the
finite answers the rule depends on that satisfy it, and when there are none it fails with the
rule's message and kind `rule_violated`."""

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
    {"id": "n", "text": "N?", "schema": {"type": "integer", "minimum": 0, "maximum": 20000}},
]  # fmt: skip
RULES = [
    {"rule": "amount <= limit + 1", "message": "amount far over the limit"},  # finite: enforced
    {"rule": "active || !over", "message": "an inactive policy over its limit"},  # a derived id
    {"rule": "n <= 10000", "message": "n too large"},  # a wide integer: no options to fall to
]
FALLIBLE = {"active", "amount", "limit", "over"}  # what re-choosing for rule 1 may change


def test_unusable_rules_are_refused_at_spec_load() -> None:
    # (an id no question of the spec has may be a per-row one: `run` refuses it when no row
    # asks it either, tests/jobs/test_row_rules.py)
    for rule, expected in (("amount + 1", "gives int, a rule must give a bool"),
                           ("amount <=", "cannot parse")):  # fmt: skip
        bad = [RULES[0], {"rule": rule, "message": "m"}]
        with pytest.raises(SpecError, match="/rules/1/rule") as info:
            parse_spec({"questions": QUESTIONS, "rules": bad})
        assert expected in str(info.value)
    assert parse_spec({"questions": QUESTIONS, "rules": RULES}).schema_rules is None


def _answers(out) -> pl.DataFrame:
    return pl.read_parquet(out / "answers" / "*.parquet").sort("doc_id")


def test_rules_are_enforced_or_checked_after_decoding(tiny_checkpoint, tmp_path) -> None:
    model = tiny_checkpoint("bert", vocab="small", init_std=0.2)
    path = write_docs(tmp_path / "in.parquet", 24, seed=2)
    for name, spec in (("free", {"questions": QUESTIONS}),
                       ("after", {"questions": QUESTIONS, "rules": RULES[1:]}),
                       ("both", {"questions": QUESTIONS, "rules": RULES})):  # fmt: skip
        run_job(parse_spec(spec), [path], tmp_path / name, model=model, batch_size=8,
                progress=False)  # fmt: skip
    free, after, both = (_answers(tmp_path / n) for n in ("free", "after", "both"))
    # Checked after decoding: the same answers where they hold; a row violating rule 1 alone
    # takes other options of its finite inputs; one violating rule 2 (no options) fails with it.
    rechosen = failed = 0
    for row, plain in zip(after.iter_rows(named=True), free.iter_rows(named=True), strict=True):
        a = json.loads(plain["answers_json"])
        breaks_1, breaks_2 = not (a["active"] or not a["over"]), a["n"] > 10000
        if not breaks_1 and not breaks_2:
            assert row["status"] == "ok" and row["answers_json"] == plain["answers_json"]
        elif breaks_2:
            failed += 1
            assert row["status"] == "error" and row["error_kind"] == "rule_violated"
            rule = RULES[1] if breaks_1 else RULES[2]
            assert row["error"] == (f"rule /rules/{0 if breaks_1 else 1} ({rule['rule']}) "
                                    f"violated: {rule['message']}")  # fmt: skip
        elif row["status"] == "ok":
            rechosen += 1
            b = json.loads(row["answers_json"])
            assert b["active"] or not b["over"], b
            assert {q for q in a if a[q] != b[q]} <= FALLIBLE, (a, b)
    assert 0 < failed < after.height and rechosen > 0  # the random model breaks both
    # Enforced while decoding: the free answers break rule 0 in some rows, the ruled ones never.
    broken = [json.loads(r) for r in free["answers_json"]]
    assert any(a["amount"] > a["limit"] + 1 for a in broken)
    for row in both.iter_rows(named=True):
        if row["status"] == "ok":
            a = json.loads(row["answers_json"])
            assert a["amount"] <= a["limit"] + 1, a
            assert a["active"] or not a["over"], a
        else:
            assert row["error"].startswith(("rule /rules/1 ", "rule /rules/2 ")), row["error"]
    assert both.filter(pl.col("status") == "ok").height > 0
    model_dir = str(model)
    (tmp_path / "spec.json").write_text(json.dumps({"questions": QUESTIONS, "rules": RULES}))
    out = CliRunner().invoke(main, ["validate", str(tmp_path / "spec.json"), "--model", model_dir])
    assert out.exit_code == 0, out.output
    assert "rule /rules/0: amount <= limit + 1 (CEL, enforced while decoding" in out.output
    assert ("rule /rules/1: active || !over (CEL, checked after decoding: it reads over "
            "(derived)") in out.output  # fmt: skip
