"""The learnt evidence ranker (`jobs.evidence_ranker`, fitted by `train.evidence_ranker`): its
features are scikit-learn's TF-IDF, it finds the sentence that answers a question in documents
it was not fitted on, it is saved as plain JSON and read back to the same scores, and the window
planner asks each question in the windows it ranks (none when no window is likely)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers.evidence import CLAUSES, PETS, document, rows
from helpers.jobdata import long_text

from decide.engine.loader import load_config
from decide.jobs.evidence_ranker import (
    FILE,
    EvidenceRanker,
    Featurizer,
    Scorer,
    sentences,
    terms,
)
from decide.jobs.pack import Packer
from decide.jobs.questionset import QuestionBook
from decide.jobs.spec import Windows, parse_questions
from decide.jobs.window_plan import WindowPlanner
from decide.jobs.windows import Window, segment, token_starts
from decide.train.evidence_ranker import fit, inside
from decide.train.windows import LongRow


@pytest.fixture(scope="module")
def ranker() -> EvidenceRanker:
    return fit(rows(range(12)), rows(range(12, 18)))


def test_features_are_scikit_learns_tfidf() -> None:
    from sklearn.feature_extraction.text import TfidfVectorizer

    units = [text[a:b] for row in rows(range(6)) for text in [row.text]
             for a, b in sentences(text)]  # fmt: skip
    reference = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=2)
    expected = reference.fit_transform(units).toarray()
    ours = Featurizer(reference.vocabulary_, reference.idf_).dense(units)
    np.testing.assert_allclose(ours, expected, atol=1e-12)
    assert set(terms("The tenant's dog")) == {"the", "tenant", "dog", "the tenant", "tenant dog"}


def test_the_answering_sentence_ranks_first_in_documents_it_was_not_fitted_on(ranker) -> None:
    assert ranker.knows("Are pets   allowed in the flat?")  # whitespace folded
    assert not ranker.knows("Are pets allowed?")
    assert 0.05 <= ranker.threshold <= 0.95 and ranker.about["validation_rows"] == 6
    clause = "A small cat or dog may be kept in the flat by the tenant."  # a new wording
    text, spans = document(40, clause)
    units = sentences(text)
    scores = ranker.probabilities([text[a:b] for a, b in units], PETS["text"])
    assert units[int(np.argmax(scores))] == (spans[0][0], spans[0][1] + 1)  # with its space
    assert scores.max() >= ranker.threshold
    plain, _ = document(41, None)
    assert ranker.probabilities([plain[a:b] for a, b in sentences(plain)], PETS["text"]).max() < (
        ranker.threshold
    )


def test_saved_as_json_and_read_back_to_the_same_scores(ranker, tmp_path) -> None:
    path = ranker.save(tmp_path)
    assert path.name == FILE and set(json.loads(path.read_text())) >= {"vocabulary", "questions"}
    again = EvidenceRanker.load(tmp_path)
    text, _ = document(50, CLAUSES[0])
    windows = [Window(0, 0, len(text) // 2, 0), Window(1, len(text) // 2, len(text), 0)]
    np.testing.assert_allclose(
        again.scores(text, windows, [PETS["text"]])[PETS["text"]],
        ranker.scores(text, windows, [PETS["text"]])[PETS["text"]],
        atol=1e-6,
    )  # fmt: skip
    assert again.threshold == ranker.threshold
    assert EvidenceRanker.load(tmp_path / "nowhere") is None
    (tmp_path / "again").mkdir()
    refit = fit(rows(range(12)), rows(range(12, 18))).save(tmp_path / "again")
    assert refit.read_bytes() == path.read_bytes()  # deterministic


def test_a_broken_file_is_refused_with_its_path(ranker, tmp_path) -> None:
    body = json.loads(ranker.save(tmp_path).read_text())
    body["questions"][PETS["text"]]["coef"].pop()
    (tmp_path / FILE).write_text(json.dumps(body))
    with pytest.raises(ValueError, match=r"evidence_ranker.json: question 'Are pets allowed"):
        EvidenceRanker.load(tmp_path)
    (tmp_path / FILE).write_text(json.dumps({**body, "format": 99}))
    with pytest.raises(ValueError, match="format 99"):
        EvidenceRanker.load(tmp_path)


def test_fitting_needs_evidence() -> None:
    bare = [LongRow("a", long_text(30), [PETS], {"pets": "not_mentioned"}, {})]
    with pytest.raises(ValueError, match="no row has evidence"):
        fit(bare)
    assert inside((10, 20), [(5, 15)]) and not inside((10, 20), [(5, 14)])


@pytest.fixture(scope="module")
def planner(tiny_checkpoint):
    model = tiny_checkpoint("bert", vocab="small")
    _, config, tokenizer = load_config(model)
    book = QuestionBook(config, tokenizer)
    packer = Packer.for_model(config, tokenizer, book.filler_id)
    late = {"id": "late", "text": "Was the report late?", "schema": {"type": "boolean"}}
    asked = book.build(parse_questions([PETS, late], "test")).asked
    return packer, asked


def windows_of(packer, text: str, budget: int = 60) -> list[Window]:
    offsets = packer.tokenizer.tokenizer.encode
    starts = token_starts(lambda t: offsets(t, add_special_tokens=False).offsets, text)
    return segment(text, starts, budget, 0)


def test_the_planner_asks_learnt_questions_where_the_ranker_finds_them(planner, ranker) -> None:
    packer, (pets, late) = planner
    text, spans = document(60, CLAUSES[1])
    windows = windows_of(packer, text)
    assert len(windows) > 4
    reads = WindowPlanner(packer, Windows(top_k=1), ranker).reads(text, windows, [pets, late])
    for_pets = [w for w, asked in reads.windows if pets in asked]
    assert len(for_pets) == 1 and for_pets[0].start <= spans[0][0] < for_pets[0].end
    assert len([w for w, asked in reads.windows if late in asked]) == 1  # BM25's top 1
    assert reads.unread == {}
    every = WindowPlanner(packer, Windows(), ranker).reads(text, windows, [late])
    assert [w for w, _ in every.windows] == windows  # no top_k: every window for the others
    plain, _ = document(61, None)
    none = WindowPlanner(packer, Windows(), ranker).reads(plain, windows_of(packer, plain), [pets])
    assert none.windows == [] and 0.0 <= none.unread["pets"] < ranker.threshold
    off = WindowPlanner(packer, Windows(evidence_ranker=False), ranker)
    assert len(off.reads(plain, windows_of(packer, plain), [pets]).windows) > 4
    floor = WindowPlanner(packer, Windows(min_evidence=0.0, top_k=2), ranker)
    assert len(floor.reads(plain, windows_of(packer, plain), [pets]).windows) == 2


def test_scoring_a_1_mb_document_stays_within_bounded_memory() -> None:
    """Sentences are featurized as sparse rows: a 1 MB document against a 20,000-term vocabulary
    (dense, its 24,000 sentences would take 3.8 GB) peaks at a small multiple of the text."""
    import tracemalloc

    vocabulary = {f"w{i}": i for i in range(20_000)}
    vocabulary.update({w: len(vocabulary) + k for k, w in enumerate(
        ["sentence", "says", "water", "damage", "roof", "policy", "late", "was", "noted"])})  # fmt: skip
    rng = np.random.default_rng(0)
    featurizer = Featurizer(vocabulary, np.ones(len(vocabulary)))
    scorer = Scorer(rng.normal(size=len(vocabulary)), 0.0)
    big = EvidenceRanker(featurizer, {"Q?": scorer, "R?": scorer}, 0.5, min_words=3)
    text = long_text(24_000)
    assert len(text) > 1_000_000
    windows = [Window(i, a, min(a + 4000, len(text)), 0) for i, a in
               enumerate(range(0, len(text), 4000))]  # fmt: skip
    tracemalloc.start()
    try:
        scores = big.scores(text, windows, ["Q?", "R?"])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert scores["Q?"].shape == (len(windows),) and np.all((scores["Q?"] > 0) & (scores["Q?"] < 1))
    assert peak < 40 * len(text), peak


def test_the_report_counts_answers_given_absent_unread(ranker, tiny_checkpoint, tmp_path) -> None:
    """A learnt question no window was likely to hold is given its absent value without being
    asked: the report said nothing of it (now `unread` per question, and a line on the page)."""
    import shutil

    import polars as pl

    from decide.jobs.runner import run_job
    from decide.jobs.spec import parse_spec
    from decide.report import write_report

    model = tmp_path / "model"
    shutil.copytree(tiny_checkpoint("bert", vocab="small"), model)
    ranker.save(model)
    texts = [document(60 + i, None if i < 2 else CLAUSES[0])[0] for i in range(3)]
    pl.DataFrame({"doc_id": ["a", "b", "c"], "document": texts}).write_parquet(tmp_path / "in.pq")
    late = {"id": "late", "text": "Was the report late?", "schema": {"type": "boolean"}}
    run_job(parse_spec({"questions": [PETS, late]}), [tmp_path / "in.pq"], tmp_path / "out",
            model=model, progress=False)  # fmt: skip
    answers = pl.read_parquet(tmp_path / "out" / "answers" / "*.parquet").sort("doc_id")
    assert (answers["windows"] > 1).all() and (answers["status"] == "ok").all()
    report = write_report(tmp_path / "out")
    counts = {q["id"]: q["unread"] for q in report["questions"]}
    assert counts == {"pets": 2, "late": 0}  # a and b: no pets clause for the ranker to find
    unread = answers.filter(pl.col("evidence").struct.field("pets").is_null())["doc_id"]
    assert unread.to_list() == ["a", "b"]
    assert "2 given absent unread" in (tmp_path / "out" / "report.html").read_text()
