"""Rules over per-row questions (docs/jobs.md, "Cross-question rules"): a rule reading a question a
row does not ask does not apply to that row, CEL as JSON Schema; a row whose own questions the
rules cannot be used with fails naming its file, row and column; a typo in a spec whose
questions are all its own, or an id no row asks, is refused before any work."""

from __future__ import annotations

import json

import polars as pl
import pytest
from helpers.jobdata import read_answers, write_docs

from decide.engine import load_config
from decide.jobs.checks import rule_ids
from decide.jobs.derive import DeriveError
from decide.jobs.questionset import QuestionBook
from decide.jobs.runner import run_job
from decide.jobs.spec import SpecError, parse_questions, parse_spec


def _q(qid: str, schema: dict, extract: bool | None = None, derive: str | None = None) -> dict:
    return {"id": qid, "text": f"{qid}?", "schema": json.dumps(schema), "extract": extract,
            "derive": derive}  # fmt: skip


BOOL = {"type": "boolean"}
POLICE, B0 = _q("police", BOOL), _q("b0", BOOL)
KIND = _q("kind", {"enum": ["auto", "home"]})
TOWN_B0 = _q("b0", {"enum": ["Boston", "Denver"]}, extract=True)  # both forms refuse it
DERIVED_B0 = _q("b0", BOOL, derive="police")  # JSON Schema rules refuse it, CEL ones check it
ROWS = [[POLICE, KIND], [POLICE, B0], [B0, POLICE, KIND], [POLICE, B0], [KIND, POLICE],
        [POLICE, TOWN_B0], [POLICE, DERIVED_B0]]  # fmt: skip
CEL = [{"rule": "!b0 || police", "message": "b0 needs police"}]
ROW = pl.Struct({"id": pl.String, "text": pl.String, "schema": pl.String, "extract": pl.Boolean,
                 "derive": pl.String})  # fmt: skip
JSON_SCHEMA = {"allOf": [{"if": {"properties": {"b0": {"const": True}}, "required": ["b0"]},
                          "then": {"properties": {"police": {"const": True}}}}]}  # fmt: skip


@pytest.fixture(scope="module")
def decided(tiny_checkpoint, tmp_path_factory) -> dict[str, pl.DataFrame]:
    model = tiny_checkpoint("bert", vocab="small", init_std=0.2)
    tmp = tmp_path_factory.mktemp("row_rules")
    questions = pl.Series(ROWS, dtype=pl.List(ROW))  # typed: no `derive` inferred away as null
    path = write_docs(tmp / "rows.parquet", len(ROWS), seed=4, questions=questions)
    out = {}
    for name, rules in (("cel", CEL), ("json", JSON_SCHEMA)):
        run_job(parse_spec({"rules": rules}), [path], tmp / name, model=model, batch_size=8,
                progress=False)  # fmt: skip
        out[name] = read_answers(tmp / name)
    return out


def test_a_rule_over_a_question_a_row_does_not_ask_does_not_apply_to_it(decided) -> None:
    for name, frame in decided.items():
        rows = frame.rows(named=True)
        for k in (0, 1, 2, 3, 4) if name == "json" else (0, 1, 2, 3, 4, 6):  # others: below
            assert rows[k]["status"] == "ok", (name, k, rows[k]["error"])
            answers = json.loads(rows[k]["answers_json"])
            assert list(answers) == [q["id"] for q in ROWS[k]]
            if "b0" in answers:
                assert not answers["b0"] or answers["police"], (name, k, answers)


def test_a_rows_question_set_plans_the_rules_over_its_own_questions(tiny_checkpoint) -> None:
    _, config, tokenizer = load_config(tiny_checkpoint("bert", vocab="small", init_std=0.2))
    rules = [(r["rule"], r["message"]) for r in CEL] + [("kind == 'auto' || police", "k")]
    book = QuestionBook(config, tokenizer, checks=rules)
    planned = {}
    for k in (0, 1, 2, 4):
        qset = book.build(parse_questions(ROWS[k], f"row {k}"))
        planned[k] = [(c.index, c.inputs) for c in qset.checks.checks]
        finite = {q.id: len(q.slot.values) for q in qset.asked}
        assert len(qset.checks.enforcement(finite)[0]) == len(planned[k])  # enforced, all
    assert planned == {0: [(1, ("kind", "police"))], 1: [(0, ("b0", "police"))],
                       2: [(0, ("b0", "police")), (1, ("kind", "police"))],
                       4: [(1, ("kind", "police"))]}  # fmt: skip


