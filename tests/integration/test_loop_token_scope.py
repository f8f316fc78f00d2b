"""Issue 34, item 3: a research loop's own API token (held by an MCP server whose model reads
untrusted text) acts for the person who started the loop and changes only its own loop's runs
and sweeps (scheduler_app.loop_scope).

Each write route it may reach (create, batch, start, stop, rerun), aimed at another loop's run,
the person's own run, another user's run and a run in no sweep, answers 403 with the reason and
changes nothing; the same route on its own run still answers 200 (201 for a new run). It reads
what its owner reads: their chats, not another person's."""

from __future__ import annotations

import json

import pytest

from accounts_app.models import ApiToken
from hosts_app.models import Host
from research_app.services import start_research
from runtime_app.memory_view import DjangoMemoryView
from scheduler_app.models import GPU, Run, RunStatus, Sweep
from scheduler_app.runs import launch as runs
from sessions_app.models import ChatSession

pytestmark = pytest.mark.django_db

TARGETS = ("another loop's", "the person's", "another user's", "in no sweep")


def issue(loop) -> str:
    """What the loop's ResearchAgent gets at its start, through its memory view."""
    agent = loop.agent
    return DjangoMemoryView(agent.id, agent.role, {"sweep": agent.sweep}).issue_api_token()


def post(client, path: str, token: str, body: dict | None = None):
    return client.post(
        path, json.dumps(body or {}), content_type="application/json", HTTP_X_AUTH_TOKEN=token
    )


@pytest.fixture
def world(tmp_path, settings, django_user_model):
    """Ada's loop (its token), Ada's other loop, Ada's own sweep and Bob's: a run in each, and
    one in no sweep; a host, so that a started run waits in the queue."""
    settings.AGENTSYS_WORKDIR = tmp_path
    host = Host.objects.create(name="gpu-box")
    GPU.objects.create(host=host, index=0, source="declared")
    ada = django_user_model.objects.create_user("ada", password="pw-1234567")
    bob = django_user_model.objects.create_user("bob", password="pw-1234567")
    chat = ChatSession.objects.create(owner=ada, title="ada's chat")  # where loops start
    loop = start_research(goal="Tune lr", workdir=str(tmp_path), chat_session_id=chat.pk)
    other_loop = start_research(goal="Tune wd", workdir=str(tmp_path), chat_session_id=chat.pk)
    sweeps = {
        "another loop's": other_loop.sweep_id,
        "the person's": Sweep.objects.create(name="ada's", created_by=ada).pk,
        "another user's": Sweep.objects.create(name="bob's", created_by=bob).pk,
        "in no sweep": None,
    }
    targets = {
        name: runs.create_run(name=name, command="true", sweep_id=sweep)
        for name, sweep in sweeps.items()
    }
    own = runs.create_run(name="its own", command="true", sweep_id=loop.sweep_id)
    return {
        "chat": chat,
        "ada": ada,
        "bob": bob,
        "loop": loop,
        "token": issue(loop),
        "sweeps": sweeps,
        "targets": targets,
        "own": own,
    }


def refused(response, world) -> str:
    assert response.status_code == 403, response.content
    detail = response.json()["detail"]
    reason = f"this loop's token may only act on runs of its own sweep ({world['loop'].sweep_id})"
    assert reason in detail, detail
    return detail


def ready_for(action: str, run: Run) -> None:
    """Put `run` where `action` would succeed: a refusal is then the token's, not the run's."""
    if action == "stop":
        runs.start_run(run_id=run.pk)  # queued on the host's GPU
    elif action == "rerun":
        Run.objects.filter(pk=run.pk).update(status=RunStatus.DONE)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("action", ["start", "stop", "rerun"])
def test_a_loops_token_acts_only_on_runs_of_its_own_sweep(client, world, action, target):
    run, own = world["targets"][target], world["own"]
    ready_for(action, run)
    ready_for(action, own)
    before = Run.objects.get(pk=run.pk).status
    detail = refused(post(client, f"/api/runs/{run.pk}/{action}", world["token"]), world)
    assert run.pk in detail
    assert ("in no sweep" in detail) == (target == "in no sweep")
    assert Run.objects.get(pk=run.pk).status == before  # nothing changed
    assert Run.objects.count() == len(TARGETS) + 1  # no rerun was made

    mine = post(client, f"/api/runs/{own.pk}/{action}", world["token"])
    assert mine.status_code == 200, mine.content
    expected = {"start": "queued", "stop": "cancelled", "rerun": "queued"}[action]
    assert mine.json()["status"] == expected
    assert mine.json()["sweep_id"] == world["loop"].sweep_id


