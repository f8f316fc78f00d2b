"""The research loop end to end (issue 10): a real runagentd runs a ResearchAgent whose model
is the project's scripted LLM behind the real OpenCode server; its experiments are real
subprocesses that write agent_metrics.jsonl, go through the GPU queue and show up as runs."""

from __future__ import annotations

import hashlib
import json
import re
import signal
import subprocess
import sys

import httpx
import pytest

from agents_app.models import Agent
from ledger_app.models import SpendEntry
from memory_app.models import MemoryEntry
from research_app import selectors as research_selectors
from research_app.models import ResearchLoop
from scheduler_app.models import Run
from tests.helpers import wait_until
from tests.runtime_harness import DaemonProcess

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PY = sys.executable
TRAIN = f"{PY} train.py --steps=40 --sleep=0"
TENSORBOARD = f"{PY} train_tensorboard.py --steps=20 --sleep=0"  # writes runs/sgd/events.*

PLAN = """<plan>
1. Run a baseline at lr=0.05.
2. Try lr=0.2 on a GPU.
3. Keep the better one.
</plan>
<summary>A two-run learning-rate search.</summary>"""

ITERATION_1 = f"""I will run two experiments.
<experiments>
- goal: baseline lr 0.05
  command: {PY} train.py --steps=40 --sleep=0
  workdir: .
  parameters: {{"lr": 0.05}}
  gpu_required: 0
- goal: lr 0.2 on a GPU
  command: echo "gpu $CUDA_VISIBLE_DEVICES" >> found.md && {TRAIN} && {TENSORBOARD}
  workdir: .
  parameters: {{"lr": 0.2}}
  gpu_required: 1
</experiments>
<summary>Launched the baseline and the GPU run.</summary>"""

ITERATION_2 = """Both finished; lr=0.2 reached the lower loss.
<promise>DONE</promise>
<summary>lr=0.2 is best.</summary>"""

REFLECTION = """<reflection>The larger learning rate converged faster on this problem.</reflection>
<memories>
- [hyperparams] lr=0.2 beat lr=0.05 on the linear demo
- a plain lesson without a tag
</memories>
<continue>no</continue>"""


SLOW_ITERATION_2 = """<experiments>
- goal: a slow check
  command: sleep 4; echo finished-ok
  workdir: .
  parameters: {}
  gpu_required: 0
</experiments>
<promise>DONE</promise>
<summary>Ran the slow check.</summary>"""


def _turn(match: str, text: str, **extra) -> dict:
    return {"match": match, "steps": [{"text": text}], **extra}


def happy_script() -> dict:
    return {
        "turns": [
            _turn(r"agentsys-prompt: planning", PLAN),
            _turn(r"Iteration 1 of", ITERATION_1),
            _turn(r"Iteration 2 of", ITERATION_2),
            _turn(r"agentsys-prompt: reflection", REFLECTION),
        ]
    }


@pytest.fixture
def daemon(make_daemon):
    return make_daemon()


def start_loop(api, workdir, **overrides) -> str:
    body = {
        "goal": "Find the best learning rate for train.py",
        "max_iterations": 5,
        "wait_seconds": 1,
        "autonomy_level": "balanced",
        "workdir": str(workdir),
        **overrides,
    }
    response = api("post", "/api/research", body)
    assert response.status_code == 201, response.content
    return response.json()["id"]


def wait_finished(loop_id: str, timeout: float = 90) -> Agent:
    return wait_until(
        lambda: Agent.objects.filter(pk=loop_id, status__in=["done", "failed", "stopped"]).first(),
        timeout,
        interval=0.2,
        message=f"research loop {loop_id} to finish",
    )


def prompts_seen(scripted_llm) -> list[str]:
    """The last user message of each chat request OpenCode sent the model."""
    requests = httpx.get(f"{scripted_llm.base_url}/_requests", timeout=5).json()
    seen = []
    for request in requests:
        users = [m for m in request.get("messages", []) if m.get("role") == "user"]
        if users:
            content = users[-1].get("content")
            if isinstance(content, list):
                content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
            seen.append(content or "")
    return seen


def wait_for_prompt(scripted_llm, text: str) -> None:
    wait_until(
        lambda: any(text in p for p in prompts_seen(scripted_llm)),
        60,
        interval=0.2,
        message=f"a prompt with {text!r} to reach the model",
    )


