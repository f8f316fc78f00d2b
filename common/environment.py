"""Everything AgentSys reads from the environment, parsed and checked in one place.

Each variable is read by exactly one function here. A malformed value raises
`ConfigError` whose message starts with the variable's name, so start-up stops
with a line a person can act on instead of a traceback deep inside Django.
The list of variables is mirrored in `.env.example` (a test keeps them in step).
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import environ

from agentsys.fair_share import InvalidShares, parse_shares
from agentsys.scheduling import InvalidLabels, parse_labels

BASE_DIR = Path(__file__).resolve().parent.parent


class ConfigError(Exception):
    """A variable in the environment has a value AgentSys cannot use."""


# name -> (default shown in .env.example, one-line description)
VARIABLES: dict[str, tuple[str, str]] = {
    "AGENTSYS_HOME": (".agentsys", "State folder: embedded PostgreSQL data, secret key, logs"),
    "AGENTSYS_WORKDIR": ("", "Project the agents work in; unset = demo workspace in AGENTSYS_HOME"),
    "AGENTSYS_PROJECT": ("", "Memory scope name of the project; unset = the workdir's folder name"),
    "DATABASE_URL": ("", "External PostgreSQL; unset = embedded PostgreSQL in AGENTSYS_HOME"),
    "HOST": ("127.0.0.1", "Address the web server binds to"),
    "PORT": ("8000", "Port the web server listens on"),
    "SECRET_KEY": ("", "Django secret key; unset = generated once into AGENTSYS_HOME"),
    "DEBUG": ("false", "Django debug mode (never in production)"),
    "ALLOWED_HOSTS": ("127.0.0.1,localhost", "Host names the web server answers to"),
    "CSRF_TRUSTED_ORIGINS": ("", "Extra origins allowed to post forms, e.g. https://lab.example"),
    "AGENTSYS_HTTPS": ("false", "Served behind TLS: secure cookies, HSTS, redirect to https"),
    "AGENTSYS_HSTS_SECONDS": ("31536000", "HSTS max-age when AGENTSYS_HTTPS is on"),
    "CHANNEL_LAYER": ("postgres", "Live event transport: postgres (default), redis or memory"),
    "REDIS_URL": ("redis://127.0.0.1:6379/0", "Redis server when CHANNEL_LAYER=redis"),
    "MODEL_PROVIDER": ("demo", "LLM provider for OpenCode; demo = the built-in scripted model"),
    "MODEL_ID": ("demo-research", "LLM model id at that provider"),
    "MODEL_BASE_URL": ("", "OpenAI-compatible server of your own (vLLM, Ollama): its /v1 URL"),
    "AGENTSYS_DEMO_SECONDS": (
        "60",
        "About how long the demo model's research loop lasts, to try Pause, Steer and Stop "
        "(0 = as fast as it can)",
    ),
    "OPENCODE_URL": ("", "OpenCode server the agents talk to; unset = make run starts one"),
    "OPENCODE_SERVER_USERNAME": ("opencode", "OpenCode basic-auth user"),
    "OPENCODE_SERVER_PASSWORD": ("", "OpenCode basic-auth password; unset = generated per start"),
    "MODEL_FIRST_TOKEN_TIMEOUT": (
        "180",
        "Seconds a research agent waits for the model's first output",
    ),
    "MODEL_RESPONSE_TIMEOUT": ("600", "Seconds a whole model response may take"),
    "MODEL_IDLE_TIMEOUT": ("120", "Seconds the OpenCode event stream may stay silent"),
    "RESEARCH_AGENT_USER_AUTH_TOKEN": ("", "API token for scripts (X-Auth-Token or Bearer)"),
    "AGENTSYS_HOST_NAME": ("", "Name this runagentd registers its host under; unset = hostname"),
    "AGENTSYS_GPUS": ("", "Declared GPUs on hosts without NVML: a count (2) or indices (0,1)"),
    "AGENTSYS_HOST_LABELS": (
        "",
        "What runs may require of this host: name=value,... (gpu_model and gpu_memory_gb "
        "come from its GPUs unless named here)",
    ),
    "AGENTSYS_SCHEDULER_POLICY": (
        "backfill",
        "GPU queue policy: backfill (the blocked head keeps a reservation; later runs start "
        "where they cannot delay it), fifo (first fit) or reserve (the head holds every host)",
    ),
    "AGENTSYS_QUEUE_SHARES": (
        "",
        "Fair share of the GPU queue per person: username=share,... (unnamed: 1 each)",
    ),
    "AGENTSYS_FOREIGN_GPU_MIN_MB": (
        "256",
        "Leave a GPU alone while processes not started here hold this many MiB on it (0 = off)",
    ),
    "AGENTSYS_METRICS_COMPACT_AFTER_DAYS": (
        "0",
        "Thin metric points older than this many days once a day, keeping each chart's shape "
        "(0 = keep every point)",
    ),
    "AGENTSYS_LOG_DB_CAP_MB": (
        "64",
        "MiB of each run's log this host ships to the database for webs on other machines",
    ),
    "AGENTSYS_RUN_BACKEND": (
        "subprocess",
        "Where runs go unless they say: subprocess (this host's GPUs) or slurm (sbatch)",
    ),
    "AGENTSYS_SLURM": (
        "auto",
        "Submit SLURM runs from this host: auto (when sbatch answers at start), on, off",
    ),
    "AGENTSYS_SLURM_MAX_JOBS": ("200", "SLURM jobs one runagentd keeps submitted at once"),
    "AGENTSYS_SLURM_PARTITION": ("", "Default sbatch --partition for SLURM runs"),
    "AGENTSYS_SLURM_ACCOUNT": ("", "Default sbatch --account"),
    "AGENTSYS_SLURM_TIME": ("", "Default sbatch --time (e.g. 4:00:00)"),
    "AGENTSYS_SLURM_QOS": ("", "Default sbatch --qos"),
    "AGENTSYS_SLURM_CONSTRAINT": ("", "Default sbatch --constraint"),
    "AGENTSYS_AGENT_CLASSES": (
        "",
        "Extra agent classes runagentd may spawn (dotted paths, comma-separated)",
    ),
    "AGENTSYS_ADMIN_USERNAME": ("admin", "Admin account created on first start"),
    "AGENTSYS_ADMIN_PASSWORD": ("", "Its password; unset = a one-time password is printed"),
    "AGENTSYS_ADMIN_EMAIL": ("", "Its e-mail address"),
    "LOG_LEVEL": ("INFO", "Logging level: DEBUG, INFO, WARNING, ERROR"),
    "AGENTSYS_WEB_PROCESSES": (
        "auto",
        "Web processes sharing the port (auto: one a CPU core, at most 4)",
    ),
    "AGENTSYS_ACCESS_LOG": ("false", "Print one line per HTTP request (daphne's access log)"),
}

_LOG_LEVELS = {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}
_CHANNEL_LAYERS = {"postgres", "redis", "memory"}
_HOST_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


@dataclass(frozen=True)
class Config:
    home: Path
    workdir: Path | None
    project: str
    database_url: str | None
    host: str
    port: int
    secret_key: str | None
    debug: bool
    allowed_hosts: list[str]
    csrf_trusted_origins: list[str]
    https: bool
    hsts_seconds: int
    channel_layer: str
    redis_url: str
    model_provider: str
    model_id: str
    model_base_url: str
    opencode_url: str
    opencode_username: str
    opencode_password: str
    api_token: str | None
    host_name: str
    gpus: list[int] | None
    host_labels: dict
    extra_agent_classes: frozenset[str]
    scheduler_policy: str
    queue_shares: dict
    foreign_gpu_min_mb: int
    run_backend: str
    slurm: str
    slurm_max_jobs: int
    slurm_options: dict
    admin_username: str
    admin_password: str | None
    admin_email: str
    log_level: str
    access_log: bool = False
    web_processes: int = 1  # AGENTSYS_WEB_PROCESSES
    # Seconds (MODEL_FIRST_TOKEN_TIMEOUT, MODEL_RESPONSE_TIMEOUT, MODEL_IDLE_TIMEOUT).
    model_first_token_timeout: int = 180
    model_response_timeout: int = 600
    model_idle_timeout: int = 120
    log_db_cap_mb: int = 64  # AGENTSYS_LOG_DB_CAP_MB
    metrics_compact_after_days: int = 0  # AGENTSYS_METRICS_COMPACT_AFTER_DAYS
    demo_seconds: int = 60  # AGENTSYS_DEMO_SECONDS

    @property
    def api_url(self) -> str:
        """Where this host reaches the web server (HOST, PORT): a wildcard bind address is
        reached on the loopback."""
        wildcards = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}  # noqa: S104
        host = wildcards.get(self.host, self.host)
        return f"http://[{host}]:{self.port}" if ":" in host else f"http://{host}:{self.port}"


def _raw(env: environ.Env, name: str) -> str:
    return env.str(name, default=VARIABLES[name][0]).strip()


def _bool(env: environ.Env, name: str) -> bool:
    value = _raw(env, name).lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off", ""}:
        return False
    raise ConfigError(f"{name}: expected true or false, got {value!r}")


def _int(env: environ.Env, name: str, *, low: int, high: int) -> int:
    value = _raw(env, name)
    try:
        number = int(value)
    except ValueError:
        raise ConfigError(f"{name}: expected a whole number, got {value!r}") from None
    if not low <= number <= high:
        raise ConfigError(f"{name}: must be between {low} and {high}, got {number}")
    return number


def _choice(env: environ.Env, name: str, choices: set[str], *, upper: bool = False) -> str:
    value = _raw(env, name)
    value = value.upper() if upper else value.lower()
    if value not in choices:
        raise ConfigError(f"{name}: expected one of {', '.join(sorted(choices))}, got {value!r}")
    return value


def _url(env: environ.Env, name: str, schemes: set[str], *, required: bool = True) -> str:
    value = _raw(env, name)
    if not value and not required:
        return ""
    parsed = urlparse(value)
    if parsed.scheme not in schemes or not (parsed.netloc or parsed.query):
        raise ConfigError(
            f"{name}: expected a {'/'.join(sorted(schemes))} URL such as "
            f"{sorted(schemes)[0]}://host:port, got {value!r}"
        )
    return value.rstrip("/")


def _list(env: environ.Env, name: str) -> list[str]:
    return [item.strip() for item in _raw(env, name).split(",") if item.strip()]


def _gpus(env: environ.Env) -> list[int] | None:
    """`AGENTSYS_GPUS=2` declares GPUs 0 and 1; `AGENTSYS_GPUS=0,3` declares those indices."""
    value = _raw(env, "AGENTSYS_GPUS")
    if not value:
        return None
    parts = [p.strip() for p in value.split(",")]
    if not all(p.isdigit() for p in parts):
        raise ConfigError(
            f"AGENTSYS_GPUS: expected a count (2) or a list of indices (0,1), got {value!r}"
        )
    if len(parts) == 1 and "," not in value:
        return list(range(int(parts[0])))
    indices = [int(p) for p in parts]
    if len(set(indices)) != len(indices):
        raise ConfigError(f"AGENTSYS_GPUS: an index appears twice in {value!r}")
    return sorted(indices)


def _queue_shares(env: environ.Env) -> dict:
    try:
        return parse_shares(_raw(env, "AGENTSYS_QUEUE_SHARES"))
    except InvalidShares as error:
        raise ConfigError(f"AGENTSYS_QUEUE_SHARES: {error}") from None


def _host_labels(env: environ.Env) -> dict:
    try:
        return parse_labels(_raw(env, "AGENTSYS_HOST_LABELS"))
    except InvalidLabels as error:
        raise ConfigError(f"AGENTSYS_HOST_LABELS: {error}") from None


def _database_url(env: environ.Env) -> str | None:
    value = _raw(env, "DATABASE_URL")
    if not value:
        return None
    if urlparse(value).scheme not in {"postgres", "postgresql", "pgsql"}:
        raise ConfigError(
            "DATABASE_URL: AgentSys runs on PostgreSQL only; expected "
            f"postgresql://user:password@host:port/name, got scheme {urlparse(value).scheme!r}"
        )
    try:
        environ.Env.db_url_config(value)
    except Exception as exc:
        raise ConfigError(f"DATABASE_URL: cannot be parsed ({exc})") from None
    return value


def _path(env: environ.Env, name: str) -> Path | None:
    value = _raw(env, name)
    if not value:
        return None
    path = Path(value).expanduser()
    return path if path.is_absolute() else (BASE_DIR / path)


def check_host_name(name: str) -> str:
    if not _HOST_NAME_RE.match(name):
        raise ConfigError(f"letters, digits, '.', '_' and '-' only (at most 63), got {name!r}")
    return name


def load(environment: dict[str, str] | None = None) -> Config:
    """Parse the process environment (or `environment`, for tests) into a Config."""
    env = environ.Env()
    if environment is not None:
        env.ENVIRON = environment
    home = _path(env, "AGENTSYS_HOME") or BASE_DIR / ".agentsys"
    workdir = _path(env, "AGENTSYS_WORKDIR")
    if workdir is not None and not workdir.is_dir():
        raise ConfigError(f"AGENTSYS_WORKDIR: {workdir} is not a directory")
    project = _raw(env, "AGENTSYS_PROJECT") or (workdir.name if workdir else "demo")
    port = _int(env, "PORT", low=1, high=65535)
    host_name = _raw(env, "AGENTSYS_HOST_NAME") or socket.gethostname()
    try:
        check_host_name(host_name)
    except ConfigError as exc:
        raise ConfigError(f"AGENTSYS_HOST_NAME: {exc}") from None
    secret_key = _raw(env, "SECRET_KEY") or None
    if secret_key is not None and len(secret_key) < 32:
        raise ConfigError("SECRET_KEY: too short; use at least 32 random characters")
    return Config(
        home=home,
        workdir=workdir,
        project=project,
        database_url=_database_url(env),
        host=_raw(env, "HOST"),
        port=port,
        secret_key=secret_key,
        debug=_bool(env, "DEBUG"),
        allowed_hosts=_list(env, "ALLOWED_HOSTS"),
        csrf_trusted_origins=_list(env, "CSRF_TRUSTED_ORIGINS"),
        https=_bool(env, "AGENTSYS_HTTPS"),
        hsts_seconds=_int(env, "AGENTSYS_HSTS_SECONDS", low=0, high=10**9),
        channel_layer=_choice(env, "CHANNEL_LAYER", _CHANNEL_LAYERS),
        redis_url=_url(env, "REDIS_URL", {"redis", "rediss", "unix"}),
        model_provider=_raw(env, "MODEL_PROVIDER"),
        model_id=_raw(env, "MODEL_ID"),
        model_base_url=_url(env, "MODEL_BASE_URL", {"http", "https"}, required=False),
        opencode_url=_url(env, "OPENCODE_URL", {"http", "https"}, required=False),
        opencode_username=_raw(env, "OPENCODE_SERVER_USERNAME"),
        opencode_password=_raw(env, "OPENCODE_SERVER_PASSWORD"),
        api_token=_raw(env, "RESEARCH_AGENT_USER_AUTH_TOKEN") or None,
        host_name=host_name,
        gpus=_gpus(env),
        host_labels=_host_labels(env),
        extra_agent_classes=frozenset(_list(env, "AGENTSYS_AGENT_CLASSES")),
        scheduler_policy=_choice(env, "AGENTSYS_SCHEDULER_POLICY", {"backfill", "fifo", "reserve"}),
        queue_shares=_queue_shares(env),
        foreign_gpu_min_mb=_int(env, "AGENTSYS_FOREIGN_GPU_MIN_MB", low=0, high=10**7),
        run_backend=_choice(env, "AGENTSYS_RUN_BACKEND", {"subprocess", "slurm"}),
        slurm=_choice(env, "AGENTSYS_SLURM", {"auto", "on", "off"}),
        slurm_max_jobs=_int(env, "AGENTSYS_SLURM_MAX_JOBS", low=1, high=100_000),
        slurm_options=_slurm_options(env),
        admin_username=_raw(env, "AGENTSYS_ADMIN_USERNAME") or "admin",
        admin_password=_raw(env, "AGENTSYS_ADMIN_PASSWORD") or None,
        admin_email=_raw(env, "AGENTSYS_ADMIN_EMAIL"),
        log_level=_choice(env, "LOG_LEVEL", _LOG_LEVELS, upper=True),
        access_log=_bool(env, "AGENTSYS_ACCESS_LOG"),
        web_processes=_web_processes(env),
        model_first_token_timeout=_int(env, "MODEL_FIRST_TOKEN_TIMEOUT", low=1, high=86400),
        model_response_timeout=_int(env, "MODEL_RESPONSE_TIMEOUT", low=1, high=86400),
        model_idle_timeout=_int(env, "MODEL_IDLE_TIMEOUT", low=1, high=86400),
        log_db_cap_mb=_int(env, "AGENTSYS_LOG_DB_CAP_MB", low=0, high=10**6),
        metrics_compact_after_days=_int(
            env, "AGENTSYS_METRICS_COMPACT_AFTER_DAYS", low=0, high=100_000
        ),
        demo_seconds=_int(env, "AGENTSYS_DEMO_SECONDS", low=0, high=3600),
    )


def _web_processes(env: environ.Env) -> int:
    """AGENTSYS_WEB_PROCESSES: a number, or auto: a process a core (each is held to one by
    the GIL), at most 4 (each holds ~130 MB and its own database connections)."""
    if _raw(env, "AGENTSYS_WEB_PROCESSES").lower() == "auto":
        return max(1, min(4, len(os.sched_getaffinity(0))))
    return _int(env, "AGENTSYS_WEB_PROCESSES", low=1, high=64)


def _slurm_options(env: environ.Env) -> dict:
    """The sbatch defaults for SLURM runs, checked as sbatch needs them."""
    from agentsys.slurm.client import SlurmError, check_options

    options = {}
    for option in ("partition", "account", "time", "qos", "constraint"):
        name = f"AGENTSYS_SLURM_{option.upper()}"
        if value := _raw(env, name):
            key = "time_limit" if option == "time" else option
            try:
                check_options(**{key: value})
            except SlurmError as error:
                raise ConfigError(f"{name}: {error}") from None
            options[key] = value
    return options


def dotenv_path() -> Path:
    """Where `.env` is read from (it may not exist: the environment alone is enough)."""
    return BASE_DIR / ".env"


def read_dotenv() -> None:
    """Load `.env` at the checkout root, if present; real environment variables win."""
    dotenv = dotenv_path()
    if dotenv.is_file():
        environ.Env.read_env(str(dotenv), overwrite=False)


def load_or_exit() -> Config:
    """For settings: turn a ConfigError into one clear line and a non-zero exit."""
    read_dotenv()
    try:
        return load()
    except ConfigError as exc:
        raise SystemExit(f"AgentSys configuration error: {exc}") from None
