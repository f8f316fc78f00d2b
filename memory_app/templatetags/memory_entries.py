"""`{% entry_body entry %}`: one memory entry as a person reads it (memory_app.rendering), the
same on every page that lists entries."""

from __future__ import annotations

from django import template

from memory_app.rendering import readable

register = template.Library()


@register.inclusion_tag("memory_app/_entry_body.html")
def entry_body(entry, compact: bool = False) -> dict:
    """`compact` (a list beside other things, as on a research loop's page) leaves out the
    secondary fields and shortens long text."""
    return {"shown": readable(entry.type, entry.data), "compact": compact}
