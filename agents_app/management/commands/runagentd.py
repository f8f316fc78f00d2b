"""`manage.py runagentd`: host the agents of this machine. Thin: parse, log, run the daemon."""

from __future__ import annotations

import asyncio

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from agentsys.daemon import Daemon, DaemonSettings
from researchagent.config import ConfigError, check_host_name
from scheduler_app.daemon_store import DjangoDaemonStore


class Command(BaseCommand):
    help = "Run the AgentSys daemon: registers this host and hosts its agents and runs."

    def add_arguments(self, parser):
        parser.add_argument(
            "--host-name",
            default=settings.AGENTSYS.host_name,
            help="Name to register this host under (default: AGENTSYS_HOST_NAME or hostname)",
        )
        parser.add_argument(
            "--heartbeat",
            type=float,
            default=5.0,
            help="Seconds between heartbeats (default 5)",
        )

    def handle(self, *args, **options):
        try:
            check_host_name(options["host_name"])
        except ConfigError as exc:
            raise CommandError(f"--host-name: {exc}") from None
        if options["heartbeat"] <= 0:
            raise CommandError("--heartbeat: must be a positive number of seconds")
        daemon = Daemon(
            DjangoDaemonStore(),
            DaemonSettings(
                host_name=options["host_name"],
                declared_gpus=settings.AGENTSYS.gpus,
                heartbeat_interval=options["heartbeat"],
            ),
        )
        asyncio.run(daemon.run())
