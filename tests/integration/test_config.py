"""A malformed environment value stops start-up with a message naming the variable."""

import os
import re
import subprocess

import pytest

from common import environment as config
from tests.helpers import PYTHON, REPO, child_env


def load(**env):
    return config.load({k: str(v) for k, v in env.items()})


def test_defaults_need_no_configuration():
    cfg = load()
    assert cfg.port == 8000
    assert cfg.database_url is None  # embedded PostgreSQL
    assert cfg.channel_layer == "postgres"
    assert cfg.opencode_url == ""  # make run starts a local OpenCode
    assert (cfg.model_provider, cfg.model_id) == ("demo", "demo-research")  # no key needed
    assert cfg.api_token is None
    assert cfg.home.name == ".agentsys"


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("PORT", "eighty", "whole number"),
        ("PORT", "70000", "between 1 and 65535"),
        ("DEBUG", "maybe", "true or false"),
        ("AGENTSYS_HTTPS", "2", "true or false"),
        ("CHANNEL_LAYER", "kafka", "postgres"),
        ("LOG_LEVEL", "LOUD", "INFO"),
        ("DATABASE_URL", "sqlite:///db.sqlite3", "PostgreSQL only"),
        ("DATABASE_URL", "mysql://root@localhost/db", "PostgreSQL only"),
        ("OPENCODE_URL", "localhost:4096", "http"),
        ("REDIS_URL", "http://localhost", "redis"),
        ("AGENTSYS_GPUS", "two", "count"),
        ("AGENTSYS_GPUS", "0,0", "twice"),
        ("AGENTSYS_HOST_NAME", "bad host!", "letters"),
        ("SECRET_KEY", "short", "too short"),
        ("AGENTSYS_WORKDIR", "/nonexistent/agentsys-workdir", "not a directory"),
        ("AGENTSYS_HSTS_SECONDS", "-1", "between"),
        ("AGENTSYS_WEB_PROCESSES", "0", "between 1 and 64"),
        ("AGENTSYS_WEB_PROCESSES", "many", "whole number"),
    ],
)
def test_bad_value_names_the_variable(name, value, expected):
    with pytest.raises(config.ConfigError) as caught:
        load(**{name: value})
    message = str(caught.value)
    assert message.startswith(f"{name}:")
    assert expected in message


@pytest.mark.parametrize(
    ("value", "indices"), [("2", [0, 1]), ("0,3", [0, 3]), ("3,1", [1, 3]), ("0", [])]
)
def test_declared_gpus(value, indices):
    assert load(AGENTSYS_GPUS=value).gpus == indices


def test_external_database_url_is_accepted():
    cfg = load(DATABASE_URL="postgresql://postgres@127.0.0.1:5432/agentsys")
    assert cfg.database_url == "postgresql://postgres@127.0.0.1:5432/agentsys"


def test_start_up_stops_with_one_clear_line():
    result = subprocess.run(
        [PYTHON, "manage.py", "check"],
        cwd=REPO,
        env=child_env(PORT="abc"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "AgentSys configuration error: PORT: expected a whole number, got 'abc'" in (
        result.stderr
    )
    assert "Traceback" not in result.stderr


def test_web_processes_default_to_one_a_core_at_most_four():
    cores = len(os.sched_getaffinity(0))
    assert load().web_processes == min(4, cores)
    assert load(AGENTSYS_WEB_PROCESSES="AUTO").web_processes == min(4, cores)
    assert load(AGENTSYS_WEB_PROCESSES="3").web_processes == 3


def test_env_example_lists_every_variable():
    example = (REPO / ".env.example").read_text()
    listed = set(re.findall(r"^#?([A-Z_]+)=", example, flags=re.MULTILINE))
    assert listed == set(config.VARIABLES)


def test_the_readme_config_table_gives_the_real_defaults():
    readme = (REPO / "README.md").read_text()
    checked = 0
    for row in re.findall(r"^\| (`[A-Z_]+`.*?) \| (.*?) \| .* \|$", readme, re.MULTILINE):
        names = re.findall(r"`([A-Z_]+)`", row[0])
        defaults = re.findall(r"`([^`]*)`", row[1])
        for index, name in enumerate(names):
            default = config.VARIABLES[name][0]
            if default:  # an unset one is described in words ("generated once", "none")
                assert index < len(defaults) and defaults[index] == default, (name, row[1])
                checked += 1
    assert checked >= 15


def test_the_readme_console_sample_is_what_make_run_prints(agentsys_config, settings):
    """Each line of the README's start-up sample is a line `serve` prints, in order ("..."
    stands for what differs per start)."""
    from io import StringIO
    from types import SimpleNamespace

    from researchagent.management.commands.serve import Command

    agentsys_config(host="127.0.0.1", port=8000)
    out = StringIO()
    login = SimpleNamespace(username="admin", password="8mJw3sSECRET", created=True)
    Command(stdout=out)._announce(login, "ast_q3VTOKEN")
    printed = out.getvalue().splitlines()
    readme = (REPO / "README.md").read_text()
    sample = readme.split("```\nAgentSys is running at", 1)[1].split("```", 1)[0]
    position = 0
    for line in ("AgentSys is running at" + sample).strip().splitlines():
        pattern = re.compile(".*".join(re.escape(piece) for piece in line.split("...")))
        found = next(
            (i for i in range(position, len(printed)) if pattern.fullmatch(printed[i])), None
        )
        assert found is not None, f"README line not printed by serve: {line!r}"
        position = found + 1
