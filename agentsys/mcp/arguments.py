"""A tool called with arguments its schema refuses answers as the REST API's 422 does: one
sentence naming each field and what is wrong with it, and for a name it does not take, the
names it does. Not pydantic's dump with `[type=..., input_value=...]` and a link to pydantic's
web page, which a model (or a person reading its transcript) has to decode first."""

from __future__ import annotations

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError, ValidationError
from fastmcp.server.middleware import Middleware, MiddlewareContext
from pydantic import ValidationError as PydanticValidationError

MAX_SAID = 5  # faults named in the sentence; the rest are counted


class PlainArgumentErrors(Middleware):
    def __init__(self, server: FastMCP):
        self.server = server

    async def on_call_tool(self, context: MiddlewareContext, call_next):
        try:
            return await call_next(context)
        except ValidationError as error:
            cause = error.__cause__
            if not isinstance(cause, PydanticValidationError):
                raise
            name = context.message.name
            tool = await self.server.get_tool(name)
            takes = list((tool.parameters or {}).get("properties", {})) if tool else []
            raise ToolError(refusal(name, cause, takes)) from None


def refusal(tool: str, error: PydanticValidationError, takes: list[str]) -> str:
    """`create_run refused: start is not one of its arguments (name, command, …)`: each
    fault by its field, in words."""
    faults, unknown = [], []
    for fault in error.errors(include_url=False):
        field = ".".join(str(part) for part in fault.get("loc", ())) or "the arguments"
        kind = fault.get("type", "")
        if kind == "unexpected_keyword_argument":
            unknown.append(field)
        elif kind in ("missing_argument", "missing"):
            faults.append(f"{field} is required")
        else:
            message = str(fault.get("msg") or "is not valid")
            faults.append(f"{field}: {message[0].lower()}{message[1:]}")
    if unknown:
        verb = "is not one of its arguments" if len(unknown) == 1 else "are not among its arguments"
        faults.insert(0, f"{' and '.join(unknown)} {verb} ({', '.join(takes)})")
    more = f"; and {len(faults) - MAX_SAID} more" if len(faults) > MAX_SAID else ""
    return f"{tool} refused: " + "; ".join(faults[:MAX_SAID]) + more + "."
