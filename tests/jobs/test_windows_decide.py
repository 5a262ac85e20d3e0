"""Long documents decided in windows on tiny random models (`jobs.longdocs`): windows batched
together equal windows decided one at a time, a fact only in the middle is found with its
evidence, 17 questions decide in three blocks each with its own questions, rules hold after
combining, a 1 MB document stays within bounded memory, and bad input fails clearly."""

from __future__ import annotations

import json
import tracemalloc

import jsonschema
import polars as pl
import pytest
from helpers.jobdata import long_text, read_answers

from decide.api import Decider
from decide.jobs.decisions import DecisionEngine, Item
from decide.jobs.failures import FailureKind
from decide.jobs.longdocs import _Doc
from decide.jobs.runner import run_job
from decide.jobs.spec import Question, SpecError, parse_spec
from decide.jobs.window_plan import WindowPlanner, linked_by_rules
from decide.jobs.windows import Candidate, Window
from decide.schemas.span import in_document

KIND = {
    "id": "kind",
    "text": "What kind of claim is it?",
    "schema": {"enum": ["auto", "home", "none"]},
    "absent": "none",
}
CODE = {
    "id": "code",
    "text": "Which clause code applies?",
    "extract": True,
    "schema": {"type": "string", "pattern": "^[Zz][Xx][0-9]{3}$"},
}


@pytest.fixture(scope="module")
def bert(tiny_checkpoint):
    return tiny_checkpoint("bert", vocab="small", init_std=0.2)


@pytest.fixture(scope="module")
def decider(bert):
    return Decider(bert, batch_size=8)


def test_a_fact_only_in_the_middle_is_found_with_its_evidence(decider) -> None:
    text = long_text(300)
    middle = len(text) // 2
    text = f"{text[:middle]} The clause code is ZX417 for this claim. {text[middle:]}"
    decision = decider.decide(text, [KIND, CODE])
    assert decision.ok and decision.windows > 3, decision.error
    assert decision.answers["code"].lower() == "zx417"
    code = decision.evidence["code"]
    assert text[code.span_start : code.span_end] == "ZX417"
    assert code.start <= code.span_start < code.span_end <= code.end
    assert code.start > 0 and code.end < len(text)  # a window in the middle, not the whole text
    kind = decision.evidence["kind"]
    assert kind.span_start is None and 0 <= kind.start < kind.end <= len(text)


@pytest.mark.parametrize("family", ["bert", "sdar"])
def test_windows_of_many_documents_equal_windows_decided_one_at_a_time(
    tiny_checkpoint, family
) -> None:
    model = tiny_checkpoint(family, vocab="small", init_std=0.2)
    # sdar's tiny model takes 4096 positions: longer documents, windows capped at 1000 tokens
    sentences = 150 if family == "bert" else 520
    windows = {"tokens": 1000}
    texts = {f"d{i}": long_text(sentences + 37 * i, seed=i) for i in range(3)}
    questions = [KIND, {"id": "late", "text": "Was it late?", "schema": {"type": "boolean"}}]
    together = Decider(model, batch_size=8, windows=windows).decide_many(texts, questions)
    alone = Decider(model, batch_size=1, windows=windows)
    for joint in together:
        single = alone.decide(texts[joint.doc_id], questions)
        assert joint.ok and single.ok and joint.windows > 1
        assert joint.answers == single.answers
        assert joint.evidence == single.evidence
        for qid, value in joint.confidence.items():
            assert value == pytest.approx(single.confidence[qid], rel=1e-4, abs=1e-6)


