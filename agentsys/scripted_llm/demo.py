"""The demo brain: answers the research loop's prompts like a careful researcher running a
learning-rate search on the demo workspace's train.py, so a newcomer sees every part of the
loop work with no API key. It reads only the prompt (phase marker, results, history)."""

from __future__ import annotations

import json
import re
import shlex
import sys

MARKER = re.compile(r"<!-- agentsys-prompt: (planning|iteration|reflection) -->")
FIRST_LRS = (0.01, 0.1, 0.5)
# The bracketing runs use the demo workspace's three twins (same arguments, same loss curve),
# one way of logging each, so the demo charts a run's metrics from agent_metrics.jsonl, from
# TensorBoard and from printed lines; the refinement uses train.py.
FIRST_SCRIPTS = ("train.py", "train_tensorboard.py", "train_prints.py")
# train_tensorboard.py imports tensorboardX, installed with AgentSys: it runs with this
# interpreter (the demo model's own, AgentSys's), the stdlib-only twins with `python`.
INTERPRETERS = {"train_tensorboard.py": shlex.quote(sys.executable)}
ARGUMENTS = "--steps=150 --sleep=0.005"
# The TensorBoard twin runs for a few seconds: tensorboardX puts no pid in its file names, so
# AgentSys tells the three brackets' files apart by which run's process holds one open, which
# it sees only if the writer is still running when it looks (agentsys.metric_sources.ownership).
SCRIPT_ARGUMENTS = {"train_tensorboard.py": "--steps=150 --sleep=0.04"}
COMMAND = f"python train.py {ARGUMENTS}"
BEST_SO_FAR = re.compile(r"best so far lr=([0-9.e-]+) loss=([0-9.e+-]+|nan|inf)")


# AgentSys's MCP tools, as OpenCode names them (`<server>_<tool>`): the demo uses them where
# OpenCode offers them. The run tools are there only where the research-agent server was given
# AgentSys's address and a token.
LIST_DIRECTORY = "research-agent_list_directory"
LIST_RUNS, GET_RUN = "research-agent_list_runs", "research-agent_get_run"
RUN_ID = re.compile(r'"id"\s*:\s*"([A-Za-z0-9_-]{1,40})"')
ENTRY_NAME = re.compile(r'"name"\s*:\s*"([^"]{1,200})"')


def demo_steps(prompt: str, tools: set[str], results: dict[str, str]) -> list[dict]:
    """One request's answer, given the tools OpenCode offers and the results of the calls
    made since the prompt: in an iteration, first each tool call it wants (one a request:
    OpenCode runs it and asks again with its result), then the reply, saying what they
    showed. The first iteration lists the workdir; a later one reads a finished run."""
    for name, arguments in _tools_wanted(prompt, tools, results):
        if name not in results:
            return [{"tool_call": {"name": name, "arguments": arguments}}]
    seen = _what_tools_showed(results)
    reply = demo_reply(prompt)
    return [{"text": f"{seen}\n\n{reply}" if seen else reply}]


def _tools_wanted(prompt: str, tools: set[str], results: dict[str, str]) -> list[tuple]:
    phases = MARKER.findall(prompt)
    if not phases or phases[-1] != "iteration":
        return []
    if not parse_results(prompt):
        return [(LIST_DIRECTORY, {"path": "."})] if LIST_DIRECTORY in tools else []
    if not {LIST_RUNS, GET_RUN} <= tools:
        return []
    wanted = [(LIST_RUNS, {"status": "done", "limit": 3})]
    found = RUN_ID.search(results.get(LIST_RUNS, ""))
    if found:
        wanted.append((GET_RUN, {"run_id": found.group(1)}))
    return wanted


def _what_tools_showed(results: dict[str, str]) -> str:
    lines = []
    if LIST_DIRECTORY in results:
        names = ENTRY_NAME.findall(results[LIST_DIRECTORY])
        shown = ", ".join(names[:12]) + (", …" if len(names) > 12 else "")
        lines.append(f"I listed the workdir with {LIST_DIRECTORY}: {shown or 'nothing in it'}.")
    if GET_RUN in results:
        found = RUN_ID.search(results[GET_RUN])
        run = found.group(1) if found else "a run"
        lines.append(f"I read the newest finished run ({run}) with {GET_RUN}.")
    elif LIST_RUNS in results:
        lines.append(f"{LIST_RUNS} showed no finished run yet.")
    return " ".join(lines)


