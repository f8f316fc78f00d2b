"""A function watched where it is looked up: each call's wall-clock instants and arguments,
for tests that check what a benchmark timed against the calls it made."""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Call:
    began: float  # time.time() as it was called
    returned: float  # ... as it returned (or raised)
    kwargs: dict
    result: object  # what it returned; None when it raised
    args: tuple = ()  # its positional arguments as passed (a method's: its instance first)


def watch_calls(monkeypatch, owner, name: str) -> list[Call]:
    """`owner.name` (a module's function, a class's method) keeps working; each call is
    appended to the list returned once it has returned."""
    calls, real = [], getattr(owner, name)

    def watched(*args, **kwargs):
        began, result = time.time(), None
        try:
            result = real(*args, **kwargs)
            return result
        finally:
            calls.append(Call(began, time.time(), kwargs, result, args))

    monkeypatch.setattr(owner, name, watched)
    return calls


def watch_awaited(monkeypatch, owner, name: str) -> list[Call]:
    """watch_calls for a coroutine method: each call's instants are its await's."""
    calls, real = [], getattr(owner, name)

    async def watched(*args, **kwargs):
        began, result = time.time(), None
        try:
            result = await real(*args, **kwargs)
            return result
        finally:
            calls.append(Call(began, time.time(), kwargs, result, args))

    monkeypatch.setattr(owner, name, watched)
    return calls
