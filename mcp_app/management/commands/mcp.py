"""`manage.py mcp [--workdir DIR]`: AgentSys as an MCP server over stdio for any MCP client (an
IDE agent, a CLI agent): the run and memory tools, list_directory and a person's approval
tools (agentsys.mcp.approval_tools), without quick_bash (the shell stays the research agent's
own, in its workdir).

The tools call AgentSys's REST API in this process (its ASGI app, no web server needed) with
the API token from AGENTSYS_API_TOKEN: no token, or one that is revoked or unknown, is refused
at start; each call is checked as the API checks a script's."""

from __future__ import annotations

import os
from pathlib import Path

from channels.routing import get_default_application
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from accounts_app.auth import authenticate_token
from agentsys.mcp.research_server import client_server
from agentsys.mcp.run_tools import AgentSysAPI
from common.no_web_checks import CHECKS_WITHOUT_THE_WEB
from mcp_app.rest_in_process import in_process_rest


class Command(BaseCommand):
    help = "Serve AgentSys's MCP tools over stdio (needs AGENTSYS_API_TOKEN)."
    requires_system_checks = CHECKS_WITHOUT_THE_WEB

    def add_arguments(self, parser):
        parser.add_argument("--workdir", default="", help="Default: AGENTSYS_WORKDIR")

    def handle(self, *args, workdir: str, **options):
        token = os.environ.get("AGENTSYS_API_TOKEN", "").strip()
        if not token:
            raise CommandError("AGENTSYS_API_TOKEN is not set: make one with manage.py apitoken")
        if authenticate_token(None, token) is None:
            raise CommandError("AGENTSYS_API_TOKEN is not a valid API token (revoked or unknown)")
        root = Path(workdir or settings.AGENTSYS_WORKDIR).resolve()
        if not root.is_dir():
            raise CommandError(f"--workdir: {root} is not a directory")
        # The project's ASGI app, found through settings.ASGI_APPLICATION as Channels finds
        # it: the project package sits above this app (it imports /mcp from here).
        api = AgentSysAPI("", token, client=in_process_rest(get_default_application()))
        client_server(root, api).run(show_banner=False)
