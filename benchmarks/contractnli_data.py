"""ContractNLI as a decide job on disk: a split's NDAs → a parquet of documents and gold, and a
spec (`decide.train.contractnli` holds the data and the questions).

`rows(split)` gives one row per NDA with `doc_id`, `document` and `gold` (JSON text: per question
id its label and the character offsets `[start, end]` of its gold evidence spans). Run as a
script it writes both, so `decide run` can decide them like any user's job:

    python benchmarks/contractnli_data.py dev out/contractnli   # dev.parquet + spec.yaml
    decide run out/contractnli/dev.parquet --spec out/contractnli/spec.yaml -o out/nli
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import polars as pl
import yaml

from decide.train.contractnli import SPLITS, LongRow, documents, load_split, spec


def rows(docs: list[LongRow]) -> pl.DataFrame:
    """One row per NDA: `doc_id`, `document`, `gold` (JSON text)."""
    out = [
        {
            "doc_id": d.doc_id,
            "document": d.text,
            "gold": json.dumps(
                {
                    q: {"label": d.gold[q], "evidence": [list(s) for s in d.evidence[q]]}
                    for q in d.gold
                }
            ),
        }
        for d in docs
    ]
    return pl.DataFrame(out, schema={"doc_id": pl.String, "document": pl.String, "gold": pl.String})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("split", choices=SPLITS)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    split = load_split(args.split)
    args.out.mkdir(parents=True, exist_ok=True)
    rows(documents(split)).write_parquet(args.out / f"{args.split}.parquet")
    (args.out / "spec.yaml").write_text(yaml.safe_dump(spec(split), sort_keys=False))
    print(f"wrote {args.out / (args.split + '.parquet')} and {args.out / 'spec.yaml'}")


if __name__ == "__main__":
    main()
