"""The project's scripted model (issue 10 item 3): an OpenAI-compatible streaming server,
scripted per test, and the demo brain that drives a believable research loop."""

import json
import subprocess
import sys
import time

import httpx
import pytest

from agentsys.research.reply import parse_reply
from agentsys.research.results import ExperimentResult, format_results
from agentsys.scripted_llm import ScriptedLLM
from agentsys.scripted_llm.demo import demo_reply
from tests.helpers import REPO


@pytest.fixture
def llm():
    server = ScriptedLLM()
    server.serve_in_thread()
    yield server
    server.stop()


def chat(llm, text, *, stream=True, system="You are opencode", tools=True, **extra):
    body = {
        "model": "demo-research",
        "stream": stream,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": text}],
        **({"tools": [{"type": "function", "function": {"name": "bash"}}]} if tools else {}),
        **extra,
    }
    return httpx.post(f"{llm.base_url}/v1/chat/completions", json=body, timeout=30)


def chunks(response) -> list[dict]:
    lines = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    return [json.loads(line) for line in lines[:-1]]


def streamed(response, field="content") -> str:
    return "".join(
        c["choices"][0]["delta"].get(field) or "" for c in chunks(response) if c["choices"]
    )


def test_text_streams_in_several_chunks_in_order(llm):
    llm.load({"turns": [{"steps": [{"text": "x" * 30 + "y" * 30}]}]})
    response = chat(llm, "hi", stream_options={"include_usage": True})
    parts = chunks(response)
    assert len(parts) > 3 and streamed(response) == "x" * 30 + "y" * 30
    assert parts[-2]["choices"][0]["finish_reason"] == "stop"
    assert parts[-1]["choices"] == [] and parts[-1]["usage"]["total_tokens"] > 0


