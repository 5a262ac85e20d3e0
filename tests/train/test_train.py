"""`decide train`: masked-diffusion fine-tuning packed exactly as inference packs, written in the
real checkpoint format, deterministic for a seed, resumable to the same weights."""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import replace

import numpy as np
import polars as pl
import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load_file
from tokenizers import Tokenizer

from decide.cli import main
from decide.engine import load_model
from decide.engine.loader import load_config
from decide.jobs.spec import SpecError
from decide.jobs.windows import Window
from decide.train import contractnli
from decide.train.bundled import (
    PACKAGE_MODEL,
    WINDOW_MASKING,
    contractnli_ranker,
    contractnli_windows,
    row_sampler,
)
from decide.train.contractnli import LABELS
from decide.train.examples import ExampleBuilder, RowMasking
from decide.train.loop import (
    TrainConfig,
    batch_loss,
    bf16_is_fast,
    draw_batch,
    masked_positions,
    position_weights,
    train,
)
from decide.train.synthetic import DEPENDENCY_INPUTS, derived_drill, sample_document
from decide.train.windows import WindowRows, holds


@pytest.fixture(scope="module")
def base(tiny_checkpoint):
    return tiny_checkpoint("bert", vocab="small", init_std=0.1)


def _rows(rng: random.Random):
    _, text, questions, gold = sample_document(rng, "train")
    return text, questions, gold


def _weights(path) -> dict[str, torch.Tensor]:
    return load_file(str(path / "model.safetensors"))


CONFIG = TrainConfig(steps=4, batch_size=2, warmup=2, save_every=2, seed=3, bf16=False)


def test_examples_are_packed_like_inference(base) -> None:
    loaded = load_model(base)
    builder = ExampleBuilder(loaded.config, loaded.tokenizer)
    rng = random.Random(0)
    text, questions, gold = _rows(rng)
    example = builder.build(text, questions, gold, rng)
    assert example is not None
    # The prompt is exactly the inference prompt; slots hold the gold spelling, then filler.
    compiled = [builder.book.compile(__import__("decide.jobs.spec", fromlist=["Question"])
                .Question.model_validate(q)) for q in questions]  # fmt: skip
    packed = builder.packer.pack(text, compiled)
    assert example.ids[: len(packed.request.prompt)] == list(packed.request.prompt)
    filler = builder.book.filler_id
    for position, is_value in zip(example.slots, example.is_value, strict=True):
        assert (example.ids[position] != filler) == is_value
    decoded = json.loads(loaded.tokenizer.decode(
        [t for t in example.ids[len(packed.request.prompt):] if t != filler][:-1]))  # fmt: skip
    assert decoded == {q["id"]: gold[q["id"]] for q in questions} or builder.stats.lowered


def test_gold_strings_an_uncased_vocabulary_cannot_spell_are_taught_as_it_reads_them() -> None:
    """The bundled vocabulary strips accents and closes up the spaces around digits and
    punctuation: "Tent 4P" has no spelling, lowered or not, but the tokenizer reads it as
    "tent4p", as an extract slot copies it from a document. Such a gold answer is taught as read
    (before, its whole row was skipped); a string no reading fits still skips its row."""
    from decide.jobs.spec import Question

    loaded = load_model(PACKAGE_MODEL)
    builder = ExampleBuilder(loaded.config, loaded.tokenizer)
    question = builder.book.compile(Question.model_validate(
        {"id": "product", "text": "Which product?", "schema": {"type": "string", "maxLength": 20}}
    ))  # fmt: skip
    filler, vocab = builder.book.filler_id, question.slot.vocab

    def taught(gold: str) -> str | None:
        tokens = builder.target(question, gold)
        return None if tokens is None else json.loads(
            vocab.detokenize([t for t in tokens if t != filler]))  # fmt: skip

    assert taught("laptop") == "laptop" and taught("Paris") == "paris"
    assert (builder.stats.lowered, builder.stats.as_read) == (1, 0)
    assert taught("Tent 4P") == "tent4p"
    assert taught("São Paulo") == "sao paulo"
    assert taught("Smith, John") == "smith,john"
    assert builder.stats.as_read == 3
    assert taught("Nomad Expedition Tent 4P") is None  # over maxLength however it is read
    rng = random.Random(0)
    text = "Hi, my Tent 4P from Kitapçı Store arrived torn. Please send a new one."
    example = builder.build(text, [{"id": "product", "text": "Which product?",
                                    "schema": {"type": "string", "maxLength": 20}}],
                            {"product": "Tent 4P"}, rng)  # fmt: skip
    assert example is not None and not builder.stats.skipped


