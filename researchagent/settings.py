"""Django settings: every value comes from the environment through common.environment."""

from __future__ import annotations

import importlib.util
import os
import secrets
from pathlib import Path

import environ

from common import environment as agentsys_config
from researchagent.embedded_db import DATABASE_NAME, EmbeddedPostgres

BASE_DIR = agentsys_config.BASE_DIR
AGENTSYS = agentsys_config.load_or_exit()
AGENTSYS_HOME = AGENTSYS.home
AGENTSYS_WORKDIR = AGENTSYS.workdir or AGENTSYS_HOME / "demo-workspace"
AGENTSYS_HOME.mkdir(parents=True, exist_ok=True)


def _secret_key() -> str:
    if AGENTSYS.secret_key:
        return AGENTSYS.secret_key
    # No key configured: make one once and keep it, so logins survive restarts.
    key_file = AGENTSYS_HOME / "secret_key"
    if not key_file.exists():
        key_file.touch(mode=0o600)
        key_file.write_text(secrets.token_urlsafe(50))
    return key_file.read_text().strip()


SECRET_KEY = _secret_key()
DEBUG = AGENTSYS.debug
ALLOWED_HOSTS = AGENTSYS.allowed_hosts
CSRF_TRUSTED_ORIGINS = AGENTSYS.csrf_trusted_origins

# -- Database: PostgreSQL only (also the event log, the channel layer and the queue) ------
if AGENTSYS.database_url:
    EMBEDDED_POSTGRES = None
    _default_db = environ.Env.db_url_config(AGENTSYS.database_url)
else:
    EMBEDDED_POSTGRES = EmbeddedPostgres(AGENTSYS_HOME)
    EMBEDDED_POSTGRES.acquire()  # starts the server, or joins the running one
    _default_db = {
        "NAME": DATABASE_NAME,
        "USER": "postgres",
        "PASSWORD": "",
        "HOST": str(EMBEDDED_POSTGRES.socket_dir),  # unix socket only: no TCP port is opened
        "PORT": "",
    }
_default_db["ENGINE"] = "django.db.backends.postgresql"
# `postgresql://u@/db?host=/socket/dir` arrives as OPTIONS["host"]; the channel layer and
# LISTEN connections read HOST, so keep it there.
if not _default_db.get("HOST") and "host" in _default_db.get("OPTIONS", {}):
    _default_db["HOST"] = _default_db["OPTIONS"].pop("host")
_default_db.setdefault("CONN_HEALTH_CHECKS", True)

# The web process takes its connections from a pool (researchagent.webserver sets this): a request
# would otherwise open a PostgreSQL connection of its own, a server process forked for each
# (issue 25: the largest part of a POST /api/runs). Not runagentd and its workers: they hold
# their connections, and a pool's threads do not survive the forkserver's fork.
WEB_POOL_VARIABLE = "AGENTSYS_WEB_DB_POOL"


def _with_pool(database: dict) -> dict:
    options = {**database.get("OPTIONS", {}), "pool": {"min_size": 2, "max_size": 10}}
    return {**database, "OPTIONS": options, "CONN_HEALTH_CHECKS": False}


DATABASES = {
    "default": _with_pool(_default_db) if os.environ.get(WEB_POOL_VARIABLE) else _default_db,
    # channels-postgres opens its own connections through this alias.
    "channels_postgres": {**_default_db, "TEST": {"MIRROR": "default"}},
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# -- Channel layer: works across processes with nothing but PostgreSQL by default ----------
if AGENTSYS.channel_layer == "postgres":
    # Live delivery is best effort (readers fill gaps from the event table), so its messages
    # need no fsync each: without one a live event reaches the browser in a few ms.
    _layer_options = dict(_default_db.get("OPTIONS", {}))
    _layer_options["options"] = " ".join(
        filter(None, [_layer_options.get("options", ""), "-c synchronous_commit=off"])
    )
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "events_app.channel_layer.ReconnectingPostgresChannelLayer",
            # TIME_ZONE must be present or get_channel_layer() silently returns None.
            "CONFIG": {**_default_db, "TIME_ZONE": None, "OPTIONS": _layer_options},
        }
    }
elif AGENTSYS.channel_layer == "redis":
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [AGENTSYS.redis_url]},
        }
    }
else:  # "memory": single process only, for tests that need no cross-process delivery
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# -- Applications ---------------------------------------------------------------------------
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "channels",
    "channels_postgres",
    "template_partials",
    "researchagent",
    "sessions_app",
    "events_app",
    "hosts_app",
    "agents_app",
    "ledger_app",
    "scheduler_app",
    "memory_app",
    "accounts_app",
    "research_app",
    "runtime_app",
    "mcp_app",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "common.api_errors.ApiErrorsAsJson",
    "common.db_unavailable.DatabaseUnavailableMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "common.nul_guard.RejectNulCharacters",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "accounts_app.auth.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

# A request body Django reads (JSON included): POST /api/runs/batch takes up to 1,000 runs,
# 16 KiB each on average (Django's default, 2.5 MiB, is 2.5 KiB a run). Past it: a 413.
DATA_UPLOAD_MAX_MEMORY_SIZE = 16 * 1024 * 1024

ROOT_URLCONF = "researchagent.urls"
ASGI_APPLICATION = "researchagent.asgi.application"

# django-ninja is not an installed app: Django imports each app in every process (runagentd,
# its forkserver, each manage.py command), and ninja's import pulls in pydantic: ~0.2 s of CPU
# a process, a quarter of its start, for nothing but the web's API docs. The docs page's
# template and Swagger UI's assets are read from the package's folders instead (found without
# importing it), so the page still serves them itself, no CDN (researchagent/api_docs.py).
NINJA_PACKAGE = Path(importlib.util.find_spec("ninja").origin).parent

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates", NINJA_PACKAGE / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "researchagent.health.daemon_banner",
            ],
        },
    },
]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static", NINJA_PACKAGE / "static"]
STATIC_ROOT = AGENTSYS_HOME / "staticfiles"
STATIC_ROOT.mkdir(exist_ok=True)  # WhiteNoise warns on every request until it exists
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

# -- Security: strict by default, HTTPS hardening when served behind TLS -------------------
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # the browser UI reads it to send X-CSRFToken on fetch()
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
if AGENTSYS.https:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = True
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = AGENTSYS.hsts_seconds
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": AGENTSYS.log_level},
    "loggers": {
        "django.db.backends": {"level": "INFO"},
        "embedded_postgres": {"level": "WARNING"},
        # It warns on every send to a group nobody has joined yet: normal when no one watches.
        "channels_postgres.core": {"level": "ERROR"},
        # A line per request to OpenCode or the model: noise on the console.
        "httpx": {"level": "WARNING"},
    },
}
