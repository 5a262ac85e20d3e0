"""Does the model compare numbers? The comparison questions of held-out documents, asked alone,
read as P(true) against the ratio of the two numbers they compare, next to a linear probe of the
answer slot's last hidden state, in the same run.

`over_limit` (claimed amount > policy limit) and `within_income` (requested loan <= annual
income) are one answer token each. For each, held-out documents of its domain are packed with
that question alone (`ExampleBuilder`, as `decide run` packs them), every answer slot masked,
and the model's P(true) among {true, false} is read at the slot's value position (what the first
decoding step sees). A model that compares has P(true) rising with the ratio for `over_limit`
and falling for `within_income`; a flat column means the answer ignores the numbers.

The probe columns fit a logistic regression on the slot's last hidden state of training-split
documents and score it on the held-out ones: for the answer itself, and for a plain magnitude
of the first number ("amount >= 10,000", "requested >= 50,000"). If even the magnitude is not
linearly there, the slot does not read the numbers at all (a representation gap, not a head
that failed to map them).

    python benchmarks/comparison_probe.py                 # 150 held-out documents per question
    python benchmarks/comparison_probe.py --docs 40 --model build/run
"""

from __future__ import annotations

import argparse
import random

import common
import torch

from decide.train.examples import ExampleBuilder
from decide.train.synthetic import DOMAINS

# question: (domain, first number, second number, magnitude threshold of the first number)
COMPARISONS = {
    "over_limit": ("claims", "amount", "policy_limit", 10_000),
    "within_income": ("loans", "requested", "income", 50_000),
}
BUCKETS = [(0.0, 0.5), (0.5, 0.9), (0.9, 1.0), (1.0, 1.1), (1.1, 2.0), (2.0, float("inf"))]


def slot_states(loaded, builder: ExampleBuilder, qid: str, split: str, n: int, seed: int):
    """(P(true), last hidden state, gold answer, ratio, first number) per document."""
    domain, first, second, _ = COMPARISONS[qid]
    spec = DOMAINS[domain]
    question = next(q for q in spec.questions if q["id"] == qid)
    rng = random.Random(seed)
    model, mask_id = loaded.model, loaded.config.mask_token_id
    rows = []
    true_id = false_id = None
    for _ in range(n):
        text, gold = spec.sample(rng, split)
        example = builder.build(text, [question], gold, random.Random(0))
        position = next(p for p, v in zip(example.slots, example.is_value, strict=True) if v)
        if gold[qid]:
            true_id = example.ids[position]
        else:
            false_id = example.ids[position]
        ids = torch.tensor([example.ids])
        ids[0, example.slots] = mask_id
        with torch.no_grad():
            hidden = model(ids, None, window_lens=torch.tensor([len(example.ids)]))[0, position]
            logits = model.logits(hidden).float()
        rows.append((logits, hidden.float(), gold[qid], gold[first] / gold[second], gold[first]))
    if true_id is None or false_id is None:
        raise SystemExit(f"{qid}: {n} documents hold only one answer; pass more --docs")
    return [
        (torch.softmax(lg[[true_id, false_id]], 0)[0].item(), h, y, r, a) for lg, h, y, r, a in rows
    ]


def probe(train_x, train_y, test_x, test_y) -> float:
    """Held-out accuracy of a logistic regression (L2, standardised inputs)."""
    mean, std = train_x.mean(0), train_x.std(0) + 1e-5
    w = torch.zeros(train_x.shape[1], requires_grad=True)
    b = torch.zeros(1, requires_grad=True)
    opt = torch.optim.Adam([w, b], lr=0.01)
    x = (train_x - mean) / std
    for _ in range(500):
        opt.zero_grad()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(x @ w + b, train_y)
        (loss + 1e-3 * w.pow(2).sum()).backward()
        opt.step()
    with torch.no_grad():
        guess = ((test_x - mean) / std @ w + b) > 0
    return (guess.float() == test_y).float().mean().item()


def pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def majority(labels: torch.Tensor) -> float:
    """Accuracy of always answering the more common of two labels (0/1)."""
    share = labels.mean().item()
    return max(share, 1 - share)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="model directory (default: bundled)")
    parser.add_argument("--docs", type=int, default=150, help="held-out documents per question")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    loaded = common.load_trained(args.model)
    loaded.model.eval()
    builder = ExampleBuilder(loaded.config, loaded.tokenizer)
    print(common.describe_machine(torch.get_num_threads()), f"\nmodel: {loaded.path}\n")

    ratio_rows, summary = [], []
    for qid, (_, first, second, threshold) in COMPARISONS.items():
        test = slot_states(loaded, builder, qid, "test", args.docs, args.seed)
        train = slot_states(loaded, builder, qid, "train", 2 * args.docs, args.seed + 1)
        for lo, hi in BUCKETS:
            chosen = [p for p, _, _, r, _ in test if lo <= r < hi]
            if chosen:
                span = f"{lo:g}-{hi:g}" if hi != float("inf") else f">= {lo:g}"
                ratio_rows.append((qid, f"{first} / {second} {span}", len(chosen),
                                   f"{sum(chosen) / len(chosen):.3f}"))  # fmt: skip
        gold = torch.tensor([float(y) for _, _, y, _, _ in test])
        right = sum((p > 0.5) == y for p, _, y, _, _ in test) / len(test)
        xs = torch.stack([h for _, h, _, _, _ in train]), torch.stack([h for _, h, _, _, _ in test])
        answer = probe(xs[0], torch.tensor([float(y) for _, _, y, _, _ in train]), xs[1], gold)
        big = [torch.tensor([float(a >= threshold) for *_, a in rows]) for rows in (train, test)]
        magnitude = probe(xs[0], big[0], xs[1], big[1])
        summary.append((qid, len(test), pct(majority(gold)), pct(right), pct(answer),
                        f"{pct(magnitude)} (majority {pct(majority(big[1]))})",
                        f"{first} >= {threshold:,}"))  # fmt: skip
    print(common.table(["question", "ratio bucket", "documents", "mean P(true)"], ratio_rows,
                       "llrr"))  # fmt: skip
    print()
    header = ["question", "documents", "majority value", "model (P(true) > 0.5)",
              "linear probe: answer", "linear probe: magnitude", "magnitude"]  # fmt: skip
    print(common.table(header, summary, "lrrrrrl"))


if __name__ == "__main__":
    main()
