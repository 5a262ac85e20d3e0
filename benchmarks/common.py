"""What the decoding benchmarks share: the tiny models, the inputs, decide's engine, tables.

The benchmarks in this folder run as scripts (`python benchmarks/<name>.py`), so this module is
imported as `common` from the script's own folder. Inputs are held-out synthetic decision documents
(`decide.train.synthetic`, test split: templates and entities never seen in training) with their
gold answers; the tiny models are random checkpoints in the real on-disk formats
(`write_random_checkpoint`) with the GPT-2 tokenizer of the test data; the bundled model is used
where it is installed.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import random
import resource
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from decide.engine import load_model
from decide.engine.loader import LoadedModel
from decide.engine.random_checkpoint import write_random_checkpoint
from decide.jobs.decisions import DecisionEngine, Item
from decide.jobs.models import bundled_model_path
from decide.jobs.questions import CompiledQuestion, special_ids
from decide.jobs.spec import Decoding, Question, read_yaml
from decide.schemas import Vocabulary
from decide.train import synthetic

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
GPT2 = ROOT / "tests" / "data" / "gpt2" / "tokenizer.json"
# The tiny LLaMA-style model every random-weight comparison uses (about 13 M parameters of
# which 12.9 M are the 50,304 × 256 embedding and head).
TINY = {
    "hidden_size": 256,
    "num_layers": 4,
    "num_heads": 4,
    "num_kv_heads": 2,
    "intermediate_size": 704,
}
# The bundled model's shape (all-MiniLM-L6-v2: BERT, 6 layers, hidden 384, 12 heads).
BUNDLED_SHAPE = {"hidden_size": 384, "num_layers": 6, "num_heads": 12, "intermediate_size": 1536}
# Qwen2.5-0.5B's layers (hidden 896, 14 heads of 64, 2 KV heads, SwiGLU 4,864; 24 of them): the
# smallest realistic LLM shape, in the LLaMA-style family.
QWEN05_LAYER = {"hidden_size": 896, "num_heads": 14, "num_kv_heads": 2, "intermediate_size": 4864}
QWEN05_LAYERS = 24


@dataclass(frozen=True)
class Doc:
    text: str
    questions: list[dict[str, Any]]  # job-format questions (id, text, schema)
    gold: dict[str, Any]

    def as_tuple(self) -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
        """The `(text, questions, gold)` triple `decide.train.evaluate` takes."""
        return self.text, self.questions, self.gold


def set_threads(threads: int) -> None:
    """One thread count for torch's intra-op pool and for what the OpenMP runtime reads."""
    os.environ["OMP_NUM_THREADS"] = str(threads)
    torch.set_num_threads(threads)


def documents(
    count: int, seed: int = 1234, questions: int = 8, domain: str | None = None
) -> list[Doc]:
    """Held-out synthetic documents with `questions` of their domain's questions each (8 or 9
    for one block, the claims and loans domains have 9, tickets 8)."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        # Tickets have only 8 questions: with 9 asked, draw from the other two domains.
        pick = domain
        if pick is None and questions > len(synthetic.TICKET_QUESTIONS):
            pick = rng.choice(["claims", "loans"])
        _, text, qs, gold = synthetic.sample_document(
            rng, "test", domain=pick, min_q=questions, max_q=questions
        )
        out.append(Doc(text, qs, gold))
    return out


def tiny_checkpoint(where: Path, model_type: str, **overrides: Any) -> Path:
    """A random checkpoint of `TINY`'s shape (or `overrides`) with the GPT-2 tokenizer."""
    return write_random_checkpoint(where, model_type, tokenizer_json=GPT2, **{**TINY, **overrides})


def bundled() -> Path | None:
    return bundled_model_path()


def load_trained(path: str | None) -> LoadedModel:
    """The model at `path`, or the bundled one; exits saying how to build it when absent."""
    path = path or bundled_model_path()
    if path is None:
        raise SystemExit(
            "no bundled model installed: build it with `decide train --recipe bundled`"
        )
    return load_model(path)


def engine(loaded: LoadedModel, batch_size: int = 16, **decoding: Any) -> DecisionEngine:
    """`DecisionEngine` with `Decoding(**decoding)`; long documents are errors, as by default."""
    return DecisionEngine(loaded, Decoding(**decoding), batch_size=batch_size)


def decoding_settings(pairs: Sequence[str]) -> dict[str, Any]:
    """`KEY=VALUE` pairs as a job's `decoding:` YAML would write them, checked by `Decoding`."""
    settings: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"--decoding {pair!r}: expected KEY=VALUE, e.g. max_steps=2")
        settings[key] = read_yaml(value)
    Decoding(**settings)  # unknown keys and bad values stop here, with pydantic's message
    return settings


