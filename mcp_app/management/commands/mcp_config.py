"""`manage.py mcp_config [--workdir DIR]`: put AgentSys's MCP servers (research-agent, and
slurm where SLURM is installed) into the workdir's opencode.json, merged into what is there,
saying what changed."""

from __future__ import annotations

import shutil
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from agentsys.mcp.opencode_config import ConfigRefused, merge_servers, server_entries


class Command(BaseCommand):
    help = "Add AgentSys's MCP servers to the workdir's opencode.json (merged, never replaced)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--workdir", default="", help="Default: AGENTSYS_WORKDIR (or the demo workspace)"
        )

    def handle(self, *args, workdir: str, **options):
        root = Path(workdir or settings.AGENTSYS_WORKDIR).resolve()
        if not root.is_dir():
            raise CommandError(f"--workdir: {root} is not a directory")
        entries = server_entries(root, slurm=shutil.which("sbatch") is not None)
        try:
            said = merge_servers(root, entries)
        except ConfigRefused as refused:
            raise CommandError(str(refused)) from None
        for line in said:
            self.stdout.write(f"{root / 'opencode.json'}: {line}")