def test_upper_case_options_are_taught_as_the_slot_spells_them() -> None:
    """An option or code the uncased vocabulary cannot spell ("Yes", "AB-1234") is taught in the
    spelling its slot gives it ("yes", "ab-1234", docs/schemas.md), so its rows are trained, not
    skipped."""
    from decide.jobs.spec import Question

    loaded = load_model(PACKAGE_MODEL)
    builder = ExampleBuilder(loaded.config, loaded.tokenizer)
    filler = builder.book.filler_id
    cases = [
        ({"enum": ["Yes", "No"]}, "Yes"),
        ({"type": "string", "pattern": "^[A-Z]{2}-[0-9]{4}$"}, "AB-1234"),  # spelled folded
        ({"type": "string", "format": "date-time"}, "2024-03-01T09:30:00Z"),
    ]
    for n, (schema, gold) in enumerate(cases, start=1):
        question = builder.book.compile(Question.model_validate(
            {"id": "q", "text": "Which?", "schema": schema}
        ))  # fmt: skip
        tokens = builder.target(question, gold)
        assert tokens is not None and builder.stats.lowered == n, schema
        state = question.slot.new_constraint(filler, len(tokens))
        assert all(state.commit(p, t) for p, t in enumerate(tokens))
        assert state.decode().value == gold


def test_short_slots_lay_short_values_out_as_grown_decoding_does() -> None:
    """With `short_slots` 1, an open-ended slot whose gold value ends inside its first positions
    is laid out with those only (the value, then at least one filler), as `grow_slots` decoding
    lays it out; a value that would fill them keeps the whole slot (decoding grows such a slot);
    with 0 every slot has its whole length."""
    from decide.jobs.spec import Question

    loaded = load_model(PACKAGE_MODEL)
    question = {"id": "name", "text": "Whose?", "schema": {"type": "string"}}
    compiled = ExampleBuilder(loaded.config, loaded.tokenizer).book.compile(
        Question.model_validate(question)
    )
    first, whole = compiled.slot.first_length, compiled.slot.length
    assert first < whole
    for share, gold, length in (
        (1.0, "ann", first),
        (1.0, " ".join(["ann"] * 8), whole),
        (0.0, "ann", whole),
    ):
        builder = ExampleBuilder(loaded.config, loaded.tokenizer, short_slots=share)
        filler = builder.book.filler_id
        example = builder.build("Ann wrote.", [question], {"name": gold}, random.Random(0))
        assert example is not None
        assert len(example.slots) == length
        assert example.slots == list(range(example.slots[0], example.slots[0] + length))
        values = [example.ids[p] for p in example.slots]
        text = compiled.slot.vocab.detokenize([t for t in values if t != filler])
        assert json.loads(text) == gold
        assert values[-1] == filler or length == whole
        tail = example.ids[example.slots[-1] + 1 :]
        assert loaded.tokenizer.decode(tail).startswith("}")  # the skeleton follows the slot
        # what follows a short slot is encoded where the whole layout puts it, as decoding does
        end = example.slots[-1] + 1
        if length == first:
            assert len(example.shifts) == len(example.ids)
            assert set(example.shifts[:end]) == {0} and set(example.shifts[end:]) == {whole - first}
        else:
            assert example.shifts == []
        if example.shifts:  # they reach the forward (`position_shift`): same masks, other loss
            losses = [
                batch_loss(loaded.model, [e], loaded.config.mask_token_id, filler,
                           torch.Generator().manual_seed(0), 0.25).item()
                for e in (example, replace(example, shifts=[]))
            ]  # fmt: skip
            assert losses[0] != losses[1]
    with pytest.raises(ValueError, match="short_slots"):
        ExampleBuilder(loaded.config, loaded.tokenizer, short_slots=1.5)


