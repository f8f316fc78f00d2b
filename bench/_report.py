"""Benchmarks print one JSON object per line: {"metric": NAME, "value": NUMBER, "unit": UNIT}."""

import json
import statistics


def report(metric: str, value: float, unit: str) -> None:
    print(json.dumps({"metric": metric, "value": round(value, 3), "unit": unit}), flush=True)


def percentile(samples: list[float], pct: float) -> float:
    ordered = sorted(samples)
    if len(ordered) == 1:
        return ordered[0]
    return statistics.quantiles(ordered, n=100, method="inclusive")[int(pct) - 1]
