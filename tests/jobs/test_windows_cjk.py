"""Scripts written without spaces (`jobs.windows`): full-width terminators of Chinese and
Japanese, with closing quotes or brackets after them, end a sentence, so windows of a long
document are cut between sentences, not inside a word; ASCII punctuation still needs whitespace
after it. Their characters are terms of their own, so BM25 (`windows.top_k`) and the evidence
ranker's sentences find the window a question is about (a whole sentence was one "word")."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import decide
from decide.jobs.evidence_ranker import sentences, terms
from decide.jobs.windows import boundaries, rank, segment, token_starts

JAPANESE = (
    "本契約は賃貸人と賃借人の間で締結される。賃借人は毎月末日までに家賃を支払うものとする！"
    "建物の修繕は賃貸人の負担とするか？ペットの飼育は禁止する。「契約期間は二年間とする。」"
    "更新については別途協議する；解約の通知は書面で行う："
) * 12
CHINESE = (
    "本合同由出租人与承租人签订。承租人应于每月月底前支付租金！房屋维修由出租人负责吗？"
    "禁止饲养宠物。他说：“合同期限为两年。”续约事宜另行协商；『解除合同须书面通知。』"
) * 12
TERMINATORS = "。！？；："
CLOSERS = "」』”"


def chars(text: str) -> list[tuple[int, int]]:
    """A tokenizer's offsets: one token per non-space character (no space to cut CJK at)."""
    return [m.span() for m in re.finditer(r"\S", text)]


def ends_a_sentence(text: str, cut: int) -> bool:
    before = text[:cut].rstrip().rstrip(CLOSERS)
    return before[-1] in TERMINATORS


@pytest.mark.parametrize("text", [JAPANESE, CHINESE], ids=["japanese", "chinese"])
def test_cjk_windows_are_cut_after_sentence_terminators(text: str) -> None:
    starts = token_starts(chars, text)
    windows = segment(text, starts, budget=60, overlap=15)
    assert len(windows) > 5
    covered: set[int] = set()
    for w in windows:
        assert w.tokens <= 60
        assert w.start == 0 or ends_a_sentence(text, w.start), text[w.start - 5 : w.start + 5]
        assert w.end == len(text) or ends_a_sentence(text, w.end), text[w.end - 5 : w.end + 5]
        covered.update(range(*np.searchsorted(starts, [w.start, w.end]).tolist()))
    assert covered == set(range(len(starts)))


def test_full_width_terminators_and_closers_end_a_sentence() -> None:
    text = "彼は「行く。」と言った！本当？はい……そう。यह है।अब هنا؟نعم۔ok"
    cuts = boundaries(text)
    units = [text[a:b] for a, b in zip(cuts, [*cuts[1:], len(text)], strict=True)]
    assert units == ["彼は「行く。」", "と言った！", "本当？", "はい……", "そう。", "यह है।", "अब هنا؟", "نعم۔", "ok"]  # fmt: skip
    # an ASCII decimal or abbreviation inside Japanese text is no sentence end, 。 is
    assert boundaries("価格は3.5ドル、e.g.xも同じ。次") == [0, len("価格は3.5ドル、e.g.xも同じ。")]


def test_ascii_decimals_and_abbreviations_are_not_boundaries() -> None:
    text = "Version 3.5 costs $2.50, e.g.x or i.e.y apply.Next one. Done"
    cuts = boundaries(text)
    assert [text[c:] for c in cuts[1:]] == ["Done"]
    assert boundaries("1…10 items") == [0]  # an ellipsis between digits is no sentence end


def test_bm25_finds_the_window_a_cjk_question_is_about() -> None:
    """Every window's only term was each whole sentence: no query term matched, all scores tied
    and `top_k` kept the first windows whatever the question."""
    filler = ["本合同由出租人与承租人签订。", "续约事宜另行协商。", "房屋维修由出租人负责。"] * 3
    texts = [*filler, "车辆于三月五日在北京被撞，索赔金额为五千元。", *filler]
    assert rank(texts, "车辆在哪里被撞？", 1) == [9]
    assert rank(texts, "索赔金额是多少？", 1) == [9]
    japanese = (
        ["家賃は毎月末日までに支払う。"] * 4
        + ["ペットの飼育は禁止する。"]
        + ["更新は別途協議する。"] * 4
    )
    assert rank(japanese, "ペットは飼えますか？", 1) == [4]


def test_cjk_sentences_are_long_enough_to_rank_and_have_bigrams() -> None:
    text = "本合同由出租人与承租人签订。车辆在北京被撞。"
    assert sentences(text) == [(0, 14), (14, 22)]  # each sentence was one word, under 6
    assert {"北", "京", "北 京"} <= set(terms("车辆在北京被撞"))
    assert terms("The car was hit") == ["the", "car", "was", "hit", "the car", "car was", "was hit"]


def test_a_long_text_without_whitespace_is_tokenized_in_pieces_as_in_one_pass(tmp_path) -> None:
    """Pieces were cut at whitespace only, so a Chinese document was cut every 64k characters
    wherever that fell, splitting a token: now just before a full-width sentence end. Checked
    with the published Qwen2 tokenizer (Dream, SDAR) and the bundled WordPiece."""
    from helpers.real_checkpoints import write_published

    from decide.engine.loader import load_config

    write_published("dream-v0-instruct-7b", tmp_path / "dream")
    bundled = Path(decide.__file__).parent / "model"
    for model in (tmp_path / "dream", bundled):
        tokenizer = load_config(model)[2].tokenizer

        def offsets(text: str, tokenizer=tokenizer) -> list[tuple[int, int]]:
            return tokenizer.encode(text, add_special_tokens=False).offsets

        text = CHINESE * 20 + JAPANESE * 20
        assert " " not in text and "\n" not in text
        assert np.array_equal(token_starts(offsets, text, 997), token_starts(offsets, text, 10**9))


def test_bm25_finds_the_window_a_hindi_question_is_about() -> None:
    """Devanagari terms lost every vowel sign and virama ("राहुल" gave "र" "ह" "ल", each
    shorter than a term): nothing matched and `top_k` kept the first windows."""
    filler = ["किराया हर महीने की पहली तारीख को देना होगा।", "मरम्मत मकान मालिक करेगा।"] * 4
    texts = [*filler, "गाड़ी दिल्ली में टकराई और दावा पाँच हज़ार रुपये का है।", *filler]
    assert rank(texts, "गाड़ी कहाँ टकराई?", 1) == [8]
    assert "दिल्ली" in terms("गाड़ी दिल्ली में टकराई")
