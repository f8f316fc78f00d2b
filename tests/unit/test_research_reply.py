"""Reading the research model's replies (issue 10 item 6): the cases of the loop's prompts and
the original, and nothing a model writes can crash the loop."""

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from agentsys.research.reply import END_MARKER, parse_reply
from agentsys.skills import PromptSkills
from tests.helpers import REPO

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
    assert len(summary) <= 300 and "promise" not in summary and summary.startswith("word word")
    assert summary.endswith("word…")  # cut between words, and said to be cut


def test_a_cut_summary_ends_at_a_word_not_inside_a_bracket():
    # As a real reflection ran on: a list of results, each naming its run in brackets.
    text = "Every rate ran: " + "lr=0.01: loss 0.3869 (run run-9f180db9), " * 12
    summary = parse_reply(text).summary
    assert summary.endswith("…") and not summary[:-1].endswith(("(", "(run", ","))
    assert text.startswith(summary[:-1]) and len(summary) <= 300
    short = "Ran the baseline; loss 0.31."
    assert parse_reply(short).summary == short  # nothing cut, nothing added


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
    "`",
    END_MARKER,
    "<plan>",
    "</plan>",
    "```",
    "```yaml\n",
    "<think>",
    "</think>",
    '[{"goal": "g", "command": "c",}',
    "//",
    "/*",
    "1. ",
    '<promise value="',
    "/>",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=60).map("".join))
def test_parse_reply_never_raises(text):
    reply = parse_reply(text)
    assert isinstance(reply.problems, list)
    assert all(isinstance(e.gpu_required, int) and e.command for e in reply.experiments)


# -- echoes, prose mentions and the end marker ---------------------------------------------


def test_a_tag_named_in_prose_does_not_swallow_the_text_before_the_block():
    reply = parse_reply("Answer in a <plan> tag, like so.\n<plan>1. measure</plan>")
    assert reply.plan == "1. measure"
    assert reply.problems == []


def test_an_echoed_prompt_before_the_end_marker_is_never_read():
    skills = PromptSkills(REPO / "skills")
    prompt = skills.render("wild_v2_iteration", {"goal": "g", "iteration": 1})
    assert "<experiments>" in prompt  # the example the model is shown
    reply = parse_reply(prompt + "\nI only read the code.\n<summary>read it</summary>")
    assert reply.experiments == [] and reply.promise is None
    assert reply.summary == "read it" and reply.problems == []


def test_a_reply_that_ends_with_the_marker_itself_is_still_read():
    reply = parse_reply(f"<promise>DONE</promise>\n{END_MARKER}\n")
    assert reply.promise == "DONE"


def test_an_unclosed_tag_after_a_complete_one_is_reported_and_not_taken_from_the_echo():
    reply = parse_reply("<promise>WAITING</promise> (example)\nreal: <promise>DONE")
    assert any("<promise> was opened but never closed" in p for p in reply.problems)


def test_promise_emphasis_and_full_stop_are_dropped():
    assert parse_reply("<promise>**Done.**</promise>").promise == "DONE"
    assert parse_reply("<promise>  </promise>").promise is None


def test_an_empty_summary_tag_falls_back_to_the_text():
    reply = parse_reply("<summary></summary> Ran the baseline. <promise>CONTINUE</promise>")
    assert reply.summary == "Ran the baseline."


# -- experiment entries the way models write them --------------------------------------------


def _experiments(body: str):
    return parse_reply(f"<experiments>\n{body}\n</experiments>")


def test_backticked_commands_and_quoted_values_are_unwrapped():
    reply = _experiments(
        '- goal: "baseline"\n  command: `python train.py --steps=10`\n  workdir: "."\n'
        '  gpu_required: "1"'
    )
    spec = reply.experiments[0]
    assert (spec.goal, spec.command, spec.workdir, spec.gpu_required) == (
        "baseline",
        "python train.py --steps=10",
        ".",
        1,
    )


def test_a_wrapped_command_is_folded_and_a_note_between_fields_is_ignored():
    reply = _experiments(
        "- goal: long one\n  command: python train.py --steps=100 \\\n"
        "      --log-every=10\n  Note: this one is cheap\n  gpu_required: 0"
    )
    assert reply.experiments[0].command == "python train.py --steps=100 --log-every=10"
    assert reply.problems == []


def test_a_command_block_keeps_its_lines_even_when_they_look_like_fields():
    reply = _experiments(
        "- goal: prep then train\n  command: |\n    python prep.py\n    goal: not a field\n"
        "  parameters: {}\n- goal: second\n  command: echo 2"
    )
    assert [e.command for e in reply.experiments] == [
        "python prep.py\ngoal: not a field",
        "echo 2",
    ]


def test_parameters_may_span_lines():
    reply = _experiments(
        '- goal: g\n  command: c\n  parameters: {\n    "lr": 0.1,\n'
        '    "seed": 2\n  }\n  gpu_required: 0'
    )
    assert reply.experiments[0].parameters == {"lr": 0.1, "seed": 2}


