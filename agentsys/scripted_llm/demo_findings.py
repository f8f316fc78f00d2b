"""What the demo model reads out of a research prompt: the runs that ended (the results
section), the findings it wrote into its own plan earlier (its only memory: it reads nothing
but the prompt, and the results section holds only the last iteration's runs), and a learning
rate the researcher asked for in a steer."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

SCRIPT = "train.py"  # the one script the comparison runs
RESULTS_HEADING = "## Results from Previous Experiments"
GUIDANCE_HEADING = "## Guidance from the researcher"
RUNNING_HEADING = "## Experiments still running"
# A run that goes on while the loop reads the others: `- run run-1a2b…: lr=0.1 seed=0 (bracket) (`
RUNNING = re.compile(r"^- run (\S+): (.*?) \(`", re.MULTILINE)
WOKE = re.compile(r"^What woke you: (.*)$", re.MULTILINE)
# A finding as the demo writes it into its plan, one run a line:
# `- lr=0.1 seed=0 (bracket): loss 0.0123 (run run-1a2b3c4d)`, or `failed` for the loss.
FINDING = re.compile(
    r"^- lr=([0-9.e-]+) seed=(\d+) \((\w+)\): (?:loss (\S+)|failed) \(run (\S+)\)$", re.MULTILINE
)
# A run that only shows a way of logging metrics: `- shown: train_prints.py (run run-…)`.
SHOWN = re.compile(r"^- shown: (\S+) \(run (\S+)\)$", re.MULTILINE)
# "lr=0.05", "lr 0.05", "learning rate of 0.05", "learning-rate: 5e-2"
STEERED_LR = re.compile(
    r"\b(?:lr|learning[ _-]?rate)\s*(?:=|:|of|to|at|is)?\s*(\d*\.?\d+(?:e-?\d+)?)", re.I
)


@dataclass
class Finding:
    lr: float
    seed: int
    kind: str  # bracket, refine or steer: why the run was made
    loss: float | None  # None: the run failed or logged no loss
    run: str

    def line(self) -> str:
        outcome = f"loss {self.loss:.6g}" if self.loss is not None else "failed"
        return f"- lr={self.lr:g} seed={self.seed} ({self.kind}): {outcome} (run {self.run})"


def parse_results(prompt: str) -> list[dict]:
    """The experiments in the LAST results section: goal, run, script, lr, seed, status,
    final loss."""
    start = prompt.rfind(RESULTS_HEADING)
    if start < 0:
        return []
    found = []
    for block in prompt[start:].split("### Experiment ")[1:]:
        entry = {"goal": block.split("\n", 1)[0].split(": ", 1)[-1].strip()}
        run = re.search(r"^- run: (\S+)", block, re.MULTILINE)
        entry["run"] = run.group(1) if run else ""
        command = re.search(r"^- command: `(.*)`$", block, re.MULTILINE)
        scripts = re.findall(r"(\w+\.py)\b", command.group(1)) if command else []
        entry["script"] = scripts[-1] if scripts else ""
        params = re.search(r"^- parameters: (\{.*\})$", block, re.MULTILINE)
        try:
            values = json.loads(params.group(1)) if params else {}
        except ValueError:
            values = {}
        entry["lr"] = _number(values.get("lr"))
        entry["seed"] = int(_number(values.get("seed")) or 0)
        status = re.search(r"^- status: (\S+)", block, re.MULTILINE)
        entry["ok"] = bool(status) and status.group(1) == "done"
        loss = re.search(r"loss last=(\S+)", block)
        entry["loss"] = _number(loss.group(1)) if loss else None
        found.append(entry)
    return found


def _number(value) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def finite(value) -> bool:
    return isinstance(value, float) and value == value and abs(value) != float("inf")


def findings(prompt: str, results: list[dict]) -> list[Finding]:
    """Every comparison run so far, oldest first: those in the plan, then the new results
    (a run already in the plan is not counted twice)."""
    found = {
        m.group(5): Finding(
            lr=float(m.group(1)),
            seed=int(m.group(2)),
            kind=m.group(3),
            loss=_number(m.group(4)),
            run=m.group(5),
        )
        for m in FINDING.finditer(prompt)
    }
    for r in results:
        if r["script"] != SCRIPT or r["lr"] is None or not r["run"] or r["run"] in found:
            continue
        loss = r["loss"] if r["ok"] and finite(r["loss"]) else None
        kind = next((k for k in ("refine", "steer") if k in r["goal"]), "bracket")
        found[r["run"]] = Finding(lr=r["lr"], seed=r["seed"], kind=kind, loss=loss, run=r["run"])
    return list(found.values())


def shown(prompt: str, results: list[dict]) -> dict[str, str]:
    """The runs that showed another way of logging metrics: {script: run}."""
    found = {m.group(1): m.group(2) for m in SHOWN.finditer(prompt)}
    for r in results:
        if r["script"] and r["script"] != SCRIPT and r["run"]:
            found.setdefault(r["script"], r["run"])
    return found


def running(prompt: str) -> list[str]:
    """The goals of the comparison's runs that still go on (not those only showing a way of
    logging)."""
    start = prompt.rfind(RUNNING_HEADING)
    if start < 0:
        return []
    section = prompt[start:].split("\n## ", 1)[0]
    return [m.group(2) for m in RUNNING.finditer(section) if "not compared" not in m.group(2)]


def woke(prompt: str) -> str:
    """What woke the loop, as its prompt says it ("" when nothing did)."""
    start = prompt.rfind(RUNNING_HEADING)
    found = WOKE.search(prompt, start) if start >= 0 else None
    return found.group(1).strip() if found else ""


def steered_lrs(prompt: str) -> list[float]:
    """The learning rates the researcher's guidance names, in its order."""
    start = prompt.rfind(GUIDANCE_HEADING)
    if start < 0:
        return []
    guidance = prompt[start:].split("\n## ", 1)[0]
    rates = []
    for match in STEERED_LR.finditer(guidance):
        rate = float(match.group(1))
        if 0 < rate < 10 and rate not in rates:
            rates.append(rate)
    return rates
