"""`{{ when|ago }}`: how long ago, as a person says it: "just now" under a minute (never
"0 minutes ago" beside a live "just now", static/js/sweep_table.js's word), else the largest
unit ("3 minutes ago", "2 days ago")."""

from __future__ import annotations

from datetime import datetime

from django import template
from django.utils import timezone
from django.utils.timesince import timesince

register = template.Library()

JUST_NOW_SECONDS = 60


@register.filter
def ago(value) -> str:
    if not isinstance(value, datetime):
        return ""
    # A time a moment in the future (another host's clock) is now too.
    if (timezone.now() - value).total_seconds() < JUST_NOW_SECONDS:
        return "just now"
    return f"{timesince(value, depth=1)} ago"
