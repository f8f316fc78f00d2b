"""The chat and agents pages as Django renders them (the browser tests drive them live)."""

import json

import pytest
from django.test import Client

from agents_app.models import Agent, AgentCommand
from agentsys.registry import SESSION_AGENT
from agentsys.types import TurnStatus
from scheduler_app.models import Alert
from sessions_app.models import ChatMessage, ChatSession, ChatTurn
from sessions_app.services import rename_session

pytestmark = pytest.mark.django_db


def test_the_pages_need_login(client):
    session = ChatSession.objects.create(title="t")
    for url in ("/chat/", f"/chat/{session.pk}/", "/agents/"):
        response = client.get(url)
        assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    assert client.post(f"/chat/{session.pk}/send/", "{}", "application/json").status_code == 302


def test_new_chat_then_send_and_stop(browser):
    response = browser.post("/chat/new/", {"mode": "wild"})
    session = ChatSession.objects.get()
    assert response["Location"] == f"/chat/{session.pk}/" and session.mode == "wild"
    assert session.owner == browser.user
    page = browser.get(f"/chat/{session.pk}/").content.decode()
    assert 'value="wild" checked' in page and "Every message starts a research loop" in page
    sent = browser.post(
        f"/chat/{session.pk}/send/",
        json.dumps({"message": "hi", "mode": "auto"}),
        "application/json",
    )
    assert sent.status_code == 202
    turn = ChatTurn.objects.get(pk=sent.json()["turn_id"])
    assert turn.status == TurnStatus.RUNNING and turn.mode == "auto"
    again = browser.post(
        f"/chat/{session.pk}/send/", json.dumps({"message": "x"}), "application/json"
    )
    assert again.status_code == 409 and "still streaming" in again.json()["detail"]
    assert browser.post(f"/chat/{session.pk}/stop/").status_code == 200
    turn.refresh_from_db()
    assert turn.status == TurnStatus.STOPPED  # no runagentd had claimed it: stopped at once


@pytest.mark.parametrize(
    "body", ["not json", json.dumps([1]), json.dumps({"message": ""}), json.dumps({"message": 5})]
)
def test_a_bad_message_is_a_400_with_a_reason(browser, body):
    session = ChatSession.objects.create(title="t", owner=browser.user)
    response = browser.post(f"/chat/{session.pk}/send/", body, "application/json")
    assert response.status_code == 400 and response.json()["detail"]
    assert not ChatTurn.objects.exists()


def test_someone_elses_chat_is_not_found(browser, django_user_model):
    other = django_user_model.objects.create_user("bob", password="x" * 12)
    session = ChatSession.objects.create(title="bob's", owner=other)
    assert browser.get(f"/chat/{session.pk}/").status_code == 404
    assert browser.post(f"/chat/{session.pk}/stop/").status_code == 404
    assert "bob's" not in browser.get("/chat/").content.decode()


def test_a_chat_shows_its_messages_parts_and_actions(browser):
    session = ChatSession.objects.create(title="Tune", owner=browser.user)
    turn = ChatTurn.objects.create(
        session=session,
        status=TurnStatus.DONE,
        actions=[
            {
                "action": "spawn_research",
                "goal": "find lr",
                "agent_id": "orchestrator-1",
                "error": "",
            }
        ],
    )
    ChatMessage.objects.create(session=session, seq=1, role="user", content="Which lr?")
    ChatMessage.objects.create(
        session=session,
        seq=2,
        role="assistant",
        content="Starting a loop.",
        turn=turn,
        parts=[
            {"id": "p1", "type": "reasoning", "text": "they want lr"},
            {
                "id": "p2",
                "type": "tool",
                "tool": "bash",
                "status": "completed",
                "input": {"command": "ls"},
                "output": "train.py",
            },
            {"id": "p3", "type": "text", "text": "Starting a loop."},
        ],
    )
    page = browser.get(f"/chat/{session.pk}/").content.decode()
    for text in (
        "Which lr?",
        "Starting a loop.",
        "they want lr",
        "train.py",
        "Started a research loop",
        '<a href="/research/orchestrator-1/">',
    ):
        assert text in page, text
    assert page.index("Which lr?") < page.index("Starting a loop.")