def test_a_row_whose_questions_the_rules_refuse_names_its_row_and_column(decided) -> None:
    cel = decided["cel"].row(5, named=True)
    assert cel["status"] == "error" and cel["error_kind"] == "invalid_questions"
    assert cel["error"] == ("invalid questions: rows.parquet row 5, column 'questions': "
                            "/rules/0/rule: '!b0 || police': type error: no overload of ! for "
                            "string")  # fmt: skip
    for k, why in ((5, "/allOf/0/if/required/0: extract: rules cannot constrain an extract question"),
                   (6, "/allOf/0/if/required/0: rules: 'b0' is a derived question")):  # fmt: skip
        ruled = decided["json"].row(k, named=True)
        assert ruled["status"] == "error" and ruled["error_kind"] == "schema_refused"
        assert ruled["error"].startswith(f"rules: {why}")
        assert ruled["error"].endswith(f" (rows.parquet row {k}, column 'questions')")


def test_a_rule_id_no_row_asks_is_refused_before_any_work(tiny_checkpoint, tmp_path) -> None:
    """A typo, in a spec of its own questions or over per-row ones: a rule over an id a row does
    not ask does not apply to it, so `run` refuses an id no question of the job has (it applied
    to nothing) before writing anything; the spec alone cannot know the rows' ids."""
    questions = [{"id": "police", "text": "Police?", "schema": BOOL},
                 {"id": "b0", "text": "B0?", "schema": BOOL}]  # fmt: skip
    typo = [{"rule": "!b0 || polcie", "message": "m"}]
    bert = tiny_checkpoint("bert", vocab="small", init_std=0.2)
    docs = write_docs(tmp_path / "in.parquet", 3)
    with pytest.raises(SpecError, match=r"rules: /rules/0/rule: 'polcie' is not the id of any "):
        run_job(parse_spec({"questions": questions, "rules": typo}), [docs], tmp_path / "out",
                model=bert, progress=False)  # fmt: skip
    assert not (tmp_path / "out" / "answers").exists()
    rows = pl.read_parquet(docs).with_columns(
        pl.Series("questions", [[POLICE, B0]] * 3, dtype=pl.List(ROW))
    )
    rows.write_parquet(tmp_path / "rows.parquet")
    with pytest.raises(SpecError, match="'polcie' is not the id of any question of this job "
                       r"\(b0, police\); did you mean 'police'\?"):  # fmt: skip
        run_job(parse_spec({"questions": [], "rules": typo}), [tmp_path / "rows.parquet"],
                tmp_path / "out2", model=bert, progress=False)  # fmt: skip
    # the rows' own id is known: a rule over a per-row question in a spec with its own questions
    spec = parse_spec({"questions": questions[:1], "rules": [{"rule": "!b0 || police",
                                                              "message": "m"}]})  # fmt: skip
    result = run_job(spec, [tmp_path / "rows.parquet"], tmp_path / "out3", model=bert,
                     progress=False)  # fmt: skip
    assert result.ok + result.failed == 3


def test_rule_ids_name_every_id_a_rule_reads_with_its_pointer() -> None:
    rules = [("!b0 || police", "m"), ("size(name) > 2 && police", "n")]
    assert rule_ids(rules) == {"b0": "/rules/0/rule", "police": "/rules/0/rule",
                               "name": "/rules/1/rule"}  # fmt: skip
    with pytest.raises(DeriveError, match=r"/rules/1/rule: cannot parse 'b0 \|\|'"):
        rule_ids([("b0", "m"), ("b0 ||", "m")])
