"""Issue 25, throughput: POST /api/runs/batch makes up to 1,000 runs in one request, all or
none. Queued in the list's order (the queue is FIFO), each with its executor agent and queue
request saying the same word; a bad run is named by its index with every other bad one; a
workdir's code is recorded once per batch; an agent's token puts the runs in its loop's
sweep. Real PostgreSQL, real git, and a real runagentd draining a batch."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from agents_app.models import Agent
from hosts_app.models import Host
from research_app.services import start_research
from runtime_app.memory_view import DjangoMemoryView
from scheduler_app.models import GPU, CodeBundle, Run, ScheduleRequest, Sweep
from scheduler_app.queue import claims as queue
from scheduler_app.runs import batch as run_batch
from scheduler_app.runs import code as run_code
from tests.helpers import wait_until

pytestmark = pytest.mark.django_db
BATCH = "/api/runs/batch"
MOCK = {"backend": "mock", "mock_delay": 0}


@pytest.fixture
def host():
    host = Host.objects.create(name="gpu-box", labels={"gpu_model": "A100"})
    GPU.objects.bulk_create(GPU(host=host, index=i, source="declared") for i in range(2))
    return host


@pytest.fixture
def workdir(settings, tmp_path):
    settings.AGENTSYS_WORKDIR = tmp_path
    return tmp_path


def nothing_made():
    return not (Run.objects.exists() or Agent.objects.exists() or ScheduleRequest.objects.exists())


def in_queue_order() -> list[str]:
    """The run names as the queue takes them: its requests oldest first, ties by id."""
    requests = ScheduleRequest.objects.order_by("created_at", "id").values_list("agent", flat=True)
    by_agent = dict(Run.objects.values_list("agent", "name"))
    return [by_agent[agent] for agent in requests]


def test_a_thousand_runs_in_one_request_are_queued_in_the_lists_order(api, host, workdir):
    names = [f"r{i:04d}" for i in range(1000)]
    body = {
        "auto_start": True,
        "runs": [
            {"name": n, "command": "true", "gpu_required": i % 3} for i, n in enumerate(names)
        ],
    }
    response = api("post", BATCH, body)
    assert response.status_code == 201, response.content[:2000]
    made = response.json()
    assert [r["name"] for r in made] == names and {r["status"] for r in made} == {"queued"}
    assert in_queue_order() == names
    assert list(Run.objects.order_by("created_at", "id").values_list("name", flat=True)) == names
    newest = api("get", "/api/runs?limit=5").json()
    assert [r["name"] for r in newest] == names[::-1][:5]  # GET /api/runs: newest first
    # Each run with its executor and request, the three saying the same thing.
    runs = {r.pk: r for r in Run.objects.select_related("agent__schedule_request")}
    for i, out in enumerate(made):
        run = runs[out["id"]]
        request = run.agent.schedule_request
        assert (run.status, request.status, run.agent.status) == ("queued", "queued", "idle")
        assert run.agent.config["run_id"] == run.pk and run.agent.config["command"] == "true"
        assert request.gpu_required == run.gpu_required == i % 3
        assert run.run_dir == str(workdir / ".agents" / "runs" / run.agent_id)
    # What the batch answered for a run is what GET /api/runs/{id} says of it.
    one = api("get", f"/api/runs/{made[500]['id']}").json()
    assert one == made[500]


def test_every_bad_run_is_named_by_its_index_and_nothing_is_made(api, host, workdir):
    runs = [{"name": f"r{i}", "command": "true", "auto_start": True} for i in range(1000)]
    runs[0]["gpu_required"] = -1  # the schema's
    runs[500]["sweep_id"] = "sweep-nope"  # a row that does not exist
    runs[999]["workdir"] = str(workdir / "missing")  # not a directory
    response = api("post", BATCH, {"runs": runs})
    assert response.status_code == 422, response.content[:2000]
    body = response.json()
    assert [(e["index"], e["field"]) for e in body["errors"]] == [
        (0, "gpu_required"),
        (500, "sweep_id"),
        (999, "workdir"),
    ]
    assert "greater than or equal to 0" in body["errors"][0]["detail"]
    assert body["errors"][1]["detail"] == "no sweep 'sweep-nope'"
    assert "is not a directory" in body["errors"][2]["detail"]
    assert body["detail"].startswith("3 of 1000 runs cannot be made, so none was: run 0 gpu")
    assert "; run 500 sweep_id: no sweep 'sweep-nope'; run 999 workdir: " in body["detail"]
    assert nothing_made()


@pytest.mark.parametrize(
    ("runs", "said"),
    [
        ([], "at least 1 item"),
        ([{"name": "r", "command": "true"}] * 1001, "at most 1000 items"),
    ],
)
def test_an_empty_or_oversized_batch_is_422(api, workdir, runs, said):
    response = api("post", BATCH, {"runs": runs})
    assert response.status_code == 422 and said in response.json()["detail"]
    assert nothing_made()


def test_a_run_that_is_no_object_or_has_unknown_keys_is_named(api, workdir):
    runs = [{"name": "ok", "command": "true"}, "true", {"name": "x", "command": "t", "gpus": 1}]
    errors = api("post", BATCH, {"runs": runs}).json()["errors"]
    assert [(e["index"], e["field"]) for e in errors] == [(1, ""), (2, "gpus")]
    assert nothing_made()


def test_a_body_over_the_servers_limit_is_413_saying_so(api, workdir, settings):
    assert settings.DATA_UPLOAD_MAX_MEMORY_SIZE >= 16 * 1024 * 1024  # 1,000 runs of 16 KiB
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100_000
    runs = [{"name": f"r{i}", "command": "echo " + "x" * 200} for i in range(1000)]
    response = api("post", BATCH, {"runs": runs})
    assert response.status_code == 413
    assert "over the 97 KiB this server takes" in response.json()["detail"]
    assert nothing_made()


def test_the_batch_defaults_apply_to_runs_that_do_not_say(api, workdir, tmp_path_factory):
    sweep, other = Sweep.objects.create(name="lr"), Sweep.objects.create(name="other")
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    body = {
        "sweep_id": sweep.pk,
        "workdir": str(elsewhere),
        "runs": [
            {"name": "a", "command": "true"},
            {"name": "b", "command": "true", "sweep_id": other.pk, "workdir": str(workdir)},
            {"name": "c", "command": "true", "auto_start": True},
        ],
    }
    made = api("post", BATCH, body).json()
    assert [(r["sweep_id"], r["workdir"], r["status"]) for r in made] == [
        (sweep.pk, str(elsewhere), "ready"),
        (other.pk, str(workdir), "ready"),
        (sweep.pk, str(elsewhere), "queued"),
    ]


def test_runs_no_host_can_fit_are_rejected_with_the_reason_the_others_queued(
    api, host, workdir, monkeypatch
):
    judged = []
    real = queue.rejection_reason
    monkeypatch.setattr(
        queue, "rejection_reason", lambda *a, **k: judged.append(a) or real(*a, **k)
    )
    kinds = [
        {"gpu_required": 1},
        {"gpu_required": 3},  # more than any host has
        {"gpu_required": 1, "requires": {"gpu_model": "H100"}},  # no host has the label
        {"gpu_required": 2, "requires": {"gpu_model": "A100"}},
    ]
    runs = [{"name": f"r{i}", "command": "true", **kinds[i % 4]} for i in range(40)]
    made = api("post", BATCH, {"runs": runs, "auto_start": True}).json()
    assert [r["status"] for r in made[:4]] * 10 == [r["status"] for r in made]
    assert [r["status"] for r in made[:4]] == ["queued", "rejected", "rejected", "queued"]
    assert made[1]["error"] == "Requires 3 GPUs but only 2 available"
    assert made[2]["error"].startswith("No host has gpu_model")
    assert len(judged) == 4  # once per kind of request, not per run
    for out in made:
        agent = Agent.objects.get(pk=out["agent_id"])
        request = ScheduleRequest.objects.get(agent=agent)
        assert request.status == out["status"] == Run.objects.get(pk=out["id"]).status
        assert agent.status == ("idle" if out["status"] == "queued" else "rejected")
        assert request.rejection_reason == agent.error == out["error"]
        assert request.finished_at is None if out["status"] == "queued" else request.finished_at
    assert in_queue_order() == [f"r{i}" for i in range(40)]


def git(cwd: Path, *args: str) -> str:
    identity = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t"}
    env = {**os.environ, **identity, "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, check=True, text=True
    ).stdout.strip()


def repository(path: Path, text: str) -> Path:
    (path / "sub").mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / "train.py").write_text(text)
    (path / "sub" / "data.txt").write_text("x\n")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "first")
    (path / "train.py").write_text(text + "# edited\n")
    return path


def test_a_workdirs_code_is_recorded_once_per_batch(api, workdir, monkeypatch, tmp_path):
    one, two = repository(tmp_path / "one", "print(1)\n"), repository(tmp_path / "two", "2\n")
    plain = tmp_path / "plain"
    plain.mkdir()
    taken, bundled = [], []
    take_here, bundle = run_code.take_here, run_code.bundle
    monkeypatch.setattr(run_code, "take_here", lambda w, **k: taken.append(w) or take_here(w, **k))
    monkeypatch.setattr(run_code, "bundle", lambda *a, **k: bundled.append(a) or bundle(*a, **k))
    workdirs = [one, two, plain, one / "sub"]  # the last: the same commit as the first
    runs = [
        {"name": f"r{i}", "command": "true", "workdir": str(workdirs[i % 4])} for i in range(60)
    ]
    made = api("post", BATCH, {"runs": runs}).json()
    assert sorted(taken) == sorted(map(str, workdirs))  # once per workdir, not per run
    assert len(bundled) == 2 and CodeBundle.objects.count() == 2  # once per commit
    commits = {str(w): git(w, "rev-parse", "HEAD") for w in (one, two)}
    for out in made:
        expected = commits.get(out["workdir"], commits[str(one)] if "sub" in out["workdir"] else "")
        assert out["code"]["commit"] == expected
        assert out["code"]["has_patch"] == bool(expected)
    assert api("get", f"/api/runs/{made[0]['id']}/patch").content.endswith(b"+# edited\n")


def test_an_agents_token_puts_its_batch_in_its_loops_sweep(client, workdir):
    loop = Agent.objects.get(pk=start_research(goal="Tune lr", workdir=str(workdir)).agent_id)
    token = DjangoMemoryView(loop.id, loop.role, {"sweep": loop.sweep}).issue_api_token()
    own = client.post(  # a sweep of its own (issue 34: its runs go in no other)
        "/api/sweeps", {"name": "own"}, content_type="application/json", HTTP_X_AUTH_TOKEN=token
    ).json()["id"]
    runs = [{"name": "a", "command": "true"}, {"name": "b", "command": "t", "sweep_id": own}]
    response = client.post(
        BATCH, {"runs": runs}, content_type="application/json", HTTP_X_AUTH_TOKEN=token
    )
    assert response.status_code == 201, response.content
    made = response.json()
    assert [(r["sweep_id"], r["created_by_agent"]) for r in made] == [
        (loop.sweep, loop.id),
        (own, loop.id),
    ]
    schema = client.get("/api/openapi.json", HTTP_X_AUTH_TOKEN=token).json()["paths"]
    refusal = schema[BATCH]["post"]["responses"]["403"]["description"]
    assert refusal.startswith("A research loop's token, on a run or sweep")


def test_runs_stamped_in_the_same_microsecond_still_queue_in_the_lists_order(
    api, host, workdir, monkeypatch
):
    from django.utils import timezone

    frozen = timezone.now()
    monkeypatch.setattr(timezone, "now", lambda: frozen)  # a clock that does not move
    names = [f"r{i:02d}" for i in range(50)]
    runs = [{"name": n, "command": "true", "gpu_required": 1} for n in names]
    assert api("post", BATCH, {"runs": runs, "auto_start": True}).status_code == 201
    assert in_queue_order() == names
    assert list(Run.objects.order_by("created_at", "id").values_list("name", flat=True)) == names


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_runagentd_drains_a_batch_first_in_first_out(workdir):
    from tests.runtime_harness import DaemonProcess

    names = [f"m{i:02d}" for i in range(50)]
    items = [
        {"name": n, "command": "true", "gpu_required": 1, "auto_start": True}
        | {"executor_options": MOCK}
        for n in names
    ]
    daemon = DaemonProcess("batch-host", AGENTSYS_GPUS="2", AGENTSYS_WORKDIR=str(workdir))
    try:
        made = run_batch.create_runs(items)  # mock runs: the API takes subprocess or slurm
        assert {run.status for run in made} == {"queued"}
        wait_until(lambda: Run.objects.filter(status="done").count() == 50, 120, message="all done")
    finally:
        daemon.stop()
    requests = {r.agent_id: r for r in ScheduleRequest.objects.all()}
    started = [requests[r.agent_id].started_at for r in made]
    assert started == sorted(started)  # claimed in the list's order, two GPUs at a time
    assert {requests[r.agent_id].status for r in made} == {"done"}
    assert set(Agent.objects.values_list("status", flat=True)) == {"done"}
