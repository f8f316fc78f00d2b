"""PostgreSQL's JSON has no NaN or Infinity, which training logs do produce. Every JSON the
system stores from agents goes through `json_safe`: such numbers become the strings "NaN",
"Infinity" and "-Infinity" instead of failing the write (and losing the record)."""

from __future__ import annotations

import math


def json_safe(value):
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value
