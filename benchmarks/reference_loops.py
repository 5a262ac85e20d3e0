"""Benchmark: decide against the published diffusion decoding loops, same models, same prompts.

Two reference loops, written here from the papers' algorithms (no code taken from their repos):

- **LLaDA** (Nie et al., 2025, low-confidence remasking): the answer region of `gen_length` masked
  tokens follows the prompt; it is decoded in semi-autoregressive sub-blocks of `block_length`
  tokens, each in the same number of steps; every step is a forward over prompt + whole answer
  region (no cache, bidirectional), a greedy prediction at every masked position of the current
  sub-block, and the k most confident of them are committed (k from the linear schedule: the
  sub-block's masks spread evenly over its steps). Unconstrained: the whole JSON object is free text.
- **SDAR** (block diffusion, JetAstra 2025): prompt blocks are prefilled into a KV cache; each
  following block of `block_size` tokens (the first one also holds the prompt's tail) is denoised
  over the cache: a forward of the block, greedy predictions, every masked position at or above
  the confidence threshold committed, or at least the schedule's share of the block (the most
  confident ones); a block without masks is stored into the cache by one more forward. A row stops
  after the block in which it produced an end token. Unconstrained free text as well.

Both run batched, rows right-padded (the engine's window lengths), greedy, on the very model and
prompt tokens `decide` uses (the packer's chat-template prompt, which asks for one JSON object);
`gen_length` is decide's answer block length for the longest document, rounded up to whole
sub-blocks, so the free text has room for every answer. The reference loops compute logits only at
positions still masked in the current (sub-)block: the rest cannot change, so this is their fastest
faithful form. Free text is cut at the first end token and the first JSON object in it is parsed
(leniently: text around it is ignored) and validated with the same `jsonschema` validator decide
uses (the questions' schemas, every id required, no other keys).

Forward passes per document count the forwards a document took part in (batched forwards count
once for each of their rows). Timings include tokenizing, decoding the text and validation.

    python benchmarks/reference_loops.py                     # bundled model (if installed), tiny llada, tiny sdar
    python benchmarks/reference_loops.py --docs 4 --models llada sdar
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import common
import torch

from decide.engine import load_model
from decide.engine.loader import LoadedModel
from decide.engine.model import WindowedModel
from decide.jobs.decisions import DecisionEngine, Item
from decide.jobs.pack import DocumentTooLong

NEG_INF = float("-inf")


@dataclass
class Outcome:
    docs: int = 0
    seconds: float = 0.0
    forwards: list[int] = field(default_factory=list)
    parsed: int = 0
    valid: int = 0

    @property
    def rate(self) -> float:
        return self.docs / self.seconds if self.seconds else float("nan")


def transfer_schedule(masks: int, steps: int) -> list[int]:
    """How many positions each step commits: `masks` spread evenly, the remainder first (the
    linear noise schedule of LLaDA, reused by SDAR)."""
    base, extra = divmod(masks, steps)
    return [base + (i < extra) for i in range(steps)]


def _greedy(model: WindowedModel, states: torch.Tensor, banned: list[int], vocab: int):
    """Greedy token and its softmax probability for hidden states `[..., H]`."""
    logits = model.logits(states).float()  # [..., V']
    logits[..., vocab:] = NEG_INF  # embedding rows beyond the tokenizer
    logits[..., banned] = NEG_INF  # the mask token is never a prediction
    best, token = logits.max(-1)
    return token, torch.exp(best - torch.logsumexp(logits, -1))


def llada_generate(
    model: WindowedModel,
    prompts: list[list[int]],
    *,
    gen_length: int,
    steps: int,
    block_length: int,
    mask_id: int,
    vocab: int,
) -> tuple[list[list[int]], int]:
    """LLaDA's semi-autoregressive low-confidence remasking, batched; (answers, forwards)."""
    if gen_length % block_length or steps % (gen_length // block_length):
        raise ValueError("gen_length must be whole sub-blocks, steps a multiple of their number")
    b = len(prompts)
    starts = torch.tensor([len(p) for p in prompts])  # [B]
    lens = starts + gen_length
    x = torch.full((b, int(lens.max())), mask_id, dtype=torch.long)
    for i, p in enumerate(prompts):
        x[i, : len(p)] = torch.tensor(p)
    rows = torch.arange(b)[:, None]
    blocks = gen_length // block_length
    forwards = 0
    for block in range(blocks):
        cols = starts[:, None] + block * block_length + torch.arange(block_length)  # [B, BL]
        for k in transfer_schedule(block_length, steps // blocks):
            hidden = model(x, window_lens=lens)  # [B, L, H]
            forwards += 1
            masked = x[rows, cols] == mask_id  # [B, BL], the same count in every row
            n = int(masked[0].sum())
            if k == 0 or n == 0:
                continue
            pos = cols[masked].view(b, n)  # [B, n]
            token, conf = _greedy(model, hidden[rows, pos], [mask_id], vocab)  # [B, n]
            pick = conf.topk(min(k, n), dim=1).indices  # [B, k]
            x[rows, pos.gather(1, pick)] = token.gather(1, pick)
    answers = [x[i, int(starts[i]) : int(lens[i])].tolist() for i in range(b)]
    return answers, forwards


def sdar_generate(
    model: WindowedModel,
    prompts: list[list[int]],
    *,
    gen_length: int,
    steps: int,
    threshold: float,
    mask_id: int,
    vocab: int,
    stops: set[int],
) -> tuple[list[list[int]], list[int]]:
    """SDAR's block-diffusion generate with KV cache and dynamic threshold, batched;
    (answers, forwards per row)."""
    bs = model.config.block_size
    assert bs is not None
    b = len(prompts)
    if min(len(p) for p in prompts) < bs:
        raise ValueError(f"every prompt must hold at least one {bs}-token block")
    totals = [-(-(len(p) + gen_length) // bs) * bs for p in prompts]
    seqs = [list(p) + [mask_id] * (t - len(p)) for p, t in zip(prompts, totals, strict=True)]
    whole = [len(p) // bs * bs for p in prompts]  # prompt tokens in whole blocks: prefilled
    cache = model.new_cache(b, max(totals))
    ids = torch.full((b, max(whole)), mask_id, dtype=torch.long)
    for i, n in enumerate(whole):
        ids[i, :n] = torch.tensor(seqs[i][:n])
    lens = torch.tensor(whole)
    model(ids, cache, window_lens=lens, commit=lens)
    forwards = [1] * b
    cursor = list(whole)  # start of each row's current block
    active = list(range(b))
    schedule = transfer_schedule(bs, steps)
    while active:
        cur = torch.tensor([seqs[i][cursor[i] : cursor[i] + bs] for i in active])  # [A, bs]
        for k in schedule:
            masked = cur == mask_id
            if not masked.any():
                break
            hidden = model(cur, cache)  # [A, bs, H], nothing committed
            for i in active:
                forwards[i] += 1
            token, conf = _greedy(model, hidden, [mask_id], vocab)  # [A, bs]
            conf = conf.masked_fill(~masked, NEG_INF)
            for r in range(len(active)):
                sure = conf[r] >= threshold
                if int(sure.sum()) < k:
                    sure = torch.zeros_like(sure)
                    top = conf[r].topk(min(k, int(masked[r].sum()))).indices
                    sure[top] = True
                sure &= masked[r]
                cur[r, sure] = token[r, sure]
        model(cur, cache, commit=bs)  # store the finished block
        keep = []
        for r, i in enumerate(active):
            forwards[i] += 1
            seqs[i][cursor[i] : cursor[i] + bs] = cur[r].tolist()
            cursor[i] += bs
            generated = seqs[i][len(prompts[i]) : cursor[i]]
            if cursor[i] < totals[i] and not stops.intersection(generated):
                keep.append(r)
        if len(keep) < len(active):
            cache = cache.select(torch.tensor(keep, dtype=torch.long))
            active = [active[r] for r in keep]
    answers = [seqs[i][len(p) : cursor[i]] for i, p in enumerate(prompts)]
    return answers, forwards


@dataclass
class Prepared:
    docs: list[common.Doc]
    prompts: list[list[int]]
    compiled: list[list]
    answer_lengths: list[int]


def prepare(eng: DecisionEngine, docs: list[common.Doc], gen_length: int | None, block: int):
    """Prompt tokens and decide's answer lengths; documents whose prompt + `gen_length` do not
    fit the model are dropped (for every decoder alike)."""
    kept, prompts, compiled, answers = [], [], [], []
    for d in docs:
        qs = common.compile_questions(eng, d.questions)
        try:
            packed = eng.packer.pack(d.text, qs)
        except DocumentTooLong:
            continue
        kept.append(d)
        prompts.append(list(packed.request.prompt))
        compiled.append(qs)
        answers.append(sum(len(b.tokens) for b in packed.request.blocks))
    if gen_length is None:
        gen_length = -(-max(answers) // block) * block
    limit = eng.loaded.config.max_position_embeddings
    keep = [i for i, p in enumerate(prompts) if len(p) + gen_length <= limit]
    prepared = Prepared(
        [kept[i] for i in keep],
        [prompts[i] for i in keep],
        [compiled[i] for i in keep],
        [answers[i] for i in keep],
    )
    return prepared, gen_length


def score(eng: DecisionEngine, loaded: LoadedModel, prep: Prepared, order, answers, out: Outcome):
    stops = common.stop_ids(loaded)
    for i, tokens in zip(order, answers, strict=True):
        value = common.parse_free_text(eng, tokens, stops)
        if value is not None:
            out.parsed += 1
            out.valid += eng.validator(prep.compiled[i]).is_valid(value)


def llada_steps(gen_length: int, args: argparse.Namespace) -> int:
    """LLaDA's step count: `gen_length × steps-per-token`, a whole number per sub-block."""
    blocks = gen_length // args.llada_block
    per_block = max(1, round(gen_length * args.llada_steps_per_token / blocks))
    return per_block * blocks


def run_reference(
    kind: str,
    eng: DecisionEngine,
    loaded: LoadedModel,
    prep: Prepared,
    args: argparse.Namespace,
    gen_length: int,
) -> Outcome:
    model, config = loaded.model, loaded.config
    vocab = loaded.tokenizer.vocab_size
    stops = common.stop_ids(loaded)

    def generate(prompts: list[list[int]], length: int, steps: int) -> tuple[list, list[int]]:
        if kind == "llada":
            answers, n = llada_generate(
                model, prompts, gen_length=length, steps=steps, block_length=args.llada_block,
                mask_id=config.mask_token_id, vocab=vocab,
            )  # fmt: skip
            return answers, [n] * len(prompts)
        return sdar_generate(
            model, prompts, gen_length=length, steps=steps, threshold=args.threshold,
            mask_id=config.mask_token_id, vocab=vocab, stops=stops,
        )  # fmt: skip

    order = sorted(range(len(prep.prompts)), key=lambda i: len(prep.prompts[i]))
    if kind == "llada":
        steps, warm = llada_steps(gen_length, args), (args.llada_block, 1)
    else:
        assert config.block_size is not None
        steps = config.block_size  # SDAR's default: as many steps as the block has tokens
        warm = (config.block_size, steps)
    generate([prep.prompts[order[0]]], *warm)  # warm-up, untimed: one short run
    out = Outcome(docs=len(order))
    started = time.perf_counter()
    for first in range(0, len(order), args.batch_size):
        chunk = order[first : first + args.batch_size]
        answers, forwards = generate([prep.prompts[i] for i in chunk], gen_length, steps)
        out.forwards += forwards
        score(eng, loaded, prep, chunk, answers, out)
    out.seconds = time.perf_counter() - started
    return out


def run_decide(eng: DecisionEngine, prep: Prepared) -> Outcome:
    items = [
        Item(i, d.text, qs) for i, (d, qs) in enumerate(zip(prep.docs, prep.compiled, strict=True))
    ]
    list(eng.decide(items[:2]))  # warm-up: first-touch mask rows, allocator
    started = time.perf_counter()
    decisions = list(eng.decide(items))
    seconds = time.perf_counter() - started
    ok = sum(d.ok for d in decisions)
    return Outcome(len(items), seconds, [d.nfe for d in decisions], parsed=ok, valid=ok)


def model_dirs(tmp: Path, wanted: list[str], block: int) -> dict[str, Path]:
    dirs: dict[str, Path] = {}
    for name in wanted:
        if name == "bundled":
            path = common.bundled()
            if path is None:
                print(
                    "- bundled model: not installed (run `decide train --recipe bundled`), skipped"
                )
                continue
            dirs["bundled (BERT 6×384, trained)"] = path
        elif name == "llada":
            dirs["tiny llada (random)"] = common.tiny_checkpoint(tmp / "llada", "llada")
        elif name == "sdar":
            dirs[f"tiny sdar (random, block {block})"] = common.tiny_checkpoint(
                tmp / "sdar", "sdar", block_size=block
            )
    return dirs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=["bundled", "llada", "sdar"])
    parser.add_argument("--docs", type=int, default=16)
    parser.add_argument("--questions", type=int, default=8, help="per document (one block)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--threshold", type=float, default=0.9, help="decide and SDAR")
    parser.add_argument("--gen-length", type=int, default=None, help="default: fits decide's")
    parser.add_argument("--llada-block", type=int, default=32, help="LLaDA sub-block length")
    parser.add_argument(
        "--llada-steps-per-token", type=float, default=1.0,
        help="LLaDA steps = gen_length × this (1: one token per step, LLaDA's setting)",
    )  # fmt: skip
    parser.add_argument("--sdar-block", type=int, default=4, help="tiny sdar's block size")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    common.set_threads(args.threads)
    print(f"Machine: {common.describe_machine(args.threads)}\n")
    rows = []
    with tempfile.TemporaryDirectory() as tmp, torch.inference_mode():
        for name, path in model_dirs(Path(tmp), args.models, args.sdar_block).items():
            loaded = load_model(path)
            eng = common.engine(loaded, args.batch_size, threshold=args.threshold)
            docs = common.documents(args.docs, args.seed, args.questions)
            block = args.llada_block if loaded.config.block_size is None else args.sdar_block
            prep, gen_length = prepare(eng, docs, args.gen_length, block)
            if not prep.docs:
                print(f"- {name}: no document fits {gen_length} answer tokens, skipped")
                continue
            kind = "llada" if loaded.config.attention == "bidirectional" else "sdar"
            ref = run_reference(kind, eng, loaded, prep, args, gen_length)
            ours = run_decide(eng, prep)
            prompt = statistics.mean(len(p) for p in prep.prompts)
            answer = statistics.mean(prep.answer_lengths)
            print(
                f"- {name}: {loaded.parameter_count() / 1e6:.1f} M parameters, "
                f"{loaded.tokenizer.vocab_size:,} tokens; {len(prep.docs)} documents of "
                f"{args.questions} questions, prompt {prompt:.0f} tokens, decide's answer block "
                f"{answer:.0f} tokens, free-text gen_length {gen_length}"
            )
            label = (
                f"LLaDA loop ({llada_steps(gen_length, args)} steps, "
                f"sub-blocks of {args.llada_block})"
                if kind == "llada"
                else f"SDAR loop (threshold {args.threshold}, ≤ {loaded.config.block_size} "
                "steps per block)"
            )
            for decoder, outcome in ((label, ref), (f"decide (threshold {args.threshold})", ours)):
                rows.append(
                    [
                        name,
                        decoder,
                        outcome.docs,
                        f"{outcome.rate:.3f}",
                        f"{outcome.rate / ref.rate:.1f}×",
                        f"{statistics.mean(outcome.forwards):.1f}",
                        f"{100 * outcome.parsed / outcome.docs:.0f} %",
                        f"{100 * outcome.valid / outcome.docs:.0f} %",
                    ]
                )
    print()
    print(
        common.table(
            [
                "model",
                "decoder",
                "documents",
                "documents/s",
                "× the reference loop",
                "forward passes / document",
                "parses as JSON",
                "validates",
            ],
            rows,
            "llrrrrrr",
        )
    )


if __name__ == "__main__":
    main()
