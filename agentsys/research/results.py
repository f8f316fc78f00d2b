"""What the model reads about finished experiments ("Results from Previous Experiments") and
about the loop so far (the history line per step).

The results section has a fixed shape (the demo model parses it): one `### Experiment k`
block per run with its run's id (the one its page and the API use), its command, parameters as
sorted compact JSON, status, a metrics summary (last/min/max of each numeric series, as
agentsys.metric_summary makes it) and the tail of its log.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class ExperimentResult:
    goal: str
    run_id: str
    command: str
    parameters: dict = field(default_factory=dict)
    gpu_required: int = 0
    status: str = ""
    exit_code: int | None = None
    error: str = ""
    log_tail: str = ""
    metrics: dict[str, dict] = field(default_factory=dict)
    alerts: list[str] = field(default_factory=list)
    run: str = ""  # the Run's id (its page, the API); run_id is its executor's


LOG_TAIL_BYTES = 4000


def read_log_tail(path: Path, max_lines: int = 30, max_bytes: int = LOG_TAIL_BYTES) -> str:
    try:
        with path.open("rb") as log:
            log.seek(0, 2)
            size = log.tell()
            log.seek(max(0, size - max_bytes))
            data = log.read()
    except OSError:
        return ""
    return log_tail_lines(data, cut=size > max_bytes, max_lines=max_lines)


def log_tail_lines(data: bytes, *, cut: bool, max_lines: int = 30) -> str:
    """The last `max_lines` whole lines of a log's tail (`cut`: it does not start the log)."""
    lines = data.decode(errors="replace").splitlines()
    if cut and lines:
        lines = lines[1:]  # the first one was cut
    return "\n".join(lines[-max_lines:])


def _one_line(text) -> str:
    """A value on one line of the section (the demo model and the reader parse it by lines)."""
    return " ".join(str(text).split())


def _number(value) -> str:
    return f"{value:.4g}" if isinstance(value, int | float) else str(value)


def _metrics_line(metrics: dict[str, dict]) -> str:
    if not metrics:
        return "none recorded"
    parts = []
    for name, s in metrics.items():
        fields = " ".join(
            f"{key}={_number(s[key])}" for key in ("last", "min", "max") if s.get(key) is not None
        )
        step = f" last_step={_number(s['last_step'])}" if s.get("last_step") is not None else ""
        parts.append(f"{name} {fields} points={s.get('points', 0)}{step}")
    return "; ".join(parts)


def _status_line(result: ExperimentResult) -> str:
    text = result.status or "unknown"
    if result.exit_code is not None:
        text += f" (exit code {result.exit_code})"
    if result.error:
        text += f": {_one_line(result.error)}"
    return text


RESULTS_BUDGET_CHARS = 12_000  # the whole section, however many runs ended
_FIELD_CHARS = {"goal": 200, "command": 600, "error": 300, "metrics": 600, "alerts": 300}


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _header(number: int, r: ExperimentResult) -> str:
    # a `command: |` block's lines, shown as \n so the entry stays one line
    command = r.command.strip().replace(chr(10), chr(92) + "n")
    alerts = "; ".join(map(_one_line, r.alerts)) if r.alerts else "none"
    return "\n".join(
        [
            f"### Experiment {number}: {_cut(_one_line(r.goal), _FIELD_CHARS['goal'])}",
            f"- run: {r.run or r.run_id or '(not started)'}",
            f"- command: `{_cut(command, _FIELD_CHARS['command'])}`",
            f"- parameters: {_cut(json.dumps(r.parameters, sort_keys=True, default=str), 600)}",
            f"- gpu_required: {r.gpu_required}",
            f"- status: {_cut(_status_line(r), _FIELD_CHARS['error'])}",
            f"- metrics: {_cut(_metrics_line(r.metrics), _FIELD_CHARS['metrics'])}",
            f"- alerts: {_cut(alerts, _FIELD_CHARS['alerts'])}",
            "- log tail:",
        ]
    )


def _tail(log_tail: str, share: int) -> tuple[str, bool]:
    """The last lines of a log tail that fit in `share` characters, indented; True when
    some of it was cut."""
    lines = [f"    {line}" for line in log_tail.splitlines()]
    if not lines:
        return "    (empty)", False
    kept, size, cut = [], 0, False
    for line in reversed(lines):
        if len(line) > share > 40:  # one huge line: its end is what matters
            line, cut = "    …" + line[-(share - 10) :], True
        if size + len(line) + 1 > share:
            break
        kept.append(line)
        size += len(line) + 1
    if len(kept) < len(lines):
        cut = True
        kept.append(f"    … ({len(lines) - len(kept)} earlier lines cut to fit the budget)")
    return "\n".join(reversed(kept)), cut


def format_results(results: list[ExperimentResult], budget: int = RESULTS_BUDGET_CHARS) -> str:
    """The results section, at most about `budget` characters: the log tails share what the
    runs' other lines leave, and when even those do not fit, the last runs are left out; the
    section says what was cut."""
    heading = "## Results from Previous Experiments"
    headers = [_header(number, r) for number, r in enumerate(results, start=1)]
    room = budget - len(heading) - 300  # 300: the note on what was cut
    fixed = [len(header) + 70 for header in headers]  # 70: the cut marker, the separators
    shown = 0
    while shown < len(headers) and sum(fixed[: shown + 1]) <= room:
        shown += 1
    share = (room - sum(fixed[:shown])) // max(1, shown)
    blocks, cut = [], False
    for header, r in zip(headers[:shown], results, strict=False):
        tail, shortened = _tail(r.log_tail, share)
        cut = cut or shortened
        blocks.append(f"{header}\n{tail}")
    notes = []
    if cut:
        notes.append(
            f"Log tails were shortened to keep this section under {budget} characters; "
            "each run's full log is its run.log."
        )
    if shown < len(results):
        notes.append(
            f"{len(results) - shown} more experiments ended but are not shown: this "
            f"section is limited to {budget} characters."
        )
    return "\n\n".join([heading, *(["_" + " ".join(notes) + "_"] if notes else []), *blocks])


def format_history(history: list[dict]) -> str:
    if not history:
        return "No iterations yet."
    lines = []
    for step in history:
        if not isinstance(step, dict):
            continue
        summary = _one_line(step.get("summary") or "")[:200]
        phase = step.get("phase")
        if phase == "model_error":  # the provider's failure, not the model's work
            continue
        if phase == "plan":
            lines.append(f"Plan: {summary}")
        elif phase == "reflection":
            lines.append(f"Reflection after iteration {step.get('iteration')}: {summary}")
        else:
            lines.append(
                f"Iteration {step.get('iteration')} [{step.get('promise') or '-'}]: {summary} "
                f"(files: {len(step.get('files_changed') or [])}, "
                f"runs: {len(step.get('runs') or [])}, errors: {len(step.get('errors') or [])})"
            )
    return "\n".join(lines)
