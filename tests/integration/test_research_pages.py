"""The research loop pages (issue 12 item 5): plan with checkboxes, iterations with their
experiments' final loss and a diff link, memories written; the diff shows only a commit the
loop recorded."""

import asyncio
import subprocess
import time
from pathlib import Path

import pytest

from agents_app.models import Agent, AgentCommand
from agentsys.git_exclude import keep_out_of_git
from agentsys.research import branch
from agentsys.research.workspace import Workspace
from events_app.events import AGENTS_STREAM, record_event
from memory_app.models import MemoryEntry
from research_app.models import ResearchLoop
from research_app.views import plan_items
from scheduler_app.metrics.series import record_rows
from scheduler_app.models import Run, Sweep

pytestmark = pytest.mark.django_db


def git(cwd, *args) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()


@pytest.fixture
def loop(tmp_path):
    git(tmp_path, "init", "-q")
    (tmp_path / "train.py").write_text("lr = 0.1\n")
    git(tmp_path, "add", "train.py")
    git(tmp_path, "commit", "-q", "-m", "start")
    (tmp_path / "train.py").write_text("lr = 0.2\n")
    git(tmp_path, "commit", "-q", "-am", "iteration 1")
    commit = git(tmp_path, "rev-parse", "HEAD")
    agent = Agent.objects.create(
        id="orchestrator-loop", role="orchestrator", cls_path="x", project="p", status="running"
    )
    executor = Agent.objects.create(id="executor-1", role="executor", cls_path="x", project="p")
    run = Run.objects.create(name="lr 0.2", command="python train.py", agent=executor)
    record_rows(agent_id=executor.id, run_id=run.pk, rows=[{"_step": 9, "loss": 0.4321}])
    tasks = tmp_path / ".agents" / "wild" / agent.id
    tasks.mkdir(parents=True)
    (tasks / "tasks.md").write_text("# Plan\n- [x] baseline at lr=0.1\n- [ ] try lr=0.2\n")
    (tasks / "iteration_log.md").write_text("## Iteration 1\nraised lr\n")
    history = [
        {
            "iteration": 1,
            "promise": "CONTINUE",
            "summary": "Raised the learning rate.",
            "files_changed": ["train.py"],
            "commit": commit,
            "runs": [executor.id],
        }
    ]
    MemoryEntry.objects.create(
        type="reflection", project="p", agent_id=agent.id, data={"text": "lr=0.2 is steadier"}
    )
    return ResearchLoop.objects.create(
        agent=agent,
        goal="Find the best learning rate",
        settings={"workdir": str(tmp_path), "max_iterations": 5},
        state={"history": history, "phase": "running"},
        iteration=1,
    ), commit


def test_the_loop_page_shows_plan_iterations_runs_and_memories(browser, loop):
    row, commit = loop
    page = browser.get(f"/research/{row.agent_id}/").content.decode()
    assert "Find the best learning rate" in page
    assert 'disabled checked aria-label="done"> baseline at lr=0.1' in page
    assert 'disabled  aria-label="to do"> try lr=0.2' in page
    assert "Raised the learning rate." in page and "Going on" in page
    assert f"/research/{row.agent_id}/diff/{commit}/" in page
    assert "0.4321" in page and "lr 0.2" in page  # the experiment's final loss
    assert "lr=0.2 is steadier" in page and "raised lr" in page
    assert row.agent_id in browser.get("/research/").content.decode()


def test_the_diff_of_a_recorded_commit(browser, loop):
    row, commit = loop
    diff = browser.get(f"/research/{row.agent_id}/diff/{commit}/").content.decode()
    assert "-lr = 0.1" in diff and "+lr = 0.2" in diff
    assert browser.get(f"/research/{row.agent_id}/diff/HEAD~1/").status_code == 404
    assert browser.get(f"/research/{row.agent_id}/diff/{'a' * 40}/").status_code == 404
    assert browser.get("/research/orchestrator-none/").status_code == 404


def test_plan_items_read_checkboxes_and_plain_lines():
    items = plan_items("<plan>\n1. Run a baseline\n- [X] done one\n- [ ] open one\nfree text\n")
    assert items == [
        {"text": "Run a baseline", "done": None},
        {"text": "done one", "done": True},
        {"text": "open one", "done": False},
        {"text": "free text", "done": None, "heading": False},
    ]


