"""Training on long documents (`decide.train.windows`): every drawn row is a prompt inference
builds for a window of that document (same windows, same earlier answers), a window teaches the
label only where it holds the evidence, and the ContractNLI splits are what they claim."""

from __future__ import annotations

import json
import random

import polars as pl
import pytest
from click.testing import CliRunner
from helpers.evidence import CLAUSES
from helpers.evidence import rows as evidence_rows
from helpers.jobdata import long_text

from decide.api import Decider
from decide.cli import main
from decide.engine.loader import load_config
from decide.jobs.evidence_ranker import EvidenceRanker
from decide.jobs.spec import Windows
from decide.jobs.window_plan import WindowPlanner, with_earlier
from decide.jobs.windows import Window
from decide.train import contractnli
from decide.train.data import read_rows
from decide.train.evidence_ranker import fit as fit_ranker
from decide.train.examples import ExampleBuilder
from decide.train.windows import LongRow, WindowRows, holds

QUESTIONS = [
    {"id": f"h{i}", "text": f"Does clause {i} hold?", "absent": "nm",
     "schema": {"enum": ["yes", "no", "nm"]}}
    for i in range(10)
] + [{"id": "code", "text": "Which code applies?", "extract": True,
      "schema": {"type": "string", "pattern": "^[Zz][Xx][0-9]{3}$"}}]  # fmt: skip


@pytest.fixture(scope="module")
def bert(tiny_checkpoint):
    return tiny_checkpoint("bert", vocab="small", init_std=0.2)


def prompts_read(monkeypatch) -> set[tuple[str, tuple[str, ...]]]:
    """Every window prompt inference builds from now on: (window text with the earlier answers,
    the ids of its questions)."""
    seen: set[tuple[str, tuple[str, ...]]] = set()
    original = WindowPlanner.prompt

    def spy(self, window_text, questions, earlier):
        if window_text:
            seen.add((with_earlier(window_text, earlier), tuple(q.id for q in questions)))
        return original(self, window_text, questions, earlier)

    monkeypatch.setattr(WindowPlanner, "prompt", spy)
    return seen


@pytest.mark.parametrize(
    ("per_block", "firsts"), [(8, {"h0", "h6"}), (3, {"h0", "h3", "h6", "h9"})]
)
def test_drawn_rows_are_the_prompts_inference_reads(bert, monkeypatch, per_block, firsts) -> None:
    """Decide a long document in windows, recording every window prompt; with the decided
    answers as gold, every row training draws is one of those prompts (also with fewer
    questions per block, `windows.questions`)."""
    text = long_text(160)
    middle = len(text) // 2
    text = f"{text[:middle]} The code is ZX417. {text[middle:]}"
    seen = prompts_read(monkeypatch)
    settings = Windows(questions=per_block)
    decision = Decider(bert, batch_size=8, windows=settings.model_dump()).decide(text, QUESTIONS)
    assert decision.ok and decision.windows > 2, decision.error
    _, config, tokenizer = load_config(bert)
    row = LongRow("d", text, QUESTIONS, decision.answers)
    rows = WindowRows(config, tokenizer, [row], settings=settings)
    builder = ExampleBuilder(config, tokenizer)
    rng = random.Random(0)
    drawn = set()
    for _ in range(60):
        window_text, questions, gold, given, weights, masking = rows.draw(rng)
        assert (
            given == () and weights == {} and masking is None
        )  # found_weight 1: no question weighs more
        ids = tuple(q["id"] for q in questions)
        assert (window_text, ids) in seen
        assert set(gold) == set(ids) and all(gold[q] == decision.answers[q] for q in ids)
        assert builder.build(window_text, questions, gold, rng) is not None
        drawn.add(ids)
    # every block is drawn; the code question only with the window that holds ZX417
    assert {ids[0] for ids in drawn} == firsts
    assert any("code" in ids for ids in drawn) and any("code" not in ids for ids in drawn)


def test_with_top_k_rows_are_drawn_from_the_windows_inference_decides(bert, monkeypatch) -> None:
    """`windows.top_k`: inference decides only the k windows BM25 ranks highest for a block's
    questions, and training draws its rows from those same windows, not from all of them."""
    text = long_text(160)
    seen = prompts_read(monkeypatch)
    questions = QUESTIONS[:10]
    settings = Windows(questions=5, top_k=2)
    decision = Decider(bert, batch_size=8, windows=settings.model_dump()).decide(text, questions)
    assert decision.ok and decision.windows > 2, decision.error
    _, config, tokenizer = load_config(bert)
    row = LongRow("d", text, questions, decision.answers)
    rng = random.Random(0)
    per_block: dict[tuple[str, ...], set[str]] = {}
    rows = WindowRows(config, tokenizer, [row], settings=settings)
    for _ in range(60):
        window_text, asked, *_ = rows.draw(rng)
        ids = tuple(q["id"] for q in asked)
        assert (window_text, ids) in seen
        per_block.setdefault(ids, set()).add(window_text)
    assert len(per_block) == 2 and all(len(texts) == 2 for texts in per_block.values())
    # without top_k the same draws reach the block's other windows
    every = WindowRows(config, tokenizer, [row], settings=Windows(questions=5))
    reached = {every.draw(rng)[0] for _ in range(60)}
    assert len(reached) > 4


