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

from agentsys.mcp.credentials import Credentials, remove_credentials, write_credentials

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


def take_back(agent, workdir: Path) -> None:
    """The loop ended: its MCP server's run tools lose the token (if it is still its)."""
    try:
        remove_credentials(workdir, agent.id)
    except OSError:
        logger.exception("%s: could not remove its MCP credentials", agent.id)