def _entries_of_each_kind(agent_id: str) -> None:
    scope = {"project": "p", "agent_id": agent_id}
    MemoryEntry.objects.create(
        type="plan", data={"goal": "g", "plan": "1. Baseline at lr=0.1\n2. Try lr=0.3"}, **scope
    )
    MemoryEntry.objects.create(
        type="context",
        data={"promise": "WAITING", "summary": "Waiting on three runs.", "iteration": 2},
        **scope,
    )
    MemoryEntry.objects.create(
        type="result", data={"exit_code": 0, "metrics": {"loss": 0.25}}, **scope
    )


def test_memories_read_as_text_not_python_reprs_on_every_page(browser, loop, admin_client):
    row, _ = loop
    _entries_of_each_kind(row.agent_id)
    pages = {
        "loop": browser.get(f"/research/{row.agent_id}/").content.decode(),
        "memory": browser.get("/memory/").content.decode(),
        "admin": admin_client.get("/admin/memory_app/memoryentry/").content.decode(),
    }
    context = MemoryEntry.objects.get(type="context")
    pages["admin entry"] = admin_client.get(
        f"/admin/memory_app/memoryentry/{context.pk}/change/"
    ).content.decode()
    for name, page in pages.items():
        assert "{&#x27;" not in page and "&#x27;summary&#x27;" not in page, name
    for name in ("loop", "memory", "admin entry"):
        # The step as its summary with its iteration.
        assert "<strong>Iteration 2</strong>" in pages[name], name
        assert "Waiting on three runs." in pages[name], name
    for name in ("loop", "memory"):  # the plan as a list, the reflection as its text
        assert '<li class="">Baseline at lr=0.1</li>' in pages[name], name
        assert "lr=0.2 is steadier" in pages[name], name
    assert "<dt>exit_code</dt><dd>0</dd>" in pages["memory"]
    assert "iteration 2: Waiting on three runs." in pages["admin"]


def test_research_is_in_the_top_nav(browser, loop):
    row, _ = loop
    for path in ("/", "/research/", f"/research/{row.agent_id}/"):
        page = browser.get(path).content.decode()
        assert '<a href="/research/"' in page, path
    assert (
        '<a href="/research/" aria-current="page">Research</a>'
        in browser.get("/research/").content.decode()
    )


def test_the_loop_page_pauses_steers_and_stops_and_its_timeline_shows_them(browser, loop):
    row, _ = loop
    url = f"/research/{row.agent_id}/"
    page = browser.get(url).content.decode()
    for action in ("pause", "stop", "steer"):
        assert f'action="{url}{action}/"' in page, action
    assert 'name="csrfmiddlewaretoken"' in page

    paused = browser.post(f"{url}pause/", follow=True)
    assert paused.redirect_chain[-1][0] == url
    assert "Pause sent" in paused.content.decode()
    steered = browser.post(
        f"{url}steer/", {"context": "Try a cosine schedule", "urgency": "priority"}, follow=True
    )
    assert "Steer sent" in steered.content.decode()
    kinds = list(
        AgentCommand.objects.filter(agent_id=row.agent_id)
        .order_by("created_at")
        .values_list("kind", "payload")
    )
    assert kinds == [
        ("pause", {}),
        ("steer", {"context": "Try a cosine schedule", "urgency": "priority"}),
    ]
    browser.post(f"{url}steer/", {"context": "Also log the seed", "urgency": "message"})
    # What the daemon records when it carries them out (agentsys.control, the supervisor).
    record_event(stream=AGENTS_STREAM, kind="paused", agent_id=row.agent_id, payload={})
    record_event(stream=AGENTS_STREAM, kind="resumed", agent_id=row.agent_id, payload={})
    record_event(
        stream=AGENTS_STREAM,
        kind="steered",
        agent_id=row.agent_id,
        payload={"urgency": "priority", "context": "Try a cosine schedule"},
    )
    timeline = browser.get(url).content.decode().split('id="loop-timeline"')[1].split("</ol>")[0]
    assert "<strong>Paused</strong>" in timeline and "<strong>Resumed</strong>" in timeline
    assert 'Steered (priority)</strong> <span class="detail">Try a cosine schedule' in timeline
    assert 'Steered (message)</strong> <span class="detail">Also log the seed' in timeline

    empty = browser.post(f"{url}steer/", {"context": "  ", "urgency": "priority"}, follow=True)
    assert "a steer needs some words" in empty.content.decode()
    Agent.objects.filter(pk=row.agent_id).update(status="done")
    refused = browser.post(f"{url}stop/", follow=True).content.decode()
    assert "Not done:" in refused and "no longer takes commands" in refused
    assert f'action="{url}pause/"' not in refused  # an ended loop offers no controls
    assert browser.post(f"{url}explode/").status_code == 404
    assert browser.post("/research/executor-1/pause/").status_code == 404  # not a loop
    assert browser.get(f"{url}pause/").status_code == 405


