"""What the API shows of memory entries (memory_app.api and the agents' entries route)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ninja import Schema


class MemoryEntryOut(Schema):
    key: str
    type: str
    agent_id: str
    target_id: str
    project: str
    session: str
    sweep: str
    run: str
    role: str
    tags: list[str]
    data: dict[str, Any]
    active: bool
    acked_at: datetime | None
    created_at: datetime
    updated_at: datetime