def test_seventeen_questions_decide_in_three_blocks_each_with_its_own_questions(
    decider, monkeypatch
) -> None:
    questions = [
        {"id": f"h{i}", "text": f"Does clause {i} hold?", "schema": {"enum": ["yes", "no", "nm"]},
         "absent": "nm"}
        for i in range(17)
    ]  # fmt: skip
    seen: list[tuple[list[str], list[str]]] = []
    original = WindowPlanner.prompt

    def spy(self, text, qs, earlier):
        if text:  # a window's prompt (the empty text measures the prompt without the document)
            seen.append(([q.id for q in qs], dict(earlier)))
        return original(self, text, qs, earlier)

    monkeypatch.setattr(WindowPlanner, "prompt", spy)
    decision = decider.decide(long_text(200), questions)
    assert decision.ok, decision.error
    assert list(decision.answers) == [q["id"] for q in questions]
    ids = [f"h{i}" for i in range(17)]
    blocks = {tuple(qs): earlier for qs, earlier in seen}
    assert list(blocks) == [tuple(ids[:6]), tuple(ids[6:12]), tuple(ids[12:])]
    assert blocks[tuple(ids[:6])] == {}
    for k, block in ((1, tuple(ids[6:12])), (2, tuple(ids[12:]))):
        earlier = blocks[block]
        # the answers kept for earlier blocks, never their questions nor this block's ids
        assert earlier and set(earlier) <= set(ids[: 6 * k])
        assert all(decision.answers[qid] == value for qid, value in earlier.items())
        # when some had to be left out for room, absent answers went first
        dropped = [qid for qid in ids[: 6 * k] if qid not in earlier]
        if any(v == "nm" for v in earlier.values()):
            assert all(decision.answers[qid] == "nm" for qid in dropped)
    text = (
        decider.engine.long.planner.prompt
    )  # the prompt of a later block holds the earlier answers
    prompt = decider.engine.packer.tokenizer.decode(
        text("one sentence.", decider._compile(questions[6:12]).asked, {"h0": "yes"})
    )
    assert "Answers so far" in prompt and '"h0":"yes"' in prompt.replace(" ", "")
    assert "[h6]" in prompt.replace(" ", "") and "[h0]" not in prompt.replace(" ", "")


def test_windows_questions_sets_the_blocks_and_leaves_each_window_more_text(bert, monkeypatch):
    questions = [
        {"id": f"h{i}", "text": f"Does clause {i} hold?", "schema": {"enum": ["yes", "no", "nm"]},
         "absent": "nm"}
        for i in range(5)
    ]  # fmt: skip
    seen: dict[int, list[tuple[str, ...]]] = {}
    original = WindowPlanner.plan

    def spy(self, text, starts, qs, *args, **kwargs):
        plan = original(self, text, starts, qs, *args, **kwargs)
        seen.setdefault(self.settings.questions, []).append(tuple(q.id for q in qs))
        sizes.setdefault(self.settings.questions, []).extend(w.tokens for w in plan.windows)
        return plan

    sizes: dict[int, list[int]] = {}
    monkeypatch.setattr(WindowPlanner, "plan", spy)
    text = long_text(200)
    whole = Decider(bert, batch_size=8).decide(text, questions)
    two = Decider(bert, batch_size=8, windows={"questions": 2}).decide(text, questions)
    assert whole.ok and two.ok and list(two.answers) == [q["id"] for q in questions]
    assert seen[8] == [("h0", "h1", "h2", "h3", "h4")]
    assert seen[2] == [("h0", "h1"), ("h2", "h3"), ("h4",)]
    assert max(sizes[2]) > max(sizes[8])  # fewer questions: more of the document per window
    with pytest.raises(SpecError, match=r"windows\.questions"):
        parse_spec({"questions": [KIND], "windows": {"questions": 9}})


RULES = {"if": {"properties": {"kind": {"const": "auto"}}},
         "then": {"properties": {"late": {"const": False}}}}  # fmt: skip
LATE = {"id": "late", "text": "Was it late?", "schema": {"type": "boolean"}}


