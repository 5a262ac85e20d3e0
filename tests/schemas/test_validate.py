"""`check_questions` / `render_table`: the data behind `decide validate SPEC`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tokenizers import Tokenizer

from decide.schemas import Vocabulary, check_questions, render_table

GPT2 = Path(__file__).parents[1] / "data" / "gpt2" / "tokenizer.json"


def test_importing_schemas_loads_neither_torch_nor_the_engine() -> None:
    """Only the engine's torch-free slot-constraint protocol (and the lazy package around it)."""
    protocol = ("decide.engine", "decide.engine.constraints")
    code = (
        "import sys, decide.schemas as s; s.compile_language({'type': 'integer'}); "
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('decide.engine')"
        f" and m not in {protocol!r}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_reports_supported_and_refused_questions() -> None:
    vocab = Vocabulary.from_tokenizer(Tokenizer.from_file(str(GPT2)), excluded=[50256])
    questions = [
        ("ok_enum", {"enum": ["yes", "no"]}),
        ("bad_format", {"type": "string", "format": "ipv6"}),
        ("long_text", {"type": "string"}),
        ("typo", {"type": "object", "properties": {"x": {"minimun": 3}}}),
    ]
    reports = check_questions(questions, vocab, max_tokens=12)
    by_id = {r.question_id: r for r in reports}
    assert by_id["ok_enum"].supported and by_id["ok_enum"].values == 2
    assert by_id["ok_enum"].slot_length == 5  # '"yes"' spelled one byte per token
    assert (by_id["bad_format"].pointer, by_id["bad_format"].keyword) == ("/format", "format")
    assert by_id["long_text"].slot_length == 12 and by_id["long_text"].truncated
    # Every value of a finite schema fits: nothing is cut, though longer spellings of its
    # values are (JSON whitespace; the table said "longer values cut" and lost none).
    wordpiece = Tokenizer.from_file(str(Path(__file__).parents[2] / "decide/model/tokenizer.json"))
    methods = ["card", "bank_transfer", "cheque", "cash", "direct_debit"]
    obj = {"type": "object", "additionalProperties": False, "required": ["method", "autopay"],
           "properties": {"method": {"enum": methods}, "autopay": {"type": "boolean"}}}  # fmt: skip
    (finite,) = check_questions([("obj", obj)], Vocabulary.from_tokenizer(wordpiece))
    assert finite.values == 10 and not finite.truncated and "cut" not in render_table([finite])
    assert by_id["typo"].pointer == "/properties/x/minimun"
    table = render_table(reports)
    assert table.splitlines()[0].split() == ["question", "status", "slot", "detail"]
    assert "refused" in table and "/properties/x/minimun minimun" in table
    assert check_questions([("q", {"type": "integer"})])[0].slot_length is None
