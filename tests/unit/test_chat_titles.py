"""A chat's title as AgentSys writes it (agentsys.chat.titles), without OpenCode: the stand-in
title, the model's answer cleaned, its paid steps keyed for the ledger, and a failure."""

from __future__ import annotations

from agentsys.chat.titles import KEY_PREFIX, clean_title, provisional_title, read_answer


def answer(text: str, *, error: dict | None = None) -> list[dict]:
    info = {"role": "assistant", "id": "msg_a", "providerID": "demo", "modelID": "small"}
    if error:
        info["error"] = error
    return [
        {"info": {"role": "user", "id": "msg_u"}, "parts": [{"type": "text", "text": "q"}]},
        {
            "info": info,
            "parts": [
                {"type": "text", "text": text},
                {
                    "type": "step-finish",
                    "id": "prt_1",
                    "tokens": {"input": 700, "output": 6, "cache": {"read": 0, "write": 0}},
                    "cost": 0.0021,
                },
            ],
        },
    ]


def test_the_stand_in_title_is_the_first_message_on_one_line_cut_short():
    assert provisional_title("  What is\nin my   project? ") == "What is in my project?"
    assert provisional_title("x" * 80) == "x" * 50 + "..."


def test_the_written_title_is_its_first_line_without_thinking_or_quotes():
    assert clean_title('<think>hmm</think>\n\n"Postgres API connection"\nmore') == (
        "Postgres API connection"
    )
    assert clean_title("Title: **Rate limiting**") == "Rate limiting"
    assert len(clean_title("y" * 300)) == 100


def test_its_steps_are_keyed_as_a_title_and_its_text_is_the_title():
    written = read_answer(answer("Debugging production 500 errors"))
    assert written.text == "Debugging production 500 errors" and written.error == ""
    [step] = written.steps
    assert step["key"] == KEY_PREFIX + "prt_1"
    assert (step["input_tokens"], step["output_tokens"], step["usd"]) == (700, 6, 0.0021)
    assert (step["provider"], step["model"]) == ("demo", "small")


def test_a_failed_call_keeps_its_paid_steps_and_says_why():
    failed = read_answer(answer("", error={"name": "APIError", "data": {"message": "429"}}))
    assert failed.error == "429" and failed.text == "" and len(failed.steps) == 1
    assert read_answer([]).error == "no title"
    assert read_answer(answer("Half a"), "no title within 60 s").error.startswith("no title")
