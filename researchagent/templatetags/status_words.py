"""`{{ x.status|status_word }}`, `{{ step.promise|promise_word }}` and
`{% status_words_script %}` (see common.status_words)."""

from __future__ import annotations

from django import template
from django.utils.html import json_script

from common import status_words

register = template.Library()


@register.filter
def status_word(value) -> str:
    return status_words.status_word(value)


@register.filter
def promise_word(value) -> str:
    return status_words.promise_word(value)


@register.simple_tag
def status_words_script() -> str:
    """The table for AgentSysLive.statusWord, so live updates read as the server renders."""
    return json_script(status_words.STATUS_WORDS, "status-words")
