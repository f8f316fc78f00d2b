"""A run as the runtime sees it, with no Django here: the port an agent reaches its Run's
rows through (its metric series, tracking, log, code and checkout).

It is separate from `agentsys.memory.MemoryView` because a run's rows are not memory: memory
is what agents write for one another to read back (entries, messages, context, the memory
bank, alerts); a run's metrics, log and code are the record of one run, stored in its own
tables, read by people and by the run's own executor. Keeping them apart lets an agent with
memory and no run (a research loop reading only outcomes), or a fake of either, stand alone.

`RunPort` is bound to one agent (its executor, for the methods about "this run"). Its
methods are synchronous (they reach the database); agents call them off the event loop
through `Agent.record_metrics` and `Agent.in_runs`. runtime_app/run_port.py implements it
on scheduler_app's tables."""

from __future__ import annotations

from typing import Protocol

from agentsys.run_waits import RunState


class RunPort(Protocol):
    agent_id: str

    def write_metrics(self, *, rows: list[dict], source: str = "jsonl") -> int:
        """A run's metric rows (agent_metrics.jsonl) into its series, not into memory
        entries: returns the number of points stored."""
        ...

    def write_run_tracking(self, *, params: dict, urls: dict) -> bool:
        """What the run's script logged about itself (its trackers' params) and the online
        tracker runs it printed ({tracker: url}) onto its run; False when it has none."""
        ...

    def write_stopped_by(self, *, words: str) -> bool:
        """The stop rule (agentsys.stop_rules) that is ending this run, with the value that
        met it, onto its run before it is stopped; False when it has no open run."""
        ...

    def judge_at_rung(
        self, *, rung: int, value: float, step: int, ended: bool = False
    ) -> tuple[bool, str] | None:
        """This run's metric reached a rung of its sweep's early stopping (agentsys.asha) with
        `value` at `step`: does it go on? (keep, words), the same answer each time it asks;
        None when its sweep has no early stopping. `ended`: read after the run ended."""
        ...

    def run_log_position(self) -> tuple[int, bool] | None:
        """How much of this executor's run log the database holds (bytes, capped), where its
        LogShipper (agentsys.log_shipping) goes on from; None when it runs no Run."""
        ...

    def append_run_log(self, *, offset: int, data: bytes, capped: bool = False) -> tuple[int, bool]:
        """Store `data` at byte `offset` of the run's log, only when that is where the stored
        log ends (one transaction); returns the stored log's (end, capped) after."""
        ...

    def run_outcome(self, *, agent_id: str, tail_bytes: int) -> dict | None:
        """The run executor `agent_id` ran, as the database has it, for a research loop on
        another host: {"exit_code", "log_tail" (bytes), "cut" (the tail is not the whole
        log)}; None when there is no such run."""
        ...

    def run_of(self, *, agent_id: str) -> str | None:
        """The id of the Run executor `agent_id` runs (the one its page and the API name it
        by); None when it runs none."""
        ...

    def run_metrics(self, *, agent_id: str) -> dict[str, dict]:
        """The stored metric series of the run executor `agent_id` ran, from every source, as
        agentsys.metric_summary summarizes a file: {key: {last, min, max, points, last_step}}
        (for a run stopped before its executor wrote its result)."""
        ...

    def run_stopped_by(self, *, agent_id: str) -> str:
        """What stopped the run executor `agent_id` ran, when a stop rule or its sweep's early
        stopping did (its `stopped_by`); "" otherwise."""
        ...

    def run_states(self, *, run_ids: list[str]) -> dict[str, RunState]:
        """The runs of `run_ids` that exist as agentsys.run_waits' conditions see them
        (status, each metric's last value and step, the newest alert), by run id."""
        ...

    def runs_news_dsn(self) -> str | None:
        """Where to LISTEN for news of runs (agentsys.run_waiters.RUNS_CHANNEL): libpq
        conninfo, or None when there is none to listen to (then waits read on a timer)."""
        ...

    def loop_spent(self, *, loop_id: str) -> dict:
        """What research loop `loop_id` spent, from the ledger: {llm_tokens, llm_usd,
        gpu_hours} (its model steps and its runs' GPU time, those still running so far)."""
        ...

    def run_code(self) -> dict | None:
        """The code recorded for this executor's run (scheduler_app.runs.code.code_for_agent:
        commit, patch bytes, patch_digest, remote, host, subdir, error); None: no run."""
        ...

    def code_bundle(self, *, commit: str) -> tuple[bytes, str] | None:
        """The stored git bundle of `commit` and the commit it builds on ("" when it holds
        the whole history); None when none is stored."""
        ...

    def record_checkout(self, *, code_dir: str, run_dir: str) -> bool:
        """The run runs in a checkout of its code at `code_dir`, its files in `run_dir`."""
        ...
