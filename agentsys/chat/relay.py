"""One turn's answer as it streams: the parts in order (what the saved message keeps) and the
events that carry them to the browser, written by the `write` its agent gives it (the chat
store's `emit`, published once stored).

Every update becomes an event in the session's stream, stored before it is published, so a
client that reconnects gets exactly what it missed. Writes are coalesced, not dropped: while
one write is in flight the next updates wait, and deltas of the same part that waited
together go out as one `part_delta` (the latency of a write is paid once per batch, however
fast the model streams).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable


class TurnRelay:
    def __init__(self, write: Callable[[list[tuple[str, dict]]], Awaitable], turn_id: str):
        self.write, self.turn_id = write, turn_id
        self.parts: list[dict] = []
        self._by_id: dict[str, dict] = {}
        self._pending: list[tuple[str, dict]] = []
        self._ready = asyncio.Event()
        self._closed = False
        self._writer = asyncio.create_task(self._write_loop(), name=f"relay:{turn_id}")

    # -- what the model produced ------------------------------------------------------------

    def on_part(self, update: dict) -> None:
        """An OpenCodeClient `on_part` update."""
        if update["kind"] == "delta":
            part = self._part(update["id"], update["ptype"])
            part["text"] += update["delta"]
            self.send(
                "part_delta",
                {"id": update["id"], "ptype": update["ptype"], "delta": update["delta"]},
            )
        elif update["kind"] == "tool":
            part = self._part(update["id"], "tool")
            for key in ("tool", "call_id", "status", "input", "output", "title", "time"):
                part[key] = update.get(key)
            self.send("part_update", {k: v for k, v in part.items() if k not in ("text", "type")})

    def _part(self, part_id: str, ptype: str) -> dict:
        part = self._by_id.get(part_id)
        if part is None:
            part = {"id": part_id, "type": ptype, "text": ""}
            self._by_id[part_id] = part
            self.parts.append(part)
        return part

    def text(self) -> str:
        return "".join(p["text"] for p in self.parts if p["type"] == "text")

    def thinking(self) -> str:
        return "".join(p["text"] for p in self.parts if p["type"] == "reasoning")

    def saved_parts(self) -> list[dict]:
        return [
            dict(p) if p["type"] != "tool" else {k: v for k, v in p.items() if k != "text"}
            for p in self.parts
        ]

    # -- events -----------------------------------------------------------------------------

    def send(self, kind: str, payload: dict) -> None:
        self._pending.append((kind, {"turn_id": self.turn_id, **payload}))
        self._ready.set()

    async def flush(self) -> None:
        """Everything sent so far is stored and published (the writer is idle)."""
        while self._pending or self._ready.is_set():
            await asyncio.sleep(0.005)
            if self._writer.done():
                self._writer.result()  # raise what it died of
                return

    async def close(self) -> None:
        await self.flush()
        self._closed = True
        self._writer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._writer

    async def _write_loop(self) -> None:
        while True:
            await self._ready.wait()
            batch, self._pending = _coalesce(self._pending), []
            if batch:
                await self.write(batch)
            if not self._pending:
                self._ready.clear()


def _coalesce(events: list[tuple[str, dict]]) -> list[tuple[str, dict]]:
    """Adjacent deltas of one part become one; everything else keeps its place."""
    out: list[tuple[str, dict]] = []
    for kind, payload in events:
        if out and kind == "part_delta" and out[-1][0] == "part_delta":
            last = out[-1][1]
            if last["id"] == payload["id"] and last["ptype"] == payload["ptype"]:
                out[-1] = (kind, {**last, "delta": last["delta"] + payload["delta"]})
                continue
        out.append((kind, payload))
    return out
