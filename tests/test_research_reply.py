"""Reading the research model's replies (issue 10 item 6): the cases of the design doc and
the original, and nothing a model writes can crash the loop."""

from hypothesis import given, settings
from hypothesis import strategies as st

from agentsys.research.reply import parse_reply

EXPERIMENTS = """<experiments>
- goal: baseline
  command: python train.py --steps=100
  workdir: .
  parameters: {"lr": 0.01, "seed": 1}
  gpu_required: 1
- goal: broken params
  command: python train.py
  parameters: {lr: 0.1}
  gpu_required: 0
- goal: no command here
  parameters: {}
- goal: bad gpus
  command: python train.py
  gpu_required: two
</experiments>"""


def test_the_last_promise_wins_and_is_upper_cased_and_stripped():
    reply = parse_reply("<promise>WAITING</promise> later... <promise> done </promise>")
    assert reply.promise == "DONE"


def test_no_promise_is_none():
    assert parse_reply("just text").promise is None


def test_continue_is_true_only_for_yes_true_and_1():
    for word in ("yes", "Yes", "TRUE", "1", " yes "):
        assert parse_reply(f"<continue>{word}</continue>").continue_loop is True, word
    for word in ("no", "false", "0", "maybe", ""):
        assert parse_reply(f"<continue>{word}</continue>").continue_loop is False, word
    assert parse_reply("no tag").continue_loop is None


def test_memories_with_and_without_tags():
    reply = parse_reply(
        "<memories>\n- [HyperParams] lr=0.1 was best\n- untagged lesson\n\nnot a list line\n"
        "* [process]   keep runs short\n- [] empty tag\n</memories>"
    )
    assert reply.memories == [
        ("hyperparams", "lr=0.1 was best"),
        ("general", "untagged lesson"),
        ("process", "keep runs short"),
        ("general", "empty tag"),
    ]


def test_experiments_valid_ones_run_and_each_bad_one_is_explained():
    reply = parse_reply(EXPERIMENTS)
    assert len(reply.experiments) == 1
    spec = reply.experiments[0]
    assert (spec.goal, spec.command, spec.workdir) == (
        "baseline",
        "python train.py --steps=100",
        ".",
    )
    assert spec.parameters == {"lr": 0.01, "seed": 1} and spec.gpu_required == 1
    problems = "\n".join(reply.problems)
    assert "'broken params'" in problems and "not valid JSON" in problems
    assert "'no command here'" in problems and "no command" in problems
    assert "'bad gpus'" in problems and "gpu_required" in problems


def test_the_singular_experiment_tag_is_accepted():
    reply = parse_reply("<experiment>\n- goal: one\n  command: echo hi\n</experiment>")
    assert [(e.goal, e.command, e.gpu_required) for e in reply.experiments] == [
        ("one", "echo hi", 0)
    ]


def test_a_multi_line_command_block():
    reply = parse_reply(
        "<experiments>\n- goal: two steps\n  command: |\n    python prep.py\n    python train.py\n"
        "  gpu_required: 0\n</experiments>"
    )
    assert reply.experiments[0].command == "python prep.py\npython train.py"


def test_a_prompt_echo_followed_by_the_real_answer_takes_the_real_answer():
    echo = (
        "Answer with <promise>DONE</promise> when done.\n<experiments>\n- goal: example\n"
        "  command: python example.py\n</experiments>\n<summary>example summary</summary>\n"
    )
    real = (
        "<experiments>\n- goal: real\n  command: python real.py\n</experiments>\n"
        "<summary>the real summary</summary>\n<promise>WAITING</promise>"
    )
    reply = parse_reply(echo + real)
    assert reply.promise == "WAITING"
    assert reply.summary == "the real summary"
    assert [e.command for e in reply.experiments] == ["python real.py"]


def test_summary_falls_back_to_the_first_300_characters_without_tags():
    text = "<promise>CONTINUE</promise>" + "word " * 200
    summary = parse_reply(text).summary
    assert len(summary) == 300 and "promise" not in summary and summary.startswith("word word")


def test_an_unclosed_tag_is_a_problem_not_an_exception():
    reply = parse_reply("<plan>1. never closed")
    assert reply.plan is None
    assert any("<plan> was opened but never closed" in p for p in reply.problems)


def test_plan_and_reflection():
    reply = parse_reply("<plan>\n1. a\n2. b\n</plan><reflection>went well</reflection>")
    assert reply.plan == "1. a\n2. b" and reply.reflection == "went well"


PIECES = [
    *'<>/-:{}[]\n ab1"',
    "<experiments>",
    "</experiments>",
    "- goal:",
    "command:",
    "parameters:",
    "gpu_required:",
    "<promise>",
    "</promise>",
    "<memories>",
    "</memories>",
    "<continue>",
    "</continue>",
    "<experiment>",
    "  ",
    "|",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=60).map("".join))
def test_parse_reply_never_raises(text):
    reply = parse_reply(text)
    assert isinstance(reply.problems, list)
    assert all(isinstance(e.gpu_required, int) and e.command for e in reply.experiments)
