"""Talking to SLURM through its own commands (sbatch, squeue, sacct, scancel, scontrol, sinfo).

Plain Python, no Django: the executor's SLURM backend (agentsys.slurm.job; docs/architecture.md,
"The GPU queue"), runagentd's poller and the SLURM MCP server (agentsys.mcp.slurm_tools) build
on this. Every call is an argument list (never a shell string) with a timeout, and every
failure is a SlurmError whose message says what went wrong in SLURM's own words. The output
of squeue, sinfo and sacct (`|`-separated fields) and of `scontrol show -o` (Key=value words)
is parsed here and nowhere else: parse_rows and parse_records.

What the real cluster does (Debian 12, SLURM 22.05, scripts/slurm_up.sh) and this module
relies on:
- `squeue -j IDS` lists only jobs still pending/running/completing; when none of IDS is known
  it exits 1 with "Invalid job id specified". (`squeue --json -j` ignores -j there: not used.)
- Without slurmdbd, plain sacct prints nothing; `sacct -c` reads the jobcomp file, which has
  finished jobs only, one line each, and keeps lines of earlier clusters whose job ids were
  reused (the last line wins).
- `scancel` exits 0 even for an unknown job; only `-v` prints the refusal on stderr.
- A controller that is down makes each command fail after ~9 s ("Unable to contact slurm
  controller"), within TIMEOUT_S.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

TIMEOUT_S = 30.0
_NAME = re.compile(r"[A-Za-z0-9_.-]+")
# SLURM's time formats: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S.
_TIME = re.compile(r"\d+(:\d{1,2}){0,2}|\d+-\d{1,2}(:\d{1,2}){0,2}")
# Feature expressions: names joined by & | , with [ ] ( ) and counts (*2).
_CONSTRAINT = re.compile(r"[A-Za-z0-9_.&|,\[\]()*!:-]+")
_ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_RECORD_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_/:.]*")  # a Key of scontrol's Key=value words
# What squeue says (exit status 1) when none of the ids it was given is queued any more.
NOT_QUEUED = "Invalid job id specified"
# The one separator of the fields asked of squeue and sinfo (-o) and sacct (-P): SLURM never
# prints it in them, except in a name, which goes last (its field keeps any it holds).
SEP = "|"
# What job_states asks: (field name, squeue's %-code) and sacct's fields.
SQUEUE_STATE_FIELDS = (("job_id", "%i"), ("state", "%T"), ("reason", "%r"))
SACCT_STATE_FIELDS = ("jobid", "state", "exitcode")
REFUSED = "sbatch refused the job:"  # how submit() begins a refusal of the job itself
# What SLURM's commands say when the controller does not answer (as opposed to a refusal).
_UNREACHABLE = ("Unable to contact slurm controller", "Socket timed out", "Zero Bytes were")

# Words that mean the job will not change any more.
FINAL_STATES = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "OUT_OF_MEMORY",
        "NODE_FAIL",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
    }
)


class SlurmError(RuntimeError):
    """A SLURM command could not be run or refused; the message says which and why."""


@dataclass(frozen=True)
class JobState:
    state: str  # SLURM's word: PENDING, RUNNING, SUSPENDED, COMPLETED, FAILED, CANCELLED, ...
    reason: str | None = None  # why a job waits (Resources, Priority); None when SLURM says None
    exit_code: int | None = None  # finished jobs only; 128 + N when killed by signal N

    @property
    def finished(self) -> bool:
        return self.state in FINAL_STATES


def _run(argv: list[str], *, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(
            argv, capture_output=True, text=True, timeout=TIMEOUT_S, env=env, check=False
        )
    except FileNotFoundError:
        raise SlurmError(f"SLURM is not installed: no {argv[0]} on PATH") from None
    except subprocess.TimeoutExpired:
        raise SlurmError(
            f"{argv[0]} did not answer within {TIMEOUT_S:g} s (is slurmctld down?)"
        ) from None


def _message(proc: subprocess.CompletedProcess) -> str:
    """SLURM's own last line of complaint, without the 'sbatch: error: ' prefix."""
    lines = [line.strip() for line in (proc.stderr or proc.stdout or "").splitlines()]
    lines = [line for line in lines if line]
    if not lines:
        return f"exit status {proc.returncode}"
    return re.sub(r"^\w+: error: ", "", lines[-1])


def _check_name(what: str, value: str | None) -> None:
    if value is not None and not _NAME.fullmatch(value):
        raise SlurmError(f"bad {what} {value!r}: letters, digits, '_', '.', '-' only")


