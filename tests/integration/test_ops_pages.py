"""The overview, GPU queue, alerts, memory and settings pages as Django renders them (the
browser tests drive them live): login needed, what each shows, actions that work or refuse
with a reason, and no 500 on bad input."""

import re

import pytest
from django.utils import timezone

from agents_app.models import Agent
from agentsys.types import AgentStatus, EntryType, RequestStatus
from hosts_app.models import Host
from memory_app.models import MemoryEntry
from memory_app.services import create_memory, write_entry
from research_app.models import ResearchLoop
from scheduler_app.metrics.series import record_rows
from scheduler_app.models import GPU, Alert, AlertStatus, GPUSource, Run, RunStatus, ScheduleRequest
from scheduler_app.runs import launch as runs
from scheduler_app.services import raise_alert

pytestmark = pytest.mark.django_db

PAGES = ("/", "/queue/", "/alerts/", "/memory/", "/settings/")


def a_host(*, gpus=2, alive=True) -> Host:
    host = Host.objects.create(
        name="gpu-box", last_heartbeat=timezone.now() if alive else None, daemon_pid=1
    )
    for index in range(gpus):
        GPU.objects.create(host=host, index=index, name="NVIDIA H100", source=GPUSource.NVML)
    return host


def a_running_run(host: Host, name="resnet lr=0.1") -> Run:
    """A run placed on GPU 0 of `host`, as a claim leaves it."""
    run = runs.start_run(run_id=runs.create_run(name=name, command="python t.py").pk)
    request = ScheduleRequest.objects.get(agent_id=run.agent_id)
    ScheduleRequest.objects.filter(pk=request.pk).update(
        status=RequestStatus.RUNNING, host=host, gpu_indices=[0], started_at=timezone.now()
    )
    GPU.objects.filter(host=host, index=0).update(allocated_to=request)
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, started_at=timezone.now())
    return run


def a_queued_run(name: str, gpus: int) -> Run:
    return runs.start_run(
        run_id=runs.create_run(name=name, command="python t.py", gpu_required=gpus).pk
    )


def _reasons(page: str) -> list[str]:
    """The queue's "Why it waits" cells, top to bottom."""
    return re.findall(r'<td class="reason"[^>]*>([^<]*)</td>', page)


def test_every_page_needs_login(client):
    for url in PAGES:
        response = client.get(url)
        assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    assert client.post("/settings/tokens/", {"name": "x"}).status_code == 302
    assert client.post("/memory/add/", {"text": "x"}).status_code == 302
    assert not MemoryEntry.objects.exists()


