"""The research loop reads what a person reads in replies written the way Claude, GPT and
Qwen write them (issue 35): tests/fixtures/model_replies.yaml holds each reply with the
experiments and the promise a person would take from it."""

from collections import Counter

import pytest
import yaml

from agentsys.research.reply import parse_reply
from tests.helpers import REPO

CORPUS = yaml.safe_load((REPO / "tests/fixtures/model_replies.yaml").read_text())


def test_the_corpus_covers_three_families_with_at_least_thirty_replies():
    families = Counter(case["family"] for case in CORPUS)
    assert len(CORPUS) >= 30 and set(families) == {"claude", "gpt", "qwen"}
    assert min(families.values()) >= 10
    assert len({case["name"] for case in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize("case", CORPUS, ids=[case["name"] for case in CORPUS])
def test_the_parser_reads_what_a_person_reads(case):
    reply = parse_reply(case["reply"])
    read = [
        {
            "goal": spec.goal,
            "command": spec.command,
            "parameters": spec.parameters,
            "gpu_required": spec.gpu_required,
        }
        for spec in reply.experiments
    ]
    expected = [
        {"parameters": {}, "gpu_required": 0, **experiment} for experiment in case["experiments"]
    ]
    assert (reply.promise, read) == (case["promise"], expected), reply.problems
