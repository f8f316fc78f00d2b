"""A model that fails, or cuts its reply off (issue 35, items 4 and "must show"): a failed
call uses up none of the loop's iterations and says what to check; a reply cut off at the
model's output limit (finish_reason "length", as real providers send it) is said so to the
model and in the history. Against a real runagentd, the real OpenCode and the scripted
model, whose script sends the provider's errors and finish reasons."""

from __future__ import annotations

import pytest

from research_app import selectors as research_selectors
from research_app.models import ResearchLoop
from tests.e2e.test_research_e2e import (
    ITERATION_2,
    PLAN,
    REFLECTION,
    _turn,
    prompts_seen,
    start_loop,
    wait_finished,
)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

BAD_KEY = {"error": {"status": 401, "message": "invalid x-api-key"}}
NO_TAGS_YET = "<summary>Looked around; nothing to run yet.</summary>"


def _failing(match: str) -> dict:
    return {"match": match, "steps": [BAD_KEY]}


def _steps(detail: dict, phase: str) -> list[dict]:
    return [s for s in detail["history"] if s.get("phase") == phase]


def test_a_provider_error_uses_up_no_iteration_and_says_what_to_check(
    api, browser, workdir, make_daemon, scripted_llm
):
    make_daemon()
    scripted_llm.load(
        {
            "turns": [
                _turn(r"agentsys-prompt: planning", PLAN),
                _failing(r"Iteration 1 of"),
                _turn(r"Iteration 1 of", NO_TAGS_YET),
                _turn(r"Iteration 2 of", ITERATION_2),
                _turn(r"agentsys-prompt: reflection", REFLECTION),
            ]
        }
    )
    loop_id = start_loop(api, workdir, max_iterations=2)
    agent = wait_finished(loop_id)
    assert agent.status == "done", agent.error
    detail = api("get", f"/api/research/{loop_id}").json()
    # Both iterations the person allowed were the model's: the failed call took neither.
    assert [s["iteration"] for s in _steps(detail, "iteration")] == [1, 2]
    assert _steps(detail, "iteration")[-1]["promise"] == "DONE"
    (failed,) = _steps(detail, "model_error")
    assert failed["iteration"] == 1
    assert "401" in failed["errors"][0] and "invalid x-api-key" in failed["errors"][0]
    assert "check the key" in failed["errors"][1], failed
    assert "asked again" in failed["summary"]
    # The person reads it on the loop page and in the log; the model is not told of it.
    page = browser.get(f"/research/{loop_id}/").content.decode()
    assert "Model call failed (iteration 1)" in page and "check the key" in page
    log = research_selectors.iteration_log_path(ResearchLoop.objects.get(pk=loop_id)).read_text()
    assert "## Model call failed (iteration 1)" in log
    second = next(p for p in prompts_seen(scripted_llm) if "Iteration 2 of" in p)
    assert "invalid x-api-key" not in second


def test_a_bad_key_fails_the_loop_after_three_tries_naming_what_to_check(
    api, workdir, make_daemon, scripted_llm
):
    make_daemon()
    scripted_llm.load(
        {"turns": [_turn(r"agentsys-prompt: planning", PLAN), *[_failing("Iteration 1 of")] * 3]}
    )
    loop_id = start_loop(api, workdir, max_iterations=3)
    agent = wait_finished(loop_id, timeout=60)
    assert agent.status == "failed"
    assert "the model failed 3 times in a row" in agent.error
    assert "401" in agent.error and "check the key" in agent.error
    detail = api("get", f"/api/research/{loop_id}").json()
    assert _steps(detail, "iteration") == []  # three failed calls, no iteration used
    assert [s["summary"].split(";")[0] for s in _steps(detail, "model_error")] == [
        f"The model call failed (try {n} of 3)" for n in (1, 2, 3)
    ]


def test_a_reply_cut_off_at_the_output_limit_is_said_so_to_the_model_and_the_person(
    api, workdir, make_daemon, scripted_llm
):
    make_daemon()
    cut = "I will run the baseline.\n<experiments>\n- goal: baseline lr 0.05\n  command: pyth"
    scripted_llm.load(
        {
            "turns": [
                _turn(r"agentsys-prompt: planning", PLAN),
                {"match": r"Iteration 1 of", "steps": [{"text": cut}, {"finish": "length"}]},
                _turn(r"Iteration 2 of", ITERATION_2),
                _turn(r"agentsys-prompt: reflection", REFLECTION),
            ]
        }
    )
    loop_id = start_loop(api, workdir, max_iterations=3)
    agent = wait_finished(loop_id)
    assert agent.status == "done", agent.error
    detail = api("get", f"/api/research/{loop_id}").json()
    first = _steps(detail, "iteration")[0]
    assert first["runs"] == []  # nothing half-read was run
    assert any("cut off at the model's output limit" in e for e in first["errors"]), first
    second = next(p for p in prompts_seen(scripted_llm) if "Iteration 2 of" in p)
    assert "your reply was cut off at the model's output limit" in second
