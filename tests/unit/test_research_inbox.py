"""The loop's inbox holds the person's steering messages and their approvals (research_app.
approvals). Its iteration reads the messages; an approval is the budget's to take, even when
the iteration reads the inbox first: given while runagentd was down, a resumed loop reads its
inbox before it reaches its cap again and polls for the approval."""

import asyncio
from dataclasses import dataclass, field

from agentsys.agents.research import ResearchAgent
from agentsys.research import budget
from agentsys.research.state import ResearchState


@dataclass
class Entry:
    key: str
    data: dict


@dataclass
class Inbox:
    """The memory view's inbox as the loop calls it (agentsys.memory.MemoryView)."""

    entries: list = field(default_factory=list)
    acked: list = field(default_factory=list)

    def read_inbox(self):
        return [e for e in self.entries if e.key not in self.acked]

    def ack(self, key):
        self.acked.append(key)


@dataclass
class Ledger:
    spent: dict

    def loop_spent(self, loop_id):
        return self.spent


def at_its_cap(inbox: Inbox) -> ResearchAgent:
    """A resumed loop whose saved state waits at its GPU-hour cap."""
    agent = ResearchAgent()
    agent.id = "research-1"
    agent.memory, agent.runs = inbox, Ledger({"gpu_hours": 0.002})
    agent.state = ResearchState(goal="g", budget={"gpu_hours": 0.001, "on_cap": "hold_runs"})
    agent.state.approval = {"kind": "cap", "reason": "its gpu_hours cap is reached"}
    agent.events = []
    agent.emit_event = lambda kind, payload=None: agent.events.append(kind)
    agent._save = lambda: None
    return agent


async def test_the_iteration_reads_messages_and_leaves_an_approval_to_the_budget():
    approval = Entry("ok", {"context": "The researcher approved", "approve": {"gpu_hours": 1}})
    inbox = Inbox([Entry("note", {"context": "try lr=0.05"}), approval])
    agent = at_its_cap(inbox)

    # Written before the loop came back; its iteration reads the inbox before the budget does.
    assert await agent._inbox() == ["try lr=0.05"]
    assert inbox.acked == ["note"]  # the approval is not acked: still there

    await asyncio.wait_for(budget.hold_at_cap(agent, "its next model call"), 2)
    assert agent.state.budget["gpu_hours"] == 1.001 and agent.state.approval == {}
    assert inbox.acked == ["note", "ok"] and agent.events == ["approved"]


async def test_a_batch_approval_is_no_message_either():
    inbox = Inbox([Entry("ok", {"context": "The researcher approved: its batch", "approve": {}})])
    agent = at_its_cap(inbox)
    assert await agent._inbox() == [] and inbox.acked == []
    assert await budget.approval_in_inbox(agent) == {} and inbox.acked == ["ok"]


async def test_an_approval_of_an_earlier_question_approves_nothing_now():
    """Two clicks on Approve as the loop goes on: the second names the question the first
    answered, and must not raise the caps at the loop's next cap unseen."""
    late = Entry("late", {"approve": {"gpu_hours": 5}, "answers": 100.0})
    fresh = Entry("ok", {"approve": {"gpu_hours": 1}, "answers": 200.0})
    inbox = Inbox([late])
    agent = at_its_cap(inbox)
    agent.state.approval["asked_at"] = 200.0
    logged = []
    agent._log_control = lambda title, detail="": logged.append(title)

    assert await budget.approval_in_inbox(agent) is None  # still waiting
    assert inbox.acked == ["late"] and logged == [
        "An approval came for a question already answered: not used"
    ]
    inbox.entries.append(fresh)
    assert await budget.approval_in_inbox(agent) == {"gpu_hours": 1.0}