def test_rules_are_enforced_on_the_combined_answers(bert) -> None:
    """The most confident window answers break a rule: the best choice that keeps it wins."""
    engine = DecisionEngine(
        Decider(bert).loaded, long_documents="windows", rules=RULES, batch_size=4
    )
    qset = engine.questions([Question.model_validate(q) for q in (KIND, LATE)])
    text = long_text(50)
    item = Item("r", text, qset)
    w = [Window(i, 100 * i, 100 * i + 90, 20) for i in range(3)]
    doc = _Doc(item, qset, None, [qset.asked])
    doc.candidates = {
        "kind": [Candidate("auto", 0.95, w[0]), Candidate("none", 0.99, w[1])],
        "late": [Candidate(True, 0.9, w[1]), Candidate(False, 0.6, w[2])],
    }
    doc.kept = {"kind": doc.candidates["kind"][0], "late": doc.candidates["late"][0]}
    decision = engine.long._finish(doc)
    assert decision.ok, decision.error
    # auto (0.95) beats the absent "none", but with late=true (0.9) it breaks the rule; of the
    # choices that keep it, kind=none (0.99) gives up less confidence than late=false (0.6)
    assert decision.answers == {"kind": "none", "late": True}
    assert decision.evidence["kind"].window == 1 and decision.evidence["late"].window == 1
    doc.candidates["kind"][1] = Candidate("none", 0.3, w[1])
    decision = engine.long._finish(doc)
    assert decision.answers == {"kind": "auto", "late": False}
    assert decision.evidence["late"].window == 2 and decision.evidence["kind"].window == 0
    # without a way to satisfy the rule, the row fails with the combined answers' reason
    doc.candidates = {"kind": doc.candidates["kind"][:1], "late": doc.candidates["late"][:1]}
    failed = engine.long._finish(doc)
    assert not failed.ok and failed.kind is FailureKind.answer_invalid


def test_rules_hold_on_every_windowed_decision(bert, tmp_path) -> None:
    docs = {f"d{i}": long_text(250 + 20 * i, seed=i) for i in range(3)}
    pl.DataFrame({"doc_id": list(docs), "document": list(docs.values())}).write_parquet(
        tmp_path / "in.parquet"
    )
    spec = parse_spec({"questions": [KIND, LATE], "rules": RULES})
    result = run_job(spec, [tmp_path / "in.parquet"], tmp_path / "out", model=bert,
                     progress=False)  # fmt: skip
    assert result.ok == 3
    frame = read_answers(tmp_path / "out")
    for row in frame.iter_rows(named=True):
        jsonschema.validate(json.loads(row["answers_json"]), RULES)
        assert (
            row["windows"] > 1 and row["evidence"]["kind"]["end"] > row["evidence"]["kind"]["start"]
        )


def test_rules_within_one_block_are_bound_in_every_window(bert) -> None:
    """A window's block that asks every question the rules test decodes under them, as a
    document read whole does (before, windows decoded freely and only the combined answers were
    checked, so rows whose windows all broke a rule failed with `rule_violated`); a block that
    lacks some of them binds its own under the rules, the others free; questions the rules
    link share a block where they fit one."""
    from decide.schemas.rules import RuledSlot

    rules = [{"rule": "late == (kind == 'home')", "message": "late exactly when home"}]
    engine = DecisionEngine(Decider(bert).loaded, long_documents="windows", rules=rules)
    text = long_text(60)
    window = Window(0, 0, 200, 40)

    def constraints(questions: list) -> dict[str, object]:
        qset = engine.questions([Question.model_validate(q) for q in questions])
        groups = engine.long.planner.groups(qset.asked, linked_by_rules(qset))
        doc = _Doc(Item("r", text, qset), qset, None, groups)
        out = {}
        for b, group in enumerate(groups):
            [(_, asked, (_, blocks, _))] = engine.long._window(doc, b, window, group, {})
            out.update({q.id: s.constraint for q, s in zip(asked, blocks[0].slots, strict=True)})
        return out

    bound = constraints([KIND, LATE])
    assert isinstance(bound["kind"], RuledSlot) and isinstance(bound["late"], RuledSlot)
    assert bound["kind"].state is bound["late"].state  # the answers see the rule jointly
    # nine questions, two blocks: in spec order `kind` would be in the first, `late` in the
    # second; the rule keeps them in one block, so they are still bound together
    others = [
        {"id": f"b{i}", "text": f"Fact {i}?", "schema": {"type": "boolean"}} for i in range(7)
    ]
    linked = constraints([KIND, *others, LATE])
    assert isinstance(linked["kind"], RuledSlot) and linked["kind"].state is linked["late"].state


