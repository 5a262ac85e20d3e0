"""Peak memory of `decide run` for 10,000 vs 100,000 rows: streaming keeps it flat.

Builds inputs of N rows from the example claims (`examples/claims.parquet`, repeated with fresh
doc ids), runs the real CLI in a subprocess for each N, and reads the child's peak RSS from
`wait4`, with the rows answered and failed. The model is a tiny random BERT (the bundled model
decides about 2 documents/s on two CPU cores: half a day for 100,000 rows) with a 1,000-token
byte-level BPE trained on the example documents (with the bundled model's 30,522-token
vocabulary the per-position vocabulary work holds a run to about 13 documents/s; `--vocab
bundled` measures that anyway), decoding at a low confidence threshold (`--threshold`, default
0.05) so that a random model, unsure of everything, still commits most of a block per forward.
The model's own memory is a constant either way; what this measures is everything that could
grow with the input: reading, packing, batching, writing parts, resume bookkeeping and the
report. Target: the 100,000-row peak is less than 1.5× the 10,000-row peak.

    python benchmarks/memory.py            # 10k and 100k rows
    python benchmarks/memory.py --rows 1000 5000
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import common
import polars as pl
from tokenizers import ByteLevelBPETokenizer

from decide.engine.random_checkpoint import write_random_checkpoint
from decide.jobs.models import bundled_model_path

ROOT = Path(__file__).resolve().parents[1]


def make_inputs(path: Path, rows: int) -> None:
    claims = pl.read_parquet(ROOT / "examples" / "claims.parquet")
    reps = -(-rows // claims.height)
    frame = pl.concat([claims] * reps).head(rows)
    frame = frame.with_columns(pl.format("CLM-{}", pl.int_range(rows)).alias("doc_id"))
    frame.write_parquet(path, row_group_size=10_000)


def small_tokenizer(path: Path) -> Path:
    """A 1,000-token byte-level BPE trained on the example documents."""
    documents = pl.read_parquet(ROOT / "examples" / "claims.parquet")["document"].to_list()
    tokenizer = ByteLevelBPETokenizer()
    tokenizer.train_from_iterator(documents, vocab_size=1000, min_frequency=2, show_progress=False)
    tokenizer.save(str(path))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="*", default=[10_000, 100_000])
    parser.add_argument(
        "--threshold", type=float, default=0.05,
        help="confidence threshold: low, so the random model commits most of a block per forward",
    )  # fmt: skip
    parser.add_argument(
        "--vocab", choices=["small", "bundled"], default="small",
        help="small: a 1,000-token BPE of the example documents; bundled: the bundled model's",
    )  # fmt: skip
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        if args.vocab == "small":
            tokenizer = small_tokenizer(tmp_path / "tokenizer.json")
            vocab_name = "a 1,000-token BPE of the example documents"
        else:
            bundled = bundled_model_path()
            tokenizer = (bundled or ROOT / "tests" / "data" / "gpt2") / "tokenizer.json"
            vocab_name = f"{tokenizer.parent.name}'s tokenizer"
        model = write_random_checkpoint(
            tmp_path / "model", "bert", tokenizer_json=tokenizer, num_layers=1, hidden_size=64,
            num_heads=2, intermediate_size=64, init_std=0.3,
            extra_config={"max_position_embeddings": 1024},  # the small BPE spells longer
        )  # fmt: skip
        print(f"model: tiny random BERT with {vocab_name}")
        print("| rows | answered | failed rows | peak RSS | time | documents/s |")
        print("|---:|---:|---:|---:|---:|---:|")
        peaks = []
        for rows in args.rows:
            inputs = tmp_path / f"in-{rows}.parquet"
            make_inputs(inputs, rows)
            spec = ROOT / "examples" / "claims.yaml"
            command = [sys.executable, "-m", "decide", "run", str(inputs), "-o",
                       str(tmp_path / f"out-{rows}"), "--spec", str(spec),
                       "--model", str(model), "--batch-size", "32", "--no-progress",
                       "--threshold", str(args.threshold)]  # fmt: skip
            mb, seconds, _ = common.peak_rss(command, ok_codes=(0, 1))
            peaks.append(mb)
            out = tmp_path / f"out-{rows}"
            answered = pl.scan_parquet(out / "answers" / "*.parquet").select(pl.len()).collect()
            errors = out / "errors.parquet"
            failed = pl.read_parquet(errors).height if errors.is_file() else 0
            print(f"| {rows:,} | {answered.item():,} | {failed:,} | {mb:,.0f} MB | {seconds:,.0f} s "
                  f"| {rows / seconds:,.0f} |")  # fmt: skip
        if len(peaks) > 1:
            print(f"\nratio of the largest to the smallest peak: {peaks[-1] / peaks[0]:.2f}x "
                  "(target < 1.5x)")  # fmt: skip


if __name__ == "__main__":
    main()
