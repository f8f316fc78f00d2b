"""How the pages write durations and metric values."""

from __future__ import annotations

import math
from datetime import timedelta

from django import template
from django.utils.html import format_html

register = template.Library()


@register.filter
def duration(value: timedelta | None) -> str:
    """1h 02m, 3m 05s, 12s; an em dash for none."""
    if value is None:
        return "—"
    seconds = max(0, int(value.total_seconds()))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {seconds:02d}s"
    return f"{seconds}s"


@register.simple_tag
def run_duration(run, value: timedelta | None) -> str:
    """The duration; a running run's ticks in the browser (static/js/durations.js) from the
    seconds it had when the page was rendered, so the reader's clock never matters."""
    if value is None or run.status != "running" or run.finished_at is not None:
        return duration(value)
    seconds = max(0, int(value.total_seconds()))
    return format_html('<span data-ticking-seconds="{}">{}</span>', seconds, duration(value))


@register.filter
def metric(value) -> str:
    """A metric value in 4 significant digits; NaN and inf by name."""
    if value is None or value == "":
        return "—"
    if isinstance(value, str):
        return value
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return f"{value:.4g}"