def test_entries_without_dashes_or_with_a_dash_per_field_split_right():
    plain = _experiments("goal: a\ncommand: echo a\n\ngoal: b\ncommand: echo b")
    assert [(e.goal, e.command) for e in plain.experiments] == [("a", "echo a"), ("b", "echo b")]
    dashed = _experiments("- goal: a\n- command: echo a\n- goal: b\n- command: echo b")
    assert [(e.goal, e.command) for e in dashed.experiments] == [("a", "echo a"), ("b", "echo b")]


def test_empty_parameters_words_mean_no_parameters():
    for word in ("none", "null", "{}", "-", ""):
        reply = _experiments(f"- goal: g\n  command: c\n  parameters: {word}")
        assert reply.experiments[0].parameters == {}, word


def test_parameters_that_are_not_an_object_or_have_unsafe_names_are_refused():
    reply = _experiments(
        "- goal: list\n  command: c\n  parameters: [1, 2]\n"
        '- goal: unsafe\n  command: c\n  parameters: {"lr; rm -rf ~": 1}'
    )
    assert reply.experiments == []
    problems = "\n".join(reply.problems)
    assert "experiment 1 ('list'): parameters must be a JSON object" in problems
    assert "experiment 2 ('unsafe')" in problems and "'lr; rm -rf ~'" in problems


def test_a_negative_or_fractional_gpu_count_is_refused():
    reply = _experiments(
        "- goal: neg\n  command: c\n  gpu_required: -1\n"
        "- goal: half\n  command: c\n  gpu_required: 0.5"
    )
    assert reply.experiments == []
    assert ["'-1'" in reply.problems[0], "'0.5'" in reply.problems[1]] == [True, True]


def test_a_goal_less_entry_uses_its_command_as_goal():
    reply = _experiments("- command: python sweep.py\n  gpu_required: 0")
    assert reply.experiments[0].goal == "python sweep.py"


def test_no_experiments_said_in_words_is_not_a_problem_but_prose_is():
    assert _experiments("none").problems == []
    assert "held no `- goal:` entries" in _experiments("run train.py twice").problems[0]


def test_numbered_memories_are_read():
    reply = parse_reply("<memories>\n1. [Data] shuffle first\n2) keep seeds\n</memories>")
    assert reply.memories == [("data", "shuffle first"), ("general", "keep seeds")]


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_parse_reply_never_raises_on_any_text(text):
    reply = parse_reply(text)
    assert isinstance(reply.summary, str) and len(reply.summary) <= 300


def test_text_whose_lower_case_is_longer_does_not_shift_the_tags():
    # "İ".lower() is two characters: positions must come from the text itself
    reply = parse_reply("İİİİ <promise>DONE</promise> <summary>Ölçüm İyi</summary>")
    assert (reply.promise, reply.summary) == ("DONE", "Ölçüm İyi")


def test_a_degenerate_reply_of_many_unclosed_tags_is_read_quickly():
    started = time.monotonic()
    reply = parse_reply("<a><summary>" * 40000 + "<plan>p</plan>" * 20000)
    assert time.monotonic() - started < 5
    assert reply.plan == "p" and any("<summary> was opened" in p for p in reply.problems)


def test_absurdly_nested_parameters_are_a_problem_not_a_crash():
    reply = _experiments("- goal: deep\n  command: c\n  parameters: " + "[" * 100000)
    assert reply.experiments == [] and "not valid JSON" in reply.problems[0]


def test_a_command_block_written_without_indentation_still_takes_its_lines():
    reply = _experiments("- goal: g\n  command: |\n  python a.py\n  python b.py\n  gpu_required: 0")
    assert reply.experiments[0].command == "python a.py\npython b.py"


def test_a_command_block_keeps_the_indentation_inside_it():
    reply = _experiments(
        "- goal: inline script\n  command: |\n    python - <<'EOF'\n    for i in range(2):\n"
        "        print(i)\n    EOF\n  gpu_required: 0"
    )
    assert reply.experiments[0].command == (
        "python - <<'EOF'\nfor i in range(2):\n    print(i)\nEOF"
    )


# -- replies as real models write them (issue 35) --------------------------------------------


def test_a_promise_only_mentioned_in_inline_code_is_not_a_promise():
    reply = parse_reply(
        "I am not done yet: I still need the lr=0.2 run. When the goal is reached I will "
        "answer with `<promise>DONE</promise>`."
    )
    assert reply.promise is None
    assert "only inside code" in reply.problems[0]


