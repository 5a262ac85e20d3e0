"""Random finite questions for the rule property tests (JSON Schema and CEL rules), and the
values of each, for the brute-force check that a rule set can be satisfied at all."""

from __future__ import annotations

from hypothesis import strategies as st


def random_question(draw, index: int) -> dict:
    """An enum (2–4 of x, y, z, w), a boolean, or an integer range 0..3–30."""
    kind = draw(st.sampled_from(["enum", "boolean", "integer"]))
    if kind == "enum":
        values = draw(st.lists(st.sampled_from(["x", "y", "z", "w"]), min_size=2, max_size=4,
                               unique=True))  # fmt: skip
        schema = {"enum": values}
    elif kind == "boolean":
        schema = {"type": "boolean"}
    else:
        schema = {"type": "integer", "minimum": 0, "maximum": draw(st.integers(3, 30))}
    return {"id": f"q{index}", "text": f"Question {index}?", "schema": schema}


def values_of(schema: dict) -> list:
    """Every value a question of `random_question` can take."""
    if "enum" in schema:
        return schema["enum"]
    if schema.get("type") == "boolean":
        return [False, True]
    return list(range(schema["minimum"], schema["maximum"] + 1))
