"""The system message of a synthetic turn: what a finished child did, in
enough detail for the L1 to summarise it for the person."""

from __future__ import annotations

LOG_TAIL_CHARS = 3000
SECTION_CHARS = 6000


def child_report_message(report: dict) -> str:
    kind = report.get("kind", "agent")
    lines = [
        f"The {kind} `{report['id']}` you started has ended: {report['status']}.",
        f"Goal: {report.get('goal', '')}",
    ]
    if report.get("error"):
        lines.append(f"Error: {report['error']}")
    if report.get("exit_code") is not None:
        lines.append(f"Exit code: {report['exit_code']}")
    if report.get("iterations"):
        lines.append(f"Iterations: {report['iterations']}")
    if report.get("metrics"):
        lines += ["", "## Metrics (last, min, max)", ""]
        lines += [_metric_line(series) for series in report["metrics"]]
    if report.get("logged_params"):
        pairs = ", ".join(f"{k}={v}" for k, v in list(report["logged_params"].items())[:40])
        lines += ["", f"Params the script logged: {pairs}"]
    for tracker, url in (report.get("tracker_urls") or {}).items():
        lines.append(f"Also logged online ({tracker}): {url}")
    for title, key, limit in (
        ("Reflection", "reflection", SECTION_CHARS),
        ("Iteration log (end)", "iteration_log", SECTION_CHARS),
        ("run.log (end)", "log_tail", LOG_TAIL_CHARS),
    ):
        text = (report.get(key) or "").strip()
        if text:
            lines += ["", f"## {title}", "", text[-limit:]]
    lines += [
        "",
        "Summarise these results for the person in a few sentences: what was tried, what "
        "worked, the best result with its numbers, and what you would do next.",
    ]
    return "\n".join(lines)


def _metric_line(series: dict) -> str:
    def number(value) -> str:
        return "—" if value is None else f"{value:.6g}"

    line = (
        f"- {series['key']}: last {number(series.get('last'))}, min {number(series.get('min'))}, "
        f"max {number(series.get('max'))} over {series.get('points', 0)} points"
    )
    if series.get("last_step") is not None:
        line += f" (to step {series['last_step']})"
    if series.get("non_finite"):
        line += f", {series['non_finite']} NaN/inf"
    if series.get("source"):
        line += f", from {series['source']}"
    return line
