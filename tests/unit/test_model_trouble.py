"""What a loop says to check when its model call fails (agentsys.research.model_trouble)."""

from __future__ import annotations

import pytest

from agentsys.opencode.errors import (
    OpenCodeAuthError,
    OpenCodeSessionError,
    OpenCodeStuckRetrying,
    OpenCodeTimeout,
    OpenCodeUnavailable,
)
from agentsys.research.model_trouble import what_to_check
from agentsys.scripted_llm.script import BadScript, parse_script


def advice(error, provider="anthropic", model="claude-sonnet-4-5"):
    return what_to_check(error, provider=provider, model=model, opencode_url="http://oc:4096")


@pytest.mark.parametrize(
    ("error", "provider", "expected"),
    [
        (OpenCodeSessionError("APIError", "bad key", 401), "anthropic", "ANTHROPIC_API_KEY"),
        (OpenCodeSessionError("APIError", "bad key", 401), "openrouter", "OPENROUTER_API_KEY"),
        (OpenCodeSessionError("APIError", "bad key", 403), "acme", "ACME_API_KEY"),
        (OpenCodeSessionError("APIError", "bad key", 401), "local", "MODEL_BASE_URL"),
        (OpenCodeSessionError("APIError", "no such model", 404), "openai", "check MODEL_ID"),
        (OpenCodeSessionError("APIError", "slow down", 429), "openai", "quota"),
        (OpenCodeSessionError("APIError", "boom", 502), "openai", "status page"),
        (OpenCodeAuthError("401"), "openai", "OPENCODE_SERVER_PASSWORD"),
        (OpenCodeTimeout("first_token", 180), "openai", "MODEL_FIRST_TOKEN_TIMEOUT (now 180 s)"),
        (OpenCodeTimeout("idle", 120), "openai", "MODEL_IDLE_TIMEOUT (now 120 s)"),
        (OpenCodeStuckRetrying("kept failing"), "openai", "quota"),
        (OpenCodeUnavailable("refused"), "openai", "OpenCode is up at http://oc:4096"),
    ],
)
def test_each_failure_names_what_to_check(error, provider, expected):
    assert expected in advice(error, provider=provider)


def test_a_provider_error_shows_its_status_in_its_message():
    assert str(OpenCodeSessionError("APIError", "invalid x-api-key", 401)) == (
        "APIError (401): invalid x-api-key"
    )
    assert str(OpenCodeSessionError("ProviderInitError", "")) == "ProviderInitError"


def test_a_script_step_may_set_the_finish_reason_and_only_a_real_one():
    script = parse_script({"turns": [{"steps": [{"text": "cut"}, {"finish": "length"}]}]})
    assert script.turns[0].steps[-1] == {"finish": "length"}
    with pytest.raises(BadScript, match="finish must be one of"):
        parse_script({"turns": [{"steps": [{"finish": "truncated"}]}]})
