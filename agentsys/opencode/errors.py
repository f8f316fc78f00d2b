"""What can go wrong talking to OpenCode, each kind its own exception with a message a person
can act on. The research loop records them in an iteration's errors."""

from __future__ import annotations


class OpenCodeError(Exception):
    """Base: `str(error)` says what happened and where."""

    status: int | None = None  # the HTTP status, when the server answered one (401, 503...)


class OpenCodeUnavailable(OpenCodeError):
    """The server cannot be reached (refused, DNS, a 5xx on a plain call)."""


class OpenCodeAuthError(OpenCodeError):
    """401: OPENCODE_SERVER_USERNAME / OPENCODE_SERVER_PASSWORD do not match the server's."""


class OpenCodeTimeout(OpenCodeError):
    def __init__(self, which: str, seconds: float):
        self.which, self.seconds = which, seconds
        what = {
            "first_token": "no output from the model",
            "total": "the response was not complete",
            "idle": "the event stream was silent",
        }[which]
        super().__init__(f"timed out: {what} after {seconds:g} s ({which} timeout)")


class OpenCodeStreamLost(OpenCodeError):
    """The event stream ended before the session went idle."""


class OpenCodeSessionError(OpenCodeError):
    """The model's provider failed the prompt (OpenCode's session.error): `provider_status`
    is the provider's HTTP status when it answered one (401: a bad key)."""

    def __init__(self, name: str, message: str, provider_status: int | None = None):
        self.name, self.provider_status = name, provider_status
        where = f" ({provider_status})" if provider_status else ""
        super().__init__(f"{name}{where}: {message}" if message else f"{name}{where}")


class OpenCodeStuckRetrying(OpenCodeError):
    """The model provider kept failing and OpenCode kept retrying."""
