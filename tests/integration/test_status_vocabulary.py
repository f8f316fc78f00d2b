"""One word for each end state (issue 9 item 7): every status that can end uses the words of
agentsys.types.EndState, in the models, in the API schema and in the source; the old words
(`finished`, `completed`) are gone."""

import re
from pathlib import Path

import pytest
from django.apps import apps

from agentsys.types import END_STATE_HELP, END_STATES
from tests.helpers import REPO

# Models whose rows stand for work that ends, and the words they use while it has not.
ENDING = {
    "agents_app.Agent": {"idle", "running", "paused"},
    "scheduler_app.ScheduleRequest": {"queued", "running"},
    "scheduler_app.Run": {"ready", "queued", "running", "paused"},
    "scheduler_app.Sweep": {"draft", "running"},
    "sessions_app.ChatTurn": {"queued", "running"},
}
OLD_WORDS = {"finished", "completed", "succeeded", "success", "complete"}


def _status_values(label: str) -> set[str]:
    return {value for value, _ in apps.get_model(label)._meta.get_field("status").choices}


@pytest.mark.parametrize("label", sorted(ENDING))
def test_every_end_state_of_every_model_is_a_shared_word(label):
    ends = _status_values(label) - ENDING[label]
    assert ends <= END_STATES, f"{label}: {ends - END_STATES} are not agentsys.types.EndState"
    assert {"done", "failed"} <= ends


def test_no_status_anywhere_uses_an_old_word():
    for model in apps.get_models():
        if any(f.name == "status" for f in model._meta.fields):
            assert not _status_values(model._meta.label) & OLD_WORDS, model._meta.label


def test_the_api_schema_lists_the_same_words_and_explains_them():
    from researchagent.api import api

    components = api.get_openapi_schema()["components"]["schemas"]
    for enum_name, label in [
        ("AgentStatus", "agents_app.Agent"),
        ("RequestStatus", "scheduler_app.ScheduleRequest"),
        ("RunStatus", "scheduler_app.Run"),
    ]:
        assert set(components[enum_name]["enum"]) == _status_values(label)
    for schema in ("AgentOut", "AgentNode", "RequestOut", "RunOut"):
        assert END_STATE_HELP in components[schema]["properties"]["status"]["description"]


SOURCES = ["agentsys", "agents_app", "scheduler_app", "sessions_app", "memory_app"]
SOURCES += ["researchagent", "templates", "static", "bench", "skills", "README.md"]
OLD_LITERAL = re.compile(r"""["'`](finished|completed|FINISHED|COMPLETED)["'`]""")
# SLURM's own job states (COMPLETED, ...), which its client and the SLURM executor read and
# the runs never show; OpenCode's tool part states, which the MCP bench waits for.
FOREIGN_WORDS = {
    Path("agentsys/slurm/client.py"),
    Path("agentsys/slurm/job.py"),
    Path("bench/mcp.py"),
}


def test_the_old_words_appear_nowhere_as_a_status_value():
    offenders = []
    for root in SOURCES:
        path = REPO / root
        files = [path] if path.is_file() else sorted(path.rglob("*"))
        for file in files:
            if "migrations" in file.parts or file.suffix not in {".py", ".html", ".js", ".md"}:
                continue
            if file.relative_to(REPO) in FOREIGN_WORDS:
                continue
            for number, line in enumerate(file.read_text().splitlines(), 1):
                if OLD_LITERAL.search(line):
                    offenders.append(f"{file.relative_to(REPO)}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)