def test_loss_masks_answer_slots_only(base) -> None:
    loaded = load_model(base)
    builder = ExampleBuilder(loaded.config, loaded.tokenizer)
    rng = random.Random(1)
    examples = [builder.build(*_rows(rng), rng) for _ in range(3)]
    seen: list[torch.Tensor] = []
    model = loaded.model.train()

    class Recorder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = model

        def forward(self, ids, cache, window_lens):
            seen.append(ids.clone())
            return self.inner(ids, cache, window_lens=window_lens)

        def logits(self, hidden):
            return self.inner.logits(hidden)

    loss = batch_loss(Recorder(), examples, loaded.config.mask_token_id, builder.book.filler_id,
                      torch.Generator().manual_seed(0), 0.25)  # fmt: skip
    assert torch.isfinite(loss) and loss > 0
    masked = seen[0] == loaded.config.mask_token_id
    for row, example in enumerate(examples):
        positions = set(torch.nonzero(masked[row]).flatten().tolist())
        assert positions and positions <= set(example.slots)  # never a prompt or skeleton token


def test_option_masking_masks_a_finite_slot_whole(base) -> None:
    """With option masking a finite slot (enum, boolean) is masked all or nothing, as the sampler
    decides it as one option; other slots are masked position by position, and the same draws
    give the same mask."""
    loaded = load_model(base)
    builder = ExampleBuilder(loaded.config, loaded.tokenizer)
    rng = random.Random(2)
    examples = [builder.build(*_rows(rng), rng) for _ in range(6)]
    partial_free = split = 0
    for e in examples:
        assert e is not None and any(e.finite) and not all(e.finite)
        for seed in range(20):
            t = (seed + 1) / 21
            picked = set(masked_positions(e, t, torch.Generator().manual_seed(seed), True))
            again = masked_positions(e, t, torch.Generator().manual_seed(seed), True)
            assert picked == set(again) and picked
            for q in set(e.question):
                mine = {k for k, qq in enumerate(e.question) if qq == q}
                inside = mine & picked
                if e.finite[min(mine)]:
                    assert inside in (set(), mine)
                    partial_free += 1
                else:
                    split += 0 < len(inside) < len(mine)
            plain = set(masked_positions(e, t, torch.Generator().manual_seed(seed), False))
            assert plain and plain <= set(range(len(e.slots)))
    assert partial_free and split  # both kinds of slot were exercised


def test_given_answers_stay_in_their_slots_and_are_never_masked(base) -> None:
    """`given` questions keep their gold answers in the block and drop out of the maskable slots;
    a row whose every answer is given is skipped, counted, not trained on."""
    loaded = load_model(base)
    builder = ExampleBuilder(loaded.config, loaded.tokenizer)
    text, questions, gold, given = derived_drill(random.Random(2), "train")
    full = builder.build(text, questions, gold, random.Random(0))
    drill = builder.build(text, questions, gold, random.Random(0), given)
    assert full is not None and drill is not None
    assert drill.ids == full.ids  # the same block, gold answers everywhere
    assert set(drill.slots) < set(full.slots)
    # what remains maskable is exactly the derived question's slot (the last question)
    assert set(drill.question) == {max(full.question)}
    masked = batch_loss(loaded.model, [drill], loaded.config.mask_token_id,
                        builder.book.filler_id, torch.Generator().manual_seed(0), 0.25)  # fmt: skip
    assert torch.isfinite(masked)
    every = {q["id"] for q in questions}
    assert builder.build(text, questions, gold, random.Random(0), every) is None
    assert builder.stats.skipped["every answer given"] == 1


