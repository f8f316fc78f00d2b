"""The OpenCode gateway: the plain-Python client agents use to
reach their model through a real OpenCode server, and (server.py) a local server to start."""

from agentsys.opencode.client import OpenCodeClient, PromptResult, Timeouts
from agentsys.opencode.errors import (
    OpenCodeAuthError,
    OpenCodeError,
    OpenCodeSessionError,
    OpenCodeStreamLost,
    OpenCodeStuckRetrying,
    OpenCodeTimeout,
    OpenCodeUnavailable,
)

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
