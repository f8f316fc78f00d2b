"""Research loops over REST and in the admin (issue 10 items 7, 8, 11): starting one, its
state saved per step, its history joined to its runs, its log, and the commands."""

import pytest

from agents_app.models import Agent, AgentCommand
from agentsys.agent import Scope
from agentsys.store import AgentRecord
from agentsys.types import AgentStatus
from hosts_app.models import Host
from research_app.models import ResearchLoop
from runtime_app.runtime_store import DjangoRuntimeStore
from scheduler_app.models import Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def workdir(tmp_path, settings):
    settings.AGENTSYS_WORKDIR = tmp_path
    return tmp_path


def start(api, workdir, **body):
    response = api("post", "/api/research", {"goal": "Tune lr", "workdir": str(workdir), **body})
    assert response.status_code == 201, response.content
    return response.json()


def test_starting_a_loop_makes_its_agent_sweep_and_row(api, workdir):
    loop = start(api, workdir, max_iterations=7, wait_seconds=2, autonomy_level="cautious")
    agent = Agent.objects.get(pk=loop["id"])
    assert agent.cls_path == "agentsys.agents.research.ResearchAgent"
    assert agent.role == "research" and agent.status == "idle" and agent.host_id is None
    assert agent.sweep == loop["sweep_id"]
    assert agent.config["max_iterations"] == 7 and agent.config["autonomy_level"] == "cautious"
    assert agent.config["workdir"] == str(workdir)
    assert loop["status"] == "idle" and loop["max_iterations"] == 7 and loop["history"] == []
    listed = api("get", "/api/research").json()
    assert [item["id"] for item in listed] == [loop["id"]]


def test_a_loops_metrics_pattern_is_its_sweeps_and_its_experiments(api, workdir):
    from agentsys.research.settings import ResearchSettings
    from scheduler_app.models import Sweep

    pattern = r"it (?P<step>\d+) cost (?P<cost>\S+)"
    loop = start(api, workdir, metrics_pattern=pattern)
    assert Sweep.objects.get(pk=loop["sweep_id"]).metrics_pattern == pattern
    config = {**Agent.objects.get(pk=loop["id"]).config, "opencode_url": "http://x"}
    # What the loop hands each experiment it launches (agentsys.research.experiments.launch).
    assert ResearchSettings.from_config(config).metrics_pattern == pattern


def test_a_loops_env_and_venv_are_its_sweeps_and_its_experiments(api, workdir):
    from agentsys.research.settings import ResearchSettings
    from scheduler_app.models import Sweep

    loop = start(api, workdir, env={"HF_HOME": "/data/hf", "SEED": 1}, venv="envs/torch")
    sweep = Sweep.objects.get(pk=loop["sweep_id"])
    assert (sweep.run_env, sweep.run_venv) == ({"HF_HOME": "/data/hf", "SEED": "1"}, "envs/torch")
    config = {**Agent.objects.get(pk=loop["id"]).config, "opencode_url": "http://x"}
    settings = ResearchSettings.from_config(config)
    assert (settings.run_env, settings.run_venv) == (sweep.run_env, "envs/torch")


def test_a_loops_budget_and_branch_options_are_its_settings(api, workdir):
    body = {
        "goal": "Tune lr",
        "workdir": str(workdir),
        "budget": {"llm_usd": 2.5, "gpu_hours": 1},
        "include_uncommitted": True,
        "commit_allow": ["*.pt"],
    }
    response = api("post", "/api/research", body)
    assert response.status_code == 201, response.content
    loop = ResearchLoop.objects.get(pk=response.json()["id"])
    assert loop.settings["budget"] == {"llm_usd": 2.5, "gpu_hours": 1.0, "on_cap": "hold_runs"}
    assert loop.settings["include_uncommitted"] is True
    assert loop.settings["commit_allow"] == ["*.pt"]
    assert response.json()["budget"] == {"llm_usd": 2.5, "gpu_hours": 1.0}


def test_a_loops_experiment_cap_is_set_when_it_starts(api, workdir):
    from agentsys.research.settings import ResearchSettings

    loop = start(api, workdir, max_experiments_per_iteration=3)
    config = {**Agent.objects.get(pk=loop["id"]).config, "opencode_url": "http://x"}
    assert ResearchSettings.from_config(config).max_experiments_per_iteration == 3


