"""The demo model's learning-rate search (issue 37 §5), read from the prompts the loop really
renders (skills/wild_v2_*, agentsys.research.results): one script, two seeds a rate, the
metric-source runs apart from the comparison, each reported loss with its run, a steer's
learning rate in the next experiments, and a pace a person can watch."""

import re
import subprocess
import sys

import pytest

from agentsys.research.reply import parse_reply
from agentsys.research.results import ExperimentResult, format_results
from agentsys.scripted_llm.demo import Pace, demo_reply, demo_steps
from agentsys.skills import PromptSkills
from tests.helpers import REPO

SKILLS = PromptSkills(REPO / "skills")
DEMO = REPO / "researchagent" / "demo_workspace"


def prompt(
    skill: str, *, plan: str, results: list, steer: str = "", iteration: int = 1, running: str = ""
) -> str:
    return SKILLS.render(
        skill,
        {
            "goal": "Find the best learning rate for train.py",
            "iteration": iteration,
            "max_iterations": 6,
            "workdir": "/w",
            "tasks_path": "/w/tasks.md",
            "log_path": "/w/iteration_log.md",
            "autonomy_level": "balanced",
            "plan": plan,
            "history": "Plan: a search",
            "experiment_results": format_results(results) if results else "No runs yet.",
            "steer_context": steer,
            "running_experiments": running,
        },
    )


def loss_of(lr: float, seed: int) -> float:
    """A made-up final loss: best near lr=0.2, the seed moving it a little."""
    return round(abs(lr - 0.2) + 0.01 + 0.003 * seed, 6)


class Loop:
    """The loop's side, as agentsys.agents.research plays it: each reply's experiments end
    (run ids run-1, run-2, ...), and the next prompt shows them and the reply's plan."""

    def __init__(self):
        self.plan, self.results, self.runs, self.iteration = "", [], 0, 0
        self.every: list[ExperimentResult] = []  # the test's record; the loop keeps the last

    def ask(self, skill: str, steer: str = ""):
        text = demo_reply(
            prompt(
                skill, plan=self.plan, results=self.results, steer=steer, iteration=self.iteration
            )
        )
        reply = parse_reply(text)
        self.plan = reply.plan or self.plan
        return reply

    def iterate(self, steer: str = ""):
        self.iteration += 1
        reply = self.ask("wild_v2_iteration", steer)
        ended = []
        for spec in reply.experiments:
            self.runs += 1
            lr, seed = spec.parameters["lr"], spec.parameters["seed"]
            loss = loss_of(lr, seed)
            ended.append(
                ExperimentResult(
                    goal=spec.goal,
                    run_id=f"executor-{self.runs}",
                    run=f"run-{self.runs}",
                    command=spec.command,
                    parameters=spec.parameters,
                    status="done",
                    exit_code=0,
                    metrics={"loss": {"last": loss, "min": loss, "max": 4.0, "points": 15}},
                )
            )
        self.results = ended or self.results  # as the loop keeps the last ones
        self.every += ended
        return reply


def script_of(spec) -> str:
    return re.findall(r"(\w+\.py)", spec.command)[-1]


def test_the_demo_compares_learning_rates_on_train_py_with_seeds_0_and_1():
    loop = Loop()
    loop.ask("wild_v2_planning")
    first = loop.iterate()
    assert {script_of(e) for e in first.experiments} == {"train.py"}
    assert sorted((e.parameters["lr"], e.parameters["seed"]) for e in first.experiments) == [
        (0.01, 0), (0.01, 1), (0.1, 0), (0.1, 1), (0.5, 0), (0.5, 1)
    ]  # fmt: skip
    second = loop.iterate()
    compared = [e for e in second.experiments if script_of(e) == "train.py"]
    assert [e.parameters["seed"] for e in compared] == [0, 1]
    assert len({e.parameters["lr"] for e in compared}) == 1  # one refinement, two seeds
    assert 0.1 < compared[0].parameters["lr"] < 0.5
    # The other ways of logging: one run each, said not to be compared.
    others = [e for e in second.experiments if script_of(e) != "train.py"]
    assert sorted(map(script_of, others)) == ["train_prints.py", "train_tensorboard.py"]
    assert all("not compared" in e.goal for e in others)
    assert loop.iterate().promise == "DONE"


def test_the_demo_report_gives_each_loss_with_the_run_it_came_from():
    loop = Loop()
    loop.ask("wild_v2_planning")
    while loop.iterate().promise != "DONE":
        assert loop.iteration < 6
    reflection = loop.ask("wild_v2_reflection").reflection
    compared = [r for r in loop.every if script_of(r) == "train.py"]
    assert len(compared) == 8  # three rates and the refinement, two seeds each
    for r in compared:
        lr = r.parameters["lr"]
        line = next(x for x in reflection.splitlines() if x.startswith(f"- lr={lr:g}"))
        assert f"{loss_of(lr, r.parameters['seed']):.4g} (run {r.run})" in line, line
    # The runs that only showed a way of logging are no number in the comparison.
    shown = [r for r in loop.every if r not in compared]
    assert len(shown) == 2 and not any(r.run in reflection for r in shown)
    assert "lowest mean final loss" in reflection


