"""Stage 8a of the bundled model: the comparison drills, run in a worktree of `83aa0da`.

Stage 7 continued for 700 steps of 8 on rows that are half the recipe's (as it was at `83aa0da`:
40 % MAMS-ACSA reviews, 60 % synthetic documents) and half a claim asked `amount`,
`policy_limit`, `over_limit` (or a loan asked `requested`, `income`, `within_income`) where only
the comparison's slot is masked: the two numbers stand in the block as answers, so the answer
slot learns to compare them. Learning rate 1e-4, 30 warm-up steps, seed 11, fp32. The generator
and `ExampleBuilder` of `83aa0da` have no `given` answers yet, so this script drops the inputs'
slots from the maskable ones after `build` (what `ExampleBuilder.build(given=...)` does since
`98a719d`). Kept as it was run on 2026-12-02 (1,610 s on 2 cores); docs/bundled-model.md,
"Rebuilding it", says where it sits in the chain.

    git worktree add ../decide-83aa0da 83aa0da && cd ../decide-83aa0da && pip install -e . --no-deps
    python /path/to/this/file.py build/stage7export build/stage8a 700 60
"""

import dataclasses
import random
import sys
from pathlib import Path

from decide.train import synthetic
from decide.train.bundled import row_sampler
from decide.train.examples import ExampleBuilder
from decide.train.loop import TrainConfig, train

TRIPLES = {
    "claims": ("amount", "policy_limit", "over_limit"),
    "loans": ("requested", "income", "within_income"),
}


def main() -> None:
    init, out = Path(sys.argv[1]), Path(sys.argv[2])
    steps, minutes = int(sys.argv[3]), float(sys.argv[4])
    base = row_sampler()
    seen = {"drills": 0}

    def rows(rng: random.Random):
        if rng.random() < 0.5:
            return base(rng)
        domain = rng.choice(sorted(TRIPLES))
        spec = synthetic.DOMAINS[domain]
        text, gold = spec.sample(rng, "train")
        ids = TRIPLES[domain]
        questions = [next(q for q in spec.questions if q["id"] == i) for i in ids]
        return text, questions, {i: gold[i] for i in ids}

    original = ExampleBuilder.build

    def build(self, document, questions, gold, rng):
        example = original(self, document, questions, gold, rng)
        if example is None or tuple(q["id"] for q in questions) not in TRIPLES.values():
            return example
        assert len(set(example.question)) == 3, example.question
        keep = [i for i, k in enumerate(example.question) if k == 2]  # the comparison's slot
        seen["drills"] += 1
        return dataclasses.replace(
            example,
            slots=[example.slots[i] for i in keep],
            is_value=[example.is_value[i] for i in keep],
            question=[example.question[i] for i in keep],
        )

    ExampleBuilder.build = build
    config = TrainConfig(
        steps=steps, minutes=minutes, batch_size=8, lr=1e-4, warmup=30, seed=11, bf16=False,
        save_every=10**6,
    )  # fmt: skip
    summary = train(init, rows, out, config)
    print({k: v for k, v in summary.items() if k != "history"}, "drill rows", seen["drills"])
    print(summary["history"])


if __name__ == "__main__":
    main()
