"""PostgreSQL's JSON has no NaN or Infinity, which training logs do produce, and no NUL
character. Every JSON the system stores from agents goes through `json_safe`: such numbers
become the strings "NaN", "Infinity" and "-Infinity", and NUL becomes U+FFFD, instead of
failing the write (and losing the record)."""

from __future__ import annotations

import math


def json_safe(value):
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd") if "\x00" in value else value
    if isinstance(value, dict):
        return {json_safe(str(k)): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value