def test_the_recipe_draws_drills_with_given_answers(base) -> None:
    """The bundled recipe's rows carry their given answers through `draw_batch`: with every
    row an over_limit drill, the claim's amount and policy limit are in every block and never
    maskable."""
    loaded = load_model(base)
    builder = ExampleBuilder(loaded.config, loaded.tokenizer)
    only = {name: 0.0 for name in DEPENDENCY_INPUTS} | {"over_limit": 1.0}
    rows = row_sampler(
        loaded.tokenizer.tokenizer, mams_share=0.0, drill_share=1.0, drill_weights=only
    )
    batch = draw_batch(builder, rows, replace(CONFIG, batch_size=6), step=0)
    assert len(batch) == 6 and all(example.slots for example in batch)
    # the same rows drawn again, built without their given ids: the amount and limit slots come
    # back, so the drills above left out exactly those
    rng = random.Random(0)
    for _ in range(6):
        text, questions, gold, given = rows(rng)
        assert given == {"amount", "policy_limit"}
        drill = builder.build(text, questions, gold, random.Random(1), given)
        full = builder.build(text, questions, gold, random.Random(1))
        ids = [q["id"] for q in questions]
        left_out = set(full.question) - set(drill.question)
        assert left_out == {ids.index("amount"), ids.index("policy_limit")}


def test_the_recipe_mixes_contractnli_windows_at_its_share() -> None:
    """With windows, `windows_share` of the recipe's rows are ContractNLI windows (17-hypothesis
    blocks of at most six, weighted found answers), planned for the bundled model's 512
    positions; without, the recipe draws what it drew before windows existed."""
    tokenizer = Tokenizer.from_file(str(PACKAGE_MODEL / "tokenizer.json"))
    windows = contractnli_windows(PACKAGE_MODEL)
    mixed = row_sampler(tokenizer, windows=windows, windows_share=0.5)
    plain = row_sampler(tokenizer)
    before = row_sampler(tokenizer, windows=None, windows_share=0.9)
    rng = random.Random(7)
    drawn = [mixed(rng) for _ in range(60)]
    nli = [r for r in drawn if r[1] and r[1][0]["schema"] == {"enum": list(LABELS.values())}]
    assert 15 <= len(nli) <= 45
    assert all(len(r[1]) <= 6 and len(r) == 6 and r[5] == WINDOW_MASKING for r in nli)
    a, b = random.Random(3), random.Random(3)
    assert [plain(a)[:3] for _ in range(10)] == [before(b)[:3] for _ in range(10)]


def test_same_seed_same_weights_and_resume_matches(base, tmp_path) -> None:
    a = train(base, _rows, tmp_path / "a", CONFIG, progress=False, log=lambda _: None)
    train(base, _rows, tmp_path / "b", CONFIG, progress=False, log=lambda _: None)
    wa, wb = _weights(tmp_path / "a"), _weights(tmp_path / "b")
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert a["steps"] == 4 and all(h["loss"] > 0 for h in a["history"])
    # Interrupted after 2 steps, then resumed: the same weights as the uninterrupted run.
    train(base, _rows, tmp_path / "c", replace(CONFIG, stop_at=2), progress=False,
          log=lambda _: None)  # fmt: skip
    wc = _weights(tmp_path / "c")
    assert not all(torch.equal(wa[k], wc[k]) for k in wa)
    train(base, _rows, tmp_path / "c", CONFIG, resume=True, progress=False, log=lambda _: None)
    wc = _weights(tmp_path / "c")
    assert all(torch.equal(wa[k], wc[k]) for k in wa)
    assert not any(torch.equal(wa[k], load_file(str(base / "model.safetensors"))[k])
                   for k in wa if k.endswith("query.weight"))  # fmt: skip


