"""Do derived answers use their inputs? Each derived question of held-out documents, decided
from one forward with every answer slot masked, against one with its inputs' gold answers
already in their slots, in the same run.

Derived questions (`over_limit` from `amount` and `policy_limit`, `eligible` from
`policy_active` and `over_limit`, ...; `decide.train.synthetic.DEPENDENCY_INPUTS`) are scored
as the sampler scores a finite slot: every value's tokens summed in log-probability over the
slot's positions, the best value wins. "all masked" is what the first decoding step sees;
"inputs given" is the best case of deciding a derived question after its inputs, with those
inputs right. If the model computed the answer from the answers, the second column would be
far ahead of the first; if it reads only the document, they agree. The documents are packed
exactly as `decide run` packs them (`ExampleBuilder`); an input in an earlier block is decided
(gold) in both modes, as at inference.

    python benchmarks/derived_inputs.py                  # 300 held-out documents, bundled model
    python benchmarks/derived_inputs.py --docs 60 --model build/run
"""

from __future__ import annotations

import argparse
import random
from collections import Counter

import common
import torch

from decide.jobs.spec import parse_questions
from decide.train.evaluate import synthetic_documents
from decide.train.examples import ExampleBuilder
from decide.train.synthetic import DEPENDENCY_INPUTS


class Fixed(random.Random):
    """An rng whose `randrange` picks one block: the block that holds the question."""

    def __init__(self, block: int) -> None:
        super().__init__(0)
        self.block = block

    def randrange(self, *args, **kwargs) -> int:  # type: ignore[override]
        return self.block


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="model directory (default: bundled)")
    parser.add_argument("--docs", type=int, default=300, help="held-out synthetic documents")
    parser.add_argument("--seed", type=int, default=1234)
    args = parser.parse_args()
    loaded = common.load_trained(args.model)
    model, mask_id = loaded.model, loaded.config.mask_token_id
    builder = ExampleBuilder(loaded.config, loaded.tokenizer)
    print(common.describe_machine(torch.get_num_threads()), f"\nmodel: {loaded.path}\n")

    right: dict[str, Counter] = {q: Counter() for q in DEPENDENCY_INPUTS}
    golds: dict[str, Counter] = {q: Counter() for q in DEPENDENCY_INPUTS}
    for text, questions, gold in synthetic_documents(args.docs, args.seed):
        compiled = builder.book.build(parse_questions(questions, "row")).questions
        packed = builder.packer.pack(text, compiled)
        for qid in DEPENDENCY_INPUTS.keys() & gold.keys():
            block = next(b for b, g in enumerate(packed.groups) if any(q.id == qid for q in g))
            example = builder.build(text, questions, gold, Fixed(block))
            if example is None:
                continue
            group = packed.groups[block]
            index = {q.id: k for k, q in enumerate(group)}
            mine = [p for p, k in zip(example.slots, example.question, strict=True)
                    if k == index[qid]]  # fmt: skip
            given = {p for p, k in zip(example.slots, example.question, strict=True)
                     if group[k].id in DEPENDENCY_INPUTS[qid]}  # fmt: skip
            ids = torch.tensor([example.ids, example.ids])
            ids[0, example.slots] = mask_id
            ids[1, [p for p in example.slots if p not in given]] = mask_id
            with torch.no_grad():
                hidden = model(ids, None, window_lens=torch.tensor([len(example.ids)] * 2))
                logp = torch.log_softmax(model.logits(hidden[:, mine]).float(), -1)  # [2, L, V]
            question = group[index[qid]]
            options = question.slot.new_constraint(builder.book.filler_id).options()
            positions = torch.arange(len(mine))
            scores = torch.stack([logp[:, positions, torch.tensor(o)].sum(-1) for o in options])
            truth = [example.ids[p] for p in mine]
            for mode, best in zip(("all masked", "inputs given"), scores.argmax(0).tolist(),
                                  strict=True):  # fmt: skip
                right[qid][mode] += list(options[best]) == truth
            right[qid]["n"] += 1
            right[qid]["inputs in block"] += bool(given)
            golds[qid][gold[qid]] += 1

    rows = []
    for qid, counts in right.items():
        n = counts["n"]
        if not n:
            continue
        majority = golds[qid].most_common(1)[0][1] / n
        rows.append((qid, " + ".join(sorted(DEPENDENCY_INPUTS[qid])), n, counts["inputs in block"],
                     f"{100 * majority:.1f} %", f"{100 * counts['all masked'] / n:.1f} %",
                     f"{100 * counts['inputs given'] / n:.1f} %"))  # fmt: skip
    header = ["question", "inputs", "documents", "with an input in its block", "majority value",
              "all masked", "inputs given"]  # fmt: skip
    print(common.table(header, rows, "llrrrrr"))


if __name__ == "__main__":
    main()