@pytest.mark.parametrize("target", TARGETS[:3])
def test_a_loops_token_makes_runs_only_in_its_own_sweeps(client, world, target):
    sweep, token = world["sweeps"][target], world["token"]
    one = {"name": "n", "command": "true"}
    detail = refused(post(client, "/api/runs", token, {**one, "sweep_id": sweep}), world)
    assert sweep in detail
    batch = {"runs": [one, {**one, "sweep_id": sweep}]}
    detail = refused(post(client, "/api/runs/batch", token, batch), world)
    assert detail.startswith("run 1: ") and sweep in detail
    assert post(client, "/api/runs/batch", token, {**batch, "sweep_id": sweep}).status_code == 403
    assert Run.objects.count() == len(TARGETS) + 1  # none was made

    made = post(client, "/api/runs/batch", token, {"runs": [one, one]})
    assert made.status_code == 201, made.content
    assert {r["sweep_id"] for r in made.json()} == {world["loop"].sweep_id}


def test_a_sweep_its_token_makes_is_its_own_and_the_persons_not_another_loops(client, world):
    token, loop = world["token"], world["loop"]
    made = post(client, "/api/sweeps", token, {"name": "lr grid"})
    assert made.status_code == 201, made.content
    sweep = Sweep.objects.get(pk=made.json()["id"])
    assert (sweep.created_by, sweep.created_by_agent) == (world["ada"], loop.agent_id)
    run = post(client, "/api/runs", token, {"name": "a", "command": "true", "sweep_id": sweep.pk})
    assert run.status_code == 201, run.content
    started = post(client, f"/api/runs/{run.json()['id']}/start", token)
    assert started.status_code == 200, started.content

    # Ada's other loop's token: not its sweep, nor its run.
    other = issue(start_research(goal="x", workdir=loop.settings["workdir"]))
    body = {"name": "b", "command": "true", "sweep_id": sweep.pk}
    assert post(client, "/api/runs", other, body).status_code == 403
    assert post(client, f"/api/runs/{run.json()['id']}/stop", other).status_code == 403


def test_a_loops_token_acts_for_the_person_who_started_it(client, world):
    ada, bob, loop = world["ada"], world["bob"], world["loop"]
    assert ApiToken.objects.get(agent_id=loop.agent_id, revoked_at=None).user == ada
    adas = world["chat"]
    bobs = ChatSession.objects.create(owner=bob, title="bob's chat")
    token = world["token"]
    assert client.get(f"/api/sessions/{adas.pk}", HTTP_X_AUTH_TOKEN=token).status_code == 200
    assert client.get(f"/api/sessions/{bobs.pk}", HTTP_X_AUTH_TOKEN=token).status_code == 404
    listed = client.get("/api/sessions", HTTP_X_AUTH_TOKEN=token).json()
    assert [s["id"] for s in listed] == [adas.pk]

    # A loop started from Bob's chat acts for Bob: not Ada's chat, nor Ada's runs.
    bobs_loop = start_research(goal="y", workdir=loop.settings["workdir"], chat_session_id=bobs.pk)
    bobs_token = issue(bobs_loop)
    assert ApiToken.objects.get(agent_id=bobs_loop.agent_id, revoked_at=None).user == bob
    assert client.get(f"/api/sessions/{adas.pk}", HTTP_X_AUTH_TOKEN=bobs_token).status_code == 404
    own = world["own"].pk
    assert post(client, f"/api/runs/{own}/start", bobs_token).status_code == 403


def test_a_loop_started_over_the_api_or_the_admin_acts_for_its_caller(
    client, admin_client, admin_user, world, tmp_path
):
    from accounts_app.services import create_token

    _, adas_token = create_token(user=world["ada"], name="laptop")
    started = post(client, "/api/research", adas_token, {"goal": "z", "workdir": str(tmp_path)})
    assert started.status_code == 201, started.content
    sweep = Sweep.objects.get(research_loops__agent_id=started.json()["id"])
    assert sweep.created_by == world["ada"]

    form = {"goal": "w", "max_iterations": 2, "wait_seconds": 0, "autonomy_level": "balanced"}
    page = admin_client.post("/admin/research_app/researchloop/start/", form)
    assert page.status_code == 302, page.content.decode()[:2000]
    assert Sweep.objects.get(research_loops__goal="w").created_by == admin_user