@pytest.mark.parametrize(
    ("body", "complaint"),
    [
        ({"goal": "   "}, "goal"),
        ({"goal": "x" * 5001}, "goal"),
        ({"max_iterations": 0}, "max_iterations"),
        ({"wait_seconds": -1}, "wait_seconds"),
        ({"max_experiments_per_iteration": 0}, "max_experiments_per_iteration"),
        ({"autonomy_level": "reckless"}, "autonomy_level"),
        ({"workdir": "/no/such/dir"}, "workdir"),
        ({"chat_session_id": "nope"}, "chat_session_id"),
        ({"chat_session_id": ""}, "chat_session_id"),  # not "none given": a 500 once
        ({"unknown": 1}, "unknown"),
        ({"metrics_pattern": "cost (?P<cost"}, "metrics_pattern does not compile"),
        ({"metrics_pattern": r"cost (\S+)"}, "metrics_pattern has no named group"),
        ({"env": {"CUDA_VISIBLE_DEVICES": "1"}}, "env CUDA_VISIBLE_DEVICES is set by AgentSys"),
        ({"env": {"A B": "1"}}, "env name 'A B' is not a variable name"),
        ({"venv": 3}, "venv"),
        ({"budget": {}}, "name at least one cap"),
        ({"budget": {"gpu_hours": -1}}, "gpu_hours"),
        ({"budget": {"gpu_hours": 1, "on_cap": "panic"}}, "on_cap"),
        ({"budget": {"dollars": 5}}, "dollars"),
        ({"commit_allow": [""]}, "commit_allow"),
    ],
)
def test_a_loop_that_cannot_start_is_422_naming_the_field(api, workdir, body, complaint):
    response = api("post", "/api/research", {"goal": "Tune lr", "workdir": str(workdir), **body})
    assert response.status_code == 422, response.content
    assert complaint in response.content.decode()
    assert not ResearchLoop.objects.exists()


def test_the_saved_state_shows_as_history_with_its_runs(api, workdir):
    loop = start(api, workdir)
    Host.objects.create(name="h")
    store = DjangoRuntimeStore()
    research = Agent.objects.get(pk=loop["id"])
    record = AgentRecord(
        id="executor-exp1",
        role="executor",
        cls_path="agentsys.agents.executor.ExecutorAgent",
        parent_id=research.id,
        goal="lr 0.1",
        config={
            "command": "python train.py",
            "workdir": str(workdir),
            "params": {"lr": 0.1},
            "gpu_required": 0,
            "experiment": {"research_agent_id": research.id, "iteration": 1, "index": 1},
        },
        scope=Scope(project=research.project, sweep=research.sweep),
        status=AgentStatus.IDLE,
    )
    store.create_queued_agent(record=record, gpu_required=0)
    run = Run.objects.get(agent_id="executor-exp1")
    assert run.sweep_id == loop["sweep_id"] and run.status == "queued"
    assert run.params == {"lr": 0.1} and run.name == "lr 0.1"
    assert Agent.objects.get(pk="executor-exp1").config["run_id"] == run.id
    listed = api("get", f"/api/runs?sweep_id={loop['sweep_id']}").json()
    assert [r["id"] for r in listed] == [run.id]

    state = {
        "goal": "Tune lr",
        "status": "running",
        "phase": "iterating",
        "iteration": 1,
        "plan": "1. try lr",
        "opencode_session_id": "ses_1",
        "history": [
            {"iteration": 0, "phase": "plan", "promise": None, "summary": "plan", "runs": []},
            {
                "iteration": 1,
                "phase": "iteration",
                "promise": "WAITING",
                "summary": "ran",
                "files_changed": ["a.py"],
                "runs": ["executor-exp1"],
                "errors": [],
                "duration_s": 3.5,
                "commit": "abc123",
            },
        ],
    }
    event = store.record_event(agent_id=research.id, kind="research_state", payload=state)
    assert event["payload"] == {"iteration": 1, "status": "running", "phase": "iterating"}
    detail = api("get", f"/api/research/{research.id}").json()
    assert detail["plan"] == "1. try lr" and detail["iteration"] == 1
    assert detail["opencode_session_id"] == "ses_1"
    step = detail["history"][1]
    assert step["promise"] == "WAITING" and step["files_changed"] == ["a.py"]
    assert step["runs"] == [
        {
            "id": run.id,
            "agent_id": "executor-exp1",
            "name": "lr 0.1",
            "status": "queued",
            "exit_code": None,
            "gpu_required": 0,
        }
    ]


def test_a_malformed_state_is_ignored_not_a_crash(api, workdir):
    loop = start(api, workdir)
    store = DjangoRuntimeStore()
    store.record_event(agent_id=loop["id"], kind="research_state", payload={"iteration": "x"})
    assert api("get", f"/api/research/{loop['id']}").json()["iteration"] == 0


