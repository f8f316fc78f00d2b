"""`MemoryView` on PostgreSQL (agentsys.memory.MemoryView): one agent's memory, its writes
filled in with the agent's id, role and scope. Its Run's rows are not memory: they go
through runtime_app/run_port.py."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from accounts_app.services import issue_agent_token
from agents_app.models import Agent
from agentsys.context import memory_bank_lines
from agentsys.memory import ContextLimits, Entry, EntryQuery
from agentsys.types import EntryType
from memory_app import selectors
from memory_app.context import assemble_context
from memory_app.models import MemoryEntry
from memory_app.services import write_entries, write_entry
from runtime_app.fresh_connection import fresh_connection
from scheduler_app import loop_scope
from scheduler_app.services import raise_alert


class DjangoMemoryView:
    def __init__(self, agent_id: str, role: str, scope: dict):
        self.agent_id, self.role = agent_id, role
        self.scope = {k: scope.get(k) or "" for k in ("project", "session", "sweep", "run")}
        self.limits = ContextLimits()

    # -- writes ------------------------------------------------------------------------------

    def write(self, *, type: str, data: dict, tags: list[str] | None = None) -> str:
        return self._write(type=type, data=data, tags=tags)

    def _write(self, *, type: str, data: dict, tags: list[str] | None, target_id: str = "") -> str:
        with fresh_connection():
            return write_entry(
                type=type,
                agent_id=self.agent_id,
                target_id=target_id,
                role=self.role,
                tags=tags,
                data=data,
                **self.scope,
            ).key

    def write_many(self, *, type: str, rows: list[dict], tags: list[str] | None = None) -> int:
        with fresh_connection():
            return len(
                write_entries(
                    type=type,
                    agent_id=self.agent_id,
                    role=self.role,
                    tags=tags,
                    rows=rows,
                    **self.scope,
                )
            )

    def msg(self, *, target_id: str, data: dict, tags: list[str] | None = None) -> str:
        """A MESSAGE to another agent: it lands in that agent's inbox."""
        if not target_id:
            raise ValueError("msg needs a target agent id")
        return self._write(type=EntryType.MESSAGE, data=data, tags=tags, target_id=target_id)

    def ack(self, key: str) -> bool:
        """Mark a message to this agent read; False if it is not one, or was read already."""
        with fresh_connection():
            return bool(
                MemoryEntry.objects.filter(
                    pk=key, target_id=self.agent_id, type=EntryType.MESSAGE, acked_at__isnull=True
                ).update(acked_at=timezone.now())
            )

    @transaction.atomic
    def raise_alert(
        self, *, severity: str, message: str, signature: str, data: dict, run_dir: str = ""
    ) -> str:
        """An ALERT entry for the agents, and an Alert a person sees with its live event in
        the agents stream, all in one transaction."""
        key = write_entry(
            type=EntryType.ALERT,
            agent_id=self.agent_id,
            role=self.role,
            tags=["alert", severity],
            data={**data, "message": message},
            **self.scope,
        ).key
        alert = raise_alert(
            agent_id=self.agent_id,
            severity=severity,
            message=message,
            signature=signature,
            memory_key=key,
            run_dir=run_dir,
        )
        return alert.id

    def issue_api_token(self) -> str:
        with fresh_connection():
            # It acts for them: the person who started the loop, or whose chat it is (a
            # SessionAgent's token, for its chat's MCP tools).
            owner = loop_scope.owner_of_loop(self.agent_id) or _chat_owner(self.agent_id)
            return issue_agent_token(agent_id=self.agent_id, owner=owner)[1]

    # -- reads -------------------------------------------------------------------------------

    def read_self(self, *, limit: int = 100) -> list[Entry]:
        """This agent's own entries, newest first."""
        return self.query(EntryQuery(agent_id=self.agent_id, limit=limit))

    def query(self, query: EntryQuery) -> list[Entry]:
        with fresh_connection():
            return selectors.query_entries(query)

    def read_inbox(self) -> list[Entry]:
        with fresh_connection():
            return selectors.inbox(agent_id=self.agent_id)

    def assemble_context(self, token_budget: int) -> str:
        with fresh_connection():
            return assemble_context(
                agent_id=self.agent_id,
                scope=self.scope,
                token_budget=token_budget,
                limits=self.limits,
            )

    def memory_bank(self, *, limit: int = 20) -> str:
        """The `{{memories}}` text: the project's newest active reflections."""
        with fresh_connection():
            entries = selectors.memory_bank(project=self.scope["project"], limit=limit)
            return memory_bank_lines(entries)


def _chat_owner(agent_id: str):
    """The owner of the chat agent `agent_id` belongs to (None: no chat, or nobody's)."""
    found = Agent.objects.filter(pk=agent_id).select_related("chat_session__owner").first()
    chat = found.chat_session if found is not None else None
    return chat.owner if chat is not None else None
