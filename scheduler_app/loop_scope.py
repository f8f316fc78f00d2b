"""What a research loop's own API token may change, and whom it acts for (issue 34).

The token is held by an MCP server that a model drives, and the model reads untrusted text
(run logs, files, web pages): whatever the token can do, a prompt injection can. So it acts
for the person who started the loop (`owner_of_loop`: it reads what they may read) and
changes only what is the loop's own:

- its sweeps: the loop's sweep, where its experiments run, and any its token made
  (POST /api/sweeps records the loop as `created_by_agent`);
- its runs: the runs of its sweeps. A new run joins the loop's sweep unless it names another
  of its sweeps; a rerun joins the sweep of the run it repeats.

Every write route a loop's token may reach (common.api_contract.AGENT_WRITES) asks here before
it writes; a refusal is a LoopRefused, which the API answers 403 with its reason
(researchagent.api). A person's token, a login session and the deployment's token pass untouched
(agent_id "")."""

from __future__ import annotations

from agents_app.models import Agent
from scheduler_app.models import Run, Sweep


class LoopRefused(Exception):
    """A loop's token asked to change what is not the loop's own (the message says why)."""


def loop_sweep(agent_id: str) -> str | None:
    """The sweep of loop `agent_id`, where its experiments and the runs its token makes go."""
    sweep = Agent.objects.filter(pk=agent_id).values_list("sweep", flat=True).first()
    return sweep if sweep and Sweep.objects.filter(pk=sweep).exists() else None


def sweeps_of_loop(agent_id: str) -> list[str]:
    """The loop's own sweeps: its sweep first, then those its token made."""
    made = Sweep.objects.filter(created_by_agent=agent_id).order_by("created_at", "id")
    own = loop_sweep(agent_id)
    return ([own] if own else []) + [pk for pk in made.values_list("pk", flat=True) if pk != own]


def owner_of_loop(agent_id: str):
    """The person who started loop `agent_id` (recorded on its sweep), or None (a script
    with the deployment's token, or a chat no person owns, started it)."""
    sweep = Sweep.objects.filter(pk=loop_sweep(agent_id) or "").select_related("created_by")
    found = sweep.first()
    return found.created_by if found is not None else None


def _refusal(agent_id: str, what: str) -> LoopRefused:
    own = ", ".join(sweeps_of_loop(agent_id)) or "none: the loop has no sweep"
    return LoopRefused(
        f"this loop's token may only act on runs of its own sweep ({own}); {what}: ask the "
        "person who started the loop"
    )


def sweep_for_new_run(agent_id: str, sweep_id: str | None) -> str | None:
    """The sweep a run made with `agent_id`'s token joins: the one it names if it is the
    loop's own, the loop's sweep if it names none. Anyone else's choice is theirs."""
    if not agent_id:
        return sweep_id
    if sweep_id is None:
        return loop_sweep(agent_id)
    if sweep_id not in sweeps_of_loop(agent_id):
        raise _refusal(agent_id, f"sweep {sweep_id[:64]!r} is not one of them")
    return sweep_id


def check_run(agent_id: str, run_id: str) -> None:
    """Refuse `agent_id`'s token a change to run `run_id` unless the run is of its sweeps."""
    if not agent_id:
        return
    sweep = Run.objects.filter(pk=run_id).values_list("sweep_id", flat=True).first()
    if sweep is None or sweep not in sweeps_of_loop(agent_id):
        where = f"in sweep {sweep}" if sweep else "in no sweep"
        raise _refusal(agent_id, f"run {run_id[:64]} is {where}")
