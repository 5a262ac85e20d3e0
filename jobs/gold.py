"""Reading a gold cell (`decide calibrate`'s and `decide train`'s gold column) as the decision
object: JSON text parsed, a struct (or map) cell as the object it holds."""

from __future__ import annotations

import json
from datetime import date, time
from decimal import Decimal
from typing import Any

import polars as pl

GOLD_OBJECTS = (pl.Struct, pl.Map)  # gold column types read as the decision object itself


def gold_object(value: Any, dtype: pl.DataType) -> Any:
    """A gold cell as the decision object: JSON text parsed, a struct (or map) cell as the
    object it holds (a null field a null value), dates and times as their ISO text, decimals
    as numbers; None for a null cell. Raises `json.JSONDecodeError` or `TypeError` for a cell
    that is neither JSON text nor an object."""
    if value is None:
        return None
    if not isinstance(dtype, GOLD_OBJECTS):
        return json.loads(value)
    return _plain(value)


def _plain(value: Any) -> Any:
    """A polars cell of a struct gold column as JSON would give it."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, date | time):  # datetime is a date
        return value.isoformat()
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value
