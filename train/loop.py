"""Masked-diffusion fine-tuning on decision blocks (the LLaDA / MDLM objective).

Per example a fraction t ~ U(0, 1] of the trained block's answer-slot positions is replaced by the
mask token (at least one); the loss is cross-entropy on the masked positions only, weighted 1/t
and averaged over the block's slot positions. Prompt and skeleton tokens are never masked. Filler
positions carry less weight than value positions (`filler_weight`): they are easy, numerous, and
would otherwise drown the one-token answers (booleans, enums) the notes found slow to learn.
With `weighting="questions"` the average is taken per question instead (each question's masked
positions weighted 1/t and divided by its slot length, then averaged over the block's questions),
so a one-token boolean weighs as much as a 24-token name.
With `option_masking` the positions of a finite slot (an enum, a boolean: what the sampler decides
as one whole option, `decide.engine.scoring.score_options`) are masked all together or not at
all, as inference meets them: masked one by one, the slot's other tokens or the filler after a
shorter option give the answer away, and the document is rarely what decides it.
With `cap_weight` a masked position weighs 1/max(t, m) instead of 1/t, where m is the share of the
slot positions actually masked: the same for whole blocks (m is about t), but an example with one
maskable slot (a derived drill, `synthetic.derived_drill`) has that slot masked whatever t is
drawn, and would otherwise weigh 1/t, without bound as t → 0 (docs/bundled-model.md, changelog).

Everything random (which rows, which block, t, which positions) is drawn from generators seeded by
`(seed, step)`, so a run is deterministic for a seed and a resumed run continues exactly where the
interrupted one stopped. Checkpoints are written in the real format (`config.json` + safetensors +
tokenizer files); optimizer state is kept beside them as safetensors + JSON, never pickled.
Every file of a checkpoint is written to a temporary file and renamed into place, the state JSON
last, and both safetensors files record the step they hold: a run stopped while saving leaves
files that disagree, and a resume refuses them instead of continuing from mixed steps. A resume
continues only the run it finds: `train_config.json` records what defines the run (`RUN_FIELDS`,
and what the caller adds, e.g. a fingerprint of the training data), and a resume that differs in
any of it is refused, naming what differs.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import random
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from decide.engine import load_model
from decide.engine.checkpoint import INDEX_NAME
from decide.engine.families import family_for
from decide.engine.loader import METADATA_FILES
from decide.engine.resolution import cpu_bf16_is_fast
from decide.jobs.output import atomic_write
from decide.jobs.progress import Progress
from decide.jobs.spec import SpecError

from .examples import BuildStats, Example, ExampleBuilder, UnusableRows, skip_summary

STATE_WEIGHTS = "train_state.safetensors"
STATE_JSON = "train_state.json"
CONFIG_JSON = "train_config.json"
SUMMARY_JSON = "train_summary.json"
STEP_KEY = "decide_train_step"  # safetensors metadata: the optimizer step the file holds
# What defines a run: a resume must agree on these (`check_output`). Not compared: the time
# budget and stop step, the device, threads, workers, checkpoint interval and bf16 (chosen by
# what the machine runs fast), which say how the same run is carried out.
RUN_FIELDS = (
    "steps", "batch_size", "lr", "warmup", "decay_from", "weight_decay", "filler_weight",
    "weighting", "cap_weight", "option_masking", "dropout", "seed", "strict_questions",
    "short_slots",
)  # fmt: skip
# Rows drawn in a row that all yield no example before a run gives up (rows none of which can be
# taught would otherwise be drawn forever): far more than any usable data set skips in a row.
SKIP_LIMIT = 10_000


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 1000  # optimizer steps (the time budget may stop earlier)
    minutes: float | None = None  # wall-clock budget for the optimizer steps
    stop_at: int | None = None  # end after this step as if interrupted (schedule of `steps`)
    batch_size: int = 8
    lr: float = 2e-4
    warmup: int = 100
    decay_from: float = 0.8  # constant LR, then linear decay to 10 % over the last 20 % of steps
    weight_decay: float = 0.01
    filler_weight: float = 0.25
    weighting: str = "positions"  # or "questions": each question weighs alike (see above)
    # weigh a masked position 1/max(t, masked share of the example's slots) instead of 1/t
    # (see above); not used by any shipped stage yet
    cap_weight: bool = False
    option_masking: bool = False  # mask a finite slot's positions together (see above)
    dropout: float = 0.1  # hidden dropout while training, for models that have it (BERT)
    seed: int = 0
    bf16: bool | None = None  # bf16 autocast; None: where it is fast (see `bf16_is_fast`)
    threads: int | None = None
    save_every: int = 200
    device: str = "cpu"
    workers: int = 0  # processes building batches ahead (0: in the training process)
    # a row whose questions the runner refuses stops the run (`SpecError`) instead of being
    # skipped and counted in `rows_skipped` (`ExampleBuilder.strict`; the bundled recipe)
    strict_questions: bool = False
    # chance that an open-ended slot whose gold ends in its first positions is laid out short,
    # as decoding with `grow_slots` lays it out (`ExampleBuilder.short_slots`); 0: every slot
    # whole, as every run before 2026-12-05 (and no random draw for it)
    short_slots: float = 0.0


def bf16_is_fast(device: str) -> bool:
    """Whether bf16 autocast speeds training up on `device`: on GPUs with bf16 support, and on
    CPUs whose bf16 matrix products time faster than fp32's (`resolution.cpu_bf16_is_fast`, the
    same choice `dtype: auto` makes for decoding). The instructions alone are not enough: an
    Intel Xeon with AVX512-BF16 and no AMX trained 12 steps of the bundled model in 47 s under
    autocast against 28 s in fp32 (2026-12-07); AVX2-only CPUs fall back to a slow
    single-threaded path (0.06 steps/s against 0.33 in fp32)."""
    kind = torch.device(device).type
    if kind == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    if kind == "cpu":
        return cpu_bf16_is_fast()[0]
    return False


def lr_at(step: int, c: TrainConfig) -> float:
    if step < c.warmup:
        return c.lr * (step + 1) / c.warmup
    start = int(c.steps * c.decay_from)
    if step < start:
        return c.lr
    frac = (step - start) / max(1, c.steps - start)
    return c.lr * (1.0 - 0.9 * frac)


def position_weights(
    example: Example,
    picked: Sequence[int],
    t: float,
    filler_weight: float,
    weighting: str,
    cap: bool = False,
) -> list[float]:
    """Loss weights of the masked slot positions `picked` (indices into `example.slots`) for a
    mask rate t: 1/t per position (filler positions `filler_weight` of that, each times its
    question's `Example.scale`), averaged over the block's slot positions ("positions") or per
    question, then over questions ("questions").
    With `cap`, 1/max(t, share of the slot positions picked) instead of 1/t."""
    if weighting not in ("positions", "questions"):
        raise ValueError(f"weighting must be 'positions' or 'questions', got {weighting!r}")
    if cap:
        t = max(t, len(picked) / len(example.slots))
    sizes: dict[int, int] = {}  # slot positions per question, for "questions" only
    if weighting == "questions":
        for q in example.question:
            sizes[q] = sizes.get(q, 0) + 1
    out = []
    for k in picked:
        w = 1.0 if example.is_value[k] else filler_weight
        if example.scale:
            w *= example.scale[k]
        if weighting == "questions":
            out.append(w / (t * sizes[example.question[k]] * len(sizes)))
        else:
            out.append(w / (t * len(example.slots)))
    return out


def masked_positions(
    example: Example, t: float, gen: torch.Generator, option_masking: bool = False
) -> list[int]:
    """The slot positions (indices into `example.slots`) masked at rate t: each with
    probability t, at least one; with `option_masking` a finite slot's positions all together
    (they share the draw of the slot's first position)."""
    e = example
    draws = torch.rand(len(e.slots), generator=gen)
    whole = option_masking and any(e.finite)
    if whole:
        first: dict[int, int] = {}
        for k, q in enumerate(e.question):
            first.setdefault(q, k)
        lead = [
            first[q] if f else k for k, (q, f) in enumerate(zip(e.question, e.finite, strict=True))
        ]
        draws = draws[torch.tensor(lead)]
    picked = draws < t
    if not picked.any():
        k = int(torch.randint(len(e.slots), (), generator=gen))
        picked[k] = True
        if whole and e.finite[k]:
            picked |= torch.tensor([q == e.question[k] for q in e.question])
    return torch.nonzero(picked).flatten().tolist()


def batch_loss(
    model: torch.nn.Module,
    examples: Sequence[Example],
    mask_id: int,
    pad_id: int,
    gen: torch.Generator,
    filler_weight: float,
    weighting: str = "positions",
    cap_weight: bool = False,
    option_masking: bool = False,
) -> torch.Tensor:
    """MDLM loss of one batch (masks drawn from `gen`, on the CPU, so runs repeat anywhere)."""
    length = max(len(e.ids) for e in examples)
    ids = torch.full((len(examples), length), pad_id, dtype=torch.long)
    lens = torch.tensor([len(e.ids) for e in examples])
    rows, cols, targets, weights = [], [], [], []
    for i, e in enumerate(examples):
        ids[i, : len(e.ids)] = torch.tensor(e.ids)
        t = 1.0 - torch.rand((), generator=gen).item()  # (0, 1]
        picked_positions = masked_positions(e, t, gen, option_masking or e.masking.option_masking)
        cap = cap_weight or e.masking.cap_weight
        for k, w in zip(
            picked_positions,
            position_weights(e, picked_positions, t, filler_weight, weighting, cap),
            strict=True,
        ):
            rows.append(i)
            cols.append(e.slots[k])
            targets.append(e.ids[e.slots[k]])
            weights.append(w)
    r, c = torch.tensor(rows), torch.tensor(cols)
    ids[r, c] = mask_id
    device = next(model.parameters()).device
    extra = {}  # short slots (`ExampleBuilder.short_slots`): positions encoded as decoding does
    if any(e.shifts for e in examples):
        shift = torch.zeros((len(examples), length), dtype=torch.long)
        for i, e in enumerate(examples):
            shift[i, : len(e.shifts)] = torch.tensor(e.shifts, dtype=torch.long)
        extra["position_shift"] = shift.to(device)
    hidden = model(ids.to(device), None, window_lens=lens.to(device), **extra)  # [B, L, H]
    logits = model.logits(hidden[r.to(device), c.to(device)]).float()  # [M, V]
    ce = F.cross_entropy(logits, torch.tensor(targets, device=device), reduction="none")
    return (ce * torch.tensor(weights, device=device)).sum() / len(examples)


# A row: (document, questions, gold answers), optionally with the ids of the questions whose
# answers are given (stay unmasked) as a fourth element, per-question loss weights as a fifth and
# its own masking (`train.examples.RowMasking`) as a sixth.
Rows = Callable[[random.Random], tuple[Any, ...]]


def draw_batch(
    builder: ExampleBuilder, rows: Rows, config: TrainConfig, step: int
) -> list[Example]:
    """The examples of optimizer step `step`: drawn from a generator seeded by (seed, step) alone,
    so any process draws the same batch for the same step. `SKIP_LIMIT` rows skipped in a row
    raise `UnusableRows` with the skip reasons."""
    rng = random.Random(config.seed * 1_000_003 + step)
    batch: list[Example] = []
    skipped = 0
    while len(batch) < config.batch_size:
        document, questions, gold, *given = rows(rng)
        example = builder.build(document, questions, gold, rng, *given)
        if example is not None:
            batch.append(example)
            skipped = 0
            continue
        skipped += 1
        if skipped >= SKIP_LIMIT:
            raise UnusableRows(
                f"no training row is usable: the last {skipped} rows drawn were all skipped "
                f"({skip_summary(builder.stats.skipped, 'draw')})"
            )
    return batch


# What a forked batch worker needs; set in the parent just before the pool forks.
_WORKER: tuple[ExampleBuilder, Rows, TrainConfig] | None = None


def _worker_batch(step: int) -> tuple[list[Example], BuildStats]:
    assert _WORKER is not None
    builder, rows, config = _WORKER
    builder.stats = BuildStats()
    return draw_batch(builder, rows, config, step), builder.stats


class BatchSource:
    """Batches for consecutive steps, built in `config.workers` forked processes (`rows` may be a
    closure: nothing is pickled but step numbers and examples) and kept at most `ahead` steps in
    advance, or in this process when `workers` is 0. Either way step s gets the same batch."""

    def __init__(self, builder: ExampleBuilder, rows: Rows, config: TrainConfig, first: int):
        global _WORKER
        self.builder, self.rows, self.config = builder, rows, config
        self.next_step, self.pool, self.pending = first, None, {}
        if config.workers > 0:
            _WORKER = (builder, rows, config)
            self.pool = multiprocessing.get_context("fork").Pool(config.workers)
            self.ahead = 4 * config.workers
            self.submitted = first

    def get(self, step: int) -> list[Example]:
        if self.pool is None:
            return draw_batch(self.builder, self.rows, self.config, step)
        while self.submitted < min(step + self.ahead, self.config.steps):
            self.pending[self.submitted] = self.pool.apply_async(_worker_batch, (self.submitted,))
            self.submitted += 1
        batch, stats = self.pending.pop(step).get()
        self.builder.stats.rows += stats.rows
        self.builder.stats.lowered += stats.lowered
        self.builder.stats.as_read += stats.as_read
        for reason, count in stats.skipped.items():
            self.builder.stats.skipped[reason] = self.builder.stats.skipped.get(reason, 0) + count
        return batch

    def close(self) -> None:
        if self.pool is not None:
            self.pool.terminate()
            self.pool.join()
            self.pool = None


def _record(step: int, window: Sequence[float], started: float) -> dict[str, float]:
    """One entry of the loss history: mean loss of the steps since the last entry."""
    return {
        "step": step,
        "loss": round(sum(window) / len(window), 4),
        "seconds": round(time.monotonic() - started, 1),
    }


def _write_json(path: Path, value: Any, indent: int | None = 2) -> None:
    atomic_write(path, lambda tmp: tmp.write_text(json.dumps(value, indent=indent)))


def _save_state(out: Path, optimizer: torch.optim.Optimizer, step: int, history: list) -> None:
    """The optimizer state of `step`, the JSON last (it is what says a checkpoint is there)."""
    tensors, meta = {}, {"step": step, "history": history, "params": {}}
    for pid, state in optimizer.state_dict()["state"].items():
        entry = {}
        for key, value in state.items():
            if torch.is_tensor(value) and value.dim() > 0:
                tensors[f"{pid}.{key}"] = value.contiguous()
            else:
                entry[key] = float(value)
        meta["params"][str(pid)] = entry
    atomic_write(
        out / STATE_WEIGHTS,
        lambda tmp: save_file(tensors, str(tmp), metadata={STEP_KEY: str(step)}),
    )
    _write_json(out / STATE_JSON, meta, indent=None)


def _file_step(path: Path) -> int | None:
    """The step a safetensors file records (`STEP_KEY`), None where it records none."""
    with safe_open(str(path), "pt") as handle:
        step = (handle.metadata() or {}).get(STEP_KEY)
    return None if step is None else int(step)


def _check_state(out: Path) -> None:
    """Refuse a checkpoint whose files hold different steps (a run stopped while saving)."""
    meta = json.loads((out / STATE_JSON).read_text())
    step = meta["step"]
    names = ["model.safetensors"] if meta.get("complete") else ["model.safetensors", STATE_WEIGHTS]
    for name in names:
        if not (out / name).is_file():
            raise SpecError(f"{out}: {STATE_JSON} is there but {name} is not: the run's last "
                            "checkpoint is incomplete and cannot be resumed; train again into "
                            "a new directory")  # fmt: skip
        held = _file_step(out / name)
        if held is not None and held != step:
            raise SpecError(f"{out}: the last checkpoint's files disagree ({STATE_JSON} is at "
                            f"step {step}, {name} at step {held}): the run was stopped while "
                            "saving it and cannot be resumed exactly; train again into a new "
                            "directory")  # fmt: skip


def _load_state(out: Path, optimizer: torch.optim.Optimizer) -> tuple[int, list]:
    meta = json.loads((out / STATE_JSON).read_text())
    tensors = load_file(str(out / STATE_WEIGHTS))
    state = optimizer.state_dict()
    for pid_text, scalars in meta["params"].items():
        pid = int(pid_text)
        entry = {k: torch.tensor(v) for k, v in scalars.items()}
        for name, value in tensors.items():
            owner, _, key = name.partition(".")
            if int(owner) == pid:
                entry[key] = value
        state["state"][pid] = entry
    optimizer.load_state_dict(state)
    return meta["step"], meta["history"]


def save_checkpoint(
    model: torch.nn.Module,
    source: Path,
    out: Path,
    dtype: torch.dtype = torch.float32,
    step: int | None = None,
) -> None:
    """Write the model in its family's checkpoint format next to the source's tokenizer files,
    each file renamed into place whole; `step` is recorded in the weights' metadata."""
    raw = json.loads((source / "config.json").read_text())
    family = family_for(raw["model_type"], raw)
    names = family.weight_names(family.parse(raw))
    state = model.state_dict()
    tensors = {
        ckpt: state[engine].detach().to(dtype).contiguous() for ckpt, engine in names.items()
    }
    out.mkdir(parents=True, exist_ok=True)
    metadata = {"format": "pt"} | ({} if step is None else {STEP_KEY: str(step)})
    atomic_write(
        out / "model.safetensors", lambda tmp: save_file(tensors, str(tmp), metadata=metadata)
    )
    # Every metadata file a checkpoint may spell its tokenizer and special tokens in (a Dream
    # fine-tune needs vocab.json + merges.txt, generation_config.json's end-of-turn ids, ...).
    for name in METADATA_FILES:
        if (source / name).is_file() and source.resolve() != out.resolve():
            atomic_write(out / name, lambda tmp, name=name: shutil.copyfile(source / name, tmp))


def _carry_files(init: Path, out: Path) -> None:
    """The starting checkpoint's other files (licences, NOTICE, `evidence_ranker.json`, ...), as
    `decide merge` carries A's: not its weights, metadata files (`save_checkpoint`) or the
    `train_*` files of the run that wrote it."""
    for item in init.iterdir():
        name = item.name
        if (
            item.is_file()
            and item.suffix != ".safetensors"
            and name not in (INDEX_NAME, *METADATA_FILES)
            and not name.startswith(("train_", "."))
        ):
            atomic_write(out / name, lambda tmp, item=item: shutil.copyfile(item, tmp))


def run_record(config: TrainConfig, about: dict[str, Any] | None = None) -> dict[str, Any]:
    """What `train_config.json` holds: the config, and what the caller says about the run."""
    return asdict(config) | dict(about or {})


def _comparable(value: Any) -> Any:
    """A recorded value as a resume compares it: where a file was read is not what it holds."""
    return {k: v for k, v in value.items() if k != "path"} if isinstance(value, dict) else value


def check_output(
    init: Path,
    out: Path,
    config: TrainConfig,
    *,
    resume: bool,
    about: dict[str, Any] | None = None,
) -> None:
    """Refuse, before anything is written: `out` that is the starting checkpoint or a file; a
    resume into a directory that holds no training run, or a run that differs from this one in
    a `RUN_FIELDS` field or a key of `about` (the recorded value differs, a dict's "path" aside;
    a key the record lacks, written before it was recorded, is not compared)."""
    if out.resolve() == Path(init).resolve():
        raise SpecError(f"-o {out} is the starting checkpoint (--init {init}): training would "
                        "overwrite it; choose another output directory")  # fmt: skip
    if out.exists() and not out.is_dir():
        raise SpecError(f"{out}: output path exists and is not a directory")
    if not resume or not out.is_dir():
        return
    if not (out / CONFIG_JSON).is_file():
        found = [p.name for p in out.iterdir() if p.name != "scratch" and p.name[0] != "."]
        if found or (out / STATE_JSON).is_file():
            raise SpecError(f"{out}: holds no training run to resume (no {CONFIG_JSON}); "
                            "choose another output directory, without --resume")  # fmt: skip
        return
    stored = json.loads((out / CONFIG_JSON).read_text())
    current = run_record(config, about)
    differ = []
    for key in (*RUN_FIELDS, *(about or {})):
        if key in stored and _comparable(stored[key]) != _comparable(current.get(key)):
            if key == "data":
                differ.append("the training data (its rows differ)")
            else:
                differ.append(f"{key} ({stored[key]!r} in the run, {current.get(key)!r} now)")
    if differ:
        raise SpecError(f"{out}: --resume continues the run it holds, which differs from this "
                        f"one in {'; '.join(differ)}: pass the run's options and data, or train "
                        "into a new directory")  # fmt: skip


def train(
    init: Path,
    rows: Rows,
    out: Path,
    config: TrainConfig,
    *,
    resume: bool = False,
    progress: bool | None = None,
    log: Callable[[str], None] = print,
    about: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Fine-tune the checkpoint at `init`; `rows(rng)` draws one training row. Writes the model
    (fp32) to `out` every `save_every` steps and at the end; returns a summary. `config.stop_at`
    ends the run early at that step as an interruption would (resumable to the same weights).
    `about` is recorded in `train_config.json` with the config, and a resume must agree with it
    (`check_output`). A run that does not resume a saved state (no `resume`, or nothing saved
    yet) starts from `init`, and first removes the state files of an earlier run in `out`."""
    check_output(init, out, config, resume=resume, about=about)
    if config.threads:
        torch.set_num_threads(config.threads)
    if config.bf16 is None:
        config = replace(config, bf16=bf16_is_fast(config.device))
    torch.manual_seed(config.seed)
    source = out if resume and (out / STATE_JSON).is_file() else init
    if source == out:
        _check_state(out)
    loaded = load_model(source, dtype="float32", device=config.device)
    model = loaded.model.train().requires_grad_(True)
    if hasattr(model, "dropout"):
        model.dropout = config.dropout
    autocast = torch.device(config.device).type
    builder = ExampleBuilder(
        loaded.config,
        loaded.tokenizer,
        strict=config.strict_questions,
        short_slots=config.short_slots,
    )
    pad_id = builder.book.filler_id
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.dim() < 2 or "norm" in name else decay).append(p)
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": config.weight_decay},
         {"params": no_decay, "weight_decay": 0.0}],
        lr=config.lr,
    )  # fmt: skip
    step, history = 0, []
    if source == out:
        if json.loads((out / STATE_JSON).read_text()).get("complete"):
            log(f"{out}: the run is complete; nothing to resume")
            return json.loads((out / SUMMARY_JSON).read_text())
        step, history = _load_state(out, optimizer)
        log(f"resuming at step {step}")
    batches = BatchSource(builder, rows, config, step)
    try:
        # The first batch before anything is written: rows none of which can be taught stop the
        # run (`UnusableRows`) without leaving a model-looking directory behind.
        first = None
        if step < config.steps and (config.stop_at is None or step < config.stop_at):
            first = batches.get(step)
        out.mkdir(parents=True, exist_ok=True)
        if source != out:
            # An earlier run's state would be "resumed" by the next --resume: gone before
            # anything of this run is written (the JSON first: it says a checkpoint is there).
            for name in (STATE_JSON, STATE_WEIGHTS, SUMMARY_JSON):
                (out / name).unlink(missing_ok=True)
        _write_json(out / CONFIG_JSON, run_record(config, about))
        if source != out:
            save_checkpoint(model, init, out, step=step)
            _carry_files(init, out)
    except BaseException:
        batches.close()
        raise

    started = time.monotonic()
    bar = Progress(total=config.steps, enabled=progress, label="training", unit="steps")
    bar.done = step
    window: list[float] = []
    try:
        while step < config.steps:
            if config.minutes is not None and time.monotonic() - started > 60 * config.minutes:
                log(f"time budget of {config.minutes} minutes reached at step {step}")
                break
            if config.stop_at is not None and step >= config.stop_at:
                break
            gen = torch.Generator().manual_seed(config.seed * 1_000_003 + step)
            torch.manual_seed(config.seed * 1_000_003 + step)  # dropout: per step, so resumable
            batch = first if first is not None else batches.get(step)
            first = None
            for group in optimizer.param_groups:
                group["lr"] = lr_at(step, config)
            with torch.autocast(autocast, dtype=torch.bfloat16, enabled=config.bf16):
                loss = batch_loss(
                    model,
                    batch,
                    loaded.config.mask_token_id,
                    pad_id,
                    gen,
                    config.filler_weight,
                    config.weighting,
                    config.cap_weight,
                    config.option_masking,
                )
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            window.append(loss.item())
            bar.advance(1, status=f"loss {sum(window) / len(window):.3f}")
            if step % 50 == 0 or step == config.steps:
                history.append(_record(step, window, started))
                window = []
            if step % config.save_every == 0:
                save_checkpoint(model, init, out, step=step)
                _save_state(out, optimizer, step, history)
    finally:
        batches.close()
    bar.close()
    if window:  # stopped between two loss records (time budget, stop_at): keep the last steps
        history.append(_record(step, window, started))
    save_checkpoint(model, init, out, step=step)
    _save_state(out, optimizer, step, history)
    summary = {
        "steps": step,
        "examples": step * config.batch_size,
        "seconds": round(time.monotonic() - started, 1),
        "history": history,
        "rows_seen": builder.stats.rows,
        "rows_skipped": builder.stats.skipped,
        "answers_lowercased": builder.stats.lowered,
        "answers_as_read": builder.stats.as_read,
        "final_loss": history[-1]["loss"] if history else math.nan,
    }
    _write_json(out / SUMMARY_JSON, summary)
    if step >= config.steps:  # complete: the optimizer state (twice the weights) has no use left
        _write_json(out / STATE_JSON, {"step": step, "history": history, "complete": True},
                    indent=None)  # fmt: skip
        (out / STATE_WEIGHTS).unlink(missing_ok=True)
    return summary
