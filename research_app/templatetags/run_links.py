"""`{{ text|run_links }}`: each `run-<hex>` a model wrote (a loop's report cites the run
behind each number) as a link to that run's page; the rest of the text escaped."""

from __future__ import annotations

import re

from django import template
from django.urls import reverse
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import mark_safe

register = template.Library()

RUN_ID = re.compile(r"\brun-[0-9a-f]{8}\b")  # scheduler_app.models.new_run_id


@register.filter(needs_autoescape=True)
def run_links(text, autoescape=True):
    escape = conditional_escape if autoescape else str
    text, parts, at = str(text or ""), [], 0
    for found in RUN_ID.finditer(text):
        run = found.group(0)
        parts += [escape(text[at : found.start()])]
        parts += [format_html('<a href="{}">{}</a>', reverse("run", args=[run]), run)]
        at = found.end()
    return mark_safe("".join([*parts, escape(text[at:])]))  # noqa: S308 (each part escaped)
