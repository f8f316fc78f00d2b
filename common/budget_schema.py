"""A budget's caps as the REST API takes and shows them (issue 38): a loop's own (`POST
/api/research`, research_app.api) and a chat session's default (`PUT
/api/sessions/{id}/budget`, sessions_app.api); agentsys.research.budget checks and applies
them."""

from __future__ import annotations

from typing import Literal

from ninja import Field, Schema
from pydantic import ConfigDict


class BudgetCaps(Schema):
    model_config = ConfigDict(extra="forbid")

    llm_tokens: float | None = Field(None, ge=0, description="Model tokens (every kind)")
    llm_usd: float | None = Field(None, ge=0, description="What the provider charges, USD")
    gpu_hours: float | None = Field(None, ge=0, description="Its runs' GPUs times hours held")
    wall_hours: float | None = Field(None, ge=0, description="Hours since it started")
    on_cap: Literal["hold_runs", "stop_runs"] = "hold_runs"