def test_a_loop_plans_runs_two_experiments_finishes_and_reflects(
    api, workdir, daemon, scripted_llm
):
    # The person works on: a change of theirs not committed, which the loop must not take.
    (workdir / "train.py").write_text((workdir / "train.py").read_text() + "# mine\n")
    theirs = what_they_have(workdir)
    scripted_llm.load(happy_script())
    # Woken when both runs have ended: iteration 2's prompt holds both results. (With the
    # default, "each", a GPU run ending over SETTLE_SECONDS after the baseline, as on a busy
    # machine, is reported in iteration 2 instead: tests/e2e/test_research_wake.py.)
    loop_id = start_loop(api, workdir, wake_on="all")
    agent = wait_finished(loop_id)
    assert agent.status == "done", agent.error

    detail = api("get", f"/api/research/{loop_id}").json()
    promises = [step["promise"] for step in detail["history"]]
    assert promises[0] is None and promises[-2:] == ["DONE", "REFLECT_STOP"], promises
    first = detail["history"][1]
    assert len(first["runs"]) == 2

    # The experiments are runs of the loop's sweep, one of them placed on the declared GPU.
    loop = ResearchLoop.objects.get(pk=loop_id)
    runs = {run.params["lr"]: run for run in Run.objects.filter(sweep_id=loop.sweep_id)}
    assert set(runs) == {0.05, 0.2} and all(r.status == "done" for r in runs.values())
    assert runs[0.2].gpu_required == 1
    listed = api("get", f"/api/runs?sweep_id={loop.sweep_id}").json()
    assert {r["id"] for r in listed} == {r.id for r in runs.values()}
    # They ran in the loop's worktree, on its branch.
    tree = workdir / ".agents" / "worktrees" / loop_id
    assert detail["branch"] == f"agentsys/{loop_id}" and detail["worktree"] == str(tree)
    assert detail["base_commit"] == theirs["head"].strip()
    for run in runs.values():
        assert run.workdir == str(tree)
        metrics = tree / ".agents" / "runs" / run.agent_id / "agent_metrics.jsonl"
        assert metrics.read_text().count("loss") == 4

    # The model saw the results of iteration 1 in iteration 2's prompt.
    iteration_2 = next(p for p in prompts_seen(scripted_llm) if "Iteration 2 of" in p)
    assert "## Results from Previous Experiments" in iteration_2
    assert '"lr": 0.2' in iteration_2 and "loss last=" in iteration_2

    loop_dir = tree / ".agents" / "wild" / loop_id
    assert "Try lr=0.2 on a GPU." in (loop_dir / "tasks.md").read_text()
    log = (loop_dir / "iteration_log.md").read_text()
    assert "## Iteration 1" in log and "## Iteration 2" in log and "promise: DONE" in log
    assert "found.md" in log  # the GPU run wrote it: iteration 1 changed that file

    # Issue 37 §1: the person's branch, index and files are as they were, and nothing of
    # AgentSys's is in their status; the loop's branch holds code only, outputs listed.
    assert what_they_have(workdir) == theirs
    commits = git(
        workdir,
        "log",
        "--format=%s",
        "--name-only",
        f"{theirs['head'].strip()}..{detail['branch']}",
    )
    assert "iteration 1" in commits and "found.md" in commits
    assert ".agents" not in commits and "tfevents" not in commits and "opencode.json" not in commits
    assert any("events.out.tfevents" in f["path"] for f in detail["left_out"])
    assert detail["merge_command"] == f"git -C {workdir} merge --no-ff agentsys/{loop_id}"

    reflections = MemoryEntry.objects.filter(agent_id=loop_id, type="reflection")
    texts = {(tuple(e.tags), e.data["text"]) for e in reflections}
    assert (("hyperparams",), "lr=0.2 beat lr=0.05 on the linear demo") in texts
    assert (("general",), "a plain lesson without a tag") in texts

    log_response = api("get", f"/api/research/{loop_id}/iteration-log")
    assert log_response.status_code == 200 and b"## Iteration 2" in log_response.content


def git(cwd, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=True
    ).stdout


