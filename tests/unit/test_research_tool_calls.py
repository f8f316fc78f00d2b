"""The tools a research loop's model called (issue 23): kept with each step of its history,
small enough to keep for good, and listed in the iteration log (which the chat agent reads in
the loop's report)."""

from __future__ import annotations

import json

from agentsys.research.llm import TOOL_INPUT_CHARS, TOOL_OUTPUT_CHARS, tool_parts
from agentsys.research.logbook import iteration_section
from agentsys.research.state import IterationRecord, ResearchState

# A tool part as OpenCode 1.18.33 reports it (agentsys.opencode.events.PromptAccumulator).
SEEN = {
    "tool": "research-agent_list_directory",
    "call_id": "call_c249796157dc",
    "status": "completed",
    "input": {"path": "."},
    "output": '{"path":".","total":1,"entries":[{"name":"train.py","type":"file"}]}',
    "title": "",
}


def test_a_tool_call_is_kept_as_the_pages_show_it():
    (part,) = tool_parts([SEEN])
    assert part == {
        "tool": "research-agent_list_directory",
        "status": "completed",
        "title": "",
        "input": {"path": "."},
        "output": SEEN["output"],
    }


def test_a_huge_call_is_cut_and_says_so():
    huge = {**SEEN, "input": {"command": "x" * 10**6}, "output": "y" * 10**6, "title": "t" * 999}
    part, bare = tool_parts([huge, {"tool": None, "status": None}])
    assert bare == {"tool": "tool", "status": "", "title": "", "input": None, "output": ""}
    assert len(part["output"]) < TOOL_OUTPUT_CHARS + 60
    assert part["output"].endswith(f"({10**6 - TOOL_OUTPUT_CHARS} more characters)")
    assert isinstance(part["input"], str) and len(part["input"]) == TOOL_INPUT_CHARS + 1
    assert len(part["title"]) == 200
    assert len(json.dumps(part)) < 4000  # what one call adds to the loop's state, at most


def test_the_history_and_the_iteration_log_keep_the_calls(tmp_path):
    record = IterationRecord(iteration=1, phase="iteration", tool_calls=tool_parts([SEEN]))
    state = ResearchState(goal="g")
    state.record(record)
    state.save(tmp_path / "state.json")
    loaded = ResearchState.load(tmp_path / "state.json")
    assert loaded.history[0]["tool_calls"][0]["tool"] == "research-agent_list_directory"
    log = iteration_section(record)
    assert "- tools called:\n  - research-agent_list_directory (completed)" in log
    assert "- tools called:\n  (none)" in iteration_section(IterationRecord(1, "iteration"))
