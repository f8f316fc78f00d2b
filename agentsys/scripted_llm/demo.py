"""The demo brain: answers the research loop's prompts like a careful researcher running a
learning-rate search on the demo workspace's train.py, so a newcomer sees every part of the
loop work with no API key. It reads only the prompt (phase marker, results, history)."""

from __future__ import annotations

import re
import shlex
import sys
from dataclasses import dataclass

from agentsys.scripted_llm import demo_findings
from agentsys.scripted_llm.demo_findings import SCRIPT, Finding, finite, parse_results

MARKER = re.compile(r"<!-- agentsys-prompt: (planning|iteration|reflection) -->")
FIRST_LRS = (0.01, 0.1, 0.5)
# Every learning rate runs with both seeds, on train.py alone: a difference between two
# rates means something only when it is larger than the one between two seeds of one rate.
SEEDS = (0, 1)
# The workdir's twins of train.py log the same training in other ways: one run each shows
# AgentSys charting TensorBoard files and printed lines. They are not part of the comparison.
SHOWCASE = {"train_tensorboard.py": "TensorBoard event files", "train_prints.py": "printed lines"}
SHOWCASE_LR = 0.1
# train_tensorboard.py imports tensorboardX, installed with AgentSys: it runs with this
# interpreter (the demo model's own, AgentSys's), the stdlib-only twins with `python`.
INTERPRETERS = {"train_tensorboard.py": shlex.quote(sys.executable)}
STEPS = 150
# The TensorBoard twin runs for a few seconds: tensorboardX puts no pid in its file names, so
# AgentSys tells event files apart by which run's process holds one open, which it sees only
# if the writer is still running when it looks (agentsys.metric_sources.ownership).
MIN_STEP_SLEEP = {"train_tensorboard.py": 0.04}
BEST_SO_FAR = re.compile(r"best so far lr=([0-9.e-]+) loss=([0-9.e+-]+|nan|inf)")


@dataclass(frozen=True)
class Pace:
    """How slowly the demo goes: `seconds` is about how long a whole demo loop lasts (0: as
    fast as it can), so that a person watching it has time to pause, steer and stop it.
    About a third goes to the model's thinking, half to the trainings (two waves of runs),
    the rest is OpenCode's and the loop's own time."""

    seconds: float = 0.0

    @property
    def think_s(self) -> float:  # before each reply with text (about six in a loop)
        return self.seconds / 18

    def step_sleep(self, script: str) -> float:  # a wave of runs: STEPS steps
        return max(MIN_STEP_SLEEP.get(script, 0.005), self.seconds / 4 / STEPS)


FAST = Pace()


# AgentSys's MCP tools, as OpenCode names them (`<server>_<tool>`): the demo uses them where
# OpenCode offers them. The run tools are there only where the research-agent server was given
# AgentSys's address and a token.
LIST_DIRECTORY = "research-agent_list_directory"
LIST_RUNS, GET_RUN = "research-agent_list_runs", "research-agent_get_run"
RUN_ID = re.compile(r'"id"\s*:\s*"([A-Za-z0-9_-]{1,40})"')
ENTRY_NAME = re.compile(r'"name"\s*:\s*"([^"]{1,200})"')


def demo_steps(
    prompt: str, tools: set[str], results: dict[str, str], pace: Pace = FAST
) -> list[dict]:
    """One request's answer, given the tools OpenCode offers and the results of the calls
    made since the prompt: in an iteration, first each tool call it wants (one a request:
    OpenCode runs it and asks again with its result), then the reply, saying what they
    showed. The first iteration lists the workdir; a later one reads a finished run."""
    for name, arguments in _tools_wanted(prompt, tools, results):
        if name not in results:
            return [{"tool_call": {"name": name, "arguments": arguments}}]
    seen = _what_tools_showed(results)
    reply = demo_reply(prompt, pace)
    thinking = [{"stall": pace.think_s}] if pace.think_s else []
    return [*thinking, {"text": f"{seen}\n\n{reply}" if seen else reply}]


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


def demo_reply(prompt: str, pace: Pace = FAST) -> str:
    phases = MARKER.findall(prompt)
    if not phases:
        return _chat(prompt)
    phase = phases[-1]
    if phase == "planning":
        return _plan()
    if phase == "reflection":
        return _reflection(prompt)
    return _iteration(prompt, pace)


CHAT_MARKER = re.compile(r"<!-- agentsys-prompt: chat-(wild|auto|agent) -->")
SPEAKER = re.compile(r"^\[(USER|SYSTEM)\] ", re.MULTILINE)
RESEARCH_WORDS = re.compile(r"learning rate|\blr\b|research|experiment|train|sweep", re.I)
# "…on /home/ada/project": the project a person names, where the loop should work.
PROJECT_PATH = re.compile(r"\b(?:on|in|at)\s+(/[^\s'\"`<>]+[^\s'\"`<>.,;:!?])")
DEMO_GOAL = (
    "Find the learning rate for train.py that gives the lowest final "
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
            # Twelve: it is asked again as each wave of runs ends, not only once a wave.
            f"max_iterations: 12\n{_workdir_line(message)}</spawn_research>"
        )
    return (
        f"(demo model, {mode.upper()} mode) You said: {message[:500]}\n\n"
        "I am a scripted demo model, so I can only run the demo learning-rate search: ask "
        "for it in WILD mode, or in AUTO mode mention research or a learning rate."
    )