def test_a_later_block_keeps_to_the_answers_kept_in_earlier_ones(bert) -> None:
    """Rules linking more questions than a block holds are bound block by block. A ruled
    question of an earlier block was left free in the later ones (any value the rules allow),
    so a later block could settle on answers that break the rule with the one already kept, and
    the row failed `rule_violated` where some other choice would have held. Now a later block
    holds the kept answers; answers kept earlier that already break a rule leave it free."""
    rules = [{"rule": "late == (kind == 'home')", "message": "late exactly when home"},
             {"rule": "paid == (kind == 'auto')", "message": "paid exactly when auto"}]  # fmt: skip
    engine = DecisionEngine(Decider(bert).loaded, long_documents="windows", rules=rules)
    paid = {"id": "paid", "text": "Was it paid?", "schema": {"type": "boolean"}}
    qset = engine.questions([Question.model_validate(q) for q in (KIND, paid, LATE)])
    by_id = {q.id: q for q in qset.asked}
    text = long_text(60)
    window = Window(0, 0, 200, 40)

    def allowed_late(kept: dict[str, object]) -> set[bool]:
        groups = [[by_id["kind"], by_id["paid"]], [by_id["late"]]]
        doc = _Doc(Item("r", text, qset), qset, None, groups)
        doc.kept = {qid: Candidate(value, 0.9, window) for qid, value in kept.items()}
        [(_, _, (_, blocks, _))] = engine.long._window(doc, 1, window, [by_id["late"]], {})
        constraint = blocks[0].slots[0].constraint
        slot = by_id["late"].slot
        return {slot.decode(list(t), qset.filler_id).value for t in constraint.options()}

    assert allowed_late({}) == {True, False}  # the first block: kind is still free
    assert allowed_late({"kind": "home", "paid": False}) == {True}
    assert allowed_late({"kind": "auto", "paid": True}) == {False}
    assert allowed_late({"kind": "home", "paid": True}) == {True, False}  # already broken


def test_rules_linking_more_questions_than_a_block_hold_on_every_row(bert) -> None:
    """Ten questions chained by equalities, more than a block holds. Windows answer each
    question independently, so the answers kept per question broke the chain (3 of these 8
    rows failed `rule_violated`: the 256 choices tried after combining never reached one of the
    two that hold); the kept answers are now the cheapest choice the rules allow, and a later block
    keeps to them."""
    questions = [{"id": f"q{i}", "text": f"Is fact {i} true?", "schema": {"type": "boolean"}}
                 for i in range(10)]  # fmt: skip
    rules = [{"rule": f"q{i} == q{i + 1}", "message": "a chain"} for i in range(9)]
    decider = Decider(bert, batch_size=8, rules=rules)
    decisions = decider.decide_many([long_text(60 + 10 * i, seed=i) for i in range(8)], questions)
    assert all(d.ok and d.windows > 1 for d in decisions), [d.error for d in decisions]
    assert all(len(set(d.answers.values())) == 1 for d in decisions)


def test_questions_the_rules_link_share_a_windows_block(bert) -> None:
    """Grouped in spec order, a rule over questions 1 and 9 of twelve spanned two blocks and was
    only checked on the combined answers (on a 14-question claims spec with three CEL rules,
    3 of 12 windowed rows failed `rule_violated`; now 0)."""
    rules = [{"rule": "q0 || q8", "message": "m"}, {"rule": "q2 || q3", "message": "m"}]
    engine = DecisionEngine(Decider(bert).loaded, long_documents="windows", rules=rules)
    questions = [{"id": f"q{i}", "text": f"Fact {i}?", "schema": {"type": "boolean"}}
                 for i in range(12)]  # fmt: skip
    qset = engine.questions([Question.model_validate(q) for q in questions])
    plain = [[q.id for q in g] for g in engine.long.planner.groups(qset.asked)]
    assert plain == [[f"q{i}" for i in range(6)], [f"q{i}" for i in range(6, 12)]]
    linked = engine.long.planner.groups(qset.asked, linked_by_rules(qset))
    groups = [[q.id for q in g] for g in linked]
    assert sorted(q for g in groups for q in g) == sorted(q["id"] for q in questions)
    assert all(len(g) <= 8 for g in groups) and len(groups) == 2
    assert any({"q0", "q8"} <= set(g) for g in groups)
    assert any({"q2", "q3"} <= set(g) for g in groups)
    assert all(g == sorted(g, key=lambda q: int(q[1:])) for g in groups)  # spec order kept


