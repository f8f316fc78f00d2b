"""GET /api/models: the models the OpenCode server offers (its `GET /config/providers`),
asked server-side with the same URL and basic-auth credentials the health check uses."""

from __future__ import annotations

import os

import httpx
from django.conf import settings
from ninja import Router, Schema, Status

router = Router(tags=["chat sessions"])

OPENCODE_TIMEOUT_SECONDS = 5.0
# Tests replace this with an httpx.MockTransport; None = real network.
transport: httpx.BaseTransport | None = None


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
    url = (config.opencode_url or os.environ.get("OPENCODE_URL", "")).rstrip("/")
    if not url:
        raise OpenCodeUnavailable("OPENCODE_URL is not set (make run sets it)")
    auth = (config.opencode_username, config.opencode_password)
    try:
        with httpx.Client(timeout=OPENCODE_TIMEOUT_SECONDS, transport=transport) as client:
            answer = client.get(
                f"{url}/config/providers", auth=auth if config.opencode_password else None
            )
    except httpx.HTTPError as error:
        raise OpenCodeUnavailable(
            f"OpenCode at {url} is unreachable: {type(error).__name__} {error}"
        ) from None
    if answer.status_code != 200:
        why = " (wrong OPENCODE_SERVER_PASSWORD)" if answer.status_code == 401 else ""
        raise OpenCodeUnavailable(f"OpenCode at {url} answered {answer.status_code}{why}")
    try:
        providers = answer.json()["providers"]
        if not isinstance(providers, list):
            raise TypeError("providers is not a list")
    except (ValueError, KeyError, TypeError) as error:
        raise OpenCodeUnavailable(f"OpenCode at {url} answered no provider list: {error}") from None
    return providers


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
