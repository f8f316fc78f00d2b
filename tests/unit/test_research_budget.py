"""A loop's budget (issue 38 §2): caps checked, what is left told to the model, and at a cap
the loop waits for a person's approval, which adds to the cap and never resets the spent."""

import asyncio
import time
from dataclasses import dataclass, field

import pytest

from agentsys.research import budget
from agentsys.research.state import ResearchState


@pytest.mark.parametrize(
    ("raw", "complaint"),
    [
        ("5", "must be an object"),
        ({"gpu_hours": -1}, "gpu_hours must be a number >= 0"),
        ({"llm_usd": True}, "llm_usd must be a number"),
        ({"dollars": 5}, "budget has no dollars"),
        ({"gpu_hours": 1, "on_cap": "panic"}, "on_cap must be one of hold_runs, stop_runs"),
        ({"llm_tokens": float("inf")}, "must be finite"),
    ],
)
def test_a_bad_budget_is_refused_saying_what(raw, complaint):
    with pytest.raises((TypeError, ValueError), match=complaint):
        budget.checked(raw)


def test_a_budget_reads_its_caps_and_says_what_is_left():
    caps = budget.checked({"llm_tokens": 5000, "gpu_hours": 0.5, "wall_hours": None})
    assert caps == {"llm_tokens": 5000.0, "gpu_hours": 0.5, "on_cap": "hold_runs"}
    spent = {"llm_tokens": 1200, "gpu_hours": 0.5}
    assert budget.reached(caps, spent) == ("gpu_hours", 0.5, 0.5)
    assert budget.reached(caps, {"llm_tokens": 10}) is None
    assert budget.left_words(caps, spent) == (
        "- llm_tokens: 3,800 left of 5,000\n- gpu_hours: 0 left of 0.5"
    )


@dataclass
class Entry:
    key: str
    data: dict


@dataclass
class FakeLoop:
    """The loop as budget.hold_at_cap uses it: its state, ports and events."""

    state: ResearchState
    id: str = "research-1"
    inbox: list = field(default_factory=list)
    events: list = field(default_factory=list)
    alerts: list = field(default_factory=list)
    ledger: dict = field(default_factory=dict)

    async def in_runs(self, method, **kwargs):
        assert method == "loop_spent" and kwargs == {"loop_id": self.id}
        return self.ledger

    async def in_memory(self, method, **kwargs):
        if method == "read_inbox":
            return list(self.inbox)
        self.inbox = [e for e in self.inbox if e.key != kwargs["key"]]
        return None

    def emit_event(self, kind, payload=None):
        self.events.append((kind, payload))

    def _log_control(self, title, text=""):
        pass

    def _save(self):
        pass

    async def alert(self, severity, message, signature, data=None):
        self.alerts.append((signature, message))

    async def check_pause(self):
        pass


async def test_at_a_cap_the_loop_waits_for_an_approval_that_adds_to_the_cap(monkeypatch):
    monkeypatch.setattr(budget, "APPROVAL_POLL_SECONDS", 0.01)
    state = ResearchState(goal="g", budget={"gpu_hours": 0.001, "on_cap": "hold_runs"})
    loop = FakeLoop(state, ledger={"gpu_hours": 0.002, "llm_tokens": 10})
    waiting = asyncio.create_task(budget.hold_at_cap(loop, "its next experiments"))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    assert state.approval["cap"] == {"gpu_hours": 0.001}
    assert "gpu_hours cap is reached: 0.002 spent of 0.001" in state.approval["reason"]
    assert [kind for kind, _ in loop.events] == ["awaiting_approval"]
    assert loop.alerts[0][0] == "budget"
    loop.inbox.append(Entry("note", {"context": "hello"}))  # a message is no approval
    await asyncio.sleep(0.05)
    assert not waiting.done()
    loop.inbox.append(Entry("ok", {"context": "more", "approve": {"gpu_hours": 1}}))
    await asyncio.wait_for(waiting, 2)
    assert state.budget["gpu_hours"] == pytest.approx(1.001) and state.approval == {}
    assert [e.key for e in loop.inbox] == ["note"]  # left for the iteration to read
    assert loop.events[-1][0] == "approved"


async def test_the_loops_own_count_of_its_model_holds_before_the_ledger_has_it():
    state = ResearchState(goal="g", budget={"llm_tokens": 1, "on_cap": "hold_runs"})
    budget.add_model_steps(state, [{"input_tokens": 900, "output_tokens": 20, "usd": 0.003}])
    spent = await budget.spent_now(FakeLoop(state, ledger={}))
    assert spent["llm_tokens"] == 920 and spent["llm_usd"] == pytest.approx(0.003)
    state.started_at = time.time() - 1800
    assert (await budget.spent_now(FakeLoop(state)))["wall_hours"] == pytest.approx(0.5, abs=0.01)
