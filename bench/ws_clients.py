"""WebSocket viewers of the live agent feed, for the viewers' figures (bench/runtime.py): each
socket notes every bench event's frame as it reads it. No Django here: a client process
(`python -m bench.ws_clients PORT COUNT FIRST EVENTS`, the API token in BENCH_WS_TOKEN)
connects its sockets, says "connected", reads the emitting agent's id from stdin, and prints
its rows as JSON: (socket number, event id, event index, emitted, received)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time

FRAME_TIMEOUT_S = 30  # a socket that gets no frame for this long fails the figure


async def connect_all(port: int, token: str, count: int) -> list:
    from websockets.asyncio.client import connect

    url = f"ws://127.0.0.1:{port}/ws/agents/events/"
    return [
        await connect(
            url,
            additional_headers={"X-Auth-Token": token},
            origin=f"http://127.0.0.1:{port}",
            max_queue=None,
        )
        for _ in range(count)
    ]


async def close_all(sockets: list) -> None:
    for ws in sockets:
        await ws.close()


async def collect_all(sockets: list, agent_id: str, events: int, first: int = 0) -> list[tuple]:
    """Every socket's rows, numbered from `first`; raises if one misses an event or gets one
    twice."""
    found = await asyncio.gather(
        *(_collect(ws, first + i, agent_id, events) for i, ws in enumerate(sockets))
    )
    return [row for rows in found for row in rows]


async def _collect(ws, client: int, agent_id: str, events: int) -> list[tuple]:
    # Plain tuples while the frames come: the clients' own garbage collections pause them,
    # and objects it tracks (10^5 of them at 1,000 clients) make those longer. One timeout a
    # socket, moved on at each frame: `wait_for` would make a task a frame, and at 10,000
    # frames a second those tasks were the clients' largest cost (py-spy, 2026-12-06).
    seen = []
    async with asyncio.timeout(FRAME_TIMEOUT_S) as deadline:
        while len(seen) < events:
            text = await ws.recv()
            received = time.time()
            deadline.reschedule(asyncio.get_running_loop().time() + FRAME_TIMEOUT_S)
            frame = json.loads(text)
            if frame["kind"] == "bench" and frame["agent_id"] == agent_id:
                payload = frame["payload"]
                seen.append((client, frame["id"], payload["i"], payload["t"], received))
    if sorted(row[2] for row in seen) != list(range(events)):
        raise RuntimeError(f"socket {client} did not get each of the {events} events once")
    return seen


async def _serve(port: int, count: int, first: int, events: int) -> list[tuple]:
    sockets = await connect_all(port, os.environ["BENCH_WS_TOKEN"], count)
    try:
        print("connected", flush=True)
        agent_id = (await asyncio.to_thread(sys.stdin.readline)).strip()
        return await collect_all(sockets, agent_id, events, first)
    finally:
        await close_all(sockets)


if __name__ == "__main__":
    port, count, first, events = (int(arg) for arg in sys.argv[1:5])
    print(json.dumps(asyncio.run(_serve(port, count, first, events))))