@pytest.mark.parametrize("words", ["Please try lr=0.05 too", "learning rate 0.05 next"])
def test_a_steer_naming_a_learning_rate_puts_it_in_the_next_experiments(words):
    loop = Loop()
    loop.ask("wild_v2_planning")
    loop.iterate()
    steered = loop.iterate(steer=words)
    rates = [(e.parameters["lr"], e.parameters["seed"]) for e in steered.experiments]
    assert (0.05, 0) in rates and (0.05, 1) in rates, rates
    assert all(
        script_of(e) == "train.py" for e in steered.experiments if e.parameters["lr"] == 0.05
    )
    # Steered before its first iteration, it compares the rate with the first three.
    first = parse_reply(demo_reply(prompt("wild_v2_iteration", plan="", results=[], steer=words)))
    assert sorted(
        e.parameters["seed"] for e in first.experiments if e.parameters["lr"] == 0.05
    ) == [0, 1]
    assert len(first.experiments) == 8
    # Asked once more after it ran, the rate is not run again; the loop ends.
    assert loop.iterate(steer=words).promise == "DONE"


def test_a_steer_after_the_refinement_is_run_before_the_loop_ends():
    loop = Loop()
    loop.ask("wild_v2_planning")
    loop.iterate()
    loop.iterate()
    late = loop.iterate(steer="Before you stop: lr=0.3, please")
    assert late.promise == "WAITING"
    assert sorted(e.parameters["seed"] for e in late.experiments) == [0, 1]
    assert {e.parameters["lr"] for e in late.experiments} == {0.3}
    assert loop.iterate().promise == "DONE"
    assert "- lr=0.3 (your steer): loss" in loop.ask("wild_v2_reflection").reflection


def test_the_demo_pace_makes_the_model_think_and_the_trainings_last():
    iteration = prompt("wild_v2_iteration", plan="", results=[])
    fast = demo_steps(iteration, set(), {})
    assert not any("stall" in step for step in fast)
    paced = demo_steps(iteration, set(), {}, Pace(60))
    assert sum(step.get("stall", 0) for step in paced) >= 3  # seconds before the reply
    commands = [e.command for e in parse_reply(paced[-1]["text"]).experiments]
    steps_s = [
        int(re.search(r"--steps=(\d+)", c)[1]) * float(re.search(r"--sleep=(\S+)", c)[1])
        for c in commands
    ]
    assert min(steps_s) >= 10  # a wave of runs lasts long enough to pause or steer it
    fast_commands = [e.command for e in parse_reply(fast[-1]["text"]).experiments]
    assert all("--sleep=0.005" in c for c in fast_commands)


@pytest.mark.parametrize("script", ["train.py", "train_prints.py"])
def test_the_demo_scripts_seed_changes_their_losses_and_repeats_them(tmp_path, script):
    def final_line(seed: int) -> str:
        done = subprocess.run(
            [
                sys.executable,
                str(DEMO / script),
                "--lr=0.1",
                "--steps=50",
                "--sleep=0",
                f"--seed={seed}",
            ],
            cwd=tmp_path,
            env={"AGENTSYS_RUN_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            check=True,
        )
        return [line for line in done.stdout.splitlines() if "loss" in line][-1]

    assert final_line(0) == final_line(0)
    assert final_line(0) != final_line(1)


def test_with_part_of_the_comparison_in_the_demo_notes_it_and_waits_for_the_rest():
    """The loop is woken as runs end (issue 39 §3): the demo reads the two that ended (one
    stopped by its NaN rule), keeps them in its plan, and waits for the four still running;
    once they are in, it refines as before."""
    loop = Loop()
    loop.ask("wild_v2_planning")
    first = loop.iterate()
    specs = first.experiments
    ended = loop.results[:2]
    ended[1].status, ended[1].error = "stopped", "stopped by its rule: loss is NaN or inf: nan"
    going = "\n".join(
        f"- run run-{k + 3}: {spec.goal} (`{spec.command}`, parameters {{}})"
        for k, spec in enumerate(specs[2:])
    )
    running = f"What woke you: run run-2 ({specs[1].goal}) ended stopped\nStill running:\n{going}"
    text = demo_reply(
        prompt("wild_v2_iteration", plan=loop.plan, results=ended, iteration=2, running=running)
    )
    waiting = parse_reply(text)
    assert waiting.promise == "WAITING" and not waiting.experiments
    assert "Run run-2 (lr=0.01 seed=1 (bracket)) ended stopped." in text
    assert "2 of the comparison's runs are in; I wait for the 4 still running" in text
    assert "- lr=0.01 seed=0 (bracket): loss" in waiting.plan
    assert "- lr=0.01 seed=1 (bracket): failed (run run-2)" in waiting.plan
    rest = loop.every[2:]
    text = demo_reply(prompt("wild_v2_iteration", plan=waiting.plan, results=rest, iteration=3))
    refined = parse_reply(text)
    assert any("(refine)" in spec.goal for spec in refined.experiments)
