"""Where a run and a research loop keep their files in the workdir, and the small files that
more than one process reads.

Everything AgentSys writes in a workdir is under `.agents/` (never committed by the research
loop: it is not the project's work).

A run (one executor) has `.agents/runs/<agent id>/`:

- command.txt: the command, run as `/bin/sh command.txt`; written by the executor.
- run.log: the command's stdout and stderr as they come (a retry appends a marker line, then
  its own output); written by the command, read by the executor, the API and the chat.
- job.pid: `<pid> <start time>`, the run's session leader and its start time in clock ticks
  since boot (empty when it could not be read), so that a pid reused since is not taken for
  the run; written by the executor at each start, read by a re-adopting executor, by `serve`
  and by `manage.py runs`.
- job.done: the exit code and a newline; written by the executor's wrapper shell when the
  command ends (replaced atomically), or TERMINATED_CODE by whoever stopped the run, unless
  the wrapper wrote it first. Its absence means the run has not ended.
- slurm_job.sh, slurm_job: a SLURM run's batch script (the same wrapper as a local run's, as
  a file for sbatch) and its job id; written by the executor at submit, read by a
  re-adopting executor and by the supervisor when it must cancel a job whose worker is gone.
  job.started: created by that script as the job starts (how the run shows running at once).
- agent_metrics.jsonl: one JSON object per line, what the training script logs (it finds
  the directory in AGENTSYS_RUN_DIR).
- metrics.pos: `<offset> <inode>`, how far the executor has stored agent_metrics.jsonl, so
  that a re-adopted run neither loses nor repeats a row; the executor's own.
- wandb/: WANDB_DIR of the command; a run that sets no W&B mode or key logs offline there
  (`wandb/wandb/offline-run-*/run-*.wandb`, read by agentsys.metric_sources.wandb_offline).
- mlruns/: the MLflow file store of a run that has no MLFLOW_TRACKING_URI of its own (the
  executor points it here; read by agentsys.metric_sources.mlflow_store).

A run whose workdir is on another host runs in a checkout of its recorded code, made by its
executor in that host's AGENTSYS_WORKDIR, `.agents/checkouts/<agent id>/`
(agentsys.agents.run_checkout); its run directory is then inside that checkout, whose
`.agents/checkout.json` says which commit and patch it holds.

A research loop has `.agents/wild/<agent id>/` (agentsys.research.workspace writes it):
tasks.md (its plan), iteration_log.md (one section per iteration), state.json (what it needs
to resume, agentsys.research.state), snapshot.txt (the workdir's files at the last iteration).
While a loop runs, `.agents/mcp/credentials.json` (mode 0600) holds its API token for the run
tools of the workdir's MCP server (agentsys.mcp.credentials: the loop writes it, the server
reads it at each call).
"""

from __future__ import annotations

import signal
from pathlib import Path

AGENTS_DIR = ".agents"  # everything of AgentSys's in a workdir
RUNS_DIR = "runs"
LOOPS_DIR = "wild"
CHECKOUTS_DIR = "checkouts"  # a host's checkouts of runs' code (agentsys.agents.run_checkout)
CHECKOUT_MARK = "checkout.json"  # in a checkout's .agents/: it is complete, and of what

COMMAND_FILE = "command.txt"
LOG_FILE = "run.log"
PID_FILE = "job.pid"
EXIT_CODE_FILE = "job.done"
SLURM_SCRIPT_FILE = "slurm_job.sh"
SLURM_JOB_FILE = "slurm_job"
METRICS_FILE = "agent_metrics.jsonl"
METRICS_POSITION_FILE = "metrics.pos"
WANDB_DIR = "wandb"
MLFLOW_DIR = "mlruns"

TASKS_FILE = "tasks.md"
ITERATION_LOG_FILE = "iteration_log.md"
STATE_FILE = "state.json"
SNAPSHOT_FILE = "snapshot.txt"

TERMINATED_CODE = 128 + signal.SIGTERM  # the shell's code for "ended by a signal"


def run_dir_of(workdir: str | Path, agent_id: str) -> Path:
    """The run directory of executor `agent_id` in `workdir`."""
    return Path(workdir) / AGENTS_DIR / RUNS_DIR / agent_id


def loop_dir_of(workdir: str | Path, agent_id: str) -> Path:
    """The directory of research loop `agent_id` in `workdir`."""
    return Path(workdir) / AGENTS_DIR / LOOPS_DIR / agent_id


def write_pid_file(run_dir: Path, pid: int, start_time: str) -> None:
    # Replaced whole: a runagentd killed mid-write must not leave an empty job.pid.
    tmp = run_dir / f"{PID_FILE}.tmp"
    tmp.write_text(f"{pid} {start_time}")
    tmp.replace(run_dir / PID_FILE)


def read_pid_file(run_dir: Path) -> tuple[int, str] | None:
    """(pid, start time) from job.pid, the start time "" when it was not recorded; None when
    there is no such file or it does not start with a pid."""
    try:
        parts = (run_dir / PID_FILE).read_text().split()
        return int(parts[0]), (parts[1] if len(parts) > 1 else "")
    except (OSError, ValueError, IndexError):
        return None


def read_slurm_job(run_dir: Path) -> int | None:
    """The SLURM job id the executor submitted, or None when it never did."""
    try:
        return int((run_dir / SLURM_JOB_FILE).read_text().strip())
    except (OSError, ValueError):
        return None


def read_exit_code(run_dir: Path) -> int | None:
    """The code in job.done; None while there is none (the run has not ended) or it is not a
    number."""
    try:
        return int((run_dir / EXIT_CODE_FILE).read_text().strip())
    except (OSError, ValueError):
        return None


def record_terminated(run_dir: Path) -> None:
    """Say the run ended by a stop, unless it had already recorded its own exit code: a run
    adopted later then reads that it ended."""
    done = run_dir / EXIT_CODE_FILE
    if not done.exists():
        done.write_text(f"{TERMINATED_CODE}\n")