def test_a_window_teaches_the_label_only_where_it_holds_the_evidence(bert) -> None:
    text = long_text(200)
    span = (3000, 3040)
    gold = {q["id"]: "yes" for q in QUESTIONS[:10]}
    gold["code"] = "ZX417"
    row = LongRow("d", text, QUESTIONS, gold, {"h0": [span], "h1": []})
    _, config, tokenizer = load_config(bert)
    rows = WindowRows(config, tokenizer, [row])
    asked = rows._groups(row)[0]
    inside, outside = Window(0, 2900, 3100, 40), Window(1, 0, 500, 100)
    assert rows.window_gold(row, inside, asked)["h0"] == "yes"
    assert rows.window_gold(row, outside, asked)["h0"] == "nm"
    # no evidence listed: never in any window; not listed at all: the document's answer
    assert rows.window_gold(row, inside, asked)["h1"] == "nm"
    assert rows.window_gold(row, outside, asked)["h2"] == "yes"
    extract = [q for group in rows._groups(row) for q in group if q.id == "code"]
    assert "code" not in rows.window_gold(row, inside, extract)  # ZX417 is not in this text
    # at least half of a span inside counts; a sliver does not
    assert holds(Window(0, 3020, 3200, 9), [span]) and not holds(Window(0, 3030, 3200, 9), [span])


def test_contractnli_parts_are_disjoint_and_evidence_lies_in_the_text() -> None:
    split = contractnli.load_split("train50")
    train = contractnli.documents(split, "train")
    validation = contractnli.documents(split, "validation")
    assert len(train) + len(validation) == 50 and 5 <= len(validation) <= 15
    assert not {d.doc_id for d in train} & {d.doc_id for d in validation}
    assert [d.doc_id for d in validation] == [
        d.doc_id for d in contractnli.documents(split) if contractnli.is_validation(d.doc_id)
    ]
    for row in train + validation:
        assert len(row.questions) == 17 and set(row.gold) == {q["id"] for q in row.questions}
        for qid, spans in row.evidence.items():
            assert all(0 <= a < b <= len(row.text) for a, b in spans)
            assert bool(spans) == (row.gold[qid] != "not_mentioned")
    dev = contractnli.documents(contractnli.load_split("dev"))
    assert len(dev) == 61 and not {d.doc_id for d in dev} & {d.doc_id for d in train}


