"""Issue 38 §1: the tokens and cost OpenCode reports on each `step-finish` part are kept
(agentsys.opencode.events), with the model of their message; the demo model reports usage
and the demo provider has a price, so OpenCode's steps cost something."""

from agentsys.opencode.events import PromptAccumulator, step_of
from agentsys.opencode.server import DEMO_MODEL, DEMO_PROVIDER, provider_config
from agentsys.scripted_llm.server import usage_of

SID = "ses_1"


def _event(kind: str, **properties) -> dict:
    return {"type": kind, "properties": properties}


def _step_finish(part_id: str, message_id: str, *, cost, **tokens) -> dict:
    part = {
        "id": part_id,
        "messageID": message_id,
        "sessionID": SID,
        "type": "step-finish",
        "reason": "tool-calls",
        "tokens": tokens,
        "cost": cost,
    }
    return _event("message.part.updated", part=part)


def _assistant(message_id: str) -> dict:
    info = {
        "id": message_id,
        "role": "assistant",
        "sessionID": SID,
        "modelID": "claude-x",
        "providerID": "anthropic",
    }
    return _event("message.updated", info=info)


def test_each_step_finish_is_a_paid_step_with_its_tokens_cost_and_model():
    acc = PromptAccumulator(SID)
    acc.feed(_assistant("msg_a"))
    cache = {"read": 100, "write": 7}
    acc.feed(
        _step_finish("prt_1", "msg_a", cost=0.0125, input=10, output=3, reasoning=2, cache=cache)
    )
    # A second step of the same prompt (after a tool call), and a snapshot of it again.
    acc.feed(_step_finish("prt_2", "msg_a", cost=0.5, input=20, output=4, reasoning=0, cache={}))
    acc.feed(_step_finish("prt_2", "msg_a", cost=0.5, input=20, output=4, reasoning=0, cache={}))
    first, second = acc.steps()
    assert first == {
        "key": "prt_1",
        "message_id": "msg_a",
        "opencode_session_id": SID,
        "input_tokens": 10,
        "output_tokens": 3,
        "reasoning_tokens": 2,
        "cache_read_tokens": 100,
        "cache_write_tokens": 7,
        "usd": 0.0125,
        "provider": "anthropic",
        "model": "claude-x",
    }
    assert second["key"] == "prt_2" and second["usd"] == 0.5 and second["input_tokens"] == 20


def test_another_sessions_steps_and_bad_numbers_are_not_counted():
    acc = PromptAccumulator(SID)
    other = _step_finish("prt_9", "msg_b", cost=1.0, input=5)
    other["properties"]["part"]["sessionID"] = "ses_other"
    acc.feed(other)
    assert acc.steps() == []
    step = step_of(
        {"id": "p", "tokens": {"input": -3, "output": True, "cache": "x"}, "cost": "free"}
    )
    assert step["input_tokens"] == step["output_tokens"] == step["cache_read_tokens"] == 0
    assert step["usd"] == 0.0


def test_the_demo_model_reports_usage_and_the_demo_provider_has_a_price():
    usage = usage_of({"messages": [{"role": "user", "content": "x" * 400}]}, "y" * 80)
    assert usage["prompt_tokens"] > 100 and usage["completion_tokens"] == 20
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    config = provider_config(provider=DEMO_PROVIDER, model=DEMO_MODEL, demo_base_url="http://x/v1")
    cost = config["provider"][DEMO_PROVIDER]["models"][DEMO_MODEL]["cost"]
    assert cost["input"] > 0 and cost["output"] > 0
