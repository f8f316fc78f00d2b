"""GET /api/models: the models the OpenCode server offers (its `GET /config/providers`),
asked server-side with the same URL and basic-auth credentials the health check uses."""

from __future__ import annotations

from asgiref.sync import async_to_sync
from django.conf import settings
from ninja import Router, Schema, Status

from agentsys.opencode import OpenCodeAuthError, OpenCodeClient, OpenCodeError
from agentsys.opencode import OpenCodeUnavailable as ServerUnreachable

router = Router(tags=["chat sessions"])

OPENCODE_TIMEOUT_SECONDS = 5.0


class ModelRef(Schema):
    provider: str
    model: str


class ModelOut(ModelRef):
    name: str


class ModelsOut(Schema):
    models: list[ModelOut]
    default: ModelRef


class ErrorOut(Schema):
    detail: str


class OpenCodeUnavailable(Exception):
    """OpenCode could not be asked, or answered something that is not a provider list."""


def opencode_providers() -> list[dict]:
    """OpenCode's providers, each {"id", "name", "models": {model_id: {"id", "name", ...}}}."""
    config = settings.AGENTSYS
    url = config.opencode_url.rstrip("/")
    if not url:
        raise OpenCodeUnavailable("OPENCODE_URL is not set (make run sets it)")
    try:
        return async_to_sync(_ask_providers)(
            url, config.opencode_username, config.opencode_password
        )
    except OpenCodeAuthError:
        raise OpenCodeUnavailable(
            f"OpenCode at {url} answered 401 (wrong OPENCODE_SERVER_PASSWORD)"
        ) from None
    except OpenCodeError as error:
        if error.status is not None:
            raise OpenCodeUnavailable(f"OpenCode at {url} answered {error.status}") from None
        if isinstance(error, ServerUnreachable):  # the client's words name the server and why
            raise OpenCodeUnavailable(f"unreachable: {error}") from None
        raise OpenCodeUnavailable(str(error)) from None  # it answered no provider list


async def _ask_providers(url: str, username: str, password: str) -> list[dict]:
    client = OpenCodeClient(
        url, username=username, password=password, call_timeout=OPENCODE_TIMEOUT_SECONDS
    )
    try:
        return await client.providers()
    finally:
        await client.aclose()


def flatten(providers: list[dict]) -> list[dict]:
    """One row per model, in OpenCode's order; malformed entries are skipped."""
    rows = []
    for provider in providers:
        if not isinstance(provider, dict) or not isinstance(provider.get("models"), dict):
            continue
        provider_id = str(provider.get("id", ""))
        for key, model in provider["models"].items():
            model = model if isinstance(model, dict) else {}
            model_id = str(model.get("id") or key)
            name = str(model.get("name") or model_id)
            rows.append({"provider": provider_id, "model": model_id, "name": name})
    return rows


@router.get(
    "/models",
    response={200: ModelsOut, 503: ErrorOut},
    summary="Models OpenCode offers, and the configured default",
    description="Asked of the OpenCode server (`GET /config/providers`) on each call; 503 "
    "with the reason when it cannot be reached.",
)
def list_models(request):
    try:
        providers = opencode_providers()
    except OpenCodeUnavailable as error:
        return Status(503, {"detail": str(error)})
    config = settings.AGENTSYS
    return {
        "models": flatten(providers),
        "default": {"provider": config.model_provider, "model": config.model_id},
    }
