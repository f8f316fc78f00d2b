"""The text outside code (issue 35 item 1): what a model quotes is blanked, what it means is
kept, and positions never move."""

from hypothesis import given, settings
from hypothesis import strategies as st

from agentsys.reply_text import outside_code


def test_inline_code_is_blanked_and_positions_are_kept():
    text = "I will answer with `<promise>DONE</promise>` later."
    plain = outside_code(text)
    assert len(plain) == len(text) and "promise" not in plain
    assert plain.startswith("I will answer with ") and plain.endswith(" later.")


def test_a_code_block_is_blanked_but_its_lines_remain():
    text = "<summary>s</summary>\n```\n<promise>DONE</promise>\n```\nafter"
    plain = outside_code(text)
    assert "DONE" not in plain and plain.count("\n") == text.count("\n")
    assert "<summary>s</summary>" in plain and plain.endswith("after")


def test_a_markdown_fence_and_a_whole_answer_fence_are_read():
    document = "Here it is:\n```markdown\n<promise>DONE</promise>\n```\nThanks."
    assert "<promise>DONE</promise>" in outside_code(document)
    assert "```" not in outside_code(document)
    whole = "```\n<summary>s</summary>\n```\n"
    assert "<summary>s</summary>" in outside_code(whole)


def test_a_yaml_fence_after_the_answer_is_quoted():
    text = "<promise>CONTINUE</promise>\n```yaml\n<promise>DONE</promise>\n```"
    assert "DONE" not in outside_code(text)


def test_inline_code_inside_an_unwrapped_fence_is_still_quoted():
    text = "```md\nsay `<promise>DONE</promise>` when done\n```"
    assert "promise" not in outside_code(text)


def test_an_unclosed_fence_keeps_its_text():
    text = "<experiments>\n```yaml\n- goal: a\n</experiments>"
    assert "</experiments>" in outside_code(text)


def test_reasoning_parts_are_blanked_even_without_their_opening_tag():
    assert "DONE" not in outside_code("<think>say <promise>DONE</promise></think>answer")
    plain = outside_code("the template opened it <promise>DONE</promise></think>\nreal")
    assert "DONE" not in plain and plain.endswith("real")


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(["`", "```", "```md\n", "\n", "a", "<think>", "</think>", " "])).map(
        "".join
    )
)
def test_the_length_never_changes(text):
    assert len(outside_code(text)) == len(text)
