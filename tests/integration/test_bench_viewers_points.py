"""bench/runtime.py's and bench/scale_viewers.py's figures time what their names say (issue 40
§3), at a tiny size on the real parts (runagentd and its workers, daphne, the live feed):

- spawn_ready_*: from the request (the agent's row, made inside request_agent_start) to the
  "started" event runagentd stores when the agent's worker reports STARTED;
- event_to_ws_* and ws_*_clients_*: from the emit in the agent's worker under runagentd (the
  instant it stamps into the event, before the event is stored) to the frame read off each
  socket, every socket counting each event exactly once, at the clients and the rate the
  figure's name says."""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass
from itertools import pairwise

import pytest
from websockets.asyncio.client import ClientConnection

from agents_app import services
from agents_app.models import Agent
from bench import runtime, scale_viewers
from bench.harness import AGENT_CLASSES
from bench.runtime import receipt_ms, spawn_ready_ms
from events_app.models import Event
from tests import live_clients, runtime_agents
from tests.call_watch import watch_calls
from tests.live_clients import Web
from tests.runtime_harness import DaemonProcess, wait_event

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
CLIENTS, EVENTS = 3, 4


@pytest.fixture
def runagentd(agentsys_config, monkeypatch):
    """A runagentd that may run the bench's agents (and a test process that may ask for them)."""
    classes = f"{runtime_agents.ALL},{AGENT_CLASSES}"
    agentsys_config(extra_agent_classes=frozenset(classes.split(",")))
    # DaemonProcess allow-lists runtime_agents.ALL itself: an AGENTSYS_AGENT_CLASSES of ours
    # would clash with its own.
    monkeypatch.setattr(runtime_agents, "ALL", classes)
    daemon = DaemonProcess("bench-viewers")
    yield daemon
    daemon.stop()


@pytest.fixture
def web(runagentd, monkeypatch):
    monkeypatch.setattr(runtime, "TOKEN", live_clients.TOKEN)
    started = Web()
    yield started
    started.stop()


def test_spawn_ready_runs_from_the_request_to_the_workers_started_event(runagentd, monkeypatch):
    requests = watch_calls(monkeypatch, services, "request_agent_start")
    spawns = runtime.spawns(count=3)
    assert len(spawns) == len(requests) == 3
    for spawn, request in zip(spawns, requests, strict=True):
        agent = Agent.objects.get(pk=spawn.agent_id)
        # Start: the request, its agent's row made by the call that asked for it.
        assert request.result.id == agent.id
        assert request.began <= spawn.requested.timestamp() <= request.returned
        assert spawn.requested == agent.created_at
        # End: the start its worker reported, runagentd's record of it (the agent's pid is
        # the worker's, not runagentd's), before the agent ran to its end.
        started = Event.objects.get(agent_id=agent.id, kind="started")
        assert spawn.started == started.created_at
        assert started.payload["pid"] == agent.pid != runagentd.pid
        assert agent.started_at <= spawn.started
        done = wait_event(agent.id, "done")  # the last may end after spawns() returned
        assert spawn.started < done.created_at
        assert spawn_ready_ms(spawn) == pytest.approx(
            (started.created_at - agent.created_at).total_seconds() * 1000
        )


@dataclass(frozen=True)
class Read:
    """One recv on a client socket."""

    ws: ClientConnection
    began: float
    returned: float
    frame: dict