def test_batches_built_by_workers_are_the_in_process_batches(base, tmp_path) -> None:
    logs: list[str] = []
    a = train(base, _rows, tmp_path / "a", CONFIG, progress=False, log=logs.append)
    b = train(base, _rows, tmp_path / "b", replace(CONFIG, workers=2), progress=False,
              log=logs.append)  # fmt: skip
    wa, wb = _weights(tmp_path / "a"), _weights(tmp_path / "b")
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert a["history"] == [{**h, "seconds": a["history"][i]["seconds"]}
                            for i, h in enumerate(b["history"])]  # fmt: skip
    assert a["rows_seen"] == b["rows_seen"] >= 4 * CONFIG.batch_size
    # Stopped at step 2 (`stop_at`, as `decide train --stop-at`), then resumed with workers:
    # the same batches, the same weights.
    train(base, _rows, tmp_path / "c", replace(CONFIG, workers=2, stop_at=2), progress=False,
          log=logs.append)  # fmt: skip
    stopped = json.loads((tmp_path / "c" / "train_summary.json").read_text())
    assert stopped["steps"] == 2 and stopped["history"][-1]["step"] == 2  # the last loss kept
    train(base, _rows, tmp_path / "c", replace(CONFIG, workers=2), resume=True, progress=False,
          log=logs.append)  # fmt: skip
    wc = _weights(tmp_path / "c")
    assert all(torch.equal(wa[k], wc[k]) for k in wa)


def test_cli_trains_from_parquet_and_from_scratch(base, tmp_path) -> None:
    rng = random.Random(5)
    rows = [sample_document(rng, "train") for _ in range(6)]
    pl.DataFrame({
        "doc_id": list(range(6)),
        "document": [r[1] for r in rows],
        "questions": [[{"id": q["id"], "text": q["text"], "schema": json.dumps(q["schema"])}
                       for q in r[2]] for r in rows],
        "gold": [json.dumps(r[3]) for r in rows],
    }).write_parquet(tmp_path / "labelled.parquet")  # fmt: skip
    for extra, out in (
        (["--weighting", "questions", "--cap-weight"], "tuned"),
        (["--from-scratch", "--bf16"], "scratch"),
    ):
        result = CliRunner().invoke(main, [
            "train", str(tmp_path / "labelled.parquet"), "--init", str(base), "-o",
            str(tmp_path / out), "--steps", "2", "--batch-size", "2", "--no-progress", *extra])  # fmt: skip
        assert result.exit_code == 0, result.output
        loaded = load_model(tmp_path / out)  # the real format, loadable by the engine
        assert loaded.config.family == "bert"
        recorded = json.loads((tmp_path / out / "train_config.json").read_text())
        assert recorded["weighting"] == ("questions" if out == "tuned" else "positions")
        assert recorded["cap_weight"] is (out == "tuned")
        # bf16 autocast: asked for, or by default only where this CPU runs it faster
        assert recorded["bf16"] is (bf16_is_fast("cpu") if out == "tuned" else True)
    scratch = _weights(tmp_path / "scratch")["bert.encoder.layer.0.attention.self.query.weight"]
    tuned = _weights(tmp_path / "tuned")["bert.encoder.layer.0.attention.self.query.weight"]
    assert not torch.allclose(scratch, tuned)
    bad = CliRunner().invoke(main, ["train", str(tmp_path / "labelled.parquet"), "-o", "x"])
    assert bad.exit_code == 2 and "--init" in bad.output


