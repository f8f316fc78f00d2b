"""How a research loop hands its API token to the MCP server of its workdir without putting
a secret in `opencode.json` (which the loop commits): `<workdir>/.agents/mcp/credentials.json`
(`.agents/` is never committed), mode 0600, written atomically by the loop at its start and
removed at its end; `{"url", "token", "sweep_id", "agent_id"}`.

The research-agent MCP server (agentsys.mcp.research_server) reads it at each call of a run
tool, so a new loop's token takes effect without restarting the server, and with no file the
run tools say that no loop is running there. Plain Python: no fastmcp, no Django.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from agentsys.run_dir import AGENTS_DIR

CREDENTIALS_FILE = Path(AGENTS_DIR) / "mcp" / "credentials.json"
MAX_BYTES = 64 * 1024


class NoCredentials(Exception):
    """No loop's credentials in the workdir, or unusable ones (the message says which)."""


@dataclass(frozen=True)
class Credentials:
    url: str
    token: str
    sweep_id: str = ""
    agent_id: str = ""


def credentials_path(workdir: str | os.PathLike) -> Path:
    return Path(workdir) / CREDENTIALS_FILE


def write_credentials(workdir: str | os.PathLike, credentials: Credentials) -> Path:
    """Write them for the workdir's MCP server: owner-only (0600, its folder 0700), and
    atomically (a reader sees the old file or the new one, never half of one)."""
    path = credentials_path(workdir)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w") as handle:
            os.fchmod(handle.fileno(), 0o600)  # an earlier leftover kept its own mode
            json.dump(asdict(credentials), handle)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def remove_credentials(workdir: str | os.PathLike, agent_id: str) -> bool:
    """Remove the file if it is still `agent_id`'s (a newer loop in the same workdir may have
    replaced it: that one's stays). True if removed."""
    path = credentials_path(workdir)
    try:
        if read_credentials(workdir).agent_id != agent_id:
            return False
    except NoCredentials:
        if not path.is_file():
            return False  # nothing there, or not a file: left as it is
    path.unlink(missing_ok=True)
    return True


def read_credentials(workdir: str | os.PathLike) -> Credentials:
    """The credentials of the loop running in `workdir`; NoCredentials saying why not."""
    path = credentials_path(workdir)
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise NoCredentials(
            f"no research loop is running in {Path(workdir)}: the run tools work while one "
            f"does (it writes {CREDENTIALS_FILE})"
        ) from None
    except OSError as error:
        raise NoCredentials(f"{path} cannot be read: {error.strerror or error}") from None
    try:
        if len(raw) > MAX_BYTES:
            raise ValueError(f"over {MAX_BYTES} bytes")
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        fields = {name: data.get(name, "") for name in ("url", "token", "sweep_id", "agent_id")}
        if not all(isinstance(value, str) for value in fields.values()):
            raise ValueError("a field is not a string")
        if not fields["url"].startswith(("http://", "https://")) or not fields["token"]:
            raise ValueError("no http(s) url or no token in it")
    except (ValueError, UnicodeDecodeError) as error:
        raise NoCredentials(f"{path} is not a loop's credentials ({error})") from None
    return Credentials(**fields)