def _header(browser, row) -> str:
    page = browser.get(f"/research/{row.agent_id}/").content.decode()
    return page.split('class="page-head"')[1].split("</p>")[0]


def test_the_header_says_the_state_the_loop_is_in_not_the_phase_it_left(browser, loop):
    row, _ = loop
    ResearchLoop.objects.filter(pk=row.pk).update(state={**row.state, "phase": "iterating"})
    assert "running iteration 2" in _header(browser, row)
    browser.post(f"/research/{row.agent_id}/stop/")  # sent, not yet carried out
    assert ">stopping</span>" in _header(browser, row)
    for status in ("stopped", "paused", "done", "failed"):
        AgentCommand.objects.filter(agent_id=row.agent_id).delete()
        Agent.objects.filter(pk=row.agent_id).update(status=status)
        header = _header(browser, row)
        assert f'id="loop-status">{status}</span>' in header, status
        assert "iterating" not in header and "running iteration" not in header, status
        served = browser.get(f"/api/research/{row.agent_id}").json()
        assert (served["state"], served["phase"]) == (status, "iterating")


def test_steps_read_as_words_and_a_reflection_is_not_a_second_iteration(browser, loop):
    row, _ = loop
    history = [
        {"iteration": 0, "phase": "plan", "summary": "Planned."},
        *row.state["history"],
        {"iteration": 2, "phase": "iteration", "promise": "WAITING", "summary": "Two runs."},
        {"iteration": 2, "phase": "reflection", "promise": "REFLECT_STOP", "summary": "Enough."},
    ]
    ResearchLoop.objects.filter(pk=row.pk).update(state={**row.state, "history": history})
    page = browser.get(f"/research/{row.agent_id}/").content.decode()
    for raw in ("WAITING", "REFLECT_STOP", "CONTINUE"):
        assert raw not in page, raw
    assert "Waiting for results" in page and "Stopped after reflection" in page
    assert page.count("<h3>Iteration 2 ") == 1
    assert "<h3>Reflection after iteration 2 " in page and "<h3>Plan " in page
    ids = [part.split('"')[0] for part in page.split(' id="')[1:]]
    assert len(ids) == len(set(ids)), ids