def _watch_sockets(monkeypatch) -> tuple[list[ClientConnection], list[Read]]:
    """The client sockets as they were made (the bench makes them one after the other, its
    client numbers in that order) and each recv on them."""
    made, reads = [], []
    real_init, real_recv = ClientConnection.__init__, ClientConnection.recv

    def init(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        made.append(self)

    async def recv(self, *args, **kwargs):
        began = time.time()
        text = await real_recv(self, *args, **kwargs)
        reads.append(Read(self, began, time.time(), json.loads(text)))
        return text

    monkeypatch.setattr(ClientConnection, "__init__", init)
    monkeypatch.setattr(ClientConnection, "recv", recv)
    return made, reads


def _emits_and_reads(web, monkeypatch, interval: float):
    """The receipts of EVENTS events on CLIENTS sockets; each socket's recvs, in the order the
    sockets were made; when it all returned."""
    made, reads = _watch_sockets(monkeypatch)
    receipts = asyncio.run(runtime.ws_receipts(web.port, CLIENTS, interval, events=EVENTS))
    return receipts, [[read for read in reads if read.ws is ws] for ws in made], time.time()


def _names_say(name: str, clients: int, interval: float) -> bool:
    said = re.fullmatch(r"ws_(\d+)_clients(?:_(\d+)_per_s)?", name)
    rate = int(said[2] or 10) if said else 0  # 10 events a second unless named
    return bool(said) and int(said[1]) == clients and 1 / interval == pytest.approx(rate)


def test_each_socket_times_each_event_once_from_its_emit_to_its_frame_read(web, monkeypatch):
    assert all(_names_say(*case) for case in scale_viewers.CASES), scale_viewers.CASES
    # bench/runtime.py's rate (its default), then scale_viewers' other one.
    for interval in dict.fromkeys([0.02, *(case[2] for case in scale_viewers.CASES)]):
        receipts, by_socket, ended = _emits_and_reads(web, monkeypatch, interval)
        _check_receipts(receipts, by_socket, ended, interval)


def _check_receipts(receipts, by_socket: list[list[Read]], ended: float, interval: float):
    seqs = {receipt.seq for receipt in receipts}
    stored = {event.seq: event for event in Event.objects.filter(seq__in=seqs, kind="bench")}
    [emitter] = {event.agent_id for event in stored.values()}
    assert Agent.objects.get(pk=emitter).cls_path == "bench.agents.Emitter"
    assert len(stored) == EVENTS
    # Each socket counted each of the emitter's events once: not one twice, none missed.
    for client in range(CLIENTS):
        mine = [receipt for receipt in receipts if receipt.client == client]
        assert sorted(receipt.seq for receipt in mine) == sorted(stored)
        assert sorted(receipt.index for receipt in mine) == list(range(EVENTS))
    assert len(by_socket) == CLIENTS
    for receipt in receipts:
        event = stored[receipt.seq]
        # Start: the emit, the instant the worker stamped into the event as it emitted it,
        # before runagentd stored it (and so before any socket could have it).
        assert receipt.emitted == event.payload["t"]
        assert receipt.index == event.payload["i"]
        assert receipt.emitted <= event.created_at.timestamp()
        # End: after this socket's recv that returned the event's frame, before its next.
        socket_reads = by_socket[receipt.client]
        at = next(i for i, read in enumerate(socket_reads) if read.frame["id"] == receipt.seq)
        later = socket_reads[at + 1].began if at + 1 < len(socket_reads) else ended
        assert socket_reads[at].returned <= receipt.received <= later
        assert receipt_ms(receipt) == pytest.approx((receipt.received - receipt.emitted) * 1000)
    # The events went out at the rate asked for, each timed from its own emit.
    emitted = sorted({receipt.emitted for receipt in receipts})
    assert all(later - earlier >= 0.9 * interval for earlier, later in pairwise(emitted))


def test_clients_shared_out_among_processes_count_each_event_once_from_its_emit(web):
    """The viewers' figures share their sockets among client processes
    (scale_viewers.CLIENT_PROCESSES): every socket, numbered across them, still counts each
    event once, timed from the emit the worker stamped into it."""
    assert scale_viewers.CLIENT_PROCESSES > 1
    before = time.time()
    receipts = asyncio.run(
        runtime.ws_receipts(web.port, CLIENTS + 1, 0.1, events=EVENTS, processes=2)
    )
    stored = {event.seq: event for event in Event.objects.filter(kind="bench")}
    assert len(stored) == EVENTS
    for client in range(CLIENTS + 1):  # an odd number: the two processes' shares differ
        mine = [receipt for receipt in receipts if receipt.client == client]
        assert sorted(receipt.seq for receipt in mine) == sorted(stored)
        assert sorted(receipt.index for receipt in mine) == list(range(EVENTS))
    assert len(receipts) == (CLIENTS + 1) * EVENTS
    for receipt in receipts:
        assert receipt.emitted == stored[receipt.seq].payload["t"]
        assert before < receipt.emitted <= receipt.received <= time.time()
