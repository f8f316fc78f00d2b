"""`manage.py research start [GOAL] --follow`: start a research loop from the shell (the demo
loop when no goal is given) and watch it step by step until it ends; `research list`."""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand, CommandError

from agents_app.models import Agent
from agentsys.research.budget import CAPS
from agentsys.types import TERMINAL_AGENT_STATUSES
from common.db_outage import DATABASE_ERRORS, first_line, wait_for_database_saying
from research_app import selectors, services
from research_app.console import step_lines

DEMO_GOAL = (
    "Find the learning rate that gives train.py the lowest final loss, with a few short runs."
)


class Command(BaseCommand):
    help = "Start a research loop (the demo one by default) and follow it; or list them."

    def add_arguments(self, parser):
        actions = parser.add_subparsers(dest="action", required=True)
        start = actions.add_parser("start", help="Start a research loop")
        start.add_argument("goal", nargs="?", default=DEMO_GOAL)
        start.add_argument("--max-iterations", type=int, default=5)
        start.add_argument("--wait-seconds", type=float, default=5)
        start.add_argument("--autonomy", default="balanced", choices=services.AUTONOMY_LEVELS)
        start.add_argument("--workdir", default=None, help="Default: AGENTSYS_WORKDIR")
        start.add_argument("--follow", action="store_true", help="Print each step until it ends")
        for cap, words in (
            ("llm_tokens", "model tokens"),
            ("llm_usd", "USD the model may cost"),
            ("gpu_hours", "GPU-hours"),
            ("wall_hours", "hours it may run"),
        ):
            start.add_argument(f"--{cap.replace('_', '-')}", type=float, help=f"Cap: {words}")
        start.add_argument("--timeout", type=float, default=1800, help="Seconds to follow")
        actions.add_parser("list", help="Research loops, newest first")

    def handle(self, *args, action, **options):
        try:
            self._act(action, options)
        except DATABASE_ERRORS as error:  # one line, not a traceback
            raise CommandError(
                f"the database is unavailable ({first_line(error)}); try again once it is back"
            ) from None

    def _act(self, action, options):
        if action == "list":
            for loop in selectors.loops(limit=50, offset=0):
                s = selectors.summary(loop)
                self.stdout.write(
                    f"{s['id']}  {s['status']:8} it {s['iteration']:>3}  {s['goal'][:70]}"
                )
            return
        try:
            loop = services.start_research(
                goal=options["goal"],
                max_iterations=options["max_iterations"],
                wait_seconds=options["wait_seconds"],
                autonomy_level=options["autonomy"],
                workdir=options["workdir"],
                budget={k: options[k] for k in CAPS if options.get(k) is not None} or None,
            )
        except services.ResearchRefused as refused:
            raise CommandError(str(refused)) from None
        self.stdout.write(f"research loop {loop.agent_id} started in {loop.settings['workdir']}")
        self.stdout.write(f"  follow it: GET /api/research/{loop.agent_id}")
        if options["follow"]:
            self._follow(loop.agent_id, options["timeout"])

    def _follow(self, loop_id: str, timeout: float) -> None:
        shown, asked = 0, ""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            # An outage meanwhile is waited out, said in a line: the loop goes on without us.
            detail = wait_for_database_saying(self.stderr.write, self._detail, loop_id)
            history = detail["history"]
            for step in history[shown:]:
                text = step_lines(step, plan=detail["plan"], reflection=detail["reflection"])
                self.stdout.write(text)
            shown = len(history)
            reason = (detail.get("approval") or {}).get("reason", "")
            if reason and reason != asked:  # said once; the person answers elsewhere
                self.stdout.write(
                    f"waiting for your approval: {reason}\n  approve on its page, or "
                    f"POST /api/research/{loop_id}/approve"
                )
            asked = reason
            agent = detail["agent"]
            if agent.status in TERMINAL_AGENT_STATUSES:
                self.stdout.write(f"research loop {loop_id}: {agent.status} {agent.error}".rstrip())
                self.stdout.write(spent_line(detail["spent"], detail.get("budget") or {}))
                if agent.status != "done":
                    raise CommandError(f"the loop ended {agent.status}: {agent.error}")
                return
            time.sleep(0.5)
        raise CommandError(f"still running after {timeout:.0f} s; see GET /api/research/{loop_id}")

    @staticmethod
    def _detail(loop_id: str) -> dict:
        return {**selectors.detail(selectors.loop(loop_id)), "agent": Agent.objects.get(pk=loop_id)}


def spent_line(spent: dict, caps: dict) -> str:
    """What the loop spent, each beside its cap when it had one."""

    def of(name: str, text: str, cap_text) -> str:
        return f"{text} (cap {cap_text(caps[name])})" if name in caps else text

    return "spent: " + ", ".join(
        [
            of("llm_tokens", f"{spent['llm_tokens']:,} model tokens", lambda c: f"{c:,.0f}"),
            of("llm_usd", f"${spent['llm_usd']:.4f}", lambda c: f"${c:g}"),
            of("gpu_hours", f"{spent['gpu_hours']:.4f} GPU-hours", lambda c: f"{c:g}"),
            of("wall_hours", f"{spent['wall_hours'] * 60:.1f} min", lambda c: f"{c * 60:g} min"),
        ]
    )