def test_a_loops_branch_is_a_change_to_review_on_its_page_and_in_the_api(browser, api, tmp_path):
    """Issue 37 §1: the branch, commit by commit with the diff, the best run's figure beside
    it, the outputs left out, and the two commands; `branch` and `base_commit` in the API."""
    git(tmp_path, "init", "-q", "-b", "main")
    (tmp_path / "train.py").write_text("lr = 0.1\n")
    git(tmp_path, "add", "train.py")
    git(tmp_path, "commit", "-q", "-m", "start")
    base = git(tmp_path, "rev-parse", "HEAD")
    keep_out_of_git(tmp_path, ".agents/")
    opened, _ = asyncio.run(branch.open_branch(tmp_path, "research-rev1"))
    tree = Workspace(Path(opened.workdir), "research-rev1")
    (tree.workdir / "train.py").write_text("lr = 0.05\n")
    (tree.workdir / "best.ckpt").write_bytes(b"weights")
    made = asyncio.run(tree.commit("AgentSys research-rev1: iteration 1: lower lr"))
    agent = Agent.objects.create(
        id="research-rev1", role="research", cls_path="x", project="p", status="done"
    )
    executor = Agent.objects.create(id="executor-rev1", role="executor", cls_path="x", project="p")
    sweep = Sweep.objects.create(name="Research: lr")
    run = Run.objects.create(name="lr 0.05", command="python train.py", agent=executor, sweep=sweep)
    record_rows(agent_id=executor.id, run_id=run.pk, rows=[{"_step": 9, "loss": 0.1234}])
    ResearchLoop.objects.create(
        agent=agent,
        sweep=sweep,
        goal="Lower the loss",
        settings={"workdir": str(tmp_path), "max_iterations": 5},
        state={
            "history": [{"iteration": 1, "commit": made.hash, "runs": [executor.id]}],
            "phase": "ended",
            "branch": opened.as_dict(),
            "left_out": made.left_out,
            "left_out_count": 1,
        },
        iteration=1,
    )

    page = browser.get("/research/research-rev1/").content.decode()
    assert "agentsys/research-rev1" in page and base[:12] in page
    assert f"/research/research-rev1/diff/{made.hash}/" in page and "iteration 1: lower lr" in page
    assert "+lr = 0.05" in page and "-lr = 0.1" in page  # the whole change
    assert "0.1234" in page and "lr 0.05" in page  # the best run beside it
    assert "best.ckpt" in page and "a checkpoint (*.ckpt)" in page
    assert f"git -C {tmp_path} merge --no-ff agentsys/research-rev1" in page
    assert f"git -C {tmp_path} branch -D agentsys/research-rev1" in page

    detail = api("get", "/api/research/research-rev1").json()
    assert detail["branch"] == "agentsys/research-rev1" and detail["base_commit"] == base
    assert detail["left_out"] == [{"path": "best.ckpt", "why": "a checkpoint (*.ckpt)"}]
    assert detail["merge_command"].endswith("merge --no-ff agentsys/research-rev1")


def test_the_loop_page_shows_each_steer_and_pause_after_the_iteration_it_followed(browser, loop):
    """Issue 37 §5: a person reads where in the loop they paused and steered it, between the
    iterations (a steer read by iteration 2 stands after iteration 1), not only by the clock;
    the report's `run run-…` citations are links to those runs."""
    row, _ = loop
    now = time.time()
    first, second = (
        {**row.state["history"][0], "finished_at": now - 600},
        {
            "iteration": 2,
            "promise": "DONE",
            "summary": "lr=0.2 has the lowest mean final loss.",
            "finished_at": now + 600,
        },
    )
    cited = Run.objects.create(name="lr 0.2 seed 1", command="python train.py")
    row.state = {**row.state, "history": [first, second]}
    row.reflection = f"- lr=0.2: loss 0.4321 (run {cited.pk}), 0.4400 (run run-00000000)"
    row.save()
    for kind, payload in [
        ("paused", {}),
        ("resumed", {}),
        ("steered", {"urgency": "priority", "context": "Try lr=0.05 as well"}),
    ]:
        record_event(stream=AGENTS_STREAM, kind=kind, agent_id=row.agent_id, payload=payload)

    page = browser.get(f"/research/{row.agent_id}/").content.decode()
    iterations = page.split("<h2>Iterations</h2>")[1].split("</section>")[0]
    one, two = iterations.find('id="iteration-1"'), iterations.find('id="iteration-2"')
    between = iterations[one:two]
    assert 'aria-label="After iteration 1"' in between
    order = ["<strong>Paused</strong>", "<strong>Resumed</strong>", "Steered (priority)"]
    assert [between.find(what) for what in order] == sorted(between.find(w) for w in order)
    assert -1 not in [between.find(what) for what in order], between
    assert '<q class="detail">Try lr=0.05 as well</q>' in between
    assert "step-controls" not in iterations[two:]  # nothing came after iteration 2 ended
    # Each run the report cites is a link to its page.
    assert f'(run <a href="/runs/{cited.pk}/">{cited.pk}</a>)' in page
    assert '<a href="/runs/run-00000000/">run-00000000</a>' in page


