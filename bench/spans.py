"""What a figure is read between: two wall-clock instants (time.time(), so that they compare
with the calls a bench's points test watches, tests/call_watch.py), and the figures made from
them."""

import statistics
import time
from dataclasses import dataclass

from bench._report import percentile


@dataclass(frozen=True)
class Span:
    """Two wall-clock instants (time.time()): a timed call's, or a figure's."""

    began: float
    ended: float


def span_ms(span: Span) -> float:
    return (span.ended - span.began) * 1000


def span_s(span: Span) -> float:
    return span.ended - span.began


def percentile_ms(spans: list[Span], pct: float) -> float:
    return percentile([span_ms(span) for span in spans], pct)


def median_ms(spans: list[Span]) -> float:
    return statistics.median(span_ms(span) for span in spans)


def per_s(count: int, span: Span) -> float:
    """`count` things done over the span: a throughput."""
    return count / span_s(span)


def spanned(fn) -> tuple[object, Span]:
    """fn()'s result and the span from just before it was called to its return."""
    began = time.time()
    result = fn()
    return result, Span(began, time.time())


def timed_spans(fn, samples: int) -> list[Span]:
    return [spanned(fn)[1] for _ in range(samples)]