def _workdir_line(message: str) -> str:
    found = PROJECT_PATH.search(message)
    return f"workdir: {found.group(1)}\n" if found else ""


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


PLAN_STEPS = (
    "Compare lr = 0.01, 0.1 and 0.5 on train.py, each with seeds 0 and 1: one script for "
    "every run, so the losses compare, and two seeds to see how much is noise",
    "Refine between the best rate and its neighbour, again with seeds 0 and 1",
    "Show the two other ways of logging metrics with one run each (train_tensorboard.py: "
    "TensorBoard, train_prints.py: printed lines); they are not part of the comparison",
    "Report each learning rate's final losses with the runs they came from",
)


def _plan_text(done: int, found: list[Finding], shown: dict[str, str]) -> str:
    """The plan with its first `done` steps ticked, and what was found so far: the demo
    model's memory from one iteration to the next (the prompt shows the plan in full)."""
    lines = [f"- [{'x' if n < done else ' '}] {step}" for n, step in enumerate(PLAN_STEPS)]
    if found or shown:
        lines += ["", "Findings so far (final loss of each run on train.py):"]
        lines += [f.line() for f in found]
        lines += [f"- shown: {script} (run {run})" for script, run in shown.items()]
    return "\n".join(lines)


def _plan() -> str:
    return (
        f"<plan>\n{_plan_text(0, [], {})}\n</plan>\n"
        "<summary>A learning-rate search on train.py: three rates with two seeds each, one "
        "refinement with two seeds, then the answer with the run behind each number.</summary>"
    )


def _experiment(lr: float, seed: int, goal: str, pace: Pace, script: str = SCRIPT) -> str:
    return (
        f"- goal: {goal}\n"
        f'  command: echo "- lr={lr:g} seed={seed}: run started ({script})" >> results.md && '
        f"{INTERPRETERS.get(script, 'python')} {script} --steps={STEPS} "
        f"--sleep={pace.step_sleep(script):.3g}\n"
        "  workdir: .\n"
        f'  parameters: {{"lr": {lr:g}, "seed": {seed}}}\n'
        "  gpu_required: 0"
    )


def _both_seeds(lr: float, kind: str, pace: Pace) -> list[str]:
    return [_experiment(lr, seed, f"lr={lr:g} seed={seed} ({kind})", pace) for seed in SEEDS]


def _by_rate(found: list[Finding]) -> dict[float, list[Finding]]:
    rates: dict[float, list[Finding]] = {}
    for f in sorted(found, key=lambda f: (f.lr, f.seed)):
        rates.setdefault(f.lr, []).append(f)
    return rates


def _mean(runs: list[Finding]) -> float | None:
    losses = [f.loss for f in runs if finite(f.loss)]
    return sum(losses) / len(losses) if losses else None


def _cited(runs: list[Finding]) -> str:
    """`loss 0.0123 (run run-1a2b…), 0.0131 (run run-…)`: each number with its run."""
    parts = [
        (f"{f.loss:.4g}" if f.loss is not None else "failed") + f" (run {f.run})" for f in runs
    ]
    return "loss " + ", ".join(parts)