def test_position_weights_per_position_and_per_question(base) -> None:
    loaded = load_model(base)
    builder = ExampleBuilder(loaded.config, loaded.tokenizer)
    rng = random.Random(3)
    # The first example whose block mixes slot lengths (which one depends on the generator).
    for _ in range(50):
        example = builder.build(*_rows(rng), rng)
        assert example is not None and len(example.question) == len(example.slots)
        counts = Counter(example.question)
        if len(counts) >= 2 and len(set(counts.values())) >= 2:
            break
    assert len(counts) >= 2 and len(set(counts.values())) >= 2  # slots of different lengths
    every = list(range(len(example.slots)))
    # t = 1, filler weighs as much as a value: positions all alike, summing to 1 ...
    flat = position_weights(example, every, 1.0, 1.0, "positions")
    assert all(w == pytest.approx(1 / len(every)) for w in flat)
    # ... or each question summing to 1 / (number of questions), whatever its slot length.
    per_question = position_weights(example, every, 1.0, 1.0, "questions")
    for q in counts:
        total = sum(
            w for w, owner in zip(per_question, example.question, strict=True) if owner == q
        )
        assert total == pytest.approx(1 / len(counts))
    # 1/t and the filler weight scale both alike.
    half = position_weights(example, every, 0.5, 0.25, "questions")
    for k, (a, b) in enumerate(zip(per_question, half, strict=True)):
        assert b == pytest.approx(a * 2 * (1.0 if example.is_value[k] else 0.25))
    with pytest.raises(ValueError, match="weighting"):
        position_weights(example, every, 1.0, 1.0, "tokens")
    # Capped: 1/max(t, share picked). Every position picked at t = 0.5 weighs as at t = 1; half
    # of them picked at t = 0.5 weigh as uncapped.
    capped = position_weights(example, every, 0.5, 0.25, "questions", cap=True)
    assert capped == pytest.approx(position_weights(example, every, 1.0, 0.25, "questions"))
    half_picked = every[::2]
    share = len(half_picked) / len(every)
    assert position_weights(example, half_picked, share, 1.0, "positions", cap=True) == (
        pytest.approx(position_weights(example, half_picked, share, 1.0, "positions"))
    )


def test_capped_weight_bounds_a_drill_with_one_maskable_slot(base) -> None:
    """A derived drill's one slot is masked whatever t is drawn: uncapped its weight grows as 1/t,
    capped it is what a fully masked block weighs (1 in all)."""
    loaded = load_model(base)
    builder = ExampleBuilder(loaded.config, loaded.tokenizer)
    text, questions, gold, given = derived_drill(random.Random(4), "train")
    drill = builder.build(text, questions, gold, random.Random(0), given)
    assert drill is not None
    every = list(range(len(drill.slots)))
    for t in (0.5, 0.01, 1e-4):
        assert sum(position_weights(drill, every, t, 1.0, "positions")) == pytest.approx(1 / t)
        assert sum(position_weights(drill, every, t, 1.0, "positions", cap=True)) == (
            pytest.approx(1.0)
        )
    # the option reaches the loss: smaller (the drawn t is below the masked share of 1)
    gen = lambda: torch.Generator().manual_seed(5)  # noqa: E731
    args = (loaded.config.mask_token_id, builder.book.filler_id)
    uncapped = batch_loss(loaded.model, [drill], *args, gen(), 1.0)
    capped = batch_loss(loaded.model, [drill], *args, gen(), 1.0, "positions", True)
    assert capped < uncapped and torch.isfinite(capped)
    # a row's own masking (`RowMasking`) caps its example in a run that does not cap
    own = builder.build(
        text, questions, gold, random.Random(0), given, None, RowMasking(False, True)
    )
    assert own is not None and own.masking == RowMasking(option_masking=False, cap_weight=True)
    assert torch.equal(batch_loss(loaded.model, [own], *args, gen(), 1.0), capped)