def set_decoding(engine: DecisionEngine, batch_size: int | None = None, **decoding: Any) -> None:
    """Swap the engine's sampler for one with other settings, keeping its compiled questions and
    their mask caches (so settings compared in one run all start warm)."""
    engine.set_decoding(Decoding(**decoding), batch_size)


def compile_questions(engine: DecisionEngine, questions: Sequence[dict]) -> list[CompiledQuestion]:
    return engine.questions([Question.model_validate(q) for q in questions])


def items(engine: DecisionEngine, docs: Sequence[Doc]) -> list[Item]:
    return [Item(i, d.text, compile_questions(engine, d.questions)) for i, d in enumerate(docs)]


def stop_ids(loaded: LoadedModel) -> set[int]:
    """Tokens that end free text: every special token but the mask (end of turn, pad, ...)."""
    return special_ids(loaded.config, loaded.tokenizer) - {loaded.config.mask_token_id}


def parse_free_text(engine: DecisionEngine, tokens: Sequence[int], stops: set[int]) -> Any:
    """The first JSON object in generated text (cut at the first stop token), or None.

    Lenient on purpose: anything before the first `{` and after the object is ignored, as a
    user post-processing free text would. Bytes come from the same `Vocabulary` that spells
    decide's values, so both are read the same way (WordPiece included)."""
    cut = []
    for t in tokens:
        if t in stops:
            break
        cut.append(int(t))
    try:
        data = engine.compiler.vocabulary.detokenize(cut)
    except KeyError:  # a token that can never stand inside text (unknown, mask, ...)
        return None
    text = data.decode("utf-8", errors="replace")
    start = text.find("{")
    if start < 0:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(text, start)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class Stopwatch:
    """Accumulates wall time per label: `with watch("forward"): ...` (nesting allowed)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}

    def add(self, label: str, seconds: float) -> None:
        self.seconds[label] = self.seconds.get(label, 0.0) + seconds
        self.calls[label] = self.calls.get(label, 0) + 1

    @contextlib.contextmanager
    def __call__(self, label: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.add(label, time.perf_counter() - started)

    def get(self, label: str) -> float:
        return self.seconds.get(label, 0.0)


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def table(header: Sequence[str], rows: Sequence[Sequence[Any]], align: str | None = None) -> str:
    """A markdown table; `align` one character per column, `l` or `r` (default: first column
    left, the rest right)."""
    align = align or "l" + "r" * (len(header) - 1)
    marks = [":---" if a == "l" else "---:" for a in align]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(marks) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def describe_machine(threads: int) -> str:
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores, torch {torch.__version__}, {threads} thread(s)"


def schemas_benchmark():
    """`benchmarks/schemas.py` as a module: its 151,936-token vocabulary (GPT-2 plus synthetic
    tokens, seeded) is the one every wide-vocabulary figure uses."""
    spec = importlib.util.spec_from_file_location("benchmark_schemas", HERE / "schemas.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


WIDE_VOCAB = 151_936  # Qwen2/Qwen3's embedding rows


def wide_config(model_type: str, size: int = WIDE_VOCAB) -> dict[str, int]:
    """`extra_config` giving a random checkpoint `size` embedding rows (logits that wide) while
    its tokenizer stays GPT-2's."""
    if model_type == "llada":
        return {"vocab_size": size, "embedding_size": size}
    return {"vocab_size": size}


def widen_vocabulary(eng: DecisionEngine, size: int = WIDE_VOCAB) -> None:
    """Compile `eng`'s questions against GPT-2 plus synthetic tokens up to `size` (the vocabulary
    of `benchmarks/schemas.py`), so slot values may use every one of a wide model's logits.
    Prompts stay GPT-2 tokens; ids the tokenizer gives its special tokens never stand in a value."""
    bench = schemas_benchmark()
    base, _ = bench.gpt2_surfaces()
    surfaces = bench.big_surfaces(base, size)
    config, tokenizer = eng.loaded.config, eng.loaded.tokenizer
    excluded = special_ids(config, tokenizer) | {eng.compiler.filler_id}
    excluded |= set(range(len(base) - 1, tokenizer.vocab_size))  # <|endoftext|> and the added
    eng.compiler.vocabulary = Vocabulary.from_bytes(surfaces, excluded=excluded)


def peak_rss(args: list[str], ok_codes: tuple[int, ...] = (0,)) -> tuple[float, float, str]:
    """(peak RSS in MB, seconds, stdout) of a child process run to its end, the peak read from
    `wait4`; exits with the end of the child's stderr when its exit code is not in `ok_codes`."""
    with tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err)
        assert process.stdout is not None
        stdout = process.stdout.read().decode()
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode not in ok_codes:
            err.seek(0)
            raise SystemExit(
                f"{' '.join(args[:4])} ... exited with {process.returncode}: "
                f"{err.read().decode()[-2000:]}"
            )
    return usage.ru_maxrss / 1024, seconds, stdout