def test_a_format_reminder_in_a_fence_after_the_real_promise_does_not_count():
    reply = parse_reply(
        "<summary>Ran the baseline.</summary>\n<promise>CONTINUE</promise>\n\n"
        "For reference, the format is:\n```\n<summary>...</summary>\n<promise>DONE</promise>\n```"
    )
    assert (reply.promise, reply.summary, reply.problems) == ("CONTINUE", "Ran the baseline.", [])
    # while a whole reply in one ```markdown fence is the answer itself (real models do that)
    reply = parse_reply(
        "```markdown\n<experiments>\n- goal: a\n  command: echo a\n</experiments>\n"
        "<promise>WAITING</promise>\n```"
    )
    assert reply.promise == "WAITING" and [e.command for e in reply.experiments] == ["echo a"]


def test_tags_in_a_think_part_are_not_used():
    reply = parse_reply("<think>Say <promise>DONE</promise>? No.</think>\n<summary>s</summary>")
    assert reply.promise is None


def test_promises_are_read_tolerantly_and_the_reason_is_kept():
    for text in (
        "<promise>Done!</promise>",
        "< promise >DONE</ promise >",
        '<promise value="DONE"/>',
        "<PROMISE status='done' />",
        "<promise>_done_</promise>",
    ):
        assert parse_reply(text).promise == "DONE", text
    reply = parse_reply("<promise>DONE — the goal is reached: lr=0.05 is best</promise>")
    assert reply.promise == "DONE"
    assert reply.promise_reason == "the goal is reached: lr=0.05 is best"


def test_a_promise_that_is_no_promise_is_a_note_naming_the_three_words():
    reply = parse_reply("<promise>finished, mostly</promise>")
    assert reply.promise is None
    assert reply.problems == [
        "<promise> held 'finished, mostly', which is not a promise: it must start with DONE, "
        "CONTINUE or WAITING; it was ignored"
    ]


def test_a_yaml_fence_inside_experiments_leaves_no_backticks_in_the_entry():
    reply = _experiments(
        "```yaml\n- goal: block\n  command: |\n    echo one\n    echo two\n"
        '- goal: params last\n  command: echo p\n  parameters: {"lr": 0.1}\n```'
    )
    assert [(e.command, e.parameters) for e in reply.experiments] == [
        ("echo one\necho two", {}),
        ("echo p", {"lr": 0.1}),
    ]
    assert reply.problems == []


def test_a_json_array_of_experiments_with_comments_and_trailing_commas():
    for body in (
        '[{"goal": "a", "command": "echo a", "parameters": {"lr": 0.1,}, "gpu_required": 1},]',
        '```json\n[\n  // the baseline\n  {"goal": "a", "command": "echo a",\n'
        '   "parameters": {"lr": 0.1}, "gpu_required": "1"}\n]\n```',
        '{"experiments": [{"Goal": "a", "command": ["echo a"], "parameters": {"lr": 0.1},'
        ' "gpu_required": 1}]}',
    ):
        reply = _experiments(body)
        spec = reply.experiments[0]
        assert (spec.goal, spec.command, spec.parameters, spec.gpu_required) == (
            "a",
            "echo a",
            {"lr": 0.1},
            1,
        ), body


def test_json_that_cannot_be_read_is_a_note_saying_what_was_expected():
    reply = _experiments('[{"goal": "a", "command": }]')
    assert reply.experiments == [] and "looked like JSON but could not be read" in reply.problems[0]


def test_numbered_and_bold_entries_keep_their_goals():
    reply = _experiments(
        "1. goal: first\n   command: echo 1\n2) goal: second\n   command: echo 2\n"
        "3. **goal**: third\n   **command:** echo 3\n   parameters:\n     lr: 0.1\n     opt: adam"
    )
    assert [(e.goal, e.command, e.parameters) for e in reply.experiments] == [
        ("first", "echo 1", {}),
        ("second", "echo 2", {}),
        ("third", "echo 3", {"lr": 0.1, "opt": "adam"}),
    ]


def test_prose_mentioning_experiments_after_the_block_is_no_false_never_closed_note():
    reply = parse_reply(
        "<experiments>\n- goal: a\n  command: echo a\n</experiments>\n"
        "The <experiments> block above runs the baseline."
    )
    assert len(reply.experiments) == 1 and reply.problems == []


def test_experiments_over_the_cap_are_refused_with_a_note():
    body = "\n".join(f"- goal: e{i}\n  command: echo {i}" for i in range(12))
    reply = _experiments(body)
    reply.cap_experiments(8)
    assert [e.goal for e in reply.experiments] == [f"e{i}" for i in range(8)]
    assert "4 of your 12 experiments were refused" in reply.problems[-1]
    assert "at most 8 run per iteration" in reply.problems[-1]


def test_broken_json_and_endless_reasoning_tags_are_read_quickly():
    started = time.monotonic()
    broken = parse_reply('<experiments>\n["' + 'a\\"' * 30000 + "\n</experiments>")
    thinking = parse_reply(
        "<think>" * 40000
        + '<experiments>\n[{"goal": "g", "command": "echo", /* ok */}]\n</experiments>'
    )
    assert time.monotonic() - started < 5
    assert "looked like JSON but could not be read" in broken.problems[0]
    assert [e.goal for e in thinking.experiments] == ["g"]
