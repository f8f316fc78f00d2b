"""How spend reads on a page: dollars with the cents a cheap model step needs, tokens with
thousands separators, hours short."""

from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def usd(value) -> str:
    amount = float(value or 0)
    if amount == 0:
        return "$0"
    # A model step costs fractions of a cent: two decimals would show most chats as $0.00.
    return f"${amount:,.2f}" if amount >= 1 else f"${amount:.4f}"


@register.filter
def tokens(value) -> str:
    return f"{int(value or 0):,}"


@register.filter
def hours(value) -> str:
    amount = float(value or 0)
    if amount == 0:
        return "0 h"
    return f"{amount:,.1f} h" if amount >= 10 else f"{amount:.2f} h"
