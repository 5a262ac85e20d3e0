"""Benchmark: decide against autoregressive decoding of the same JSON under outlines-core masks.

The autoregressive model is the diffusion model's own weights run causally (the engine's layers
with block-causal attention of block size 1, i.e. a causal decoder of exactly the same size and
cost per token) with a KV cache: one prefill of the prompt, then one forward per generated token.
Every step does what a constrained left-to-right decoder does: the logits of each row's last
position, the row's outlines-core `Guide` writing its allowed-token bitmask, `masked_confidence`
over them (the kernel decide uses), and `Guide.advance`. The token appended is the next token of
the JSON object decide produced for that document (re-tokenized as text; each is checked against
the mask first), so both decoders produce the same object and the comparison is pure cost; random
weights would otherwise make the autoregressive output's length arbitrary.

The outlines-core `Index` is built once per question set from our own regex of the decision object
(compact, keys in the question order), not from `build_regex_from_schema`, avoiding the pitfalls
measured in issue 3: integer ranges are written out digit by digit with the longest alternatives
first (outlines-core 0.2.14 drops `minimum`/`maximum`, and its alternation is leftmost-first),
`[0-9]` instead of `\\d`, and strings are unbounded (`maxLength` as a bounded repetition makes the
build explode); the length bound does not matter here because the tokens followed are decide's
valid answers. WordPiece tokens (the bundled model) are given outlines-core as their bare text.

The autoregressive loop runs in the model's dtype and, when that is not fp32, in fp32 as well; decide
is compared with the faster (on a CPU with bf16 matrix units a one-token step is slower in bf16).
Both decoders batch `--batch-sizes` documents (the autoregressive one statically: a batch runs
until its longest answer is done, finished rows leave the cache). decide runs at its defaults
(the in-block cache: steps recompute only the open positions and those committed to a value's
token; `grow_slots`: open-ended slots laid out with 8 positions, grown when a value fills them;
`max_steps: 2`: at most 2 steps per block, then the rest committed greedily from the last
forward's logits; 4 from 2026-12-05, 3 on 2026-12-07 until the evening), and with one default
changed at a time: every slot whole (`grow_slots: false`, the default before 2026-12-05), no
step cap (`max_steps: null`, the default until the sixth session of 2026-12-05), recomputing the whole block at every step
(each run's objects are compared with that run's); `--max-steps N ...` adds runs at the defaults with
`decoding.max_steps` N. The floor and the objects the loop writes are those of the defaults. The
floor is one batched forward per document over its prompt and every block's skeleton in the
default layout: what reading the document once costs either decoder. Every forward of either
decoder computes the last layer only where a state is read (`WindowedModel.forward`'s `outputs`:
the answer positions for decide and the floor, the last prompt position for the autoregressive
prefill); keys and values everywhere.
Per document: forward passes it took part in, and wall time per document (batch wall time /
documents).

    python benchmarks/autoregressive.py
    python benchmarks/autoregressive.py --docs 4 --batch-sizes 4 --models llada
    python benchmarks/autoregressive.py --models bundled --max-steps 2
    python benchmarks/autoregressive.py --repeats 3   # each figure the fastest of 3 rounds
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import tempfile
import time
from pathlib import Path

import common
import outlines_core as oc
import torch

from decide.engine import load_model
from decide.engine.constraints import bitmask_width
from decide.engine.loader import LoadedModel, build_model
from decide.engine.model import WindowedModel
from decide.jobs.decisions import DecisionEngine, Item
from decide.jobs.spec import DEFAULT_MAX_STEPS
from decide.kernels import masked_confidence
from decide.schemas import Vocabulary

DEFAULTS = f"decide, defaults (in-block cache, grow_slots, max_steps {DEFAULT_MAX_STEPS})"
STRING = r'"([^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"'
META = set(r"\.^$|?*+()[]{}")


def escape(text: str) -> str:
    """Escape regex metacharacters only (Rust's regex refuses escapes of some other punctuation)."""
    return "".join("\\" + c if c in META else c for c in text)


def _same_length(lo: str, hi: str) -> list[str]:
    """Alternatives matching exactly the decimal strings of len(lo) digits in [lo, hi]."""
    if lo == hi:
        return [lo]
    if len(lo) == 1:
        return [f"[{lo}-{hi}]"]
    if lo[0] == hi[0]:
        return [lo[0] + tail for tail in _same_length(lo[1:], hi[1:])]
    rest = len(lo) - 1
    out, first, last = [], int(lo[0]), int(hi[0])
    if lo[1:] != "0" * rest:
        out += [lo[0] + tail for tail in _same_length(lo[1:], "9" * rest)]
        first += 1
    tail_alts = []
    if hi[1:] != "9" * rest:
        tail_alts = [hi[0] + tail for tail in _same_length("0" * rest, hi[1:])]
        last -= 1
    if first <= last:
        digit = str(first) if first == last else f"[{first}-{last}]"
        out.append(digit + ("[0-9]" if rest == 1 else f"[0-9]{{{rest}}}"))
    return out + tail_alts


def integer_range(lo: int, hi: int) -> str:
    """A regex for the integers in [lo, hi] (lo ≥ 0) without leading zeros, longest first."""
    if lo < 0 or hi < lo:
        raise ValueError(f"only non-negative ranges are needed here, got [{lo}, {hi}]")
    alternatives = []
    for digits in range(len(str(hi)), len(str(lo)) - 1, -1):
        a = max(lo, 10 ** (digits - 1) if digits > 1 else 0)
        b = min(hi, 10**digits - 1)
        if a <= b:
            alternatives += _same_length(str(a), str(b))
    return "(" + "|".join(alternatives) + ")"


def value_regex(schema: dict) -> str:
    if "enum" in schema:
        spelled = [escape(json.dumps(v, separators=(",", ":"))) for v in schema["enum"]]
        return "(" + "|".join(sorted(spelled, key=len, reverse=True)) + ")"
    kind = schema.get("type")
    if kind == "boolean":
        return "(true|false)"
    if kind == "integer":
        return integer_range(schema.get("minimum", 0), schema["maximum"])
    if kind == "string":
        return STRING
    raise NotImplementedError(f"no regex for {schema} (the synthetic questions need none)")


def object_regex(questions: list[dict]) -> str:
    fields = [f'"{q["id"]}":{value_regex(q["schema"])}' for q in questions]
    return r"\{" + ",".join(fields) + r"\}"


def outlines_vocabulary(vocab: Vocabulary, eos: int) -> oc.Vocabulary:
    """Each usable token with its shortest spelling (WordPiece: the bare text of the piece)."""
    spelled: dict[int, bytes] = {}
    for token, data in zip(vocab.var_token.tolist(), vocab.var_bytes, strict=True):
        if token != eos and (token not in spelled or len(data) < len(spelled[token])):
            spelled[token] = data
    mapping: dict[bytes, list[int]] = {}
    for token, data in spelled.items():
        mapping.setdefault(data, []).append(token)
    return oc.Vocabulary(eos, mapping)


def causal_twin(loaded: LoadedModel, dtype: torch.dtype | None = None) -> WindowedModel:
    """The same weights with causal attention (block-causal, blocks of one token); shared with
    the loaded model, or copied in `dtype`."""
    config = dataclasses.replace(loaded.config, attention="block_causal", block_size=1)
    with torch.device("meta"):
        twin = build_model(config)
    state = loaded.model.state_dict()
    if dtype is not None:
        state = {k: v.to(dtype) if v.is_floating_point() else v for k, v in state.items()}
    twin.load_state_dict(state, assign=True, strict=True)
    return twin.eval()


def ar_decode(
    model: WindowedModel,
    prompts: list[list[int]],
    targets: list[list[int]],
    indexes: list[oc.Index],
    width: int,
) -> tuple[list[int], list[bool]]:
    """Decode each target left to right under the masks of a guide over its row's index;
    (forwards, refused) per row. A refused row (target token outside the mask) stops there."""
    b = len(prompts)
    cache = model.new_cache(b, max(len(p) + len(t) for p, t in zip(prompts, targets, strict=True)))
    lens = torch.tensor([len(p) for p in prompts])
    ids = torch.zeros((b, int(lens.max())), dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, : len(p)] = torch.tensor(p)
    # the last layer only where a state is read, as decide's forwards (`outputs`)
    reads = [[len(p) - 1] for p in prompts]
    hidden = model(ids, cache, window_lens=lens, commit=lens, outputs=reads)  # [B, L, H]
    state = hidden[torch.arange(b), lens - 1]  # [B, H]: predicts each row's first answer token
    guides = [oc.Guide(index) for index in indexes]
    bitmask = torch.zeros((b, width), dtype=torch.int32)
    forwards, refused = [1] * b, [False] * b
    active, step = list(range(b)), 0
    while active:
        logits = model.logits(state).float()  # [A, V]
        masks = bitmask[: len(active)]
        for r, i in enumerate(active):
            guides[i].write_mask_into(masks[r].data_ptr(), width, 4)
        masked_confidence(logits, masks)  # the choice a free decoder would make
        keep, nxt = [], []
        for r, i in enumerate(active):
            token = targets[i][step]
            if not (int(masks[r, token // 32]) >> (token % 32)) & 1:
                refused[i] = True
                continue
            guides[i].advance(token, return_tokens=False)
            if step + 1 < len(targets[i]):
                keep.append(r)
                nxt.append(token)
        step += 1
        if len(keep) < len(active):
            active = [active[r] for r in keep]
            if not active:
                break
            cache = cache.select(torch.tensor(keep, dtype=torch.long))
        hidden = model(torch.tensor(nxt)[:, None], cache, commit=1)  # [A, 1, H]
        state = hidden[:, 0]
        for i in active:
            forwards[i] += 1
    return forwards, refused


def compare(name: str, loaded: LoadedModel, args: argparse.Namespace, rows: list) -> None:
    eng: DecisionEngine = common.engine(loaded, args.batch_sizes[0])
    docs = common.documents(args.docs, args.seed, questions=8)
    items: list[Item] = common.items(eng, docs)
    packed = [eng.packer.pack(d.text, it.questions) for d, it in zip(docs, items, strict=True)]
    prompts = [list(p.request.prompt) for p in packed]
    eos = loaded.config.end_of_turn_ids[0]  # the token both decoders write after the `}`
    started = time.perf_counter()
    ovocab = outlines_vocabulary(eng.compiler.vocabulary, eos)
    vocab_s = time.perf_counter() - started
    built: dict[str, oc.Index] = {}
    build_s = []
    for d in docs:
        regex = object_regex(d.questions)
        if regex not in built:
            started = time.perf_counter()
            built[regex] = oc.Index(regex, ovocab)
            build_s.append(time.perf_counter() - started)
    indexes = [built[object_regex(d.questions)] for d in docs]
    twin = causal_twin(loaded)
    # The autoregressive loop runs in the model's dtype and, where that is not fp32, in fp32 as
    # well: on a CPU with bf16 matrix units one-token steps are slower in bf16 than in fp32,
    # while decide's wide forwards are faster, so decide is compared with the faster of the two.
    twins = {str(twin.dtype).removeprefix("torch."): twin}
    if twin.dtype != torch.float32:
        twins["float32"] = causal_twin(loaded, torch.float32)
    width = bitmask_width(loaded.config.embedding_size)
    skeleton = statistics.mean(
        sum(len(b.tokens) - sum(s.constraint.length for s in b.slots) for b in p.request.blocks)
        for p in packed
    )
    print(
        f"- {name}: {loaded.parameter_count() / 1e6:.1f} M parameters; outlines-core Vocabulary "
        f"{1000 * vocab_s:.0f} ms, Index {1000 * statistics.mean(build_s):.0f} ms per question "
        f"set ({len(built)} sets, built once, not in the times below); decide pre-fills a "
        f"skeleton of {skeleton:.0f} tokens per document that the autoregressive decoder generates"
    )
    list(eng.decide(items[:2]))  # warm-up (untimed)
    for batch in args.batch_sizes:
        timings: dict[str, tuple[float, dict]] = {}
        cap = DEFAULT_MAX_STEPS
        variants = [("decide, whole block every step", False, cap, True),
                    ("decide, whole slots (grow_slots false)", True, cap, False),
                    ("decide, no step cap (max_steps null)", True, None, True),
                    (DEFAULTS, True, cap, True)]  # fmt: skip
        variants += [(f"decide, max_steps {n}", True, n, True) for n in args.max_steps]
        ar: dict[str, tuple[float, list[int], int]] = {}  # dtype -> ms/doc, forwards, refused
        floor_s = float("inf")
        # `--repeats` rounds of every measurement, interleaved; each keeps its fastest round
        for _ in range(args.repeats):
            for variant, in_block, max_steps, grow in variants:
                common.set_decoding(eng, batch_size=batch, in_block_cache=in_block,
                                    max_steps=max_steps, grow_slots=grow)  # fmt: skip
                started = time.perf_counter()
                decided = {d.doc_id: d for d in eng.decide(items)}
                seconds = time.perf_counter() - started
                if variant not in timings or seconds < timings[variant][0]:
                    timings[variant] = (seconds, decided)
            # the autoregressive loop writes the objects decide writes at its defaults
            decisions = timings[DEFAULTS][1]
            good = [i for i in range(len(docs)) if decisions[i].ok]
            order = sorted(good, key=lambda i: len(prompts[i]))
            targets = {i: loaded.tokenizer.encode(decisions[i].answers_json or "") for i in good}
            with torch.inference_mode():
                for label, model in twins.items():
                    first = order[0]  # warm-up (untimed): a few tokens of one document
                    ar_decode(model, [prompts[first]], [targets[first][:4]], [indexes[first]],
                              width)  # fmt: skip
                    forwards, refused = [], 0
                    started = time.perf_counter()
                    for start in range(0, len(order), batch):
                        chunk = order[start : start + batch]
                        f, r = ar_decode(
                            model,
                            [prompts[i] for i in chunk],
                            [targets[i] for i in chunk],
                            [indexes[i] for i in chunk],
                            width,
                        )
                        forwards += f
                        refused += sum(r)
                    ms = 1000 * (time.perf_counter() - started) / len(order)
                    if label not in ar or ms < ar[label][0]:
                        ar[label] = (ms, forwards, refused)
                floor_s = min(floor_s, prefill_floor(loaded, packed, batch))
        floor_ms = 1000 * floor_s / len(packed)
        json_tokens = statistics.mean(len(targets[i]) for i in good)
        best = min(ar, key=lambda label: ar[label][0])
        ar_ms = ar[best][0]
        rows.append([name, batch, "prefill only (the floor)", "1.0", "", f"{floor_ms:.1f}", "",
                     "one forward over prompt + skeleton"])  # fmt: skip
        for label, (ms, forwards, refused) in ar.items():
            rows.append(
                [name, batch, f"autoregressive + outlines-core ({label})",
                 f"{statistics.mean(forwards):.1f}", f"{json_tokens:.0f}", f"{ms:.1f}", "",
                 f"{refused} refused; {ms / floor_ms:.1f}× the floor"
                 + ("; the baseline (faster)" if label == best and len(ar) > 1 else "")]
            )  # fmt: skip
        whole = timings["decide, whole block every step"][1]
        for variant, (seconds, decided) in timings.items():
            ours_ms = 1000 * seconds / len(docs)
            same = sum(decided[i].answers_json == whole[i].answers_json for i in decided)
            failed = sum(not d.ok for d in decided.values())
            rows.append(
                [name, batch, variant, f"{statistics.mean(d.nfe for d in decided.values()):.1f}",
                 f"{json_tokens:.0f}", f"{ours_ms:.1f}", f"**{ar_ms / ours_ms:.2f}×**",
                 f"{failed} failed; {ours_ms / floor_ms:.1f}× the floor; "
                 f"{same}/{len(decided)} objects as whole blocks"]
            )  # fmt: skip


def prefill_floor(loaded: LoadedModel, packed: list, batch: int) -> float:
    """Seconds of one forward per document over its prompt and every block's skeleton (answer
    positions masked), batched: what reading the document once costs either decoder."""
    mask = loaded.config.mask_token_id
    seqs, reads = [], []
    for p in packed:
        seq, read = list(p.request.prompt), []
        for block in p.request.blocks:
            tokens = list(block.tokens)
            for slot in block.slots:
                tokens[slot.start : slot.start + slot.constraint.length] = [mask] * (
                    slot.constraint.length
                )
                read += range(len(seq) + slot.start, len(seq) + slot.start + slot.constraint.length)
            seq += tokens
        seqs.append(seq)
        reads.append(read)
    started = time.perf_counter()
    for start in range(0, len(seqs), batch):
        chunk = seqs[start : start + batch]
        width = max(len(s) for s in chunk)
        ids = torch.full((len(chunk), width), mask, dtype=torch.long)
        for i, s in enumerate(chunk):
            ids[i, : len(s)] = torch.tensor(s)
        lens = torch.tensor([len(s) for s in chunk])
        cache = loaded.model.new_cache(len(chunk), width)
        loaded.model(ids.to(loaded.model.device), cache, window_lens=lens,
                     outputs=reads[start : start + batch])  # fmt: skip
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=["llada", "bundled"])
    parser.add_argument("--docs", type=int, default=32)
    parser.add_argument("--batch-sizes", type=int, nargs="*", default=[1, 16])
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--max-steps", type=int, nargs="*", default=[],
        help="also time decide (in-block cache) with `decoding.max_steps` at each of these",
    )  # fmt: skip
    parser.add_argument(
        "--repeats", type=int, default=1,
        help="rounds of every measurement, interleaved; each figure is its fastest round "
        "(a shared machine's run-to-run noise, which moved the autoregressive loop by 35 %%)",
    )  # fmt: skip
    args = parser.parse_args()
    common.set_threads(args.threads)
    print(f"Machine: {common.describe_machine(args.threads)}")
    rounds = f"; each figure the fastest of {args.repeats} rounds" if args.repeats > 1 else ""
    print(f"{args.docs} documents × 8 questions; decide at threshold 0.9{rounds}\n")
    rows: list = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            if name == "bundled":
                path = common.bundled()
                if path is None:
                    print("- bundled model: not installed, skipped")
                    continue
                compare("bundled (BERT 6×384, trained)", load_model(path), args, rows)
            else:
                path = common.tiny_checkpoint(Path(tmp) / name, name)
                compare(f"tiny {name} (random)", load_model(path), args, rows)
    print()
    print(
        common.table(
            [
                "model",
                "batch",
                "decoder",
                "forward passes / document",
                "JSON tokens / document",
                "ms / document",
                "decide's speed-up",
                "notes",
            ],
            rows,
            "lrlrrrrl",
        )
    )


if __name__ == "__main__":
    main()