def demo_reply(prompt: str) -> str:
    phases = MARKER.findall(prompt)
    if not phases:
        return _chat(prompt)
    phase = phases[-1]
    if phase == "planning":
        return _plan()
    if phase == "reflection":
        return _reflection(prompt)
    return _iteration(prompt)


CHAT_MARKER = re.compile(r"<!-- agentsys-prompt: chat-(wild|auto|agent) -->")
SPEAKER = re.compile(r"^\[(USER|SYSTEM)\] ", re.MULTILINE)
RESEARCH_WORDS = re.compile(r"learning rate|\blr\b|research|experiment|train|sweep", re.I)
DEMO_GOAL = (
    "Find the learning rate for train.py (the demo workspace) that gives the lowest final "
    "loss, with a few short trainings"
)


def _chat(prompt: str) -> str:
    """The session agent's answers: WILD (and AUTO, asked for research) starts the demo
    loop; a [SYSTEM] report of a finished loop is summarised from its reflection."""
    modes = CHAT_MARKER.findall(prompt)
    speakers = list(SPEAKER.finditer(prompt))
    if not modes or not speakers:
        return (
            "I am the AgentSys demo model: I run a learning-rate search on the demo workspace. "
            "Start a research loop (`make demo`, or a chat in WILD mode) to watch a whole "
            "loop; set MODEL_PROVIDER and MODEL_ID to use a real model."
        )
    mode, last = modes[-1], speakers[-1]
    message = prompt[last.end() :].strip()
    if last.group(1) == "SYSTEM":
        return _summarise_report(message)
    if mode == "wild" or (mode == "auto" and RESEARCH_WORDS.search(message)):
        return (
            "I will hand this to a research loop: it plans, runs short trainings through the "
            "GPU queue, refines around the best and reports back here when it ends.\n\n"
            f"<spawn_research>\ngoal: {DEMO_GOAL} (asked: {message[:300]})\n"
            "max_iterations: 6\n</spawn_research>"
        )
    return (
        f"(demo model, {mode.upper()} mode) You said: {message[:500]}\n\n"
        "I am a scripted demo model, so I can only run the demo learning-rate search: ask "
        "for it in WILD mode, or in AUTO mode mention research or a learning rate."
    )


def _summarise_report(report: str) -> str:
    first = report.splitlines()[0] if report else "An experiment ended."
    best = BEST_SO_FAR.findall(report)
    reflection = ""
    if "## Reflection" in report:
        reflection = report.split("## Reflection", 1)[1].split("\n## ", 1)[0].strip()
    lines = [f"Results are in. {first}"]
    if best:
        lr, loss = best[-1]
        lines.append(f"The best run so far used lr={lr} with a final loss of {loss}.")
    if reflection:
        lines.append(f"Its reflection: {' '.join(reflection.split())[:600]}")
    lines.append("Next: refine around that learning rate, or try a longer schedule.")
    return "\n\n".join(lines)


def _plan() -> str:
    return (
        "<plan>\n"
        "1. Read train.py: it fits y = 3x + 2 by SGD and logs `loss` every 10 steps.\n"
        "2. Run three short trainings at lr = 0.01, 0.1 and 0.5 to bracket a good rate.\n"
        "3. Refine around the best of them with one more run.\n"
        "4. Report the learning rate with the lowest final loss.\n"
        "</plan>\n"
        "<summary>A learning-rate search: three bracketing runs, one refinement, then the "
        "answer.</summary>"
    )


def _experiment(lr: float, goal: str, script: str = "train.py") -> str:
    return (
        f"- goal: {goal}\n"
        f'  command: echo "- lr={lr:g}: run started" >> results.md && '
        f"{INTERPRETERS.get(script, 'python')} {script} "
        f"{SCRIPT_ARGUMENTS.get(script, ARGUMENTS)}\n"
        "  workdir: .\n"
        f'  parameters: {{"lr": {lr:g}}}\n'
        "  gpu_required: 0"
    )