def _iteration(prompt: str, pace: Pace = FAST) -> str:
    results = parse_results(prompt)
    found = demo_findings.findings(prompt, results)
    shown = demo_findings.shown(prompt, results)
    tried = {f.lr for f in found}
    asked = [lr for lr in demo_findings.steered_lrs(prompt) if lr not in tried][:1]
    # The researcher's rate runs like the others: on train.py, with both seeds.
    steer = [f"As you asked, I add lr={asked[0]:g} (seeds 0 and 1)."] if asked else []
    if not found and not results:
        runs = [e for lr in FIRST_LRS for e in _both_seeds(lr, "bracket", pace)]
        runs += [e for lr in asked for e in _both_seeds(lr, "steer", pace)]
        rates = ", ".join(f"{lr:g}" for lr in (*FIRST_LRS, *asked))
        return (
            f"I read train.py and compare lr = {rates} on it, each with seeds 0 and 1. "
            f"{' '.join(steer)}\n"
            f"<experiments>\n{chr(10).join(runs)}\n</experiments>\n"
            f"<plan>\n{_plan_text(0, found, shown)}\n</plan>\n"
            f"<summary>Launched lr = {rates} on train.py with seeds 0 and 1 each.</summary>\n"
            "<promise>WAITING</promise>"
        )
    going = demo_findings.running(prompt)
    if going:  # read what came in, and wait for the rest of the comparison
        return _waiting(prompt, found, shown, going, asked, steer, pace)
    failed = [f for f in found if f.loss is None]
    note = f" {len(failed)} run(s) failed: {', '.join(f.run for f in failed)}." if failed else ""
    means = {lr: m for lr, runs in _by_rate(found).items() if (m := _mean(runs)) is not None}
    if not means:
        return (
            f"No run produced a usable loss.{note}\n<summary>Every run failed; see the logs."
            "</summary>\n<promise>DONE</promise>"
        )
    best = min(means, key=means.get)
    cited = _cited(_by_rate(found)[best])
    runs, said = [], []
    refined = any(f.kind == "refine" for f in found)
    if not refined:
        higher = sorted(lr for lr in means if lr > best)
        target = round((best * higher[0]) ** 0.5 if higher else best * 1.5, 4)
        runs += _both_seeds(target, "refine", pace)
        said.append(f"I refine at lr={target:g}, between it and its neighbour.")
    runs += [e for lr in asked for e in _both_seeds(lr, "steer", pace)]
    if not refined:  # shown beside the refinement, where there is room for them
        for script, way in SHOWCASE.items():
            if script not in shown:
                goal = f"show metrics logged as {way} (not compared)"
                runs.append(_experiment(SHOWCASE_LR, 0, goal, pace, script))
        said.append("Two more runs show the other ways of logging; they are not compared.")
    summary = f"best so far lr={best:g} loss={means[best]:.6g}"
    lead = f"lr={best:g} has the lowest mean final loss over seeds 0 and 1: {cited}.{note}"
    done = 3 if refined else 1
    if not runs:
        return (
            f"The refinement is in. {lead}\n"
            f"<plan>\n{_plan_text(done, found, shown)}\n</plan>\n"
            f"<summary>Done: {summary}; lr={best:g} is the answer.</summary>\n"
            "<promise>DONE</promise>"
        )
    return (
        f"{lead} {' '.join(steer + said)}\n"
        f"<experiments>\n{chr(10).join(runs)}\n</experiments>\n"
        f"<plan>\n{_plan_text(done, found, shown)}\n</plan>\n"
        f"<summary>{summary}; {'refining' if not refined else 'running your rate'}."
        "</summary>\n<promise>WAITING</promise>"
    )


def _waiting(prompt, found, shown, going, asked, steer, pace) -> str:
    """Some of the comparison's runs ended and others go on: note what came in (a run that
    its rule stopped says so), start a rate the researcher asked for now, and wait."""
    woke = demo_findings.woke(prompt)
    runs = [e for lr in asked for e in _both_seeds(lr, "steer", pace)]
    done = 1 if any(f.kind == "refine" for f in found) or any("refine" in g for g in going) else 0
    heard = f"{woke[0].upper()}{woke[1:]}." if woke else "A run ended."
    listed = f"<experiments>\n{chr(10).join(runs)}\n</experiments>" if runs else ""
    return (
        f"{heard} {len(found)} of the comparison's runs are in; I wait for the {len(going)} "
        f"still running ({'; '.join(going[:4])}). {' '.join(steer)}\n{listed}\n"
        f"<plan>\n{_plan_text(done, found, shown)}\n</plan>\n"
        f"<summary>{len(found)} runs in, {len(going)} still running.</summary>\n"
        "<promise>WAITING</promise>"
    )


def _reflection(prompt: str) -> str:
    found = demo_findings.findings(prompt, parse_results(prompt))
    rates = _by_rate(found)
    means = {lr: m for lr, runs in rates.items() if (m := _mean(runs)) is not None}
    if not means:
        return (
            "<reflection>No run on train.py logged a usable loss, so no learning rate can be "
            "recommended.</reflection>\n<memories>\n- [process] check that train.py runs "
            "before a search\n</memories>\n<continue>no</continue>"
        )
    best = min(means, key=means.get)
    lines = [
        f"- lr={lr:g}{' (your steer)' if any(f.kind == 'steer' for f in runs) else ''}: "
        f"{_cited(runs)}"
        for lr, runs in rates.items()
    ]
    losses = [f.loss for f in rates[best] if finite(f.loss)]
    seeds = f" Its seeds differ by {max(losses) - min(losses):.2g}." if len(losses) > 1 else ""
    return (
        "<reflection>Every rate ran train.py with seeds 0 and 1 (one script, so the numbers "
        "compare); the final losses, each with the run it came from:\n"
        + "\n".join(lines)
        + f"\nlr={best:g} gave the lowest mean final loss ({means[best]:.4g}).{seeds} The "
        "TensorBoard and printed-lines runs only showed how AgentSys reads those logs; they "
        "are not in the comparison.</reflection>\n"
        "<memories>\n"
        f"- [hyperparams] on train.py, lr={best:g} gave the lowest mean final loss "
        f"({means[best]:.4g}) over seeds 0 and 1 in {STEPS} steps\n"
        "- [process] compare rates on one script with two seeds each, then refine\n"
        "</memories>\n"
        "<continue>no</continue>"
    )