@dataclass(frozen=True)
class SlurmJobSpec:
    """One batch job: its script and what sbatch is told about it. SLURM expands its own
    patterns in `output` (%j: the job id; a literal % is %%)."""

    script: str | os.PathLike
    job_name: str
    gpus: int
    workdir: str | os.PathLike
    output: str | os.PathLike
    partition: str | None = None
    account: str | None = None
    time_limit: str | None = None
    qos: str | None = None
    constraint: str | None = None

    def argv(self) -> list[str]:
        """The sbatch command line, after checking every value."""
        gpus = self.gpus
        if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 0:
            raise SlurmError(f"bad gpus {gpus!r}: a whole number >= 0")
        name = self.job_name
        if not name or len(name) > 200 or not name.isprintable():
            raise SlurmError(f"bad job name {name!r}: 1-200 printable characters")
        check_options(
            partition=self.partition,
            account=self.account,
            time_limit=self.time_limit,
            qos=self.qos,
            constraint=self.constraint,
        )
        # Absolute paths: a name starting with '-' can never read as an option.
        script = Path(self.script).absolute()
        if not script.is_file():
            raise SlurmError(f"no job script at {script}")
        out = str(Path(self.output).absolute())
        argv = [
            "sbatch",
            "--parsable",
            f"--job-name={name}",
            f"--chdir={Path(self.workdir).absolute()}",
            f"--output={out}",
            f"--error={out}",
            "--export=ALL",
        ]
        if gpus:
            argv.append(f"--gres=gpu:{gpus}")
        for option, value in (
            ("partition", self.partition),
            ("account", self.account),
            ("time", self.time_limit),
            ("qos", self.qos),
            ("constraint", self.constraint),
        ):
            if value is not None:
                argv.append(f"--{option}={value}")
        argv.append(str(script))
        return argv


def check_options(
    *,
    partition: str | None = None,
    account: str | None = None,
    time_limit: str | None = None,
    qos: str | None = None,
    constraint: str | None = None,
) -> None:
    """Refuse a value sbatch would misread, saying which (the API checks with this too)."""
    _check_name("partition", partition)
    _check_name("account", account)
    _check_name("qos", qos)
    if time_limit is not None and not _TIME.fullmatch(time_limit):
        raise SlurmError(f"bad time limit {time_limit!r}: MM, HH:MM:SS or D-HH:MM:SS")
    if constraint is not None and not _CONSTRAINT.fullmatch(constraint):
        raise SlurmError(f"bad constraint {constraint!r}")


