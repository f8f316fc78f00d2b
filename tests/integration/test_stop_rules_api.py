"""Issue 39 §1, the API side of stop rules: `stop_when` on a run, a batch and a sweep, a bad
rule a 422 naming it, the rules (defaults filled in) in the run's executor config, a sweep's
rules on its runs unless a run brings its own; `stopped_by` in GET /api/runs/{id} and the
sweep table's rows."""

import pytest

from agents_app.models import Agent
from scheduler_app.models import Run, Sweep

pytestmark = pytest.mark.django_db

LOSS_ABOVE = {"metric": "loss", "above": 2.0, "after_step": 100}
NO_BETTER = {"metric": "val_loss", "no_improvement_steps": 500}
NO_BETTER_FILLED = {**NO_BETTER, "mode": "min", "min_delta": 0.0}
TYPO = {"metric": "loss", "abve": 2.0}


@pytest.fixture
def workdir(settings, tmp_path):
    settings.AGENTSYS_WORKDIR = tmp_path
    return tmp_path


def run_body(**extra):
    return {"name": "r", "command": "python train.py", **extra}


def test_a_bad_rule_is_422_naming_it_on_a_run_a_batch_and_a_sweep(api, workdir):
    said = 'stop_when[1] {"metric": "loss", "abve": 2.0}: a rule takes exactly one of'
    response = api("post", "/api/runs", run_body(stop_when=[LOSS_ABOVE, TYPO]))
    assert response.status_code == 422 and said in response.json()["detail"]

    batch = {"runs": [run_body(), run_body(stop_when=[{"wall_seconds": -1}])]}
    response = api("post", "/api/runs/batch", batch)
    assert response.status_code == 422
    assert "run 1 stop_when: " in response.json()["detail"]
    assert "wall_seconds must be more than 0" in response.json()["detail"]

    response = api("post", "/api/runs/batch", {"runs": [run_body()], "stop_when": [1, TYPO]})
    assert response.status_code == 422 and "stop_when[0] 1: a rule is an object" in str(
        response.json()
    )

    response = api("post", "/api/sweeps", {"name": "s", "stop_when": [LOSS_ABOVE, TYPO]})
    assert response.status_code == 422 and said in response.json()["detail"]
    assert not Run.objects.exists() and not Sweep.objects.exists()


def test_the_rules_reach_the_executor_with_their_defaults(api, workdir):
    made = api("post", "/api/runs", run_body(stop_when=[LOSS_ABOVE, NO_BETTER])).json()
    assert made["executor_options"]["stop_when"] == [LOSS_ABOVE, NO_BETTER_FILLED]
    assert made["stopped_by"] == ""

    started = api("post", f"/api/runs/{made['id']}/start").json()
    config = Agent.objects.get(pk=started["agent_id"]).config
    assert config["stop_when"] == [LOSS_ABOVE, NO_BETTER_FILLED]


def test_a_batch_and_a_sweep_give_their_rules_to_runs_that_bring_none(api, workdir):
    sweep = api("post", "/api/sweeps", {"name": "s", "stop_when": [NO_BETTER]}).json()
    assert sweep["stop_when"] == [NO_BETTER_FILLED]
    wall = {"wall_seconds": 60}

    runs = [
        run_body(name="sweeps", sweep_id=sweep["id"]),
        run_body(name="own", sweep_id=sweep["id"], stop_when=[LOSS_ABOVE]),
        run_body(name="none", sweep_id=sweep["id"], stop_when=[]),
    ]
    made = api("post", "/api/runs/batch", {"runs": runs}).json()
    rules = {run["name"]: run["executor_options"].get("stop_when") for run in made}
    assert rules == {"sweeps": [NO_BETTER_FILLED], "own": [LOSS_ABOVE], "none": []}

    made = api("post", "/api/runs/batch", {"runs": runs[:2], "stop_when": [wall]}).json()
    rules = {run["name"]: run["executor_options"].get("stop_when") for run in made}
    assert rules == {"sweeps": [wall], "own": [LOSS_ABOVE]}  # the batch's, over the sweep's

    one = api("post", "/api/runs", run_body(sweep_id=sweep["id"])).json()
    assert one["executor_options"]["stop_when"] == [NO_BETTER_FILLED]


def test_stopped_by_is_in_the_run_and_the_sweep_table(api, workdir):
    sweep = api("post", "/api/sweeps", {"name": "s"}).json()
    made = api("post", "/api/runs", run_body(sweep_id=sweep["id"])).json()
    words = "loss > 2.0 after step 100: 3.71 at step 140"
    Run.objects.filter(pk=made["id"]).update(status="stopped", stopped_by=words)

    assert api("get", f"/api/runs/{made['id']}").json()["stopped_by"] == words
    [row] = api("get", f"/api/sweeps/{sweep['id']}/table").json()["rows"]
    assert row["stopped_by"] == words
