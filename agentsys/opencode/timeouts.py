"""How long a model call may take, in seconds (a deployment's settings; the client's waits)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Timeouts:
    first_token: float = 180.0
    total: float = 600.0
    idle: float = 120.0