def test_decide_train_reads_long_documents_in_windows_with_evidence(bert, tmp_path) -> None:
    """`decide train` on a parquet with long documents and an evidence column trains on
    windows (a window with the evidence teaches the label, others the absent value), and a
    malformed evidence cell is refused naming its row and question."""
    text = long_text(200)
    span = [text.index("Sentence 120"), text.index("Sentence 121")]
    spec = tmp_path / "spec.yaml"
    spec.write_text(json.dumps({"questions": QUESTIONS[:3]}))
    gold = json.dumps({"h0": "yes", "h1": "nm", "h2": "no"})
    frame = pl.DataFrame({"doc_id": ["a", "b"], "document": [text, "A short one."],
                          "gold": [gold, gold],
                          "evidence": [json.dumps({"h0": [span], "h1": []}), None]})  # fmt: skip
    frame.write_parquet(tmp_path / "long.parquet")
    _, config, tokenizer = load_config(bert)
    rows = read_rows(tmp_path / "long.parquet", "gold", QUESTIONS[:3], "evidence")
    assert rows[0].evidence == {"h0": [tuple(span)], "h1": []} and rows[1].evidence == {}
    windows = WindowRows(config, tokenizer, rows, evidence_share=1.0, found_weight=3.0)
    assert not windows.fits(0) and windows.fits(1)
    seen = {}
    rng = random.Random(4)
    for _ in range(30):
        window_text, _, window_gold, _, weights, _ = windows.draw(rng)
        if window_text == "A short one.":
            assert window_gold == json.loads(gold) and weights == {}
            continue
        holds_it = "Sentence 120 says" in window_text
        seen[holds_it] = True
        assert window_gold["h0"] == ("yes" if holds_it else "nm") and window_gold["h1"] == "nm"
        assert window_gold["h2"] == "no" and weights == ({"h0": 3.0, "h2": 3.0} if holds_it
                                                         else {"h2": 3.0})  # fmt: skip
    assert seen.get(True)
    # With a learnt evidence ranker, a question it knows is asked only in the windows it
    # ranks as holding its answer (top_k 1: the one with the clause), as inference asks it.
    pets = evidence_rows(range(9))
    ranked = WindowRows(config, tokenizer, pets, 0.0, Windows(top_k=1), ranker=fit_ranker(pets))
    for _ in range(20):
        window_text, _, window_gold, *_ = ranked.draw(rng)
        assert window_gold["pets"] == "yes" and any(c in window_text for c in CLAUSES)
    args = ["train", str(tmp_path / "long.parquet"), "--init", str(bert), "--spec", str(spec),
            "--evidence-column", "evidence", "--steps", "2", "--batch-size", "2",
            "--no-progress", "--option-masking"]  # fmt: skip
    result = CliRunner().invoke(main, [*args, "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "out" / "train_config.json").read_text())["option_masking"]
    learnt = EvidenceRanker.load(tmp_path / "out")
    assert learnt is not None and learnt.knows(QUESTIONS[0]["text"])
    plain = CliRunner().invoke(main, [*args, "--no-evidence-ranker", "-o", str(tmp_path / "no")])
    assert plain.exit_code == 0 and EvidenceRanker.load(tmp_path / "no") is None
    frame.with_columns(pl.Series("evidence", ['{"h0": [[1]]}', None])).write_parquet(
        tmp_path / "long.parquet"
    )
    bad = CliRunner().invoke(main, [*args, "-o", str(tmp_path / "bad")])
    assert bad.exit_code == 2 and "row 0: evidence/h0" in bad.output


CUT_QUESTIONS = [
    {"id": "tenant", "text": "Who is the tenant?", "extract": True,
     "schema": {"type": ["string", "null"]}},
    {"id": "rent", "text": "What is the monthly rent?", "extract": True,
     "schema": {"type": ["integer", "null"]}},
    {"id": "pets", "text": "Are pets allowed?", "absent": "nm",
     "schema": {"enum": ["yes", "no", "nm"]}},
    {"id": "smoker", "text": "Does the tenant smoke?", "schema": {"type": "boolean"}},
]  # fmt: skip
CUT_TEXT = ("Lease for the flat on Elm Street. The tenant is Ingrid Solberg. The monthly rent is "
            "1450 dollars. Pets are allowed with a deposit. She does not smoke.")  # fmt: skip


def test_a_cut_document_no_longer_states_the_answer_it_teaches_absent(bert, tmp_path) -> None:
    """With `cut_share`, a document read whole is also drawn with one question's evidence
    sentences cut out: that answer becomes the absent value, questions with evidence keep their
    gold only where their evidence is left, extract questions only where their value is still
    written, and the others are not asked."""

    def span(words: str) -> list[tuple[int, int]]:
        return [(CUT_TEXT.index(words), CUT_TEXT.index(words) + len(words))]

    gold = {"tenant": "Ingrid Solberg", "rent": 1450, "pets": "yes", "smoker": False}
    evidence = {"tenant": span("Ingrid Solberg"), "rent": span("1450"),
                "pets": span("Pets are allowed")}  # fmt: skip
    row = LongRow("d", CUT_TEXT, CUT_QUESTIONS, gold, evidence)
    _, config, tokenizer = load_config(bert)
    rows = WindowRows(config, tokenizer, [row], cut_share=1.0)
    seen = {}
    rng = random.Random(0)
    for _ in range(40):
        text, questions, taught, *_ = rows.draw(rng)
        assert [q["id"] for q in questions] == list(taught) and "smoker" not in taught
        cut = next(qid for qid in ("tenant", "rent", "pets") if taught[qid] in (None, "nm"))
        seen[cut] = text
        assert text.startswith("Lease for the flat on Elm Street.") and len(text) < len(CUT_TEXT)
        assert ("Solberg" in text) == (taught["tenant"] == "Ingrid Solberg")
        assert ("1450" in text) == (taught["rent"] == 1450)
        assert ("Pets are allowed" in text) == (taught["pets"] == "yes")
    assert set(seen) == {"tenant", "rent", "pets"}
    # A value written outside its evidence is not cut (it would still be stated).
    twice = LongRow("e", CUT_TEXT + " Signed: Ingrid Solberg.", CUT_QUESTIONS, gold,
                    {"tenant": span("Ingrid Solberg")})  # fmt: skip
    assert WindowRows(config, tokenizer, [twice]).cut_row(twice, random.Random(0)) is None
    # Without cut_share the same draws give the whole document, as before.
    plain = WindowRows(config, tokenizer, [row]).draw(random.Random(0))
    assert plain[0] == CUT_TEXT and plain[2] == gold
    # `decide train --cut-share` needs the evidence that says what to cut.
    frame = pl.DataFrame({"doc_id": ["a"], "document": [CUT_TEXT], "gold": [json.dumps(gold)]})
    frame.write_parquet(tmp_path / "lease.parquet")
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"questions": CUT_QUESTIONS}))
    args = ["train", str(tmp_path / "lease.parquet"), "--init", str(bert), "--spec", str(spec),
            "--steps", "1", "--batch-size", "2", "--no-progress", "--cut-share", "0.5"]  # fmt: skip
    refused = CliRunner().invoke(main, [*args, "-o", str(tmp_path / "out")])
    assert refused.exit_code == 2 and "--cut-share needs --evidence-column" in refused.output
    frame.with_columns(pl.lit(json.dumps(evidence)).alias("evidence")).write_parquet(
        tmp_path / "lease.parquet"
    )
    trained = CliRunner().invoke(
        main, [*args, "--evidence-column", "evidence", "-o", str(tmp_path / "out")]
    )
    assert trained.exit_code == 0, trained.output
