"""`GET /api/health` and the no-daemon banner: is the database there, does the channel layer
carry a message, does any runagentd heart-beat, how deep is the queue.

The route answers without authentication, so a load balancer or a monitoring probe can use
it: 200 `{"status": "ok"}` or 503 `{"status": "degraded"}`. Its details (each check, each
host, the queue) go only to a logged-in user or an API token."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime
from typing import Literal

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import DatabaseError, connection
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from ninja import Router, Schema
from pydantic import ConfigDict

from agentsys.mcp.status import mcp_check, mcp_warnings
from agentsys.types import RequestStatus
from common import db_watch
from common.db_outage import is_database_unavailable, outage
from common.opencode_status import opencode_check
from hosts_app.liveness import host_is_alive
from scheduler_app import selectors as host_selectors
from scheduler_app.models import ScheduleRequest

CHANNEL_TIMEOUT_SECONDS = 2.0
BACK_MEANWHILE = "The database was unreachable a moment ago and is back: ask again."
router = Router(tags=["health"])


class HealthOut(Schema):
    """`status` for anyone; the details below it only for a logged-in user or a token."""

    model_config = ConfigDict(extra="allow")

    status: Literal["ok", "degraded"]
    problems: list[str] | None = None


def database_check() -> dict:
    started = time.perf_counter()
    try:
        connection.ensure_connection()
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except DatabaseError as exc:
        if is_database_unavailable(exc):
            db_watch.confirm_down(exc)
        return {"ok": False, "error": str(exc).strip().splitlines()[0] if str(exc) else "down"}
    return {"ok": True, "latency_ms": round((time.perf_counter() - started) * 1000, 2)}


_probe: tuple[object, str] | None = None  # (the layer, its probe channel)
RESEND_SECONDS = 0.5


async def _round_trip() -> None:
    """Send a marked message to this process's probe channel and wait for it to come back.
    One channel for the process's life: channels-postgres takes a session advisory lock per
    channel it receives on, so a new channel per probe would pile up locks. A message sent
    before the very first receive holds its lock is dropped, hence the resend."""
    global _probe
    layer = get_channel_layer()
    if _probe is None or _probe[0] is not layer:
        _probe = (layer, await layer.new_channel("health."))
    channel = _probe[1]
    marker = uuid.uuid4().hex

    async def wait_for_marker():
        while (await layer.receive(channel)).get("marker") != marker:
            pass  # a reply to an earlier probe that had given up

    waiter = asyncio.ensure_future(wait_for_marker())
    try:
        deadline = asyncio.get_running_loop().time() + CHANNEL_TIMEOUT_SECONDS
        while not waiter.done():
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                raise TimeoutError
            await layer.send(channel, {"type": "health.ping", "marker": marker})
            await asyncio.wait([waiter], timeout=min(RESEND_SECONDS, left))
        waiter.result()
    finally:
        waiter.cancel()


async def channel_layer_check() -> dict:
    started = time.perf_counter()
    try:
        await _round_trip()
    except TimeoutError:
        return {"ok": False, "error": f"no message back within {CHANNEL_TIMEOUT_SECONDS}s"}
    except Exception as exc:  # any transport error is the answer to this check
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
    return {"ok": True, "round_trip_ms": round((time.perf_counter() - started) * 1000, 2)}


def hosts_check() -> list[dict]:
    now = timezone.now()
    return [
        {
            "name": host.name,
            "alive": host_is_alive(host, now=now),
            "status": host.status,
            "daemon_pid": host.daemon_pid,
            "last_heartbeat": host.last_heartbeat.isoformat() if host.last_heartbeat else None,
            "seconds_since_heartbeat": (
                round((now - host.last_heartbeat).total_seconds(), 1)
                if host.last_heartbeat
                else None
            ),
        }
        for host in host_selectors.hosts_with_gpus()
    ]


def queue_check() -> dict:
    counts = {RequestStatus.QUEUED: 0, RequestStatus.RUNNING: 0}
    for status in counts:
        counts[status] = ScheduleRequest.objects.filter(status=status).count()
    return {"queued": counts[RequestStatus.QUEUED], "running": counts[RequestStatus.RUNNING]}


def no_daemon_message(hosts: list[dict]) -> str | None:
    """The banner's text when no runagentd heart-beats; None while one does."""
    if any(host["alive"] for host in hosts):
        return None
    beats = [h for h in hosts if h["last_heartbeat"]]
    last = max(beats, key=lambda h: h["last_heartbeat"], default=None)
    when = (
        f"Last heartbeat: {last['last_heartbeat']} ({last['name']})."
        if last
        else ("No runagentd has ever heart-beaten.")
    )
    return f"No runagentd is running: agents and runs will not start. {when}"