def test_top_k_decides_only_the_windows_bm25_ranks_highest(bert) -> None:
    text = long_text(300)
    middle = len(text) // 2
    text = f"{text[:middle]} The clause code is ZX417. {text[middle:]}"
    everything = Decider(bert, batch_size=8).decide(text, [KIND, CODE])
    few = Decider(bert, batch_size=8, windows={"top_k": 2}).decide(text, [KIND, CODE])
    assert few.ok and few.windows == everything.windows > 2
    assert few.nfe < everything.nfe
    assert few.answers["code"].lower() == "zx417"  # "clause code" ranks that window first


def test_a_1_mb_document_is_decided_in_bounded_memory(bert) -> None:
    text = long_text(24_000)  # about 1 MB
    assert len(text) > 1_000_000
    decider = Decider(bert, batch_size=8, windows={"top_k": 2})
    tracemalloc.start()
    try:
        decision = decider.decide(text, [KIND])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert decision.ok and decision.windows > 400
    assert peak < 40 * len(text)  # offsets, window texts for BM25: a small multiple of the text


def test_a_100_kb_sentence_is_split_and_decided(decider) -> None:
    text = "word " * 20_000 + "ZX417"  # no sentence boundary at all
    decision = decider.decide(text, [KIND, CODE])
    assert decision.ok and decision.windows > 10 and decision.answers["code"].lower() == "zx417"


def test_bad_absent_values_and_settings_are_refused() -> None:
    with pytest.raises(SpecError, match=r"questions\.0.*absent: 'maybe' is not a value"):
        parse_spec({"questions": [{**KIND, "absent": "maybe"}]})
    with pytest.raises(SpecError, match=r"windows\.top_k"):
        parse_spec({"questions": [KIND], "windows": {"top_k": 0}})
    assert parse_spec({"questions": [KIND]}).long_documents == "windows"


def test_long_documents_error_and_truncate_stay_available(bert) -> None:
    text = long_text(300)
    failed = Decider(bert, long_documents="error").decide_many([text], [KIND])[0]
    assert failed.kind is FailureKind.document_too_long
    cut = Decider(bert, long_documents="truncate").decide(text, [KIND])
    assert cut.truncated and cut.windows == 0 and cut.evidence is None


def test_no_window_fits_when_the_questions_fill_the_context(decider) -> None:
    wordy = [{"id": f"q{i}", "text": "Is it true that " + "very " * 60 + "late?",
              "schema": {"type": "boolean"}} for i in range(8)]  # fmt: skip
    # The API refuses them up front, as `decide run` does ...
    with pytest.raises(SpecError, match="no window of the document fits"):
        decider.decide_many([long_text(300)], wordy)
    # ... and per-row questions, which reach the engine, fail their row with the same reason.
    qset = decider.engine.questions([Question.model_validate(q) for q in wordy])
    [decision] = decider.engine.decide([Item("d", long_text(300), qset)])
    assert decision.kind is FailureKind.questions_do_not_fit
    assert "no window of the document fits" in decision.error


def test_output_parquet_has_windows_and_evidence(bert, tmp_path) -> None:
    text = long_text(300)
    middle = len(text) // 2
    docs = ["short claim about a roof", f"{text[:middle]} Code ZX417 applies. {text[middle:]}"]
    pl.DataFrame({"doc_id": ["s", "l"], "document": docs}).write_parquet(tmp_path / "in.parquet")
    spec = parse_spec({"questions": [KIND, CODE]})
    run_job(spec, [tmp_path / "in.parquet"], tmp_path / "out", model=bert, progress=False)
    rows = {r["doc_id"]: r for r in read_answers(tmp_path / "out").iter_rows(named=True)}
    assert rows["s"]["windows"] == 0 and rows["s"]["evidence"] is None  # no code: no span
    assert rows["l"]["status"] == "ok" and rows["l"]["windows"] > 1
    # Every window fills the `kind` slot with a value's token: counted as answer tokens, not
    # filler (they were all filler before, and the report's tokens per forward pass read 0).
    assert rows["l"]["value_tokens"] >= rows["l"]["windows"] and rows["l"]["filler_tokens"] >= 0
    code = rows["l"]["evidence"]["code"]
    assert docs[1][code["span_start"] : code["span_end"]] == "ZX417"
    assert in_document(rows["l"]["answers"]["code"], docs[1][code["start"] : code["end"]])