def submit(
    spec: SlurmJobSpec,
    *,
    env: Mapping[str, str] | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> int:
    """Submit a batch job; returns SLURM's job id.

    The job's environment is sbatch's own (--export=ALL): `env` in place of this process's,
    then `extra_env` over it. Values never pass through a command line (SLURM splits
    --export values on commas)."""
    argv = spec.argv()
    for key in extra_env or {}:
        if not _ENV_KEY.fullmatch(key):
            raise SlurmError(f"bad environment variable name {key!r}")
    job_env = None
    if env is not None or extra_env:
        base = os.environ if env is None else env
        job_env = {**base, **{key: str(value) for key, value in (extra_env or {}).items()}}
    proc = _run(argv, env=job_env)
    if proc.returncode != 0:
        message = _message(proc)
        if any(sign in message for sign in _UNREACHABLE):  # not a verdict on the job
            raise SlurmError(f"sbatch could not reach slurmctld: {message}")
        raise SlurmError(f"{REFUSED} {message}")
    # --parsable prints "ID" or "ID;CLUSTER".
    first = proc.stdout.strip().split(";")[0]
    if not first.isdigit():
        raise SlurmError(f"sbatch printed no job id: {proc.stdout.strip()!r}")
    return int(first)


def _ids_arg(job_ids: Iterable[int]) -> str:
    return ",".join(str(job_id) for job_id in job_ids)


def output_format(fields: Sequence[tuple[str, str]]) -> str:
    """squeue's or sinfo's -o argument asking for these (name, %-code) fields, SEP-joined."""
    return SEP.join(code for _, code in fields)


def parse_rows(text: str, names: Sequence[str]) -> list[dict[str, str]]:
    """Lines of SEP-joined fields (squeue/sinfo -o, sacct -P), each a dict of `names` in
    order; blank lines and lines of fewer fields are left out. The last field keeps any SEP it
    holds (a name, asked for last, may hold one)."""
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split(SEP, len(names) - 1)
        if len(parts) == len(names):
            rows.append(dict(zip(names, parts, strict=True)))
    return rows


def parse_records(text: str) -> list[dict[str, str]]:
    """`scontrol show -o` output: one record a line, `Key=value` words; a word without a key
    belongs to the value before it (OS=Linux 6.1 #1 SMP)."""
    records = []
    for line in text.splitlines():
        record: dict[str, str] = {}
        key = None
        for word in line.split():
            head, eq, value = word.partition("=")
            if eq and _RECORD_KEY.fullmatch(head):
                key = head
                record[key] = value
            elif key is not None:
                record[key] += " " + word
        if record:
            records.append(record)
    return records


def _job_rows(text: str, names: Sequence[str]) -> list[tuple[int, list[str]]]:
    """parse_rows' rows whose first field is a plain job id (array or step ids such as 123_4
    or 123.batch are left out: this module submits neither), with the fields after it. No
    name goes last in these formats, so a line of more fields than asked is not one of them;
    a line's surrounding whitespace is not part of its first or last field."""
    jobs = []
    for row in parse_rows(text, names):
        fields = list(row.values())
        fields[0], fields[-1] = fields[0].lstrip(), fields[-1].rstrip()
        if fields[0].isdigit() and SEP not in fields[-1]:
            jobs.append((int(fields[0]), fields[1:]))
    return jobs


def parse_squeue(text: str) -> dict[int, JobState]:
    """Lines of `squeue -h -o %i|%T|%r`: id, state word, reason ("None" when none)."""
    states = {}
    for job_id, (state, reason) in _job_rows(text, [name for name, _ in SQUEUE_STATE_FIELDS]):
        states[job_id] = JobState(
            state=state, reason=reason if reason not in ("", "None") else None
        )
    return states


def _exit_code(field: str) -> int | None:
    code, _, signal = field.partition(":")
    if not code.isdigit():
        return None
    if signal.isdigit() and int(signal) > 0:
        return 128 + int(signal)  # the shell's convention for "killed by signal N"
    return int(code)


def parse_sacct(text: str) -> dict[int, JobState]:
    """Lines of `sacct -c -P -n -o jobid,state,exitcode`; the last line of an id wins (the
    jobcomp file keeps the lines of an earlier cluster that handed out the same ids)."""
    states = {}
    for job_id, (state, exit_code) in _job_rows(text, SACCT_STATE_FIELDS):
        state = state.split(" ")[0]  # "CANCELLED by 0" with a database
        states[job_id] = JobState(state=state, exit_code=_exit_code(exit_code))
    return states


def job_states(job_ids: Iterable[int]) -> dict[int, JobState]:
    """The state of each job, in one squeue call plus at most one sacct call for the jobs
    squeue no longer lists. Ids SLURM knows nothing of are left out of the answer."""
    wanted = sorted({int(job_id) for job_id in job_ids})
    if not wanted:
        return {}
    proc = _run(["squeue", "-h", "-j", _ids_arg(wanted), "-o", output_format(SQUEUE_STATE_FIELDS)])
    if proc.returncode != 0 and NOT_QUEUED not in proc.stderr:
        raise SlurmError(f"squeue failed: {_message(proc)}")
    live = parse_squeue(proc.stdout) if proc.returncode == 0 else {}
    states = {job_id: state for job_id, state in live.items() if job_id in wanted}
    gone = [job_id for job_id in wanted if job_id not in states]
    if gone:
        fields = ",".join(SACCT_STATE_FIELDS)
        proc = _run(["sacct", "-c", "-j", _ids_arg(gone), "-P", "-n", "-o", fields])
        if proc.returncode != 0:
            raise SlurmError(f"sacct failed: {_message(proc)}")
        ended = parse_sacct(proc.stdout)
        states.update({job_id: ended[job_id] for job_id in gone if job_id in ended})
    return states


def cancel(job_id: int) -> None:
    """Cancel a pending or running job; one that already ended is left as it is."""
    # scancel exits 0 even when it refuses; -v makes it say so on stderr.
    proc = _run(["scancel", "-v", str(int(job_id))])
    errors = [line for line in proc.stderr.splitlines() if "error:" in line]
    errors = [line for line in errors if "already completing or completed" not in line]
    if proc.returncode != 0 or errors:
        raise SlurmError(f"scancel refused job {job_id}: {_message(proc)}")


def _scontrol(verb: str, job_id: int) -> None:
    proc = _run(["scontrol", verb, str(int(job_id))])
    if proc.returncode != 0:
        raise SlurmError(f"scontrol {verb} refused job {job_id}: {_message(proc)}")


def suspend(job_id: int) -> None:
    """Stop a running job's processes (SIGSTOP) and keep its resources; needs SLURM admin."""
    _scontrol("suspend", job_id)


def resume(job_id: int) -> None:
    _scontrol("resume", job_id)


def query(argv: list[str]) -> str:
    """The output of a read-only SLURM command (squeue, sinfo, sacct, scontrol show); a
    SlurmError in SLURM's words when it fails, saying so when the controller did not answer."""
    proc = _run(argv)
    if proc.returncode != 0:
        message = _message(proc)
        if any(sign in message for sign in _UNREACHABLE):
            raise SlurmError(f"{argv[0]} could not reach slurmctld: {message}")
        raise SlurmError(f"{argv[0]} failed: {message}")
    return proc.stdout


def available() -> tuple[bool, str]:
    """Whether jobs can be submitted here: SLURM installed, its controller answering, and
    a node in a state that runs jobs; with the reason either way."""
    if shutil.which("sbatch") is None:
        return False, "SLURM is not installed: no sbatch on PATH"
    try:
        proc = _run(["sinfo", "-h", "-o", "%T"])
    except SlurmError as error:
        return False, str(error)
    if proc.returncode != 0:
        return False, f"slurmctld not reachable: {_message(proc)}"
    states = sorted({line.strip() for line in proc.stdout.splitlines() if line.strip()})
    if not states:
        return False, "SLURM has no nodes"
    usable = [s for s in states if s.rstrip("*~#$@+").lower() in ("idle", "mixed", "allocated")]
    if not usable:
        return False, f"no usable SLURM node (node states: {', '.join(states)})"
    return True, f"SLURM nodes: {', '.join(states)}"