def test_reasoning_and_tool_calls(llm):
    llm.load(
        {
            "turns": [
                {
                    "steps": [
                        {"reasoning": "think"},
                        {"tool_call": {"name": "bash", "arguments": {"command": "ls"}}},
                    ]
                }
            ]
        }
    )
    response = chat(llm, "hi")
    assert streamed(response, "reasoning_content") == "think"
    calls = [
        c for c in chunks(response) if c["choices"] and c["choices"][0]["delta"].get("tool_calls")
    ]
    call = calls[0]["choices"][0]["delta"]["tool_calls"][0]
    assert call["function"] == {"name": "bash", "arguments": '{"command": "ls"}'}
    assert chunks(response)[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_an_error_step_answers_with_that_status(llm):
    llm.load({"turns": [{"steps": [{"error": {"status": 503, "message": "overloaded"}}]}]})
    response = chat(llm, "hi")
    assert response.status_code == 503 and response.json()["error"]["message"] == "overloaded"


def test_a_stall_delays_the_reply(llm):
    llm.load({"turns": [{"steps": [{"text": "a"}, {"stall": 0.5}, {"text": "b"}]}]})
    started = time.monotonic()
    assert streamed(chat(llm, "hi")) == "ab"
    assert time.monotonic() - started >= 0.5


def test_turns_match_the_last_user_message_first_unused_first(llm):
    llm.load(
        {
            "turns": [
                {"match": "Iteration 2", "steps": [{"text": "second"}]},
                {"match": "Iteration \\d", "steps": [{"text": "first"}]},
                {"match": "Iteration \\d", "steps": [{"text": "again"}]},
            ]
        }
    )
    assert streamed(chat(llm, "Iteration 1 of 5")) == "first"
    assert streamed(chat(llm, "Iteration 2 of 5")) == "second"
    assert streamed(chat(llm, "Iteration 3 of 5")) == "again"
    assert "no scripted turn matched" in streamed(chat(llm, "Iteration 4 of 5"))


def test_a_title_call_uses_no_turn(llm):
    llm.load({"turns": [{"steps": [{"text": "the answer"}]}]})
    title = chat(llm, "hi", system="You are a title generator.", tools=False)
    assert streamed(title) == "Research loop"
    assert streamed(chat(llm, "hi")) == "the answer"
    assert len(httpx.get(f"{llm.base_url}/_requests").json()) == 2


def test_a_malformed_script_is_400_with_the_reason(llm):
    bad = httpx.post(f"{llm.base_url}/_script", json={"turns": [{"steps": [{"stall": -1}]}]})
    assert bad.status_code == 400 and "stall" in bad.json()["error"]
    bad = httpx.post(f"{llm.base_url}/_script", json={"turns": [{"match": "(", "steps": []}]})
    assert bad.status_code == 400 and "regex" in bad.json()["error"]


def test_non_streaming_answers_one_json(llm):
    llm.load({"turns": [{"steps": [{"text": "whole"}]}]})
    body = chat(llm, "hi", stream=False).json()
    assert body["choices"][0]["message"]["content"] == "whole"


def test_the_command_line_server_answers_with_the_demo_brain():
    process = subprocess.Popen(
        [sys.executable, "-m", "agentsys.scripted_llm", "--port", "0", "--demo"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = process.stdout.readline()
        # Labelled: on the console of `make run` it sits among the other children's lines.
        assert line.startswith("demo model (scripted LLM) listening on http://127.0.0.1:")
        assert line.strip().endswith("/v1")
        base = line.split()[-1]
        body = {
            "model": "demo-research",
            "stream": False,
            "messages": [
                {"role": "user", "content": "<!-- agentsys-prompt: planning -->\nGoal: lr"}
            ],
        }
        answer = httpx.post(f"{base}/chat/completions", json=body, timeout=10).json()
        assert "<plan>" in answer["choices"][0]["message"]["content"]
    finally:
        process.terminate()
        process.wait(10)


def _results(*rows) -> str:
    return format_results(
        [
            ExperimentResult(
                goal=goal,
                run_id=f"executor-{n}",
                command="python train.py",
                parameters={"lr": lr},
                status="done" if loss is not None else "failed",
                exit_code=0 if loss is not None else 1,
                metrics={"loss": {"last": loss, "min": loss, "max": 4.0, "points": 15}}
                if loss is not None
                else {},
            )
            for n, (goal, lr, loss) in enumerate(rows)
        ]
    )


def test_the_demo_brain_plans_a_learning_rate_search():
    # Its iterations and report: tests/unit/test_demo_research.py.
    plan = parse_reply(demo_reply("<!-- agentsys-prompt: planning -->\n# Research planning"))
    assert plan.plan and "learning" in plan.summary.lower()


def test_the_demo_brain_answers_a_chat_without_a_marker():
    assert "demo model" in demo_reply("What can you do?")


# -- the demo brain uses AgentSys's MCP tools where OpenCode offers them (issue 23) ----------

ITERATION_1 = "<!-- agentsys-prompt: iteration -->\nIteration 1 of 5\nNo experiments have run yet."
LISTING = json.dumps(
    {"path": ".", "total": 2, "entries": [{"name": "train.py", "type": "file", "size": 9}]}
)


def _offered(*names):
    return [{"type": "function", "function": {"name": n, "parameters": {}}} for n in names]


def _demo_request(llm, prompt, tools, answered=()):
    """A request as OpenCode sends it (shapes seen from OpenCode 1.18.33): the prompt, then
    each tool call the model made with its result."""
    messages = [
        {"role": "system", "content": "You are opencode"},
        {"role": "user", "content": prompt},
    ]
    for n, (name, arguments, result) in enumerate(answered):
        call = {"id": f"call_{n}", "type": "function"}
        call["function"] = {"name": name, "arguments": json.dumps(arguments)}
        messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"call_{n}", "content": result})
    body = {"model": "demo-research", "stream": False, "messages": messages, "tools": tools}
    answer = httpx.post(f"{llm.base_url}/v1/chat/completions", json=body, timeout=30).json()
    return answer["choices"][0]["message"]


def test_the_demo_lists_the_workdir_in_its_first_iteration_then_answers(llm):
    llm.demo = True
    tools = _offered("bash", "research-agent_list_directory", "research-agent_quick_bash")
    first = _demo_request(llm, ITERATION_1, tools)
    (call,) = first["tool_calls"]
    assert call["function"]["name"] == "research-agent_list_directory"
    assert json.loads(call["function"]["arguments"]) == {"path": "."}

    then = _demo_request(
        llm, ITERATION_1, tools, [("research-agent_list_directory", {"path": "."}, LISTING)]
    )
    assert "tool_calls" not in then
    assert "research-agent_list_directory: train.py." in then["content"]
    assert {e.parameters["lr"] for e in parse_reply(then["content"]).experiments} == {
        0.01,
        0.1,
        0.5,
    }
    # Without the tool (no MCP server configured), the same prompt is answered at once.
    plain = _demo_request(llm, ITERATION_1, _offered("bash"))
    assert "tool_calls" not in plain and "list_directory" not in plain["content"]


def test_the_demo_reads_a_finished_run_only_where_the_run_tools_are_there(llm):
    llm.demo = True
    later = "<!-- agentsys-prompt: iteration -->\nIteration 2 of 5\n" + _results(
        ("lr=0.1", 0.1, 0.01)
    )
    workdir_only = _offered("research-agent_list_directory", "research-agent_quick_bash")
    assert "tool_calls" not in _demo_request(llm, later, workdir_only)  # nothing to call

    tools = _offered(
        "research-agent_list_directory", "research-agent_list_runs", "research-agent_get_run"
    )
    first = _demo_request(llm, later, tools)
    assert first["tool_calls"][0]["function"]["name"] == "research-agent_list_runs"
    runs = json.dumps({"result": [{"id": "run_ab12", "status": "done", "sweep_id": "sw_1"}]})
    listed = [("research-agent_list_runs", {"status": "done"}, runs)]
    second = _demo_request(llm, later, tools, listed)
    (call,) = second["tool_calls"]
    assert call["function"]["name"] == "research-agent_get_run"
    assert json.loads(call["function"]["arguments"]) == {"run_id": "run_ab12"}
    run = json.dumps({"id": "run_ab12", "status": "done", "metrics": {"loss": {"last": 0.01}}})
    done = _demo_request(llm, later, tools, [*listed, ("research-agent_get_run", {}, run)])
    assert (
        "I read the newest finished run (run_ab12) with research-agent_get_run" in done["content"]
    )
    assert "best so far lr=0.1" in done["content"]


def test_the_demo_chat_starts_its_loop_on_the_project_the_person_names():
    """Issue 37 §1 from the chat: "…on /tmp/x/project" gives the loop that workdir."""
    asked = demo_reply(
        "<!-- agentsys-prompt: chat-wild -->\n[USER] Find the best lr on /tmp/x/project."
    )
    assert "<spawn_research>" in asked and "\nworkdir: /tmp/x/project\n" in asked
    plain = demo_reply("<!-- agentsys-prompt: chat-wild -->\n[USER] Find the best lr.")
    assert "<spawn_research>" in plain and "workdir:" not in plain
