"""`RunPort` on PostgreSQL (agentsys.run_port.RunPort): one agent's way to its Run's rows
(metric series, tracking, log, code, checkout) in scheduler_app, apart from its memory
(runtime_app/memory_view.py), which a run's record is not."""

from __future__ import annotations

from django.utils import timezone

from agentsys.run_waits import RunState
from common.listen_dsn import listen_dsn
from ledger_app.selectors import spent_by_loop
from runtime_app.fresh_connection import fresh_connection
from scheduler_app import run_wait_reads
from scheduler_app.metrics.series import record_rows
from scheduler_app.models import MetricSeries, Run
from scheduler_app.queue.spend import held_gpu_hours
from scheduler_app.runs import code as run_code
from scheduler_app.runs import log_reader as run_log_reader
from scheduler_app.runs import log_store as run_log_store
from scheduler_app.runs.launch import record_stopped_by, record_tracking
from scheduler_app.sweeps import rungs


class DjangoRunPort:
    def __init__(self, agent_id: str, run_id: str = ""):
        self.agent_id = agent_id
        self.run_id = run_id  # the Run this executor runs; "" for a research loop's harness
        self._log_run: str | None = None  # the run whose log this executor ships

    # -- the run's record --------------------------------------------------------------------

    def write_metrics(self, *, rows: list[dict], source: str = "jsonl") -> int:
        with fresh_connection():
            return record_rows(agent_id=self.agent_id, run_id=self.run_id, rows=rows, source=source)

    def write_run_tracking(self, *, params: dict, urls: dict) -> bool:
        if not self.run_id:
            return False  # an executor with no Run row (a research loop's own test harness)
        with fresh_connection():
            return record_tracking(run_id=self.run_id, params=params, urls=urls)

    def write_stopped_by(self, *, words: str) -> bool:
        if not self.run_id:
            return False
        with fresh_connection():
            return record_stopped_by(run_id=self.run_id, words=words)

    def judge_at_rung(
        self, *, rung: int, value: float, step: int, ended: bool = False
    ) -> tuple[bool, str] | None:
        if not self.run_id:
            return None
        with fresh_connection():
            judged = rungs.judge(run_id=self.run_id, rung=rung, value=value, step=step, ended=ended)
        return None if judged is None else (judged.keep, judged.words)

    # -- its log -----------------------------------------------------------------------------

    def run_log_position(self) -> tuple[int, bool] | None:
        with fresh_connection():
            found = run_log_store.log_position(agent_id=self.agent_id)
        if found is None:
            return None
        self._log_run, shipped, capped = found
        return shipped, capped

    def append_run_log(self, *, offset: int, data: bytes, capped: bool = False) -> tuple[int, bool]:
        if self._log_run is None:
            self.run_log_position()
        if self._log_run is None:
            raise LookupError(f"{self.agent_id} runs no Run: its log has nowhere to go")
        with fresh_connection():
            return run_log_store.append_log(
                run_id=self._log_run, offset=offset, data=data, capped=capped
            )

    def run_outcome(self, *, agent_id: str, tail_bytes: int) -> dict | None:
        with fresh_connection():
            run = Run.objects.filter(agent_id=agent_id).select_related("agent__host").first()
            if run is None:
                return None
            data, cut = run_log_reader.tail(run, tail_bytes)
            return {"exit_code": run.exit_code, "log_tail": data, "cut": cut}

    def run_of(self, *, agent_id: str) -> str | None:
        with fresh_connection():
            return Run.objects.filter(agent_id=agent_id).values_list("id", flat=True).first()

    def run_metrics(self, *, agent_id: str) -> dict[str, dict]:
        with fresh_connection():
            rows = MetricSeries.objects.filter(agent_id=agent_id).values_list(
                "key", "last_value", "min_value", "max_value", "points", "last_step"
            )
            return {
                key: {"last": last, "min": low, "max": high, "points": points, "last_step": step}
                for key, last, low, high, points, step in rows
                if points
            }

    def run_stopped_by(self, *, agent_id: str) -> str:
        with fresh_connection():
            found = Run.objects.filter(agent_id=agent_id).values_list("stopped_by", flat=True)
            return found.first() or ""

    def run_states(self, *, run_ids: list[str]) -> dict[str, RunState]:
        with fresh_connection():
            return run_wait_reads.run_states(run_ids)

    def runs_news_dsn(self) -> str | None:
        return listen_dsn()

    def loop_spent(self, *, loop_id: str) -> dict:
        with fresh_connection():
            spent = spent_by_loop(loop_id)
            spent["gpu_hours"] += held_gpu_hours(loop_id, timezone.now())  # runs going on
            return spent

    # -- its code ----------------------------------------------------------------------------

    def run_code(self) -> dict | None:
        with fresh_connection():
            return run_code.code_for_agent(self.agent_id)

    def code_bundle(self, *, commit: str) -> tuple[bytes, str] | None:
        with fresh_connection():
            return run_code.bundle_of(commit)

    def record_checkout(self, *, code_dir: str, run_dir: str) -> bool:
        with fresh_connection():
            return run_code.record_checkout(
                agent_id=self.agent_id, code_dir=code_dir, run_dir=run_dir
            )
