"""SLURM figures (issue 22), against the real cluster of scripts/slurm_up.sh:

- slurm_submit_overhead_p50_ms: AgentSys's own cost of taking a run to a running SLURM job,
  one run at a time with a real runagentd submitting: from create_run (what POST /api/runs
  does) to its executor writing the batch script just before it calls sbatch, plus from the
  job's first instruction (it creates job.started) to the run row saying `running`. What lies
  between is sbatch and SLURM's scheduling, which are SLURM's. Side by side on the same
  cluster, the medians of the whole path (create_run → row running) and of sbatch alone (its
  call → squeue says RUNNING, asked every 10 ms) are printed too; SLURM's own scheduling
  delay varies by hundreds of ms from job to job, so their difference says little.
- slurm_poll_ms_200_runs: one tick of runagentd's SLURM poller (agentsys.slurm.poller) for 200
  SLURM runs (100 waiting in SLURM's queue, held; 100 ended, read by sacct), p50 of 30 ticks.

Needs root on a Debian machine (scripts/slurm_up.sh installs SLURM) or a SLURM cluster up."""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._report import percentile, report

REPO = Path(__file__).resolve().parent.parent
SAMPLES = 15
POLL_RUNS = 200


def _squeue_state(job_id: int) -> str:
    out = subprocess.run(
        ["squeue", "-h", "-j", str(job_id), "-o", "%T"], capture_output=True, text=True
    ).stdout
    return out.strip()


def sbatch_to_running(workdir: Path, samples: int) -> list[float]:
    """sbatch alone: its call → squeue says RUNNING (ms)."""
    script = workdir / "raw.sh"
    script.write_text("#!/bin/sh\nsleep 0.2\n")
    times = []
    for _ in range(samples):
        start = time.monotonic()
        job_id = int(
            subprocess.run(
                ["sbatch", "--parsable", "-o", "/dev/null", str(script)],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.split(";")[0]
        )
        while _squeue_state(job_id) not in ("RUNNING", "COMPLETING", ""):
            time.sleep(0.01)
        times.append((time.monotonic() - start) * 1000)
        _wait_idle()
    return times


def _wait_idle() -> None:
    while subprocess.run(["squeue", "-h"], capture_output=True, text=True).stdout.strip():
        time.sleep(0.05)


def agentsys_to_running(workdir: Path, samples: int) -> tuple[list[float], list[float]]:
    """Runs through AgentSys: create_run(auto_start) → its row says running, and of that
    AgentSys's own part (before sbatch, and after the job started), in ms."""
    from scheduler_app.models import Run, RunStatus
    from scheduler_app.runs import launch as runs

    times, own = [], []
    for _ in range(samples):
        start, wall_start = time.monotonic(), time.time()
        run = runs.create_run(
            name="bench",
            command="sleep 0.2",
            workdir=str(workdir),
            auto_start=True,
            executor_options={"backend": "slurm"},
        )
        rows = Run.objects.filter(pk=run.pk)
        while not rows.filter(status__in=[RunStatus.RUNNING, RunStatus.DONE]).exists():
            time.sleep(0.002)
        times.append((time.monotonic() - start) * 1000)
        seen_running = time.time()
        run_dir = Path(rows.get().run_dir)
        before_sbatch = (run_dir / "slurm_job.sh").stat().st_mtime - wall_start
        # squeue may say RUNNING (the poller tells the executor) before the job's first line
        # has run: then the row was ahead of the job, and AgentSys added nothing after it.
        started_file = run_dir / "job.started"
        while not started_file.exists():
            time.sleep(0.002)
        after_start = max(0.0, seen_running - started_file.stat().st_mtime)
        own.append((before_sbatch + after_start) * 1000)
        while rows.filter(status__in=RunStatus.open()).exists():
            time.sleep(0.01)
        _wait_idle()
    return times, own


def poll_ticks(workdir: Path, runs: int, ticks: int = 30) -> list[float]:
    """One SlurmPoller.poll() over `runs` jobs, half held in SLURM's queue, half ended."""
    from agentsys.slurm import client as slurm
    from agentsys.slurm.poller import SlurmPoller

    script = workdir / "poll.sh"
    script.write_text("#!/bin/sh\ntrue\n")
    held, ended = [], []
    for index in range(runs):
        argv = ["sbatch", "--parsable", "-o", "/dev/null"]
        if index % 2 == 0:
            argv.append("--hold")
        job_id = int(
            subprocess.run(
                [*argv, str(script)], capture_output=True, text=True, check=True
            ).stdout.split(";")[0]
        )
        (held if index % 2 == 0 else ended).append(job_id)
    try:
        deadline = time.monotonic() + 120
        while not all(s.finished for s in slurm.job_states(ended).values()):
            if time.monotonic() > deadline:
                raise RuntimeError("the ended half did not end")
            time.sleep(0.2)
        told = []
        poller = SlurmPoller(lambda agent_id, message: told.append(agent_id) or True)
        for index, job_id in enumerate(held + ended):
            poller.watch(f"executor-{index}", job_id)
        times = []
        for tick in range(ticks):
            start = time.monotonic()
            asyncio.run(poller.poll())
            times.append((time.monotonic() - start) * 1000)
            if tick == 0:
                assert len(told) == runs, f"the first tick told {len(told)} of {runs}"
        return times
    finally:
        subprocess.run(["scancel", *map(str, held)], capture_output=True)


def main() -> None:
    from agentsys.slurm import client as slurm

    ok, why = slurm.available()
    if not ok:
        sys.exit(f"bench/slurm.py needs SLURM up (scripts/slurm_up.sh as root): {why}")
    workdir = Path(tempfile.mkdtemp(prefix="agentsys-bench-slurm-"))
    os.environ["AGENTSYS_SLURM"] = "on"
    from bench.harness import BenchSystem

    system = BenchSystem(gpus="")
    try:
        system.start_daemon()
        _wait_idle()
        raw = sbatch_to_running(workdir, SAMPLES)
        ours, own = agentsys_to_running(workdir, SAMPLES)
        report("slurm_sbatch_to_running_p50_ms", statistics.median(raw), "ms")
        report("slurm_agentsys_to_running_p50_ms", statistics.median(ours), "ms")
        report("slurm_submit_overhead_p50_ms", statistics.median(own), "ms")
        ticks = poll_ticks(workdir, POLL_RUNS)
        report("slurm_poll_ms_200_runs", percentile(ticks, 50), "ms")
        report("slurm_poll_ms_200_runs_p95", percentile(ticks, 95), "ms")
    finally:
        system.close()


if __name__ == "__main__":
    main()
