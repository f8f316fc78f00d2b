"""The SLURM MCP server (issue 23 part 2): squeue, sinfo, sbatch, scancel, sacct and
scontrol show as MCP tools over stdio, on top of the SLURM client (agentsys/slurm/client.py:
argument lists, never a shell, timeouts). Output is JSON (lists of dicts) parsed from SLURM's
parsable formats by the client's parser (parse_rows, parse_records).

Every bad argument and every SLURM failure is a ToolError saying why; sbatch only submits
scripts inside the server's workdir (--workdir or AGENTSYS_SLURM_WORKDIR).

    python -m agentsys.mcp.slurm_tools --workdir DIR
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path
from typing import Annotated, Literal

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from pydantic import Field

from agentsys.mcp.arguments import PlainArgumentErrors
from agentsys.slurm import client as slurm
from agentsys.slurm.client import SlurmError, output_format, parse_records, parse_rows

WORKDIR_ENV = "AGENTSYS_SLURM_WORKDIR"
_NAME = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.-]{0,199}")  # never starts with '-': not an option

JobId = Annotated[int, Field(strict=True, ge=1, le=4_294_967_295, description="a SLURM job id")]
Name = Annotated[str, Field(max_length=200)]
JobIds = Annotated[list[JobId], Field(max_length=1000)]

SQUEUE_FIELDS = (
    ("job_id", "%i"),
    ("partition", "%P"),
    ("user", "%u"),
    ("state", "%T"),
    ("time", "%M"),
    ("time_limit", "%l"),
    ("nodes", "%D"),
    ("nodelist_or_reason", "%R"),
    ("gres", "%b"),
    ("name", "%j"),
)
SINFO_FIELDS = (
    ("partition", "%P"),
    ("avail", "%a"),
    ("time_limit", "%l"),
    ("nodes", "%D"),
    ("state", "%T"),
    ("nodelist", "%N"),
    ("gres", "%G"),
)
SACCT_FIELDS = (
    "jobid",
    "user",
    "partition",
    "state",
    "start",
    "end",
    "exitcode",
    "nodelist",
    "jobname",
)


def _name(what: str, value: str | None) -> str | None:
    if value is not None and not _NAME.fullmatch(value):
        raise ToolError(
            f"bad {what} {value[:80]!r}: 1-200 letters, digits, '_', '.', '-' (not first)"
        )
    return value


def _query(argv: list[str]) -> str:
    try:
        return slurm.query(argv)
    except SlurmError as error:
        raise ToolError(str(error)) from None


def squeue(
    job_ids: JobIds | None = None, user: Name | None = None, partition: Name | None = None
) -> list[dict[str, str]]:
    """Jobs still pending, running or completing; optionally only these ids, user, partition."""
    argv = ["squeue", "-h", "-o", output_format(SQUEUE_FIELDS)]
    if job_ids:
        argv.append("--jobs=" + ",".join(str(job_id) for job_id in job_ids))
    if _name("user", user):
        argv.append(f"--user={user}")
    if _name("partition", partition):
        argv.append(f"--partition={partition}")
    try:
        text = slurm.query(argv)
    except SlurmError as error:
        if slurm.NOT_QUEUED in str(error):
            return []  # none of the ids is queued any more (sacct knows the ended ones)
        raise ToolError(str(error)) from None
    return parse_rows(text, [name for name, _ in SQUEUE_FIELDS])


def sinfo(partition: Name | None = None) -> list[dict[str, str]]:
    """Partitions and their nodes: availability, time limit, node count, state, GPUs (gres)."""
    argv = ["sinfo", "-h", "-o", output_format(SINFO_FIELDS)]
    if _name("partition", partition):
        argv.append(f"--partition={partition}")
    return parse_rows(_query(argv), [name for name, _ in SINFO_FIELDS])


def sacct(job_ids: JobIds) -> list[dict[str, str]]:
    """Finished jobs (SLURM's job completion log): state, exit code, start, end, node."""
    if not job_ids:
        raise ToolError("job_ids: give at least one job id")
    argv = ["sacct", "-c", "-P", "-n", "-o", ",".join(SACCT_FIELDS)]
    argv.append("--jobs=" + ",".join(str(job_id) for job_id in job_ids))
    rows = parse_rows(_query(argv), SACCT_FIELDS)
    last = {row["jobid"]: row for row in rows}  # the log keeps reused ids: the last line wins
    return list(last.values())


def scancel(job_id: JobId) -> dict[str, object]:
    """Cancel a pending or running job; one that already ended is left as it is."""
    try:
        slurm.cancel(job_id)
    except SlurmError as error:
        raise ToolError(str(error)) from None
    return {"job_id": job_id, "cancelled": True}


def scontrol_show(kind: Literal["job", "node", "partition"], name: Name) -> list[dict[str, str]]:
    """`scontrol show -o KIND NAME` as records of SLURM's Key=value fields."""
    if kind == "job":
        if not name.isdigit() or not 1 <= int(name) <= 4_294_967_295:
            raise ToolError(f"bad job id {name[:80]!r}: a whole number >= 1")
        name = str(int(name))
    else:
        _name(kind, name)
    return parse_records(_query(["scontrol", "show", "-o", kind, name]))


def script_inside(workdir: Path, script_path: str) -> Path:
    """The script's real path, refusing anything that is not a file inside workdir."""
    if "\x00" in script_path:
        raise ToolError("script_path: NUL bytes are not allowed")
    if not script_path.strip():
        raise ToolError("script_path: empty")
    if ".." in Path(script_path).parts:
        raise ToolError(f"script_path {script_path[:200]!r}: '..' is not allowed")
    root = workdir.resolve()
    candidate = Path(script_path) if os.path.isabs(script_path) else root / script_path
    try:
        real = candidate.resolve(strict=True)
    except (OSError, RuntimeError):
        raise ToolError(f"script_path {script_path[:200]!r}: no such file in {root}") from None
    if not real.is_relative_to(root):
        raise ToolError(f"script_path {script_path[:200]!r} is outside the workdir {root}")
    if not real.is_file():
        raise ToolError(f"script_path {script_path[:200]!r} is not a file")
    return real


def build_server(workdir: str | os.PathLike) -> FastMCP:
    root = Path(workdir)
    if not root.is_dir():
        raise SystemExit(f"workdir {root} is not a directory")
    mcp = FastMCP("slurm", instructions=f"SLURM tools; sbatch runs scripts inside {root}.")
    mcp.add_middleware(PlainArgumentErrors(mcp))
    for tool in (squeue, sinfo, sacct, scancel, scontrol_show):
        mcp.tool(tool)

    @mcp.tool
    def sbatch(
        script_path: Annotated[str, Field(max_length=4096)],
        gpus: Annotated[int, Field(strict=True, ge=0, le=64)] = 0,
        partition: Name | None = None,
        time_limit: Annotated[str, Field(max_length=32)] | None = None,
        job_name: Name | None = None,
    ) -> dict[str, object]:
        """Submit a batch script from inside the workdir; returns its job id. The job runs in
        the workdir; its output goes to slurm-<job id>.out there."""
        script = script_inside(root, script_path)
        _name("partition", partition)
        _name("job_name", job_name)
        spec = slurm.SlurmJobSpec(
            script,
            job_name=job_name or re.sub(r"[^A-Za-z0-9_.-]", "_", script.stem)[:200] or "job",
            gpus=gpus,
            workdir=root.resolve(),
            output=root.resolve() / "slurm-%j.out",
            partition=partition,
            time_limit=time_limit,
        )
        try:
            job_id = slurm.submit(spec)
        except SlurmError as error:
            raise ToolError(str(error)) from None
        return {"job_id": job_id, "script": str(script)}

    return mcp


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="The SLURM MCP server (stdio).")
    parser.add_argument("--workdir", default=os.environ.get(WORKDIR_ENV), help="sbatch's root")
    args = parser.parse_args(argv)
    if not args.workdir:
        parser.error(f"--workdir or {WORKDIR_ENV} is required")
    build_server(args.workdir).run(transport="stdio", show_banner=False)


if __name__ == "__main__":
    main()
