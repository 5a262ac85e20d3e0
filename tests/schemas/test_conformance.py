"""Runs the JSON Schema Test Suite (draft 2020-12) against compiled slot languages.

Each test case (one schema, several instances) is classified: `refused` (the schema does not
compile), `false-positive` (an invalid instance is accepted in some serialization: must never
happen), `false-negative` (a valid instance is rejected: allowed, we may leave values out) or
`pass`. An instance is accepted when any of its compact serializations (every key order, integral
floats with or without `.0`) is in the language, so key order chosen by the compiler cannot hide a
false positive. The checked-in baseline may improve, never regress:
`python tests/schemas/test_conformance.py --update` rewrites it after an improvement.
"""

from __future__ import annotations

import itertools
import json
import sys
from decimal import Decimal
from pathlib import Path

from decide.schemas import SchemaError, compile_language

SUITE = Path(__file__).parents[1] / "data" / "json-schema-test-suite" / "draft2020-12"
BASELINE = Path(__file__).with_name("conformance_baseline.json")
FORMATS = ["date", "time", "date-time", "email", "uuid", "ipv4"]
_VARIANT_LIMIT = 500


def suite_files() -> list[Path]:
    files = sorted(SUITE.glob("*.json"))
    files += [SUITE / "optional" / "format" / f"{name}.json" for name in FORMATS]
    return files


def serializations(value: object) -> list[str]:
    """Compact JSON texts of `value`: all key orders, integral floats both ways."""
    if isinstance(value, dict):
        out = []
        for keys in itertools.permutations(value):
            parts = [
                [json.dumps(k, ensure_ascii=False) + ":" + v for v in serializations(value[k])]
                for k in keys
            ]
            for combo in itertools.product(*parts):
                out.append("{" + ",".join(combo) + "}")
                if len(out) >= _VARIANT_LIMIT:
                    return out
        return out
    if isinstance(value, list):
        parts = [serializations(v) for v in value]
        out = []
        for combo in itertools.product(*parts):
            out.append("[" + ",".join(combo) + "]")
            if len(out) >= _VARIANT_LIMIT:
                break
        return out
    if isinstance(value, float):
        texts = [json.dumps(value)]
        if value.is_integer():
            texts.append(str(int(value)))
        elif "e" in texts[0] or "E" in texts[0]:
            texts.append(format(Decimal(repr(value)), "f"))
        return texts
    return [json.dumps(value, ensure_ascii=False)]


def run() -> dict[str, str]:
    results: dict[str, str] = {}
    for path in suite_files():
        rel = path.relative_to(SUITE).as_posix()
        for case in json.loads(path.read_text()):
            key = f"{rel}::{case['description']}"
            try:
                lang = compile_language(case["schema"])
            except SchemaError:
                results[key] = "refused"
                continue
            status = "pass"
            for test in case["tests"]:
                accepted = any(lang.accepts(t) for t in serializations(test["data"]))
                if accepted and not test["valid"]:
                    status = "false-positive"
                    break
                if not accepted and test["valid"]:
                    status = "false-negative"
            results[key] = status
    return results


RANK = {"false-positive": 0, "refused": 1, "false-negative": 2, "pass": 3}


def test_conformance_never_regresses_and_has_no_false_positive() -> None:
    found = run()
    baseline = json.loads(BASELINE.read_text())
    assert set(found) == set(baseline), "suite cases changed: rerun with --update"
    false_positives = sorted(k for k, v in found.items() if v == "false-positive")
    assert not false_positives
    regressed = {k: (baseline[k], v) for k, v in found.items() if RANK[v] < RANK[baseline[k]]}
    assert not regressed
    improved = [k for k, v in found.items() if RANK[v] > RANK[baseline[k]]]
    if improved:
        print(f"{len(improved)} cases improved: record them with --update")


if __name__ == "__main__":
    found = run()
    if "--update" in sys.argv:
        BASELINE.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
    counts: dict[str, int] = {}
    for status in found.values():
        counts[status] = counts.get(status, 0) + 1
    print(counts)
    for key, status in found.items():
        if status == "false-positive":
            print("FP", key)
