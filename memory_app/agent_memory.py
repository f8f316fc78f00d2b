"""The Django side of agentsys.memory.AgentMemory: an agent's writes, scoped to it."""

from __future__ import annotations

from django.db import connection, transaction

from agents_app.events import record_event
from agentsys.types import EntryType
from memory_app.services import write_entry
from scheduler_app.models import Alert, Run


class DjangoAgentMemory:
    def __init__(self, agent_id: str, role: str, scope: dict):
        self.agent_id, self.role, self.scope = agent_id, role, scope

    def write(self, *, type: str, data: dict, tags: list[str] | None = None) -> str:
        try:
            return write_entry(
                type=type,
                agent_id=self.agent_id,
                role=self.role,
                tags=tags or [],
                data=data,
                **self.scope,
            ).key
        finally:
            connection.close_if_unusable_or_obsolete()

    @transaction.atomic
    def raise_alert(
        self, *, severity: str, message: str, signature: str, data: dict, run_dir: str = ""
    ) -> str:
        """An ALERT entry for the agents, and an Alert a person sees (with a live event):
        the original wrote executor alerts where no one looked."""
        key = write_entry(
            type=EntryType.ALERT,
            agent_id=self.agent_id,
            role=self.role,
            tags=["alert", severity],
            data={**data, "message": message},
            **self.scope,
        ).key
        run = Run.objects.filter(agent_id=self.agent_id).first()
        alert = Alert.objects.create(
            run=run,
            agent_id=self.agent_id,
            severity=severity,
            message=message,
            signature=signature,
            choices=["acknowledge", "stop"],
            memory_key=key,
        )
        record_event(
            stream="alerts",
            kind="alert",
            agent_id=self.agent_id,
            payload={
                "alert_id": alert.id,
                "severity": severity,
                "message": message,
                "run_dir": run_dir,
            },
        )
        return alert.id
