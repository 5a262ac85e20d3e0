"""`decide train` on a user's data that is not all usable: a spec with derived questions, gold
rows that cannot be taught, evidence offsets that name no question or no span of the document.
Each is a run that trains on what it can or a usage error (exit 2) that says why, with nothing
written; never a traceback or a run that spins forever."""

from __future__ import annotations

import json
import random

import polars as pl
import pytest
from click.testing import CliRunner

from decide.cli import main
from decide.engine.loader import load_config
from decide.jobs.spec import SpecError
from decide.train import loop
from decide.train.bundled import PACKAGE_MODEL
from decide.train.examples import ExampleBuilder, UnusableRows
from decide.train.loop import TrainConfig, draw_batch, train

QUESTIONS = [
    {"id": "claim_type", "text": "What kind of claim is this?",
     "schema": {"enum": ["auto", "home", "health", "travel"]}},
    {"id": "policy_active", "text": "Is the policy active?", "schema": {"type": "boolean"}},
]  # fmt: skip
DERIVED = {"id": "eligible", "text": "Is the claim eligible?", "derive": "policy_active",
           "schema": {"type": "boolean"}}  # fmt: skip
KINDS = ["auto", "home", "health", "travel"]


@pytest.fixture(scope="module")
def base(tiny_checkpoint):
    return tiny_checkpoint("bert", vocab="small", init_std=0.1)


def _documents(n: int) -> list[str]:
    return [f"My {KINDS[i % 4]} claim, number {i}. The policy is "
            f"{'active' if i % 2 else 'lapsed'}." for i in range(n)]  # fmt: skip


def _gold(n: int, **change) -> list[str]:
    rows = []
    for i in range(n):
        gold = {"claim_type": KINDS[i % 4], "policy_active": bool(i % 2)}
        for key, value in change.items():
            if value is None:
                gold.pop(key, None)
            else:
                gold[key] = value(i) if callable(value) else value
        rows.append(json.dumps(gold))
    return rows


def _write(tmp_path, questions, gold, evidence=None, name="data"):
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(json.dumps({"questions": questions}))
    columns = {"doc_id": [f"d{i}" for i in range(len(gold))], "document": _documents(len(gold)),
               "gold": gold}  # fmt: skip
    if evidence is not None:
        columns["evidence"] = evidence
    pl.DataFrame(columns).write_parquet(tmp_path / f"{name}.parquet")
    return tmp_path / f"{name}.parquet", spec


def _train(base, data, spec, out, *extra):
    return CliRunner().invoke(main, [
        "train", str(data), "--init", str(base), "-o", str(out), "--spec", str(spec),
        "--steps", "2", "--batch-size", "2", "--no-progress", *extra])  # fmt: skip


def test_a_spec_with_derived_questions_trains_on_the_asked_ones(base, tmp_path) -> None:
    """A `derive:` question (examples/claims.yaml has two) is computed, never asked: it has no
    slot, no example teaches it, and its gold, given or not, is neither needed nor checked.
    Before, `decide train` crashed on its missing slot (AttributeError)."""
    _, config, tokenizer = load_config(base)
    builder = ExampleBuilder(config, tokenizer)
    gold = {"claim_type": "home", "policy_active": True}
    for given in ({}, {"eligible": True}, {"eligible": "not a boolean"}):
        example = builder.build(_documents(2)[1], [*QUESTIONS, DERIVED], gold | given,
                                random.Random(0))  # fmt: skip
        assert example is not None and set(example.question) == {0, 1}
        assert builder.problem([*QUESTIONS, DERIVED], gold | given) is None
    assert not builder.stats.skipped
    # Gold for the derived question on half the rows only, as a user's gold often is.
    data, spec = _write(tmp_path, [*QUESTIONS, DERIVED],
                        _gold(6, eligible=lambda i: bool(i % 2) if i < 3 else None))  # fmt: skip
    result = _train(base, data, spec, tmp_path / "out")
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "out" / "train_summary.json").read_text())
    assert summary["rows_skipped"] == {} and summary["rows_unusable"] == {}


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"claim_type": "boat"}, "gold value invalid for claim_type: 6 rows"),
        ({"policy_active": None}, "gold answer missing for policy_active: 6 rows"),
    ],
)
def test_no_usable_row_is_a_usage_error_before_anything_is_written(
    base, tmp_path, change, reason
) -> None:
    """Every gold value refused by its schema, or every row missing a question's gold: exit 2
    saying no row is usable and why, counted by reason, and no output directory (before, the
    run drew rows forever at 100 % CPU, a model-looking directory already written)."""
    data, spec = _write(tmp_path, QUESTIONS, _gold(6, **change))
    result = _train(base, data, spec, tmp_path / "out")
    assert result.exit_code == 2, result.output
    assert "no training row is usable" in result.output and reason in result.output
    assert "doc_id d0" in result.output
    assert not (tmp_path / "out").exists()


