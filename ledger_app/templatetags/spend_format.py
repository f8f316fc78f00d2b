"""How spend reads on a page: dollars with the cents a cheap model step needs, tokens with
thousands separators, hours short, a wall time under an hour in minutes."""

from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def usd(value) -> str:
    amount = float(value or 0)
    if amount == 0:
        return "$0"
    if amount >= 1:
        return f"${amount:,.2f}"
    # A model step costs fractions of a cent: two decimals would show most chats as $0.00.
    cents, rest = f"{amount:.4f}"[:4], f"{amount:.4f}"[4:].rstrip("0")
    return f"${cents}{rest}"


@register.filter
def tokens(value) -> str:
    return f"{int(value or 0):,}"


@register.filter
def hours(value) -> str:
    amount = float(value or 0)
    if amount == 0:
        return "0 h"
    return f"{amount:,.1f} h" if amount >= 10 else f"{amount:.2f} h"


@register.filter
def wall(value) -> str:
    """Wall time given in hours: minutes under an hour (a new loop is not "0.00 h")."""
    amount = float(value or 0)
    return f"{amount * 60:.0f} min" if amount < 1 else hours(amount)
