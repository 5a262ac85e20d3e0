"""Runs the JSON Schema Test Suite (draft-04, draft-07, 2019-09, 2020-12) against compiled slot
languages.

Each test case (one schema, several instances) of each draft is compiled as a schema of that draft
(the suite's schemas mostly omit `$schema`) and classified: `refused` (the schema does not
compile), `false-positive` (an invalid instance is accepted in some serialization: must never
happen), `false-negative` (a valid instance is rejected: allowed, we may leave values out) or
`pass`. An instance is accepted when any of its compact serializations (every key order, integral
floats with or without `.0`; draft-04 keeps `1.0` a non-integer, so only `1.0` there) is in the
language, so key order chosen by the compiler cannot hide a false positive. The 2020-12 form the
compiler builds from (`drafts.normalize`) is also checked: the 2020-12 validator on it must judge
every instance as the draft's own validator judges the original (`normalize-mismatch` otherwise,
which must never happen either; both assert formats, so they may differ from the suite there).
The checked-in baseline (per draft: every case and the counts) may improve, never regress:
`python tests/schemas/test_conformance.py --update` rewrites it after an improvement.
"""

from __future__ import annotations

import itertools
import json
import sys
from decimal import Decimal
from pathlib import Path

import pytest

from decide.schemas import SchemaError, compile_language
from decide.schemas.drafts import VALIDATORS

DATA = Path(__file__).parents[1] / "data" / "json-schema-test-suite"
DRAFTS = {"draft4": "draft-04", "draft7": "draft-07", "draft2019-09": "2019-09", "draft2020-12": "2020-12"}  # fmt: skip
BASELINE = Path(__file__).with_name("conformance_baseline.json")
FORMATS = ["date", "time", "date-time", "email", "uuid", "ipv4", "duration", "uri"]
_VARIANT_LIMIT = 500


def suite_files(folder: str) -> list[Path]:
    suite = DATA / folder
    files = sorted(suite.glob("*.json"))
    optional = suite / "optional" / "format"
    files += [optional / f"{name}.json" for name in FORMATS if (optional / f"{name}.json").exists()]
    return files


def serializations(value: object, floats_both_ways: bool = True) -> list[str]:
    """Compact JSON texts of `value`: all key orders, integral floats both ways."""
    if isinstance(value, dict):
        out = []
        for keys in itertools.permutations(value):
            parts = [
                [
                    json.dumps(k, ensure_ascii=False) + ":" + v
                    for v in serializations(value[k], floats_both_ways)
                ]
                for k in keys
            ]
            for combo in itertools.product(*parts):
                out.append("{" + ",".join(combo) + "}")
                if len(out) >= _VARIANT_LIMIT:
                    return out
        return out
    if isinstance(value, list):
        parts = [serializations(v, floats_both_ways) for v in value]
        out = []
        for combo in itertools.product(*parts):
            out.append("[" + ",".join(combo) + "]")
            if len(out) >= _VARIANT_LIMIT:
                break
        return out
    if isinstance(value, float):
        texts = [json.dumps(value)]
        if value.is_integer() and floats_both_ways:
            texts.append(str(int(value)))
        elif "e" in texts[0] or "E" in texts[0]:
            texts.append(format(Decimal(repr(value)), "f"))
        return texts
    return [json.dumps(value, ensure_ascii=False)]


def run(folder: str) -> dict[str, str]:
    draft = DRAFTS[folder]
    both = draft != "draft-04"
    checker = VALIDATORS[draft].FORMAT_CHECKER
    results: dict[str, str] = {}
    for path in suite_files(folder):
        rel = path.relative_to(DATA / folder).as_posix()
        for case in json.loads(path.read_text()):
            key = f"{rel}::{case['description']}"
            try:
                lang = compile_language(case["schema"], draft=draft)
            except SchemaError:
                results[key] = "refused"
                continue
            status = "pass"
            normalized = VALIDATORS["2020-12"](lang.normalized, format_checker=checker)
            original = VALIDATORS[draft](case["schema"], format_checker=checker)
            for test in case["tests"]:
                if normalized.is_valid(test["data"]) != original.is_valid(test["data"]):
                    status = "normalize-mismatch"
                    break
                accepted = any(lang.accepts(t) for t in serializations(test["data"], both))
                if accepted and not test["valid"]:
                    status = "false-positive"
                    break
                if not accepted and test["valid"]:
                    status = "false-negative"
            results[key] = status
    return results


RANK = {"normalize-mismatch": -1, "false-positive": 0, "refused": 1, "false-negative": 2, "pass": 3}


def counts(results: dict[str, str]) -> dict[str, int]:
    out = {k: 0 for k in ("pass", "false-negative", "refused", "false-positive")}
    for status in results.values():
        out[status] = out.get(status, 0) + 1
    return out


@pytest.mark.parametrize("folder", list(DRAFTS))
def test_conformance_never_regresses_and_has_no_false_positive(folder: str) -> None:
    found = run(folder)
    baseline = json.loads(BASELINE.read_text())
    assert baseline["counts"][folder] == counts(baseline[folder]), "baseline counts are stale"
    base = baseline[folder]
    assert set(found) == set(base), "suite cases changed: rerun with --update"
    wrong = sorted(k for k, v in found.items() if v in ("false-positive", "normalize-mismatch"))
    assert not wrong
    regressed = {k: (base[k], v) for k, v in found.items() if RANK[v] < RANK[base[k]]}
    assert not regressed
    improved = [k for k, v in found.items() if RANK[v] > RANK[base[k]]]
    if improved:
        print(f"{folder}: {len(improved)} cases improved: record them with --update")


if __name__ == "__main__":
    out: dict = {"counts": {}}
    for folder in DRAFTS:
        found = run(folder)
        out[folder] = found
        out["counts"][folder] = counts(found)
        print(folder, out["counts"][folder])
        for key, status in found.items():
            if status in ("false-positive", "normalize-mismatch"):
                print("WRONG", status, folder, key)
    if "--update" in sys.argv:
        BASELINE.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
