"""A research loop's start, first or again after a restart (agentsys.agents.research): its
settings; its state as it saved it (a resumed loop: found in its worktree, or in the workdir
when it made none) or a new one; its own branch opened, or reopened with its worktree made
again if someone removed it (agentsys.research.branch); its workdir's MCP servers carried into
that worktree; and its API token handed over to its model's MCP run tools there."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agentsys.git_exclude import keep_out_of_git
from agentsys.mcp.opencode_config import carry_servers
from agentsys.research import branch, tool_token
from agentsys.research.asking import ResearchFailed
from agentsys.research.llm import ModelGateway, OpenCodeGateway
from agentsys.research.settings import ResearchSettings
from agentsys.research.state import ResearchState
from agentsys.research.workspace import Workspace
from agentsys.run_dir import AGENTS_DIR
from agentsys.skills import PromptSkills


async def start(agent: Any) -> None:
    """Everything the loop needs before its first step: sets its settings, skills, branch
    (and branch_note), state, workspace, iteration and gateway."""
    agent.settings = settings = ResearchSettings.from_config(agent.config, agent.deployment)
    # Its files, its worktree, its runs' and its token's: never in anyone's `git status`.
    await asyncio.to_thread(keep_out_of_git, settings.workdir, f"{AGENTS_DIR}/")
    agent.skills = PromptSkills(settings.skills_dir)
    state = await resumed_state(agent) if agent.config.get("resume") else None
    agent.state = state or await _new_state(agent)
    root = work_root(agent)
    if agent.branch is not None:  # its model's MCP tools, working in its worktree
        await asyncio.to_thread(carry_servers, settings.workdir, root)
    agent.workspace = Workspace(root, agent.id, commits=agent.branch is not None)
    agent.iteration = agent.state.iteration
    agent.gateway = gateway(agent)
    await tool_token.hand_over(agent, root)  # for its MCP run tools
    if settings.include_uncommitted and not agent.state.history:
        await agent._commit(f"AgentSys {agent.id}: the researcher's uncommitted changes")


async def _new_state(agent: Any) -> ResearchState:
    settings = agent.settings
    agent.branch, agent.branch_note = await branch.open_branch(
        settings.workdir, agent.id, include_uncommitted=settings.include_uncommitted
    )
    return ResearchState(
        goal=agent.goal,
        max_iterations=settings.max_iterations,
        settings=settings.public(),
        branch=agent.branch.as_dict() if agent.branch else {},
        budget=dict(settings.budget),
    )


async def resumed_state(agent: Any) -> ResearchState | None:
    """The state it saved (in its worktree, or in the workdir when it made none), with its
    worktree made again if someone removed it."""
    agent.branch, agent.branch_note = None, ""
    workdir = agent.settings.workdir
    in_worktree = await branch.workdir_in_worktree(workdir, agent.id)
    for root in filter(None, (in_worktree, workdir)):
        state = ResearchState.load(Workspace(root, agent.id).state_path)
        if state is not None:
            agent.branch = branch.LoopBranch.from_dict(state.branch)
            trouble = await branch.reopen(agent.branch) if agent.branch else ""
            if trouble:
                raise ResearchFailed(trouble)
            return state
    return None


def work_root(agent: Any) -> Path:
    """Where it, its model and its runs work: its worktree's copy of the workdir (the workdir
    itself when it has no branch of its own)."""
    return Path(agent.branch.workdir) if agent.branch else agent.settings.workdir


def gateway(agent: Any) -> ModelGateway:
    """Its model, behind OpenCode, working in its worktree."""
    settings = agent.settings
    return OpenCodeGateway(
        url=settings.opencode_url,
        provider=settings.model_provider,
        model=settings.model_id,
        workdir=str(work_root(agent)),
        title=f"AgentSys research {agent.id}",
        timeouts=settings.timeouts,
        username=agent.deployment.opencode_username,
        password=agent.deployment.opencode_password,
    )
