"""`manage.py runagentd`: host the agents of this machine. Thin: parse, log, run the daemon."""

from __future__ import annotations

import asyncio
import faulthandler
import signal
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connections

from agentsys import forkserver
from agentsys.daemon import Daemon, DaemonSettings
from agentsys.deployment import Deployment
from agentsys.opencode import Timeouts
from agentsys.run_dir import AGENTS_DIR, CHECKOUTS_DIR
from agentsys.slurm.poller import SlurmUnavailable
from common.db_outage import stop_waiting
from common.environment import ConfigError, check_host_name
from common.listen_dsn import listen_dsn
from common.no_web_checks import CHECKS_WITHOUT_THE_WEB
from events_app.events import publish_message, publish_through
from events_app.live import verify_channel_layer
from runtime_app.chat_store import DjangoChatStore
from runtime_app.runtime_store import DjangoRuntimeStore

WORKER_PRELOAD = ("runtime_app.worker_boot",)


def deployment(host_name: str = "") -> Deployment:
    """What every agent gets from the configuration (agentsys reads no environment)."""
    config = settings.AGENTSYS
    return Deployment(
        host_name=host_name or config.host_name,
        checkouts_dir=str(Path(settings.AGENTSYS_WORKDIR) / AGENTS_DIR / CHECKOUTS_DIR),
        code_cache_dir=str(Path(settings.AGENTSYS_HOME) / "code-cache.git"),
        workdir=str(config.workdir or ""),
        model_provider=config.model_provider,
        model_id=config.model_id,
        opencode_url=config.opencode_url,
        opencode_username=config.opencode_username,
        opencode_password=config.opencode_password,
        timeouts=Timeouts(
            first_token=float(config.model_first_token_timeout),
            total=float(config.model_response_timeout),
            idle=float(config.model_idle_timeout),
        ),
        slurm_options=dict(config.slurm_options),
        api_url=config.api_url,
        log_db_cap_bytes=config.log_db_cap_mb * 2**20,
    )


class Command(BaseCommand):
    help = "Run the AgentSys daemon: registers this host and hosts its agents and runs."
    requires_system_checks = CHECKS_WITHOUT_THE_WEB

    def add_arguments(self, parser):
        parser.add_argument(
            "--host-name",
            default=settings.AGENTSYS.host_name,
            help="Name to register this host under (default: AGENTSYS_HOST_NAME or hostname)",
        )
        parser.add_argument(
            "--heartbeat", type=float, default=5.0, help="Seconds between heartbeats"
        )
        parser.add_argument(
            "--stop-grace",
            type=float,
            default=5.0,
            help="Seconds an agent gets to stop before SIGTERM, then SIGKILL (default 5)",
        )

        parser.add_argument(
            "--poll",
            type=float,
            default=5.0,
            help="Seconds between fallback polls of the database; LISTEN/NOTIFY wakes the "
            "daemon at once for new work, commands and freed GPUs (default 5)",
        )
        parser.add_argument(
            "--dead-after",
            type=float,
            default=20.0,
            help="Seconds without a heartbeat before another host is declared dead (default 20)",
        )

    def handle(self, *args, **options):
        # `kill -USR1 <pid>` prints every thread's stack to stderr: where a daemon that will
        # not stop (or not progress) is waiting.
        faulthandler.register(signal.SIGUSR1, all_threads=True)
        try:
            check_host_name(options["host_name"])
        except ConfigError as exc:
            raise CommandError(f"--host-name: {exc}") from None
        for name in ("heartbeat", "stop_grace", "dead_after", "poll"):
            if options[name] <= 0:
                raise CommandError(f"--{name.replace('_', '-')}: must be a positive number")
        daemon = Daemon(
            DjangoRuntimeStore(),
            DaemonSettings(
                host_name=options["host_name"],
                declared_gpus=settings.AGENTSYS.gpus,
                labels=settings.AGENTSYS.host_labels,
                heartbeat_interval=options["heartbeat"],
                poll_interval=options["poll"],
                stop_grace=options["stop_grace"],
                dead_host_after=max(options["dead_after"], options["heartbeat"] * 3),
                listen_dsn=listen_dsn(),
                allowed_classes=settings.AGENTSYS.extra_agent_classes,
                forkserver_preload=WORKER_PRELOAD,
                scheduler_policy=settings.AGENTSYS.scheduler_policy,
                queue_shares=settings.AGENTSYS.queue_shares,
                foreign_gpu_min_mb=settings.AGENTSYS.foreign_gpu_min_mb,
                memory_factory="runtime_app.agent_ports:memory_view",
                run_port_factory="runtime_app.agent_ports:run_port",
                default_workdir=str(settings.AGENTSYS_WORKDIR),
                deployment=deployment(options["host_name"]),
                slurm=settings.AGENTSYS.slurm,
                slurm_max_jobs=settings.AGENTSYS.slurm_max_jobs,
                metrics_compact_after_days=settings.AGENTSYS.metrics_compact_after_days,
            ),
            publish=publish_message,
            on_stopping=stop_waiting,
            chat_store=DjangoChatStore(),  # every runagentd serves the chat sessions' turns
        )
        # The workers' forkserver, forked from here while this is the only thread: Django
        # is imported once, not again in a fresh interpreter (agentsys.forkserver).
        connections.close_all()
        forkserver.fork_here(WORKER_PRELOAD)
        asyncio.run(self._run(daemon))

    async def _run(self, daemon: Daemon) -> None:
        await verify_channel_layer()
        # Events its agents' memory threads record are published from this loop.
        publish_through(asyncio.get_running_loop())
        try:
            await daemon.run()
        except SlurmUnavailable as error:
            raise CommandError(str(error)) from None
        finally:
            # In-daemon agents' memory calls may be waiting for the database in threads,
            # which asyncio.run waits for on exit: stop within the 5 s promised.
            stop_waiting()
