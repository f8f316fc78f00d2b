"""The OpenCode gateway: the plain-Python client agents use to
reach their model through a real OpenCode server, and (server.py) a local server to start.

The client's names load on first use (PEP 562): importing the settings' `Timeouts` must not
import httpx, with the CLI it carries (rich, pygments, click): every manage.py process and
runagentd imports the settings, ~60 ms each, and most never call a model."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from agentsys.opencode.errors import (
    OpenCodeAuthError,
    OpenCodeError,
    OpenCodeSessionError,
    OpenCodeStreamLost,
    OpenCodeStuckRetrying,
    OpenCodeTimeout,
    OpenCodeUnavailable,
)
from agentsys.opencode.timeouts import Timeouts

if TYPE_CHECKING:
    from agentsys.opencode.client import OpenCodeClient, PromptResult

_FROM_THE_CLIENT = {"OpenCodeClient", "PromptResult"}

__all__ = [
    "OpenCodeAuthError",
    "OpenCodeClient",
    "OpenCodeError",
    "OpenCodeSessionError",
    "OpenCodeStreamLost",
    "OpenCodeStuckRetrying",
    "OpenCodeTimeout",
    "OpenCodeUnavailable",
    "PromptResult",
    "Timeouts",
]


def __getattr__(name: str):
    if name in _FROM_THE_CLIENT:
        return getattr(importlib.import_module("agentsys.opencode.client"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
