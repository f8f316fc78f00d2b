"""What a loop tells a person when its model call fails, or its reply was cut off: one line
that says what happened and what to check, in the words of the setting to change.

A failed call is not the model's answer, so it uses up none of the loop's iterations: the
same step is asked again (after a pause that grows with each failure), and the loop fails
only after `max_model_failures` in a row, with this line as its error.
"""

from __future__ import annotations

import time

from agentsys.opencode import OpenCodeError
from agentsys.opencode.errors import (
    OpenCodeAuthError,
    OpenCodeSessionError,
    OpenCodeStreamLost,
    OpenCodeStuckRetrying,
    OpenCodeTimeout,
    OpenCodeUnavailable,
)
from agentsys.research.reply import ParsedReply, parse_reply
from agentsys.research.settings import ResearchSettings
from agentsys.research.state import ITERATING, MODEL_ERROR, IterationRecord, ResearchState

# The environment variable OpenCode reads each hosted provider's key from.
KEY_VARIABLES = {
    "anthropic": "ANTHROPIC_API_KEY",
    "openai": "OPENAI_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
    "google": "GOOGLE_GENERATIVE_AI_API_KEY",
    "groq": "GROQ_API_KEY",
    "mistral": "MISTRAL_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "xai": "XAI_API_KEY",
    "togetherai": "TOGETHER_AI_API_KEY",
}
TIMEOUT_SETTINGS = {
    "first_token": "MODEL_FIRST_TOKEN_TIMEOUT",
    "total": "MODEL_RESPONSE_TIMEOUT",
    "idle": "MODEL_IDLE_TIMEOUT",
}
CUT_OFF = (
    "your reply was cut off at the model's output limit (finish_reason: length); what came "
    "after the cut was lost: answer shorter (fewer experiments, no long logs)"
)


def read_reply(text: str, finish: str | dict) -> ParsedReply:
    """The reply parsed; one cut off at the model's output limit says so first. `finish` is
    the reply's finish reason, or the saved iteration that kept it."""
    if isinstance(finish, dict):
        finish = finish.get("finish") or ""
    parsed = parse_reply(text)
    if finish == "length":
        parsed.problems.insert(0, CUT_OFF)
    return parsed


def failed_call(
    state: ResearchState, settings: ResearchSettings, error: OpenCodeError
) -> IterationRecord:
    """Count the failure in `state` and add the history step that says it, with what to check
    as its last error."""
    state.consecutive_model_failures += 1
    tries, limit = state.consecutive_model_failures, settings.max_model_failures
    advice = what_to_check(
        error,
        provider=settings.model_provider,
        model=settings.model_id,
        opencode_url=settings.opencode_url,
    )
    now = time.time()
    record = IterationRecord(
        # the step it was asked for: the plan (0), the next iteration, or a reflection
        iteration=state.iteration + (1 if state.phase == ITERATING else 0),
        phase=MODEL_ERROR,
        summary=f"The model call failed (try {tries} of {limit}); "
        + ("the loop gives up." if tries >= limit else "it is asked again."),
        errors=[f"model: {error}", advice],
        started_at=now,
        finished_at=now,
    )
    state.record(record)
    return record


def what_to_check(error: OpenCodeError, *, provider: str, model: str, opencode_url: str) -> str:
    """The failure and what to check, e.g. "401: check the key in ANTHROPIC_API_KEY"."""
    if isinstance(error, OpenCodeSessionError):
        return _provider_advice(error.provider_status, provider, model)
    if isinstance(error, OpenCodeAuthError):
        return (
            "OpenCode refused runagentd's password (401): check that OPENCODE_SERVER_PASSWORD "
            "is the one OpenCode was started with"
        )
    if isinstance(error, OpenCodeTimeout):
        setting = TIMEOUT_SETTINGS.get(error.which, "MODEL_RESPONSE_TIMEOUT")
        return (
            f"check that the model {provider}/{model} is up and answering; a slow model needs "
            f"a longer {setting} (now {error.seconds:g} s)"
        )
    if isinstance(error, OpenCodeStuckRetrying):
        return (
            f"the provider {provider!r} kept refusing (rate limit or outage): check its status "
            "and your plan's quota"
        )
    if isinstance(error, OpenCodeUnavailable | OpenCodeStreamLost):
        return f"check that OpenCode is up at {opencode_url or 'OPENCODE_URL'} (make run starts it)"
    return f"check OpenCode's log and the model {provider}/{model}"


def _provider_advice(status: int | None, provider: str, model: str) -> str:
    if status in (401, 403):
        variable = KEY_VARIABLES.get(provider.lower())
        if variable is None and provider.lower() in ("local", "demo"):
            return (
                f"{status}: the model server refused the key: check the key the server at "
                "MODEL_BASE_URL expects"
            )
        where = variable or f"{provider.upper()}_API_KEY (the variable OpenCode reads for it)"
        return f"{status}: the provider refused the key: check the key in {where}"
    if status == 404:
        return f"404: the provider does not know the model: check MODEL_ID ({model!r})"
    if status == 429:
        return f"429: rate limited by {provider!r}: check your plan's quota, or wait"
    if status == 400:
        return f"400: the provider refused the request: check that {model!r} suits the loop"
    if status is not None and status >= 500:
        return f"{status}: the provider {provider!r} failed: check its status page"
    return f"check the provider {provider!r} and the model {model!r}"