def test_the_overview_shows_what_runs_waits_and_needs_a_person(browser):
    host = a_host()
    running = a_running_run(host)
    record_rows(agent_id=running.agent_id, run_id=running.pk, rows=[{"_step": 41, "loss": 0.5}])
    a_queued_run("big sweep", gpus=2)
    raise_alert(agent_id=running.agent_id, severity="critical", message="NaN loss at step 41")
    loop_agent = Agent.objects.create(
        id="research-0000cccc", role="research", status=AgentStatus.RUNNING
    )
    ResearchLoop.objects.create(
        agent=loop_agent, goal="Find the best LR", settings={"max_iterations": 5}, iteration=2
    )
    page = browser.get("/").content.decode()
    assert "resnet lr=0.1" in page and "step 41" in page and "loss 0.5" in page
    assert "big sweep" in page and "no host with 2 free GPUs; largest has 1 free" in page
    assert "NaN loss at step 41" in page and "Find the best LR" in page and "of 5" in page
    assert 'id="count-running">1<' in page and 'id="count-alerts">1<' in page
    body = browser.get("/?part=body", HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in body and "resnet lr=0.1" in body


def test_the_overview_says_when_no_daemon_runs(browser):
    a_host(alive=False)
    page = browser.get("/").content.decode()
    assert 'id="health-banner"' in page and "No runagentd is running" in page


def test_the_queue_shows_holders_positions_and_why_each_waits(browser, agentsys_config):
    agentsys_config(scheduler_policy="fifo")
    host = a_host()
    a_running_run(host, name="holder run")
    first = a_queued_run("needs two", gpus=2)
    a_queued_run("needs one", gpus=1)
    page = browser.get("/queue/").content.decode()
    assert "holder run" in page  # GPU 0's holder, named
    assert page.index("needs two") < page.index("needs one")
    reasons = _reasons(page)
    assert reasons == [
        "No host with 2 free GPUs; largest has 1 free (gpu-box: 1 free of 2)",
        "Next in line",  # fifo: the first fit passes the run that does not fit
    ]
    agentsys_config(scheduler_policy="reserve")
    reserved = browser.get("/queue/").content.decode()
    assert _reasons(reserved)[1] == "Behind 1 earlier run"
    agentsys_config(scheduler_policy="backfill")  # the default
    assert _reasons(browser.get("/queue/").content.decode()) == [
        "No host with 2 free GPUs; largest has 1 free (gpu-box: 1 free of 2); kept for it: "
        "gpu-box frees 2 GPUs when its runs end",
        "Would delay the reservation (gpu-box frees 2 GPUs when its runs end); no run there has "
        "a time limit, so nothing may start before it",
    ]
    board = browser.get("/queue/", HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in board and "needs two" in board
    request_id = ScheduleRequest.objects.get(agent_id=first.agent_id).pk
    done = browser.post(f"/queue/{request_id}/cancel/", follow=True).content.decode()
    assert "Cancelled “needs two”: it left the queue." in done and request_id not in done
    assert Run.objects.get(pk=first.pk).status == RunStatus.CANCELLED
    again = browser.post(f"/queue/{request_id}/cancel/", follow=True).content.decode()
    assert "“needs two” was not cancelled: it is cancelled; only queued" in again
    assert browser.post("/queue/no-such-request/cancel/").status_code == 404


def test_the_queue_names_a_dead_host(browser):
    a_host(alive=False)
    a_queued_run("orphan", gpus=1)
    page = browser.get("/queue/").content.decode()
    assert _reasons(page) == ["No runagentd online"]


def test_alerts_are_answered_from_the_inbox(browser):
    host = a_host()
    run = a_running_run(host)
    nan = raise_alert(agent_id=run.agent_id, severity="critical", message="NaN loss")
    spike = raise_alert(agent_id=run.agent_id, severity="warning", message="Loss spike")
    page = browser.get("/alerts/").content.decode()
    assert "NaN loss" in page and "Loss spike" in page and "2 open" in page
    assert "NaN loss" not in browser.get("/alerts/?severity=warning").content.decode()
    done = browser.post(
        f"/alerts/{spike.pk}/respond/", {"response": "acknowledge"}, follow=True
    ).content.decode()
    assert "Alert on the run “resnet lr=0.1”: answered “acknowledge”" in done
    assert "Loss spike" not in done.split("</h1>")[1] and f"Alert {spike.pk}" not in done
    assert Alert.objects.get(pk=spike.pk).status == AlertStatus.RESOLVED
    refused = browser.post(f"/alerts/{nan.pk}/respond/", {"response": "reboot"}, follow=True)
    assert "response must be one of acknowledge, stop" in refused.content.decode()
    assert Alert.objects.get(pk=nan.pk).status == AlertStatus.PENDING
    browser.post(f"/alerts/{nan.pk}/respond/", {"response": "stop"})
    assert Alert.objects.get(pk=nan.pk).response == "stop"
    assert Agent.objects.get(pk=run.agent_id).commands.filter(kind="stop").exists()
    everything = browser.get("/alerts/?show=all").content.decode()
    assert "by <bdi>ada</bdi>" in everything and "Loss spike" in everything
    assert browser.post("/alerts/nope/respond/", {"response": "stop"}).status_code == 404
    assert browser.get("/alerts/?show=bogus&severity=" + "x" * 999).status_code == 200
    assert browser.get("/alerts/?show=%00").status_code == 400  # a clear 4xx, as everywhere


def test_memory_is_browsed_searched_edited_and_noted(browser):
    write_entry(type=EntryType.RESULT, project="demo", run="r-7", data={"final_loss": 0.25})
    write_entry(type=EntryType.PLAN, project="demo", session="s-1", data={"text": "Sweep LR"})
    mine = create_memory(text="Warmup matters", title="Warmup", tags=["lr"], project="demo")
    page = browser.get("/memory/").content.decode()
    assert "final_loss" in page and "Sweep LR" in page and "Warmup matters" in page
    assert "3 entries" in page
    assert "Sweep LR" not in browser.get("/memory/?type=result").content.decode()
    assert "final_loss" not in browser.get("/memory/?tag=lr").content.decode()
    scoped = browser.get("/memory/?scope=session&scope_value=s-1").content.decode()
    assert "Sweep LR" in scoped and "final_loss" not in scoped
    found = browser.get("/memory/?q=warmup", HTTP_HX_REQUEST="true").content.decode()
    assert "Warmup matters" in found and "Sweep LR" not in found and "<html" not in found

    browser.post(f"/memory/{mine.key}/edit/", {"text": "Warmup matters a lot", "tags": "lr, x"})
    mine.refresh_from_db()
    assert mine.data["text"] == "Warmup matters a lot" and mine.tags == ["lr", "x"]
    result = MemoryEntry.objects.get(type=EntryType.RESULT)
    refused = browser.post(f"/memory/{result.key}/edit/", {"text": "forged"}, follow=True)
    assert "can be hidden, not rewritten" in refused.content.decode()
    browser.post(f"/memory/{result.key}/deactivate/")
    assert not MemoryEntry.objects.get(pk=result.key).active
    assert "final_loss" in browser.get("/memory/?active=inactive").content.decode()
    browser.post(f"/memory/{mine.key}/delete/")
    assert not MemoryEntry.objects.filter(pk=mine.key).exists()

    added = browser.post("/memory/add/", {"title": "Note", "text": "Use AdamW", "tags": "opt"})
    assert added.status_code == 302
    note = MemoryEntry.objects.get(data__text="Use AdamW")
    assert note.type == EntryType.REFLECTION and note.author.username == "ada"
    empty = browser.post("/memory/add/", {"text": "  "}, follow=True).content.decode()
    assert "A note needs some text." in empty
    assert browser.post("/memory/nope/delete/").status_code == 404
    assert browser.get("/memory/?page=abc&type=bogus&scope=x").status_code == 200


def test_tokens_are_made_once_used_and_revoked(browser, client, django_user_model):
    made = browser.post("/settings/tokens/", {"name": "laptop scripts"})
    page = made.content.decode()
    assert made.status_code == 200 and made["Cache-Control"] == "no-store"
    token = page.split('id="new-token" class="mono" type="text" readonly value="')[1].split('"')[0]
    assert "laptop scripts" in page
    assert "laptop scripts" in browser.get("/settings/").content.decode()
    assert token not in browser.get("/settings/").content.decode()  # shown once
    client.logout()
    auth = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    assert client.get("/api/runs", **auth).status_code == 200
    browser.force_login(django_user_model.objects.get(username="ada"))
    row_id = django_user_model.objects.get(username="ada").api_tokens.get().pk
    browser.post(f"/settings/tokens/{row_id}/revoke/")
    client.logout()
    assert client.get("/api/runs", **auth).status_code == 401

    eve = django_user_model.objects.create_user("eve", password="y" * 12)
    client.force_login(eve)
    refused = client.post(f"/settings/tokens/{row_id}/revoke/", follow=True).content.decode()
    assert "No such token of yours." in refused
    nameless = client.post("/settings/tokens/", {"name": ""})
    assert nameless.status_code == 400 and "a token needs a name" in nameless.content.decode()


def test_settings_show_the_model_and_that_opencode_is_down(browser, agentsys_config):
    agentsys_config(opencode_url="", model_provider="demo", model_id="scripted")
    page = browser.get("/settings/").content.decode()
    assert "demo/scripted" in page and "OPENCODE_URL is not set" in page
    # The MCP servers are OpenCode's to report: not asked while it is not there.
    assert "MCP servers" in page and "Not known: not asked: OpenCode is not answering" in page


def test_settings_shows_the_last_mcp_answer_with_its_age_when_opencode_is_slow(
    browser, monkeypatch, agentsys_config
):
    from agentsys.mcp import status

    async def answering(url, workdir, **kwargs):
        servers = {"their-tool": {"status": "failed", "error": "ENOENT", "fix": "fix its path"}}
        return {"ok": False, "directory": str(workdir), "servers": servers}

    async def silent(url, workdir, **kwargs):
        return {"ok": False, "directory": str(workdir), "timed_out": True, "error": "no answer"}

    async def opencode_up():
        return {"ok": True, "url": "http://oc", "model": "demo/x", "version": "1"}

    monkeypatch.setattr("accounts_app.views.opencode_check", opencode_up)
    agentsys_config(opencode_url="http://oc")
    clock = [500.0]
    monkeypatch.setattr(status.time, "monotonic", lambda: clock[0])
    status.forget()
    monkeypatch.setattr(status, "workdir_mcp_status", answering)
    assert "their-tool" in browser.get("/settings/").content.decode()
    clock[0] += 20
    monkeypatch.setattr(status, "workdir_mcp_status", silent)
    page = browser.get("/settings/").content.decode()
    status.forget()
    assert "their-tool" in page and "Fix: fix its path" in page
    assert "As OpenCode answered 20 s ago (now no answer)." in page