def test_a_loop_at_its_budget_cap_asks_for_approval_on_its_page_and_in_the_api(browser, api, loop):
    """Issue 38 §2: the page and the API say why the loop waits, what it spent, and take an
    approval that adds to the cap (a message with `approve` in the loop's inbox)."""
    row, _ = loop
    row.state = {
        **row.state,
        "budget": {"gpu_hours": 0.0005, "on_cap": "hold_runs"},
        "approval": {
            "reason": "its gpu_hours cap is reached: 0.0006 spent of 0.0005; it waits for "
            "your approval before its next experiments",
            "cap": {"gpu_hours": 0.0005},
            "spent": {"gpu_hours": 0.0006, "llm_tokens": 10},
            "asked_at": 1764300000.5,
        },
    }
    row.save()
    detail = api("get", f"/api/research/{row.agent_id}").json()
    assert detail["state"] == "awaiting_approval"
    assert detail["approval"]["cap"] == {"gpu_hours": 0.0005}
    assert detail["budget"] == {"gpu_hours": 0.0005}

    page = browser.get(f"/research/{row.agent_id}/").content.decode()
    assert "The loop waits for your approval" in page and "awaiting your approval" in page
    assert "gpu_hours cap is reached: 0.0006 spent of 0.0005" in page
    assert 'name="gpu_hours"' in page

    refused = browser.post(f"/research/{row.agent_id}/approve/", {"gpu_hours": "lots"})
    assert refused.status_code == 302
    assert not MemoryEntry.objects.filter(target_id=row.agent_id, tags=["approval"]).exists()
    browser.post(f"/research/{row.agent_id}/approve/", {"gpu_hours": "1"})
    entry = MemoryEntry.objects.get(target_id=row.agent_id, tags=["approval"])
    assert entry.data["approve"] == {"gpu_hours": 1.0} and entry.type == "message"
    assert entry.data["answers"] == 1764300000.5  # the question it answers, and no other

    record_event(
        stream=AGENTS_STREAM,
        kind="awaiting_approval",
        agent_id=row.agent_id,
        payload={"reason": "its gpu_hours cap is reached"},
    )
    timeline = browser.get(f"/research/{row.agent_id}/").content.decode()
    assert "<strong>Waiting for approval</strong>" in timeline

    bad = api("post", f"/api/research/{row.agent_id}/approve", {"add": {"dollars": 5}})
    assert bad.status_code == 422 and "dollars" in bad.json()["detail"]
    assert (
        api("post", "/api/research/research-none/approve", {"add": {"llm_usd": 1}}).status_code
        == 404
    )
    Agent.objects.filter(pk=row.agent_id).update(status="done")
    ended = api("post", f"/api/research/{row.agent_id}/approve", {"add": {"llm_usd": 1}})
    assert ended.status_code == 409


def test_the_chats_card_of_a_loop_takes_the_approval_of_its_batch(browser, loop):
    """Issue 38 §3: where the loop was started (the chat's card), the person reads why it
    waits and approves its planned runs in one click; the card then says it goes on."""
    row, _ = loop
    row.state = {
        **row.state,
        "approval": {
            "kind": "batch",
            "reason": "autonomy_level cautious: every batch waits for you (2 runs, 1 GPUs)",
            "batch": [
                {"goal": "baseline", "command": "python train.py", "gpu_required": 0},
                {"goal": "on a GPU", "command": "python train.py --lr 0.2", "gpu_required": 1},
            ],
        },
    }
    row.save()
    card = browser.get(f"/research/{row.agent_id}/progress/").content.decode()
    assert "The loop waits for your approval:" in card and "every batch waits for you" in card
    assert "Approve its 2 runs" in card and "awaiting your approval" in card

    answered = browser.post(f"/research/{row.agent_id}/approve/", HTTP_HX_REQUEST="true")
    card = answered.content.decode()
    assert answered.status_code == 200 and "Approved: the loop goes on now." in card
    assert "Approve its 2 runs" not in card
    entry = MemoryEntry.objects.get(target_id=row.agent_id, tags=["approval"])
    assert entry.data["approve"] == {}  # a batch's approval adds to no cap