def test_a_document_read_whole_has_evidence_for_its_extract_answers(decider) -> None:
    """Short enough to read whole: the extract answer points at the span it was copied from
    (the first place it is written), the enum answer has no evidence."""
    text = "Roof claim. The clause code is ZX417, as ZX417 says. Home."
    decision = decider.decide(text, [KIND, CODE])
    assert decision.ok and decision.windows == 0 and decision.answers["code"] == "ZX417"
    code = decision.evidence["code"]
    assert code.window is None and (code.start, code.end) == (0, len(text))
    assert text[code.span_start : code.span_end] == "ZX417" and code.span_start == text.index("Z")
    assert set(decision.evidence) == {"code"}
    assert decider.decide("Roof claim, no code.", [KIND, CODE]).evidence is None


def test_a_low_confident_threshold_keeps_a_window_that_may_have_found_something(bert) -> None:
    """A window that answers a question's absent value still says how likely its best other
    option was; below 0.5 `windows.confident` thresholds that probability over all windows."""
    # One sentence repeated, so every window reads alike, and declared absent the option this
    # random model then answers (its weights depend on the test vocabulary, which is trained on
    # generator text: which option that is may change with the generator).
    text = " ".join("Water damage was noted." for _ in range(300))
    for absent in KIND["schema"]["enum"]:
        kind = {**KIND, "absent": absent}
        default = Decider(bert, batch_size=8).decide(text, [kind])
        if default.ok and default.answers["kind"] == absent:
            break
    else:
        pytest.fail("no option is answered on every window of the repeated sentence")
    low = Decider(bert, batch_size=8, windows={"confident": 1e-12}).decide(text, [kind])
    assert default.ok and low.ok and default.windows == low.windows > 2
    assert default.confidence["kind"] > 0.5
    assert low.answers["kind"] != absent  # some window's runner-up
    assert 1e-12 <= low.confidence["kind"] < 0.5
    assert low.evidence["kind"].window is not None
    half = Decider(bert, batch_size=8, windows={"confident": 0.5}).decide(text, [kind])
    assert half.answers == default.answers  # a runner-up never reaches 0.5


def test_a_learnt_evidence_ranker_sends_each_question_to_its_windows(bert, tmp_path) -> None:
    """With the model's `evidence_ranker.json`, a question it knows is asked only in the windows
    likely to hold its answer; in a document where none is, it gets its absent value without a
    window read, with no evidence and the ranker's confidence that nothing is there."""
    import shutil

    from helpers.evidence import CLAUSES, PETS
    from helpers.evidence import rows as ranker_rows

    from decide.train.evidence_ranker import fit

    model = tmp_path / "model"
    shutil.copytree(bert, model)
    ranker = fit(ranker_rows(range(12)), ranker_rows(range(12, 18)))
    ranker.save(model)
    text = long_text(300)
    middle = text.index(" Sentence", len(text) // 2) + 1
    text = f"{text[:middle]}{CLAUSES[0]} {text[middle:]}"
    learnt = Decider(model, batch_size=8).decide(text, [PETS, KIND])
    off = Decider(model, batch_size=8, windows={"evidence_ranker": False})
    every = off.decide(text, [PETS, KIND])
    assert learnt.ok and every.ok and learnt.windows == every.windows > 3
    pets = learnt.evidence["pets"]
    assert pets.start <= middle < pets.end
    alone = Decider(model, batch_size=8).decide(text, [PETS])
    assert alone.nfe < off.decide(text, [PETS]).nfe  # a window or two instead of all of them
    plain = long_text(300)
    nothing = Decider(model, batch_size=8).decide(plain, [PETS, KIND])
    assert nothing.ok and nothing.answers["pets"] == "not_mentioned"
    assert nothing.evidence["pets"] is None
    assert 1 - ranker.threshold < nothing.confidence["pets"] <= 1.0