def parse_results(prompt: str) -> list[dict]:
    """The experiments in the LAST results section: lr, status, exit code, final loss."""
    start = prompt.rfind("## Results from Previous Experiments")
    if start < 0:
        return []
    found = []
    for block in prompt[start:].split("### Experiment ")[1:]:
        entry = {"goal": block.split("\n", 1)[0].split(": ", 1)[-1].strip()}
        params = re.search(r"^- parameters: (\{.*\})$", block, re.MULTILINE)
        try:
            entry["lr"] = float(json.loads(params.group(1)).get("lr")) if params else None
        except (ValueError, TypeError):
            entry["lr"] = None
        status = re.search(r"^- status: (\S+)(?: \(exit code (-?\d+)\))?", block, re.MULTILINE)
        entry["ok"] = bool(status) and status.group(1) == "done"
        loss = re.search(r"loss last=(\S+)", block)
        try:
            entry["loss"] = float(loss.group(1)) if loss else None
        except ValueError:
            entry["loss"] = None
        found.append(entry)
    return found


def _iteration(prompt: str) -> str:
    results = parse_results(prompt)
    if not results:
        runs = "\n".join(
            _experiment(lr, f"lr={lr:g} bracket ({script})", script)
            for lr, script in zip(FIRST_LRS, FIRST_SCRIPTS, strict=True)
        )
        return (
            "I read train.py and launch three bracketing runs.\n"
            f"<experiments>\n{runs}\n</experiments>\n"
            "<summary>Launched lr = 0.01, 0.1 and 0.5 to bracket the learning rate.</summary>\n"
            "<promise>WAITING</promise>"
        )
    good = [r for r in results if r["ok"] and r["lr"] is not None and _finite(r["loss"])]
    failed = [r for r in results if not r["ok"]]
    note = (
        f" {len(failed)} run(s) failed: {', '.join(r['goal'] for r in failed)}." if failed else ""
    )
    previous = BEST_SO_FAR.findall(prompt)
    candidates = [(r["loss"], r["lr"]) for r in good]
    if previous:
        lr, loss = previous[-1]
        if _finite(float(loss)):
            candidates.append((float(loss), float(lr)))
    if not candidates:
        return (
            f"No run produced a usable loss.{note}\n<summary>Every run failed; see the logs."
            "</summary>\n<promise>DONE</promise>"
        )
    loss, lr = min(candidates)
    refined = any("refine" in r["goal"] for r in results)
    if refined:
        return (
            f"The refinement is in. The best learning rate is lr={lr:g} with a final loss of "
            f"{loss:.4g}.{note}\n"
            f"<summary>Done: best so far lr={lr:g} loss={loss:.6g}; lr={lr:g} is the answer."
            "</summary>\n<promise>DONE</promise>"
        )
    tried = sorted(r["lr"] for r in good)
    higher = [x for x in tried if x > lr]
    target = (lr * higher[0]) ** 0.5 if higher else lr * 1.5
    return (
        f"Of the bracketing runs, lr={lr:g} reached the lowest final loss ({loss:.4g}).{note} "
        "I refine between it and its neighbour.\n"
        f"<experiments>\n{_experiment(round(target, 4), f'refine at lr={target:.3g}')}\n"
        "</experiments>\n"
        f"<summary>best so far lr={lr:g} loss={loss:.6g}; refining at lr={target:.3g}."
        "</summary>\n<promise>WAITING</promise>"
    )


def _finite(value) -> bool:
    return isinstance(value, float) and value == value and abs(value) != float("inf")


def _reflection(prompt: str) -> str:
    best = BEST_SO_FAR.findall(prompt)
    lr, loss = best[-1] if best else ("unknown", "unknown")
    return (
        f"<reflection>The search bracketed the learning rate with three runs and refined once. "
        f"lr={lr} gave the lowest final loss ({loss}). Larger rates converge faster on this "
        "small linear problem until they overshoot.</reflection>\n"
        "<memories>\n"
        f"- [hyperparams] on train.py, lr={lr} gave the lowest final loss ({loss}) in 150 steps\n"
        "- [process] bracket with a few short runs an order of magnitude apart, then refine\n"
        "</memories>\n"
        "<continue>no</continue>"
    )
