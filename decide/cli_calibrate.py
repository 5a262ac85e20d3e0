"""`decide calibrate`: fit calibration.json from a decided job and gold answers.

Contract. Reads OUT_DIR (a finished or partial job's answer parts and manifest) and GOLD (parquet
with `doc_id` and a gold column of decision-object JSON text, the format `decide train` reads,
or a struct column of decision objects),
prints one line per skipped gold row or answer (ids not in the job, failed rows, invalid JSON,
gold values the question schema refuses) to stderr, then a before/after table of ECE (10
equal-mass bins), Brier score and accuracy over the matched answers, the `absent_below` each
question with an absent value would best take (`jobs.calibrate.suggest_absent_below`), and
writes the calibration file (`schemas/calibration.schema.json`). The "after" figures are
in-sample (measured on the answers the maps were fitted to); measure on held-out rows for an
honest figure (`benchmarks/calibration.py` does). Exits 2 on usage errors, when a doc_id has
more than one gold row (the error names the first few and their rows), or when no gold answer is
usable, or when the calibration file cannot be written.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

MESSAGES = 50  # skipped-row messages printed; the rest are counted
# The gold parquet's column of decision objects, as `decide train` and `decide calibrate` read it.
gold_column_option = click.option(
    "--gold-column",
    default="gold",
    show_default=True,
    help="Column with the gold decision object (JSON text).",
)


@click.command()
@click.argument("out_dir", metavar="OUT_DIR", type=click.Path(path_type=Path))
@click.argument("gold", metavar="GOLD", type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    default=Path("calibration.json"),
    show_default=True,
    help="Where the calibration file goes.",
)
@gold_column_option
@click.option(
    "--min-labels",
    type=click.IntRange(min=1),
    default=50,
    show_default=True,
    help="Labels a question needs for a map of its own (else its kind's, pooled).",
)
def calibrate(out_dir: Path, gold: Path, output: Path, gold_column: str, min_labels: int) -> None:
    """Fit a confidence calibration for a model and spec from a job's answers and gold labels.

    Finite questions (booleans, enums, small integer ranges) get a temperature on the logit of
    their confidence, the others Platt scaling; a question with fewer than --min-labels labels
    uses the map fitted on all questions of its schema kind. For each question with an absent
    value (`absent:`, or null) it also prints the `absent_below` that gets the most of its
    labelled answers right (with fewer than --min-labels, of its kind's), to set in the spec.

    \b
    Example:
      decide calibrate out/claims labelled.parquet -o calibration.json
      decide run new.parquet -o out/new --spec job.yaml --calibration calibration.json \\
          --review-below 0.9
    """
    from decide.jobs.calibrate import build_document, collect_labels
    from decide.jobs.output import OutputError, atomic_write
    from decide.jobs.spec import SpecError

    try:
        labels, fingerprints = collect_labels(out_dir, gold, gold_column)
        for message in labels.messages[:MESSAGES]:
            click.echo(f"warning: {message}", err=True)
        if len(labels.messages) > MESSAGES:
            click.echo(f"warning: ... and {len(labels.messages) - MESSAGES} more skipped", err=True)
        document = build_document(
            labels, fingerprints, job=str(out_dir), gold=str(gold), min_labels=min_labels
        )
    except SpecError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    text = json.dumps(document, indent=2, allow_nan=False) + "\n"
    try:
        atomic_write(output, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    except (OutputError, OSError) as exc:
        why = exc.strerror or str(exc)
        click.echo(f"error: {output}: cannot write the calibration ({why})", err=True)
        sys.exit(2)
    before, after = document["metrics"]["before"], document["metrics"]["after"]
    click.echo(
        f"{labels.rows} gold rows, {before['answers']} answers matched, "
        f"{len(labels.messages)} skipped"
    )
    click.echo(f"{'':<22}{'before':>10}{'after':>10}  (after: in-sample)")
    for name, key in (
        ("ECE (10 equal-mass)", "ece"),
        ("Brier score", "brier"),
        ("accuracy", "accuracy"),
        ("mean confidence", "mean_confidence"),
    ):
        click.echo(f"{name:<22}{before[key]:>10.4f}{after[key]:>10.4f}")
    for qid, entry in document["questions"].items():
        chosen = entry["map"]
        how = {
            "temperature": lambda m: f"temperature {m['temperature']:.3g}",
            "platt": lambda m: f"platt a={m['a']:.3g} b={m['b']:.3g}",
            "identity": lambda m: "identity (too few labels)",
        }[chosen["method"]](chosen)
        click.echo(
            f"  {qid}: {entry['kind']}, {entry['labels']} labels, "
            f"fitted on {entry['fitted_on']}: {how}"
        )
    suggested = document.get("absent_below", {})
    if suggested:
        click.echo("absent_below (answers right on these labels, in-sample):")
    for qid, entry in suggested.items():
        t, where = entry["threshold"], {"question": "", "kind": " (its kind's labels)"}
        gain = (
            "too few labels, even of its kind"
            if entry["fitted_on"] == "none"
            else "no threshold gets more right"
            if t is None
            else f"at absent_below {t:g}{where[entry['fitted_on']]}: "
            f"{entry['right_at_threshold']} right, {entry['withheld']} withheld"
        )
        click.echo(
            f"  {qid}: {entry['labels']} labels ({entry['absent_gold']} absent), "
            f"{entry['right']} right as decoded; {gain}"
        )
    chosen = {qid: e["threshold"] for qid, e in suggested.items() if e["threshold"] is not None}
    if chosen:
        click.echo("to use them, add to each question in the spec:")
        for qid, t in chosen.items():
            click.echo(f"  {qid}: absent_below: {t:g}")
        click.echo(
            "  (this changes the spec's fingerprint, and a run refuses a calibration fitted for "
            "another: decide the labelled rows again with the new spec and calibrate on that)"
        )
    click.echo(f"calibration: {output}")