def _database_report() -> tuple[dict, list[str]]:
    database = database_check()
    details, problems = {"database": database}, []
    if not database["ok"]:
        problems.append(f"database unreachable: {database['error']}")
    else:
        details["hosts"] = hosts_check()
        details["queue"] = queue_check()
        if message := no_daemon_message(details["hosts"]):
            problems.append(message)
    return details, problems


async def report() -> dict | None:
    """Every check's details, or None when the database check found it away (then the
    channel layer, on the same database, would only wait out its timeout)."""
    details, problems = await sync_to_async(_database_report)()
    if outage.since is not None:
        return None
    # On the server's own event loop: the channel layer's connections belong to it.
    details["channel_layer"] = await channel_layer_check()
    if not details["channel_layer"]["ok"]:
        problems.append(f"channel layer: {details['channel_layer']['error']}")
    # Without OpenCode the agents' model is unreachable, but runs, the queue and the pages
    # work: a warning the person sees, not a 503 that takes the app out of a load balancer.
    details["opencode"] = await opencode_check()
    warnings = [] if details["opencode"]["ok"] else [f"opencode: {details['opencode']['error']}"]
    # The workdir's MCP servers as OpenCode runs them: a failed one is the agents' tools
    # missing, a warning with its fix.
    config = settings.AGENTSYS
    details["mcp"] = await mcp_check(
        config.opencode_url,
        settings.AGENTSYS_WORKDIR,
        username=config.opencode_username,
        password=config.opencode_password,
        opencode_ok=details["opencode"]["ok"],
    )
    warnings += mcp_warnings(details["mcp"])
    return {
        "status": "degraded" if problems else "ok",
        "problems": problems,
        "warnings": warnings,
        **details,
    }


def _caller_may_see_details(request: HttpRequest) -> bool:
    from accounts_app.auth import authenticate_token
    from events_app.consumers import api_token

    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return True
    token = api_token(
        x_auth_token=request.headers.get("X-Auth-Token", ""),
        authorization=request.headers.get("Authorization", ""),
    )
    return authenticate_token(None, token) is not None


@router.get(
    "/health",
    auth=None,
    summary="Health: database, channel layer, runagentd hosts, queue",
    description='No authentication needed: answers 200 `{"status": "ok"}` or 503 '
    '`{"status": "degraded"}` (database unreachable, channel layer not carrying messages, '
    "or no runagentd heart-beating). A logged-in user or an API token also gets `problems`, "
    "`database` (latency), `channel_layer` (round trip), `hosts` (alive, last heartbeat) and "
    "`queue` (queued and running requests), `opencode` (reachable, version, model; its "
    "failure is listed in `warnings`, not a 503), `mcp` (OpenCode's status of each MCP "
    "server of the workdir: connected, or failed with its error and a one-line `fix`, also "
    "listed in `warnings`). While the database is known to be away, every caller gets at once "
    "`problems` (what is down, since when) and `database.down_since`. `?banner=true` answers "
    "200 whatever the "
    "status, with the same body: the pages' banner asks so, as a browser logs every 503 as a "
    "console error.",
    response={200: HealthOut, 503: HealthOut},
)
async def health(request, banner: bool = False):
    result = None if outage.since is not None else await report()
    if result is None:
        # Known down (common/db_watch.py, or found so by this request's check): said at
        # once, to everyone alike, as telling a token or a login apart needs the database.
        down = database_down_report() or {"status": "degraded", "problems": [BACK_MEANWHILE]}
        response = JsonResponse(down, status=200 if banner else 503)
        response._has_been_logged = True
        return response
    code = 200 if result["status"] == "ok" or banner else 503
    detailed = await sync_to_async(_caller_may_see_details)(request)
    body = result if detailed else {"status": result["status"]}
    response = JsonResponse(body, status=code)
    # A probe polls this every few seconds: its 503s are answers, not server errors to log.
    response._has_been_logged = True
    return response


def database_down_report() -> dict | None:
    """Health's answer while the database is known to be away: what and since when."""
    line = outage.describe()
    since = outage.since
    if line is None or since is None:
        return None
    down_since = datetime.fromtimestamp(since, UTC).isoformat()
    return {
        "status": "degraded",
        "problems": [line],
        "database": {"ok": False, "down_since": down_since, "down_seconds": _since(since)},
    }


def _since(moment: float) -> float:
    return round(time.time() - moment, 1)


def daemon_banner(request: HttpRequest) -> dict:
    """Context processor: the banner on every page while no runagentd heart-beats."""
    if (line := outage.describe()) is not None:
        return {"daemon_banner": line}
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    try:
        return {"daemon_banner": no_daemon_message(hosts_check())}
    except DatabaseError:
        return {"daemon_banner": "The database is unreachable: nothing can be shown or started."}