def what_they_have(repo) -> dict:
    """The person's branch, HEAD, index, status and every file's bytes (outside .git/ and
    AgentSys's .agents/)."""
    files = {
        str(p.relative_to(repo)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(repo.rglob("*"))
        if p.is_file() and not {".git", ".agents"} & set(p.relative_to(repo).parts)
    }
    return {
        "branch": git(repo, "symbolic-ref", "HEAD"),
        "head": git(repo, "rev-parse", "HEAD"),
        "index": git(repo, "ls-files", "--stage"),
        "status": git(repo, "status", "--porcelain", "--untracked-files=all"),
        "files": files,
    }


def _iteration_steps(detail: dict) -> list[int]:
    return [s["iteration"] for s in detail["history"] if s.get("phase") == "iteration"]


def test_a_priority_steer_changes_the_next_iteration_prompt(api, workdir, daemon, scripted_llm):
    scripted_llm.load(
        {
            "turns": [
                _turn(r"agentsys-prompt: planning", PLAN),
                {
                    "match": r"Iteration 1 of",
                    "steps": [{"stall": 6}, {"text": "<summary>Read the code.</summary>"}],
                },
                _turn(r"Iteration 2 of", ITERATION_2),
                _turn(r"agentsys-prompt: reflection", REFLECTION),
            ]
        }
    )
    loop_id = start_loop(api, workdir)
    wait_for_prompt(scripted_llm, "Iteration 1 of")
    steered = api(
        "post",
        f"/api/research/{loop_id}/steer",
        {"context": "Focus on lr=0.3 from now on", "urgency": "priority"},
    )
    assert steered.status_code in (200, 202), steered.content
    messaged = api(
        "post",
        f"/api/research/{loop_id}/steer",
        {"context": "Also record the seed of each run", "urgency": "message"},
    )
    assert messaged.status_code == 202 and messaged.json()["status"] == "delivered_to_inbox"
    assert api("post", f"/api/research/{loop_id}/pause").status_code == 202
    wait_until(lambda: Agent.objects.get(pk=loop_id).status == "paused", 20)
    assert api("post", f"/api/research/{loop_id}/resume").status_code == 202
    assert wait_finished(loop_id).status == "done"
    # Each command leaves its trace in the iteration log, where it happened, with its words.
    log = api("get", f"/api/research/{loop_id}/iteration-log").content.decode()
    order = [
        "## Steer from the researcher (priority",
        "> Focus on lr=0.3 from now on",
        "## Paused by the researcher",
        "## Resumed",
        "## Iteration 1",
        "## Message from the researcher (read now)",
        "> Also record the seed of each run",
        "## Iteration 2",
    ]
    assert [log.find(line) for line in order] == sorted(log.find(line) for line in order), log
    assert -1 not in [log.find(line) for line in order], log
    # And in the loop page's timeline.
    timeline = [item["what"] for item in research_selectors.timeline(ResearchLoop.objects.get())]
    for what in ("Steered (priority)", "Steered (message)", "Paused", "Resumed", "Done"):
        assert what in timeline, timeline
    prompts = prompts_seen(scripted_llm)
    first = next(p for p in prompts if "Iteration 1 of" in p)
    second = next(p for p in prompts if "Iteration 2 of" in p)
    assert "Focus on lr=0.3" not in first
    assert "Focus on lr=0.3 from now on" in second
    assert "Also record the seed of each run" in second  # the inbox, read once
    reflection = next(p for p in prompts if "agentsys-prompt: reflection" in p)
    assert "Also record the seed" not in reflection


def test_a_stalled_model_times_out_and_the_iteration_is_asked_again(
    api, workdir, make_daemon, scripted_llm
):
    make_daemon(MODEL_RESPONSE_TIMEOUT="15")
    scripted_llm.load(
        {
            "turns": [
                _turn(r"agentsys-prompt: planning", PLAN),
                {"match": r"Iteration 1 of", "steps": [{"text": "thinking"}, {"stall": 60}]},
                _turn(r"Iteration 1 of", ITERATION_2),
                _turn(r"agentsys-prompt: reflection", REFLECTION),
            ]
        }
    )
    loop_id = start_loop(api, workdir)
    assert wait_finished(loop_id).status == "done"
    detail = api("get", f"/api/research/{loop_id}").json()
    failed = next(s for s in detail["history"] if s["iteration"] == 1)
    assert failed["phase"] == "model_error"
    assert any("timed out" in e for e in failed["errors"]), failed
    assert any("MODEL_RESPONSE_TIMEOUT (now 15 s)" in e for e in failed["errors"]), failed
    assert _iteration_steps(detail) == [1]  # the timed-out call used up no iteration
    assert detail["history"][-2]["promise"] == "DONE"


def test_runagentd_killed_during_iteration_2_resumes_it_and_readopts_its_run(
    api, workdir, make_daemon, scripted_llm
):
    daemon = make_daemon()
    long_run = SLOW_ITERATION_2
    scripted_llm.load(
        {
            "turns": [
                _turn(r"agentsys-prompt: planning", PLAN),
                _turn(r"Iteration 1 of", ITERATION_1),
                _turn(r"Iteration 2 of", long_run),
                _turn(r"agentsys-prompt: reflection", REFLECTION),
            ]
        }
    )
    loop_id = start_loop(api, workdir)
    slow = wait_until(
        lambda: Run.objects.filter(command__startswith="sleep 4", status="running").first(),
        90,
        interval=0.1,
        message="iteration 2's run to be running",
    )
    daemon.stop(signal.SIGKILL)
    make_daemon()
    agent = wait_finished(loop_id)
    assert agent.status == "done", agent.error
    detail = api("get", f"/api/research/{loop_id}").json()
    assert _iteration_steps(detail) == [1, 2]
    prompts = prompts_seen(scripted_llm)
    assert sum("agentsys-prompt: planning" in p for p in prompts) == 1
    assert sum("Iteration 1 of" in p for p in prompts) == 1
    assert sum("Iteration 2 of" in p for p in prompts) == 1
    # The run was re-adopted, not run again: one run, which finished by itself.
    assert Run.objects.filter(command__startswith="sleep 4").count() == 1
    slow.refresh_from_db()
    assert slow.status == "done" and slow.exit_code == 0
    assert detail["history"][-1]["promise"] == "REFLECT_STOP"


def test_runagentd_killed_between_spawning_an_experiment_and_saving_it_asks_nothing_twice(
    api, workdir, make_daemon, scripted_llm
):
    """The loop saves an iteration's reply before spawning its experiments, and the ids once
    spawned; a kill in between (its state holds the reply, not the ids) must neither ask the
    model again nor run the experiment twice: the restarted loop finds the one it spawned."""
    from agentsys.research.workspace import Workspace

    daemon = make_daemon()
    scripted_llm.load(
        {
            "turns": [
                _turn(r"agentsys-prompt: planning", PLAN),
                _turn(r"Iteration 1 of", ITERATION_1),
                _turn(r"Iteration 2 of", SLOW_ITERATION_2),
                _turn(r"agentsys-prompt: reflection", REFLECTION),
            ]
        }
    )
    loop_id = start_loop(api, workdir)
    wait_until(
        lambda: Run.objects.filter(command__startswith="sleep 4", status="running").exists(),
        90,
        interval=0.1,
        message="iteration 2's run to be running",
    )
    daemon.stop(signal.SIGKILL)
    # Issue 38 §1: as if the kill came between paid replies and their ledger rows.
    paid = SpendEntry.objects.filter(loop_id=loop_id, kind="llm")
    written = sorted(paid.values_list("key", flat=True))
    assert len(written) >= 2  # the plan's and iteration 1's, at least
    paid.delete()
    state_path = Workspace(workdir / ".agents" / "worktrees" / loop_id, loop_id).state_path
    state = json.loads(state_path.read_text())
    assert state["in_progress"]["children"]  # saved once spawned...
    del state["in_progress"]["children"]  # ...but the kill came first
    state_path.write_text(json.dumps(state))
    make_daemon()
    agent = wait_finished(loop_id)
    assert agent.status == "done", agent.error
    prompts = prompts_seen(scripted_llm)
    assert sum("Iteration 2 of" in p for p in prompts) == 1
    slow = Run.objects.get(command__startswith="sleep 4")  # one run, not two
    assert (slow.status, slow.exit_code) == ("done", 0)
    detail = api("get", f"/api/research/{loop_id}").json()
    assert _iteration_steps(detail) == [1, 2]
    assert detail["history"][-1]["promise"] == "REFLECT_STOP"
    # The resumed loop read its session's steps back: the lost ones are there again (each
    # once: the key is OpenCode's part id), and its spent is their sum.
    entries = SpendEntry.objects.filter(loop_id=loop_id, kind="llm")
    assert set(written) <= set(entries.values_list("key", flat=True))
    tokens = sum(
        e.input_tokens
        + e.output_tokens
        + e.reasoning_tokens
        + e.cache_read_tokens
        + e.cache_write_tokens
        for e in entries
    )
    assert detail["spent"]["llm_tokens"] == tokens > 0


def test_opencode_killed_mid_iteration_fails_the_loop_with_an_explained_error(
    api, workdir, scripted_llm, tmp_path
):
    from agentsys.opencode.server import LocalOpenCode, provider_config

    password = "killed-opencode-test"
    config = provider_config(
        provider="demo", model="demo-research", demo_base_url=scripted_llm.base_url + "/v1"
    )
    opencode = LocalOpenCode(
        state_dir=tmp_path / "opencode",
        workdir=workdir,
        port=None,
        config=config,
        password=password,
    )
    url = opencode.start()
    daemon = DaemonProcess(
        "research-host",
        AGENTSYS_WORKDIR=str(workdir),
        OPENCODE_URL=url,
        OPENCODE_SERVER_PASSWORD=password,
        MODEL_PROVIDER="demo",
        MODEL_ID="demo-research",
    )
    try:
        scripted_llm.load(
            {
                "turns": [
                    _turn(r"agentsys-prompt: planning", PLAN),
                    {"match": r"Iteration 1 of", "steps": [{"text": "..."}, {"stall": 30}]},
                ]
            }
        )
        loop_id = start_loop(api, workdir)
        wait_for_prompt(scripted_llm, "Iteration 1 of")
        opencode.stop()
        agent = wait_finished(loop_id, timeout=60)
    finally:
        daemon.stop()
        opencode.stop()
    assert agent.status == "failed"
    assert "model failed 3 times in a row" in agent.error
    detail = api("get", f"/api/research/{loop_id}").json()
    first = next(s for s in detail["history"] if s["iteration"] == 1)
    assert first["errors"] and first["errors"][0].startswith("model:")


def test_stopping_a_loop_stops_its_running_experiment(api, workdir, daemon, scripted_llm):
    slow = """<experiments>
- goal: a long training
  command: sleep 60
  gpu_required: 0
</experiments>
<summary>Started a long run.</summary>"""
    scripted_llm.load(
        {
            "turns": [
                _turn(r"agentsys-prompt: planning", PLAN),
                _turn(r"Iteration 1 of", slow),
            ]
        }
    )
    loop_id = start_loop(api, workdir)
    run = wait_until(
        lambda: Run.objects.filter(command="sleep 60", status="running").first(),
        60,
        interval=0.1,
        message="the long run to be running",
    )
    paused = api("post", f"/api/research/{loop_id}/pause")
    assert paused.status_code == 202
    wait_until(
        lambda: Run.objects.filter(pk=run.pk, status="paused").exists(),
        20,
        message="the loop's run to be paused with it",
    )
    assert api("post", f"/api/research/{loop_id}/resume").status_code == 202
    wait_until(lambda: Run.objects.filter(pk=run.pk, status="running").exists(), 20)
    assert api("post", f"/api/research/{loop_id}/stop").status_code == 202
    agent = wait_finished(loop_id, timeout=30)
    assert agent.status == "stopped"
    run.refresh_from_db()
    assert run.status == "stopped"
    state = ResearchLoop.objects.get(pk=loop_id).state
    assert state["status"] == "stopped"


def test_a_critical_steer_restarts_the_loop_with_the_steer_in_its_goal(
    api, workdir, daemon, scripted_llm
):
    scripted_llm.load(
        {
            "turns": [
                _turn(r"agentsys-prompt: planning", PLAN),
                {"match": r"Iteration 1 of", "steps": [{"stall": 8}, {"text": "<summary>x"}]},
                _turn(r"agentsys-prompt: planning", PLAN),
                _turn(r"Iteration 1 of", ITERATION_2),
                _turn(r"agentsys-prompt: reflection", REFLECTION),
            ]
        }
    )
    old_id = start_loop(api, workdir)
    wait_for_prompt(scripted_llm, "Iteration 1 of")
    steered = api(
        "post",
        f"/api/research/{old_id}/steer",
        {"context": "Use lr=0.3 only", "urgency": "critical"},
    )
    assert steered.status_code == 202
    old = wait_until(
        lambda: Agent.objects.filter(pk=old_id, superseded_by__isnull=False).first(),
        30,
        message="the loop to be superseded",
    )
    new_id = old.superseded_by_id
    assert wait_finished(new_id).status == "done"
    assert Agent.objects.get(pk=old_id).status == "stopped"
    assert api("get", f"/api/research/{old_id}").json()["superseded_by"] == new_id
    new = api("get", f"/api/research/{new_id}").json()
    assert "[STEER: Use lr=0.3 only]" in new["goal"] and new["status"] == "done"
    assert new["sweep_id"] == ResearchLoop.objects.get(pk=old_id).sweep_id
    plans = [p for p in prompts_seen(scripted_llm) if "agentsys-prompt: planning" in p]
    assert len(plans) == 2 and "Use lr=0.3 only" in plans[1]


def test_the_demo_loop_compares_rates_on_one_script_follows_a_steer_and_cites_each_run(
    api, workdir, make_daemon, scripted_llm
):
    """Issue 37 §5, through the real loop with the demo model: every rate runs train.py with
    seeds 0 and 1, the rate a steer names among them; the other ways of logging run apart;
    the report gives each loss with the id of the run it came from."""
    scripted_llm.demo = True
    try:
        loop_id = start_loop(api, workdir, max_iterations=6)  # no runagentd is up yet
        # A message steer lands in the loop's inbox at once: its first iteration reads it.
        steer = {"context": "Please try lr=0.05 as well", "urgency": "message"}
        assert api("post", f"/api/research/{loop_id}/steer", steer).status_code == 202
        make_daemon()
        agent = wait_finished(loop_id, timeout=180)
    finally:
        scripted_llm.demo = False
    assert agent.status == "done", agent.error
    loop = ResearchLoop.objects.get()
    runs = list(Run.objects.filter(sweep_id=loop.sweep_id))
    scripts = {r.id: re.findall(r"(\w+\.py) --steps", r.command) for r in runs}
    compared = [r for r in runs if scripts[r.id] == ["train.py"]]
    pairs = {(r.params["lr"], r.params["seed"]) for r in compared}
    for lr in (0.01, 0.1, 0.5, 0.05):  # 0.05: the steer's
        assert {(lr, 0), (lr, 1)} <= pairs, pairs
    assert len(compared) == 10  # and the refinement's two seeds
    others = sorted(s for r in runs if r not in compared for s in scripts[r.id])
    assert others == ["train_prints.py", "train_tensorboard.py"], scripts

    report = api("get", f"/api/research/{loop_id}").json()["reflection"]
    for run in compared:
        loss = run.metric_series.get(key="loss").last_value
        assert f"{loss:.4g} (run {run.id})" in report, (run.params, loss, report)
        assert api("get", f"/api/runs/{run.id}").status_code == 200
    assert "- lr=0.05 (your steer): loss" in report
    assert not any(r.id in report for r in runs if r not in compared)


def _detail(api, loop_id: str) -> dict:
    return api("get", f"/api/research/{loop_id}").json()


def test_a_loop_at_its_token_cap_waits_for_approval_and_goes_on_or_stops(
    api, workdir, daemon, scripted_llm
):
    """Issue 38 §2 against the real parts: the demo provider's steps carry tokens; a loop
    capped at 1 token asks for approval before its second model call; approve raises the
    cap and it goes on to the end; another loop at its cap is stopped by Stop."""
    scripted_llm.load(happy_script())
    loop_id = start_loop(api, workdir, budget={"llm_tokens": 1})
    waiting = wait_until(
        lambda: (d := _detail(api, loop_id))["state"] == "awaiting_approval" and d,
        60,
        interval=0.2,
        message="the loop to wait at its cap",
    )
    assert waiting["approval"]["cap"] == {"llm_tokens": 1.0}
    overshoot = waiting["approval"]["spent"]["llm_tokens"] - 1
    print(f"overshoot at a 1-token cap: {overshoot:.0f} tokens (one model call: the plan)")
    assert overshoot > 0 and not any("Iteration 1 of" in p for p in prompts_seen(scripted_llm))
    assert (
        api("post", f"/api/research/{loop_id}/approve", {"add": {"gpu_hours": -1}}).status_code
        == 422
    )
    approved = api("post", f"/api/research/{loop_id}/approve", {"add": {"llm_tokens": 10**7}})
    assert approved.status_code == 202, approved.content
    assert wait_finished(loop_id).status == "done"
    done = _detail(api, loop_id)
    assert done["budget"]["llm_tokens"] == 10**7 + 1  # the approval added to the cap
    assert done["spent"]["llm_tokens"] > waiting["approval"]["spent"]["llm_tokens"]  # kept
    assert (
        api("post", f"/api/research/{loop_id}/approve", {"add": {"llm_tokens": 1}}).status_code
        == 409
    )

    scripted_llm.load(happy_script())
    stopped_id = start_loop(api, workdir, budget={"llm_tokens": 1})
    wait_until(lambda: _detail(api, stopped_id)["state"] == "awaiting_approval", 60, interval=0.2)
    assert api("post", f"/api/research/{stopped_id}/stop").status_code == 202
    assert wait_finished(stopped_id).status == "stopped"


GPU_SLEEP = """<experiments>
- goal: a long GPU run
  command: sleep 120
  workdir: .
  parameters: {}
  gpu_required: 1
</experiments>
<summary>Started the long run.</summary>"""


def test_a_stop_runs_budget_stops_a_run_at_its_gpu_cap_and_waits_for_approval(
    api, workdir, daemon, scripted_llm
):
    """Issue 38 §2: `on_cap: stop_runs` watches the caps while runs go on: a run holding a
    GPU past a 0.0005 GPU-hour cap (~2 s) is stopped, and the loop waits for approval."""
    scripted_llm.load(
        {
            "turns": [
                _turn(r"agentsys-prompt: planning", PLAN),
                _turn(r"Iteration 1 of", GPU_SLEEP),
                _turn(r"Iteration 2 of", ITERATION_2),
                _turn(r"agentsys-prompt: reflection", REFLECTION),
            ]
        }
    )
    loop_id = start_loop(api, workdir, budget={"gpu_hours": 0.0005, "on_cap": "stop_runs"})
    run = wait_until(lambda: Run.objects.filter(command="sleep 120", status="running").first(), 60)
    waiting = wait_until(
        lambda: (d := _detail(api, loop_id))["state"] == "awaiting_approval" and d,
        60,
        interval=0.2,
        message="the loop to stop its run and wait at its cap",
    )
    run.refresh_from_db()
    held = (run.finished_at - run.started_at).total_seconds()
    print(f"a 1-GPU run at a 0.0005 GPU-hour cap (1.8 s) was stopped after {held:.1f} s")
    assert run.status == "stopped" and held < 30
    assert waiting["approval"]["cap"] == {"gpu_hours": 0.0005}
    assert waiting["spent"]["gpu_hours"] >= 0.0005  # the ledger has the stopped run's time
    assert not any("Iteration 2 of" in p for p in prompts_seen(scripted_llm))
    assert api("post", f"/api/research/{loop_id}/stop").status_code == 202
    assert wait_finished(loop_id).status == "stopped"


def test_a_cautious_loop_waits_for_approval_of_each_batch_and_stops_when_none_comes(
    api, workdir, daemon, scripted_llm
):
    """Issue 38 §3: `cautious` shows its planned runs and waits; approved, they run and the
    loop ends; a second loop whose approval nobody gives within approval_timeout_s stops."""
    scripted_llm.load(happy_script())
    loop_id = start_loop(api, workdir, autonomy_level="cautious")
    waiting = wait_until(
        lambda: (d := _detail(api, loop_id))["state"] == "awaiting_approval" and d,
        60,
        interval=0.2,
        message="the cautious loop to ask before its batch",
    )
    approval = waiting["approval"]
    assert (
        approval["kind"] == "batch"
        and "every batch waits for you (2 runs, 1 GPUs)" in (approval["reason"])
    )
    assert [r["gpu_required"] for r in approval["batch"]] == [0, 1]
    assert "train.py" in approval["batch"][0]["command"]
    assert not Run.objects.filter(sweep_id=ResearchLoop.objects.get(pk=loop_id).sweep_id).exists()
    assert api("post", f"/api/research/{loop_id}/approve", {}).status_code == 202
    assert wait_finished(loop_id).status == "done"
    assert Run.objects.filter(sweep_id=ResearchLoop.objects.get(pk=loop_id).sweep_id).count() == 2

    scripted_llm.load(happy_script())
    unanswered = start_loop(api, workdir, autonomy_level="cautious", approval_timeout_s=2)
    agent = wait_finished(unanswered)
    assert agent.status == "stopped"
    log = api("get", f"/api/research/{unanswered}/iteration-log").content.decode()
    assert "no approval came within 2 s for 2 experiments: the loop stops" in log