def test_set_model_checks_its_input(browser):
    session = ChatSession.objects.create(title="t", owner=browser.user)
    bad = browser.post(
        f"/chat/{session.pk}/model/", json.dumps({"model": "nope"}), "application/json"
    )
    assert bad.status_code == 400
    ok = browser.post(
        f"/chat/{session.pk}/model/", json.dumps({"model": "demo/brain"}), "application/json"
    )
    assert ok.status_code == 200
    session.refresh_from_db()
    assert (session.model_provider, session.model_id) == ("demo", "brain")


def _agent(agent_id: str, status: str, goal: str, **fields) -> Agent:
    role = agent_id.split("-")[0]
    return Agent.objects.create(
        id=agent_id, role=role, cls_path="x", project="p", status=status, goal=goal, **fields
    )


def _tree():
    l1 = _agent("orchestrator-l1", "running", "Chat")
    l2 = _agent("research-l2", "running", "Find the lr", parent=l1, iteration=3)
    _agent("executor-l3", "done", "train", parent=l2, run="run-1")
    _agent("research-old", "done", "Old loop")
    return l1, l2


def test_the_tree_nests_live_trees_and_hides_ended_ones(browser):
    _tree()
    page = browser.get("/agents/").content.decode()
    assert (
        page.index('id="agent-orchestrator-l1"')
        < page.index('id="agent-research-l2"')
        < page.index('id="agent-executor-l3"')
    )
    assert "iteration 3" in page and "Old loop" not in page
    assert "L2 research" in page and "L3 run" in page
    assert "Old loop" in browser.get("/agents/?ended=1").content.decode()
    partial = browser.get("/agents/", HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in partial and "agent-research-l2" in partial


def test_tree_actions_go_through_the_services(browser):
    _, l2 = _tree()
    response = browser.post(f"/agents/{l2.pk}/pause/", follow=True)
    assert AgentCommand.objects.get(agent=l2).kind == "pause"
    assert "Pause sent to the research loop “Find the lr”" in response.content.decode()
    browser.post(f"/agents/{l2.pk}/steer/", {"context": "try 3e-4", "urgency": "priority"})
    assert AgentCommand.objects.filter(agent=l2, kind="steer").exists()
    refused = browser.post("/agents/executor-l3/stop/", follow=True).content.decode()
    assert "Not sent to the agent “train”:" in refused  # finished: refused with a reason
    assert (
        browser.post(
            f"/agents/{l2.pk}/steer/", {"context": "", "urgency": "x"}, follow=True
        ).status_code
        == 200
    )
    assert browser.post("/agents/nobody/stop/").status_code == 404
    assert browser.post(f"/agents/{l2.pk}/explode/").status_code == 404


def test_a_tree_acted_on_or_shown_stays_on_the_page_when_it_ends(browser):
    """Stopping a loop from the tree redraws the page; the stop often lands before that draw.
    The tree stays, its pill on stopped, instead of vanishing as an ended tree (and the live
    re-render keeps the trees on the page the same way); a reload hides it."""
    _, l2 = _tree()
    response = browser.post(f"/agents/{l2.pk}/stop/")
    assert response.status_code == 302
    Agent.objects.filter(pk=l2.pk).update(status="stopped")  # runagentd carried the stop out
    after_stop = browser.get(response["Location"]).content.decode()
    assert 'id="agent-research-l2"' in after_stop
    assert '<span class="pill status stopped">stopped</span>' in after_stop
    assert "Old loop" not in after_stop  # only the tree acted on
    assert "No agent at work" in browser.get("/agents/").content.decode()
    rerender = browser.get(
        "/agents/?keep=orchestrator-l1,research-old,nobody,,", HTTP_HX_REQUEST="true"
    ).content.decode()
    assert "agent-research-l2" in rerender and "Old loop" in rerender


def test_tree_actions_need_the_csrf_token(django_user_model):
    _, l2 = _tree()
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(django_user_model.objects.create_user("eve", password="x" * 12))
    assert strict.post(f"/agents/{l2.pk}/stop/").status_code == 403
    assert strict.post("/chat/new/").status_code == 403
    assert not AgentCommand.objects.exists()


def _idle_chat(title: str) -> Agent:
    """A chat renamed after its session agent was made: the agent's goal has the old title,
    and it stays `running` for as long as the chat exists, answering or not."""
    session = ChatSession.objects.create(title="New chat")
    agent = Agent.objects.create(
        id=f"orchestrator-{session.pk[-8:]}",
        role="orchestrator",
        cls_path=SESSION_AGENT,
        status="running",
        goal="Chat session: New chat",
        chat_session=session,
    )
    rename_session(session=session, title=title)
    return agent


def test_idle_chats_are_not_agents_at_work_and_show_their_new_title(browser):
    chats = [_idle_chat(f"Tune lr {n}") for n in range(3)]
    home = browser.get("/").content.decode()
    # 3 chats waiting for a person: none at work (they counted as 3 "live agents").
    assert 'id="count-agents">0</span><span class="label">agents at work<' in home
    page = browser.get("/agents/").content.decode()
    assert "No agent at work" in page and "Tune lr" not in page
    shown = browser.get("/agents/?ended=1").content.decode()
    assert "Chat: Tune lr 0" in shown and "New chat" not in shown  # the title of now
    assert '<span class="pill status idle">idle</span>' in shown
    ChatTurn.objects.create(session=chats[0].chat_session, status=TurnStatus.RUNNING)
    assert 'id="count-agents">1<' in browser.get("/").content.decode()
    working = browser.get("/agents/").content.decode()
    assert "Chat: Tune lr 0" in working and "Tune lr 1" not in working
    assert '<span class="pill status running">running</span>' in working


def test_status_pills_say_words_not_identifiers(browser):
    session = ChatSession.objects.create(title="Asks", owner=browser.user)
    _agent("executor-ask", "running", "train", chat_session=session)
    Alert.objects.create(agent_id="executor-ask", message="NaN loss", choices=["stop"])
    listing = browser.get("/chat/").content.decode()
    assert ">awaiting you</span>" in listing and "awaitinghuman" not in listing
    page = browser.get(f"/chat/{session.pk}/").content.decode()
    assert 'id="chat-status">awaiting you</span>' in page
    # The scripts' table, so a pill updated live reads the same (AgentSysLive.statusWord).
    table = page.split('id="status-words" type="application/json">')[1].split("</script>")[0]
    assert json.loads(table)["awaiting_human"] == "awaiting you"


def test_a_childs_end_reads_as_one_line_with_a_link_not_the_agents_report(browser):
    from agentsys.chat.reports import child_report_message
    from research_app.models import ResearchLoop
    from runtime_app.chat_store import DjangoChatStore
    from scheduler_app.models import Run

    session = ChatSession.objects.create(title="t", owner=browser.user)
    loop = _agent("orchestrator-loop", "done", "Find the lr")
    ResearchLoop.objects.create(agent=loop, goal=loop.goal)
    command = _agent("executor-cmd", "failed", "nvidia-smi")
    run = Run.objects.create(name="nvidia-smi", command="nvidia-smi", agent=command)
    turns = []
    for child in (loop, command):
        report = {"id": child.id, "kind": "x", "status": child.status, "goal": child.goal}
        turns.append(
            ChatTurn.objects.create(
                session=session,
                synthetic=True,
                status=TurnStatus.QUEUED,  # one turn runs at a time
                message=child_report_message(report),
                variables={"child_id": child.id},
            )
        )
    # The event the page follows live carries the line too (runagentd begins the turn).
    ChatTurn.objects.filter(pk=turns[0].pk).update(status=TurnStatus.RUNNING)
    begun = DjangoChatStore().begin_turn(turn_id=turns[0].pk, agent_id="session-x")
    assert begun.events[0]["payload"]["notice"] == {
        "text": "The research loop “Find the lr” ended: done.",
        "href": "/research/orchestrator-loop/",
        "link": "See the loop",
    }
    ChatTurn.objects.filter(pk=turns[0].pk).update(status=TurnStatus.DONE)
    ChatTurn.objects.filter(pk=turns[1].pk).update(status=TurnStatus.RUNNING)
    DjangoChatStore().begin_turn(turn_id=turns[1].pk, agent_id="session-x")

    page = browser.get(f"/chat/{session.pk}/").content.decode()
    assert "Summarise these results" not in page and "you started has ended" not in page
    assert "The research loop “Find the lr” ended: done." in page
    assert '<a href="/research/orchestrator-loop/">See the loop</a>' in page
    assert "The command “nvidia-smi” ended: failed." in page
    assert f'<a href="/runs/{run.pk}/">See the run</a>' in page
