"""`MemoryView` on PostgreSQL (agentsys.memory.MemoryView): one agent's memory, its writes
filled in with the agent's id, role and scope."""

from __future__ import annotations

from django.db import connection, transaction
from django.utils import timezone

from accounts_app.services import issue_agent_token
from agentsys.context import memory_bank_lines
from agentsys.memory import ContextLimits, Entry, EntryQuery
from agentsys.types import EntryType
from common.db_outage import is_database_unavailable
from memory_app import selectors
from memory_app.context import assemble_context
from memory_app.models import MemoryEntry
from memory_app.services import write_entries, write_entry
from scheduler_app import loop_scope, run_code, run_log_reader, run_log_store
from scheduler_app.metric_series import record_rows
from scheduler_app.models import Run
from scheduler_app.runs import record_tracking
from scheduler_app.services import raise_alert


class DjangoMemoryView:
    def __init__(self, agent_id: str, role: str, scope: dict):
        self.agent_id, self.role = agent_id, role
        self.scope = {k: scope.get(k) or "" for k in ("project", "session", "sweep", "run")}
        self.limits = ContextLimits()
        self._log_run: str | None = None  # the run whose log this executor ships

    # -- writes ------------------------------------------------------------------------------

    def write(self, *, type: str, data: dict, tags: list[str] | None = None) -> str:
        return self._write(type=type, data=data, tags=tags)

    def _write(self, *, type: str, data: dict, tags: list[str] | None, target_id: str = "") -> str:
        with _fresh_connection():
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
        with _fresh_connection():
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

    def write_metrics(self, *, rows: list[dict], source: str = "jsonl") -> int:
        with _fresh_connection():
            return record_rows(
                agent_id=self.agent_id, run_id=self.scope["run"], rows=rows, source=source
            )

    def write_run_tracking(self, *, params: dict, urls: dict) -> bool:
        if not self.scope["run"]:
            return False  # an executor with no Run row (a research loop's own test harness)
        with _fresh_connection():
            return record_tracking(run_id=self.scope["run"], params=params, urls=urls)

    def run_log_position(self) -> tuple[int, bool] | None:
        with _fresh_connection():
            found = run_log_store.log_position(agent_id=self.agent_id)
        if found is None:
            return None
        self._log_run, shipped, capped = found
        return shipped, capped

    def append_run_log(self, *, offset: int, data: bytes, capped: bool = False) -> tuple[int, bool]:
        if self._log_run is None:
            self.run_log_position()
        if self._log_run is None:
            raise LookupError(f"{self.agent_id} runs no Run: its log has nowhere to go")
        with _fresh_connection():
            return run_log_store.append_log(
                run_id=self._log_run, offset=offset, data=data, capped=capped
            )

    def run_outcome(self, *, agent_id: str, tail_bytes: int) -> dict | None:
        with _fresh_connection():
            run = Run.objects.filter(agent_id=agent_id).select_related("agent__host").first()
            if run is None:
                return None
            data, cut = run_log_reader.tail(run, tail_bytes)
            return {"exit_code": run.exit_code, "log_tail": data, "cut": cut}

    def msg(self, *, target_id: str, data: dict, tags: list[str] | None = None) -> str:
        """A MESSAGE to another agent: it lands in that agent's inbox."""
        if not target_id:
            raise ValueError("msg needs a target agent id")
        return self._write(type=EntryType.MESSAGE, data=data, tags=tags, target_id=target_id)

    def ack(self, key: str) -> bool:
        """Mark a message to this agent read; False if it is not one, or was read already."""
        with _fresh_connection():
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

    def run_code(self) -> dict | None:
        with _fresh_connection():
            return run_code.code_for_agent(self.agent_id)

    def code_bundle(self, *, commit: str) -> tuple[bytes, str] | None:
        with _fresh_connection():
            return run_code.bundle_of(commit)

    def record_checkout(self, *, code_dir: str, run_dir: str) -> bool:
        with _fresh_connection():
            return run_code.record_checkout(
                agent_id=self.agent_id, code_dir=code_dir, run_dir=run_dir
            )

    def issue_api_token(self) -> str:
        with _fresh_connection():
            owner = loop_scope.owner_of_loop(self.agent_id)  # it acts for them
            return issue_agent_token(agent_id=self.agent_id, owner=owner)[1]

    # -- reads -------------------------------------------------------------------------------

    def read_self(self, *, limit: int = 100) -> list[Entry]:
        """This agent's own entries, newest first."""
        return self.query(EntryQuery(agent_id=self.agent_id, limit=limit))

    def query(self, query: EntryQuery) -> list[Entry]:
        with _fresh_connection():
            return selectors.query_entries(query)

    def read_inbox(self) -> list[Entry]:
        with _fresh_connection():
            return selectors.inbox(agent_id=self.agent_id)

    def assemble_context(self, token_budget: int) -> str:
        with _fresh_connection():
            return assemble_context(
                agent_id=self.agent_id,
                scope=self.scope,
                token_budget=token_budget,
                limits=self.limits,
            )

    def memory_bank(self, *, limit: int = 20) -> str:
        """The `{{memories}}` text: the project's newest active reflections."""
        with _fresh_connection():
            entries = selectors.memory_bank(project=self.scope["project"], limit=limit)
            return memory_bank_lines(entries)


class _fresh_connection:
    """Agents call from threads that outlive a broken connection: drop it after an error.
    A healthy one is kept: executors run inside runagentd, and a new connection for each
    write (Django's CONN_MAX_AGE=0 outside requests) cost a PostgreSQL backend per metrics
    batch and per result (issue 25)."""

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, traceback):
        broken = connection.errors_occurred or is_database_unavailable(exc)
        if broken and not connection.in_atomic_block:  # in a caller's transaction: theirs
            connection.close()
        return False
