"""The chat's SessionAgent waits on runs through MCP's `wait_runs` with a token of its own
(issue 39 §3): a real daphne and runagentd, the real OpenCode running the research-agent MCP
server of the chat's workdir (no fixed token in its config), and the scripted model. The
chat's model waits on a run still going until its loss crosses 0.5, and is answered as it
does, long before the run ends; the token it used acts for the chat's owner."""

from __future__ import annotations

import json
from urllib.parse import urlparse

import httpx
import pytest

from accounts_app.models import ApiToken
from agents_app.models import Agent
from agentsys.mcp.credentials import read_credentials
from agentsys.mcp.opencode_config import merge_servers, server_entries
from agentsys.types import AgentRole
from scheduler_app.models import Run
from sessions_app.models import ChatSession
from tests.chat_clients import HEADERS, chat, new_session
from tests.e2e.test_chat_e2e import text_of, web  # noqa: F401  (web: a fixture)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

WAIT = "research-agent_wait_runs"
RUN_SECONDS = 40
CROSSES = (
    "import time\n"
    "print('step 1 | loss 0.9', flush=True)\n"
    "time.sleep(1)\n"
    "print('step 2 | loss 0.3', flush=True)\n"
    f"time.sleep({RUN_SECONDS})\n"
)


def test_the_chat_waits_on_a_metric_crossing_with_its_own_token(
    web,  # noqa: F811  (test_chat_e2e's fixture, imported above)
    make_daemon,
    scripted_llm,
    workdir,
    django_user_model,
):
    # Before OpenCode first looks at the workdir (it reads opencode.json once); no token in
    # it: the server acts with whichever agent's credentials the workdir holds.
    merge_servers(workdir, server_entries(workdir, slurm=False))
    make_daemon(PORT=str(urlparse(web.url).port))
    (workdir / "crosses.py").write_text(CROSSES)
    made = httpx.post(
        f"{web.url}/api/runs",
        json={"name": "crossing", "command": "python crosses.py", "auto_start": True},
        headers=HEADERS,
        timeout=30,
    )
    assert made.status_code == 201, made.text
    run_id = made.json()["id"]
    until = {"metric": "loss", "below": 0.5}
    scripted_llm.load(
        {
            "turns": [
                {
                    "match": "chat-auto",
                    "steps": [
                        {
                            "tool_call": {
                                "name": WAIT,
                                "arguments": {"run_ids": [run_id], "until": until, "timeout_s": 60},
                            }
                        }
                    ],
                },
                {"match": "chat-auto", "steps": [{"text": "Your run's loss is below 0.5."}]},
            ]
        }
    )
    session = new_session(web)
    person = django_user_model.objects.create_user("researcher", password="pw-1234567")
    ChatSession.objects.filter(pk=session).update(owner=person)  # as if they had made it
    status, events = chat(web, session, "Tell me when my run's loss is below 0.5", mode="auto")
    assert status == 200, events
    assert events[-1]["outcome"] == "done", events[-1]
    waited = [e for e in events if e["type"] == "part_update" and e.get("tool") == WAIT]
    assert waited and waited[-1]["status"] == "completed", waited
    answer = json.loads(waited[-1]["output"])
    assert answer["woke"] is True, answer
    assert (
        answer["reason"] == f"run {run_id} (crossing) reached loss 0.3 at step 2 (loss below 0.5)"
    )
    assert answer["waited_s"] < RUN_SECONDS / 2, answer
    assert text_of(events) == "Your run's loss is below 0.5."
    assert Run.objects.get(pk=run_id).status == "running"  # woken by the crossing, not the end

    # The token in the workdir is the chat agent's own, acting for the chat's owner.
    agent_id = Agent.objects.get(chat_session_id=session, role=AgentRole.ORCHESTRATOR).pk
    assert read_credentials(workdir).agent_id == agent_id
    token = ApiToken.objects.get(agent_id=agent_id, revoked_at__isnull=True)
    assert token.user == person
    httpx.post(f"{web.url}/api/runs/{run_id}/stop", headers=HEADERS, timeout=30)
