"""An Agent row as the runtime reads it: the agentsys.store.AgentRecord both Django stores
(runtime_store.py, chat_store.py) hand the daemon. Its own module because both make
records, and neither store is the other's to import."""

from __future__ import annotations

from agents_app.models import Agent
from agentsys.agent import Scope
from agentsys.store import AgentRecord
from agentsys.types import AgentStatus


def agent_record(agent: Agent) -> AgentRecord:
    return AgentRecord(
        id=agent.id,
        role=agent.role,
        cls_path=agent.cls_path,
        parent_id=agent.parent_id,
        goal=agent.goal,
        config=agent.config,
        scope=Scope(project=agent.project, session=agent.session, sweep=agent.sweep, run=agent.run),
        status=AgentStatus(agent.status),
        host_id=agent.host_id,
        chat_session_id=agent.chat_session_id,
        pid=agent.pid,
        pid_start=agent.pid_start,
    )