def test_an_unusable_row_is_skipped_with_its_true_reason(base, tmp_path) -> None:
    """One row whose gold its schema refuses: trained without it, one line at the start counting
    the skipped rows by reason, and the summary naming the reason (before: silent, and counted
    as "unspellable gold"). A value the schema accepts but the tokenizer cannot spell is told
    apart from one the schema refuses."""
    data, spec = _write(tmp_path, QUESTIONS,
                        _gold(6, claim_type=lambda i: "boat" if i == 0 else KINDS[i % 4]))  # fmt: skip
    result = _train(base, data, spec, tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert ("skipping 1 of 6 rows that cannot be taught: gold value invalid for claim_type: 1 row"
            in result.output)  # fmt: skip
    summary = json.loads((tmp_path / "out" / "train_summary.json").read_text())
    assert summary["rows_unusable"] == {"gold value invalid for claim_type": 1}
    assert set(summary["rows_skipped"]) <= {"gold value invalid for claim_type"}

    _, config, tokenizer = load_config(PACKAGE_MODEL)  # uncased WordPiece: no snowman
    builder = ExampleBuilder(config, tokenizer)
    product = [{"id": "product", "text": "Which product?",
                "schema": {"type": "string", "maxLength": 20}}]  # fmt: skip
    for value, reason in (("☃ snow", "unspellable gold for product"),
                          (5, "gold value invalid for product"),
                          ("a name far over twenty letters", "gold value invalid for product")):  # fmt: skip
        assert builder.problem(product, {"product": value})[0] == reason
        assert builder.build("A snow globe.", product, {"product": value}, random.Random(0)) is None
        assert builder.stats.skipped.pop(reason) == 1


def test_a_run_gives_up_on_draws_none_of_which_can_be_taught(base, tmp_path, monkeypatch) -> None:
    """Rows that pass no check before the run (as windows may make them) still end: after
    `SKIP_LIMIT` skipped draws in a row, `UnusableRows` with the reasons, and no model
    written."""
    monkeypatch.setattr(loop, "SKIP_LIMIT", 20)
    _, config, tokenizer = load_config(base)
    builder = ExampleBuilder(config, tokenizer)
    gold = {"claim_type": "boat", "policy_active": True}

    def rows(rng: random.Random):
        return "A boat claim.", QUESTIONS, gold

    run = TrainConfig(steps=2, batch_size=2, warmup=1, bf16=False)
    with pytest.raises(UnusableRows, match="gold value invalid for claim_type: 20 draws"):
        draw_batch(builder, rows, run, 0)
    with pytest.raises(SpecError, match="no training row is usable"):
        train(base, rows, tmp_path / "out", run, progress=False)
    assert not (tmp_path / "out").exists()


def test_evidence_naming_no_question_or_no_span_is_a_usage_error(base, tmp_path) -> None:
    """`--evidence-column` keys that are no question id (a typo): exit 2 naming them and the
    questions (before: a ValueError traceback, an empty output directory). Offsets past the
    document's end, negative or reversed: exit 2 naming the row (before: accepted)."""
    n = 4
    cases = [
        ([json.dumps({"claimtype": [[0, 5]]})] * n, ["'claimtype'", "4 rows",
                                                     "claim_type, policy_active"]),
        ([json.dumps({"claim_type": [[0, 5]]}), json.dumps({"claim_type": [[3, 1000]]}),
          None, None], ["row 1 (doc_id d1)", "evidence/claim_type", "past the end"]),
        ([None, None, json.dumps({"policy_active": [[9, 4]]}), None],
         ["row 2 (doc_id d2)", "evidence/policy_active", "[9, 4]"]),
        ([json.dumps({"claim_type": [[-1, 4]]}), None, None, None], ["row 0", "[-1, 4]"]),
    ]  # fmt: skip
    for k, (evidence, expected) in enumerate(cases):
        data, spec = _write(tmp_path, QUESTIONS, _gold(n), evidence, name=f"ev{k}")
        out = tmp_path / f"out{k}"
        result = _train(base, data, spec, out, "--evidence-column", "evidence")
        assert result.exit_code == 2, result.output
        assert all(text in result.output for text in expected), result.output
        assert not out.exists()
    # Spans that lie in the document (an empty one included) train.
    good = [json.dumps({"claim_type": [[0, 7]], "policy_active": []}), None, None,
            json.dumps({"claim_type": [[3, 3]]})]  # fmt: skip
    data, spec = _write(tmp_path, QUESTIONS, _gold(n), good, name="good")
    result = _train(base, data, spec, tmp_path / "good", "--evidence-column", "evidence",
                    "--no-evidence-ranker")  # fmt: skip
    assert result.exit_code == 0, result.output
