"""One row of every model, wired together the way the system wires them."""

from __future__ import annotations

from django.utils import timezone

from agents_app.models import Agent, AgentCommand
from agentsys.types import AgentStatus, EntryType, RequestStatus
from events_app.events import record_event
from hosts_app.models import Host
from memory_app.models import MemoryEntry
from scheduler_app.metrics.series import record_rows
from scheduler_app.models import (
    GPU,
    Alert,
    CodeBundle,
    CodePatch,
    GPUSource,
    QueuedAsk,
    Run,
    RunLogChunk,
    ScheduleRequest,
    Sweep,
    SweepRung,
)
from sessions_app.models import ChatMessage, ChatSession, ChatTurn


def one_of_everything() -> dict:
    host = Host.objects.create(name="gpu-box", hostname="gpu-box", last_heartbeat=timezone.now())
    gpu = GPU.objects.create(host=host, index=0, name="NVIDIA H100", source=GPUSource.NVML)
    chat = ChatSession.objects.create(title="Tune the LR", project="demo")
    turn = ChatTurn.objects.create(session=chat, full_text="On it.", parts=[{"type": "text"}])
    message = ChatMessage.objects.create(session=chat, seq=1, role="user", content="Tune it")
    l1 = Agent.objects.create(
        id="orchestrator-0000aaaa",
        role="orchestrator",
        cls_path="agentsys.agents.session",
        project="demo",
        chat_session=chat,
        status=AgentStatus.RUNNING,
        host=host,
    )
    l3 = Agent.objects.create(
        id="executor-0000bbbb",
        role="executor",
        cls_path="agentsys.agents.executor",
        parent=l1,
        project="demo",
        session="s1",
        run="r1",
        config={"command": "python train.py"},
    )
    request = ScheduleRequest.objects.create(
        agent=l3,
        agent_cls_path=l3.cls_path,
        goal="train",
        parent=l1,
        gpu_required=1,
        status=RequestStatus.QUEUED,
    )
    command = AgentCommand.objects.create(agent=l1, kind="pause")
    event = record_event(stream="agents", kind="started", agent_id=l1.id, payload={"a": 1})
    asha = {"type": "asha", "metric": "loss", "max_steps": 27}
    sweep = Sweep.objects.create(
        name="lr sweep", parameters={"lr": [0.1, 0.01]}, chat_session=chat, early_stop=asha
    )
    run = Run.objects.create(name="baseline", command="python train.py", sweep=sweep, agent=l3)
    SweepRung.objects.create(
        sweep=sweep, run=run, rung=1, step=1, value=0.5, kept=True, words="ASHA rung 1: first"
    )
    alert = Alert.objects.create(
        run=run, agent_id=l3.id, message="High loss", choices=["acknowledge", "stop"]
    )
    record_rows(agent_id=l3.id, run_id=run.pk, rows=[{"_step": 1, "loss": 0.5}])
    RunLogChunk.objects.create(run=run, offset=0, data=b"epoch 1 loss 0.5 demo\n")
    CodePatch.objects.create(digest="d" * 64, data=b"+lr = 0.1  # demo\n", size=18, files=1)
    CodeBundle.objects.create(commit="c" * 40, data=b"# v2 git bundle", size=15, host="gpu-box")
    QueuedAsk.objects.create(account="demo", gpus=4, summed_at=timezone.now())
    memory = MemoryEntry.objects.create(
        type=EntryType.REFLECTION,
        agent_id=l1.id,
        project="demo",
        tags=["lr"],
        data={"text": "Smaller LR was steadier"},
    )
    return {
        "host": host,
        "gpu": gpu,
        "chat": chat,
        "turn": turn,
        "message": message,
        "l1": l1,
        "l3": l3,
        "request": request,
        "command": command,
        "event": event,
        "sweep": sweep,
        "run": run,
        "alert": alert,
        "memory": memory,
    }
