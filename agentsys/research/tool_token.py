"""A research loop's API token of its own, for the run tools of its workdir's MCP server
(agentsys.mcp.research_server): issued at each start (a resumed loop gets a fresh one, its
earlier ones revoked), handed over in `.agents/mcp/credentials.json`
(agentsys.mcp.credentials), and taken back at the loop's end (the file removed here; the token
revoked with the agent's end by the runtime). Runs the tools make join the loop's sweep and
name the loop as their creator.

Neither step can fail the loop: without a token the run tools answer that no loop runs there,
and the loop's own experiments go on as before.
"""

from __future__ import annotations

import logging
from pathlib import Path

from agentsys.mcp.credentials import (
    Credentials,
    NoCredentials,
    read_credentials,
    remove_credentials,
    write_credentials,
)

logger = logging.getLogger("agentsys.research")


async def hand_over(agent, workdir: Path) -> bool:
    """Issue the loop's token and write it for the MCP server; False (logged) if it cannot."""
    url = agent.deployment.api_url
    if not url or agent.memory is None:
        logger.info("%s: no API address or no memory: its MCP run tools get no token", agent.id)
        return False
    try:
        token = await agent.in_memory("issue_api_token")
        credentials = Credentials(
            url=url, token=token, sweep_id=agent.scope.sweep or "", agent_id=agent.id
        )
        write_credentials(workdir, credentials)
    except Exception:  # the loop goes on; its run tools say that they have no token
        logger.exception("%s: could not hand its MCP run tools a token", agent.id)
        return False
    return True


async def lend_to_chat(agent, workdir: Path) -> bool:
    """A chat's SessionAgent: its own token for the MCP tools of its workdir (wait_runs,
    get_run, ...), acting for the chat's owner, written while no one else's is there (a
    loop's, working in the same folder, takes precedence). Issued afresh at its first turn of
    each process's life (the file's token, from before a restart, was revoked with the old
    one); True when the file holds its token."""
    try:
        holder = read_credentials(workdir).agent_id
    except NoCredentials:
        holder = None
    lent = agent.__dict__.setdefault("_lent_token_to", set())
    if holder is not None and holder != agent.id:
        return False
    if holder == agent.id and str(workdir) in lent:
        return True
    if await hand_over(agent, workdir):
        lent.add(str(workdir))
        return True
    return False


def take_back_lent(agent) -> None:
    """The chat's agent stops: the tokens it lent its workdirs' MCP servers are taken back."""
    for workdir in agent.__dict__.get("_lent_token_to", ()):
        take_back(agent, Path(workdir))


def take_back(agent, workdir: Path) -> None:
    """The loop ended: its MCP server's run tools lose the token (if it is still its)."""
    try:
        remove_credentials(workdir, agent.id)
    except OSError:
        logger.exception("%s: could not remove its MCP credentials", agent.id)