def test_a_rows_option_masking_masks_its_example_whole_in_a_run_without_it(base) -> None:
    """The sixth element of a row (the bundled recipe's ContractNLI windows) masks its finite
    slots whole while the run's other rows are masked position by position."""
    loaded = load_model(base)
    builder = ExampleBuilder(loaded.config, loaded.tokenizer)
    rng = random.Random(2)
    row = _rows(rng)
    whole = builder.build(*row, random.Random(0), (), None, RowMasking(option_masking=True))
    plain = builder.build(*row, random.Random(0))
    assert whole is not None and plain is not None and whole.masking.option_masking
    seen: list[torch.Tensor] = []

    class Recorder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = loaded.model

        def forward(self, ids, cache, window_lens):
            seen.append(ids.clone())
            return self.inner(ids, cache, window_lens=window_lens)

        def logits(self, hidden):
            return self.inner.logits(hidden)

    masks = {}
    mask_id = loaded.config.mask_token_id
    for name, example in (("whole", whole), ("plain", plain)):
        batch_loss(Recorder(), [example], mask_id, builder.book.filler_id,
                   torch.Generator().manual_seed(11), 0.25)  # fmt: skip
        masked = set(torch.nonzero(seen[-1][0] == mask_id).flatten().tolist())
        gen = torch.Generator().manual_seed(11)
        t = 1.0 - torch.rand((), generator=gen).item()
        expected = masked_positions(example, t, gen, option_masking=name == "whole")
        assert masked == {example.slots[k] for k in expected}
        masks[name] = masked
    assert masks["whole"] != masks["plain"]  # the row's flag changed how it was masked


def test_a_refused_row_is_skipped_or_in_strict_mode_stops_the_build(base) -> None:
    """User data: a row whose questions the runner refuses is skipped and counted. Our own data
    (the bundled recipe, `TrainConfig.strict_questions`): the same row is an error naming why,
    not a silently different model."""
    loaded = load_model(base)
    text, questions, gold, _ = derived_drill(random.Random(2), "train")
    bad = [dict(questions[0], unit="days")]  # `unit` without `extract`: refused
    lenient = ExampleBuilder(loaded.config, loaded.tokenizer)
    assert lenient.build(text, bad, gold, random.Random(0)) is None
    assert sum(lenient.stats.skipped.values()) == 1
    strict = ExampleBuilder(loaded.config, loaded.tokenizer, strict=True)
    assert strict.build(text, questions, gold, random.Random(0)) is not None
    with pytest.raises(SpecError, match=r"refused.*unit"):
        strict.build(text, bad, gold, random.Random(0))


def test_the_recipe_reads_contractnli_windows_with_its_evidence_ranker() -> None:
    """With windows the recipe fits the ContractNLI evidence ranker (train50's training part,
    threshold on its validation part) and reads windows as `decide run` will with it: each
    hypothesis only in windows whose evidence probability reaches the threshold. On the
    validation NDAs, in the spec's windows, the window it ranks first holds a gold evidence span
    for most hypotheses that have one (0.88 measured on 2026-12-06; BM25 over the hypothesis
    text 0.68)."""
    ranker = contractnli_ranker()
    split = contractnli.load_split("train50")
    assert all(ranker.knows(q["text"]) for q in contractnli.questions(split))
    assert ranker.about["validation_rows"] == 9 and 0.05 <= ranker.threshold <= 0.95
    _, config, tokenizer = load_config(PACKAGE_MODEL)
    validation = contractnli.documents(split, "validation")
    planned = WindowRows(config, tokenizer, validation, settings=contractnli.window_settings())
    hits = []
    for i, doc in enumerate(validation):
        for block, group in enumerate(planned._groups(doc)):
            cut = planned.plan(i, block).windows
            for q in group:
                if doc.evidence[q.id]:
                    best = int(np.argmax(ranker.scores(doc.text, cut, [q.text])[q.text]))
                    hits.append(holds(cut[best], doc.evidence[q.id]))
    assert len(hits) == 99 and sum(hits) >= 0.8 * len(hits)
    windows = contractnli_windows(PACKAGE_MODEL, ranker=ranker)
    rng = random.Random(5)
    for _ in range(20):
        text, questions, *_ = windows.draw(rng)
        part = text.split("\n\nAnswers so far:")[0]
        for q in questions:
            score = ranker.scores(part, [Window(0, 0, len(part), 0)], [q["text"]])[q["text"]][0]
            assert score >= ranker.threshold, (q["id"], part[:80])