def test_a_state_holding_a_nan_loss_is_stored_and_read_back(api, workdir):
    """A stopped run's stored series end in NaN; its results, in the loop's state, once failed
    every save of it (PostgreSQL's JSON has no NaN): the loop's page froze where it was."""
    loop = start(api, workdir)
    store = DjangoRuntimeStore()
    nan = float("nan")
    results = [{"goal": "diverges", "metrics": {"loss": {"last": nan, "min": 0.2, "max": 1.0}}}]
    state = {"iteration": 2, "status": "running", "phase": "iterating", "last_results": results}
    store.record_event(agent_id=loop["id"], kind="research_state", payload=state)
    stored = ResearchLoop.objects.get(agent_id=loop["id"])
    assert stored.iteration == 2
    assert stored.state["last_results"][0]["metrics"]["loss"]["last"] == "NaN"
    assert api("get", f"/api/research/{loop['id']}").json()["iteration"] == 2


def test_the_iteration_log_is_served_once_written(api, workdir):
    loop = start(api, workdir)
    missing = api("get", f"/api/research/{loop['id']}/iteration-log")
    assert missing.status_code == 404 and "no iteration log" in missing.json()["detail"]
    path = workdir / ".agents" / "wild" / loop["id"] / "iteration_log.md"
    path.parent.mkdir(parents=True)
    path.write_text("## Iteration 1\n")
    response = api("get", f"/api/research/{loop['id']}/iteration-log")
    assert response.status_code == 200 and response.content == b"## Iteration 1\n"
    assert response["Content-Type"].startswith("text/markdown")


def test_commands_go_to_the_loops_agent(api, workdir):
    loop = start(api, workdir)
    Agent.objects.filter(pk=loop["id"]).update(status=AgentStatus.RUNNING)
    steer = api(
        "post",
        f"/api/research/{loop['id']}/steer",
        {"context": "try lr=0.3", "urgency": "priority"},
    )
    assert steer.status_code == 202
    for action in ("pause", "stop"):
        assert api("post", f"/api/research/{loop['id']}/{action}").status_code == 202
    kinds = list(AgentCommand.objects.filter(agent_id=loop["id"]).values_list("kind", flat=True))
    assert sorted(kinds) == ["pause", "steer", "stop"]
    assert api("post", f"/api/research/{loop['id']}/resume").status_code == 409  # not paused


def test_unknown_loops_are_404(api):
    for method, path in [
        ("get", "/api/research/x"),
        ("get", "/api/research/x/iteration-log"),
        ("post", "/api/research/x/stop"),
        ("post", "/api/research/x/pause"),
    ]:
        response = api(method, path)
        assert response.status_code == 404 and "No research loop" in response.json()["detail"]


def test_the_research_api_needs_credentials(client, workdir):
    assert client.get("/api/research").status_code == 401
    assert (
        client.post("/api/research", {"goal": "x"}, content_type="application/json").status_code
        == 401
    )


def test_the_admin_form_starts_a_loop(admin_client, workdir):
    page = admin_client.get("/admin/research_app/researchloop/start/")
    assert page.status_code == 200 and b"csrfmiddlewaretoken" in page.content
    response = admin_client.post(
        "/admin/research_app/researchloop/start/",
        {
            "goal": "Tune lr",
            "max_iterations": 3,
            "wait_seconds": 1,
            "autonomy_level": "balanced",
            "workdir": str(workdir),
        },
    )
    loop = ResearchLoop.objects.get()
    assert response.status_code == 302 and loop.agent_id in response["Location"]
    assert loop.settings["max_iterations"] == 3


def test_the_admin_form_is_for_staff_only(client, django_user_model, workdir):
    user = django_user_model.objects.create_user("plain", password="pw-123456")
    client.force_login(user)
    response = client.get("/admin/research_app/researchloop/start/")
    assert response.status_code == 302 and "/login" in response["Location"]


def test_a_loop_respawned_by_a_critical_steer_keeps_where_its_caps_came_from(api, workdir):
    first = start(api, workdir, budget={"gpu_hours": 2})
    assert first["budget_from"] == {"gpu_hours": "loop"}
    sweep = ResearchLoop.objects.get(agent_id=first["id"]).sweep_id
    Agent.objects.create(
        id="research-respawned", role="research", cls_path="x", project="p", sweep=sweep
    )
    state = {"iteration": 0, "status": "running", "settings": {"budget": {"gpu_hours": 2.0}}}
    DjangoRuntimeStore().record_event(
        agent_id="research-respawned", kind="research_state", payload=state
    )
    respawned = api("get", "/api/research/research-respawned").json()
    assert respawned["budget_from"] == {"gpu_hours": "loop"}
