"""Each xdist worker's test database, copied from one migrated once.

pytest-django makes each worker's test database by running every migration in it: four
workers, four migrations at once, each ~6 CPU-s at the start of a suite already short of CPU.
Here the first worker to need one migrates a template
(`<test name>_tpl_<host hash>_<controller pid>`),
under a lock; every worker then copies it (CREATE DATABASE ... TEMPLATE: milliseconds). The
controller drops the template when the session ends, and any left by a session that was
killed (its controller gone) when the next one starts.

Only under xdist: a plain pytest (the child suites of test_external_database and
test_postgres_restart among them) makes its database as Django does.
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
import tempfile
import warnings
from pathlib import Path

from tests.helpers import file_lock, pid_alive

# A template's name says whose it is: this machine (a server may be shared) and the pid of the
# session's controller, the workers' parent.
TEMPLATE_MARK = "_tpl_" + hashlib.sha256(socket.gethostname().encode()).hexdigest()[:6] + "_"


def template_name(worker_database: str, controller_pid: int) -> str:
    """test_agentsys_gw0 -> test_agentsys_tpl_<host>_<controller pid>."""
    base = re.sub(r"_gw\d+$", "", worker_database)
    return f"{base}{TEMPLATE_MARK}{controller_pid}"


def install() -> None:
    """On an xdist worker: make Django's PostgreSQL test-database creation copy the template."""
    from django.db.backends.postgresql.creation import DatabaseCreation

    if getattr(DatabaseCreation.create_test_db, "from_template", False):
        return
    migrate_into = DatabaseCreation.create_test_db

    def create_test_db(self, verbosity=1, autoclobber=False, serialize=True, keepdb=False):
        if keepdb:  # --reuse-db: the worker's own database, as pytest-django keeps it
            return migrate_into(self, verbosity, autoclobber, serialize, keepdb)
        worker_database = self._get_test_db_name()
        template = template_name(worker_database, os.getppid())
        with file_lock(_lock_path(template)):
            if not _exists(self, template):
                test_settings = self.connection.settings_dict["TEST"]
                test_settings["NAME"] = template
                try:
                    migrate_into(self, verbosity, autoclobber, serialize=False)
                finally:
                    test_settings["NAME"] = worker_database
                self.connection.close()  # a template may have no session open on it
                self.connection.close_pool()
            with self._nodb_cursor() as cursor:
                cursor.execute(f"DROP DATABASE IF EXISTS {self._quote_name(worker_database)}")
                cursor.execute(
                    f"CREATE DATABASE {self._quote_name(worker_database)} "
                    f"TEMPLATE {self._quote_name(template)}"
                )
        _use(self.connection, worker_database)
        if serialize:
            self.connection._test_serialized_contents = self.serialize_db_to_string()
        self.connection.ensure_connection()
        return worker_database

    create_test_db.from_template = True
    DatabaseCreation.create_test_db = create_test_db


def drop_templates(config, *, only_this_controller: bool) -> None:
    """On the controller: drop this session's template, or (at its start) those whose
    controller is gone."""
    from django.db import connection
    from pytest_django.plugin import blocking_manager_key

    try:
        with config.stash[blocking_manager_key].unblock():
            _drop_templates(connection, only_this_controller)
    except Exception as error:  # the next session drops it: say so, fail nothing
        warnings.warn(f"test database templates left in place: {error}", stacklevel=1)


def _drop_templates(connection, only_this_controller: bool) -> None:
    with connection.creation._nodb_cursor() as cursor:
        cursor.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE %s",
            [f"%{TEMPLATE_MARK}%"],
        )
        for (name,) in cursor.fetchall():
            pid_text = name.rpartition(TEMPLATE_MARK)[2]
            if TEMPLATE_MARK not in name or not pid_text.isdigit():
                continue  # LIKE reads "_" as any one character
            pid = int(pid_text)
            mine = pid == os.getpid()
            if mine if only_this_controller else (not mine and not pid_alive(pid)):
                cursor.execute(f"DROP DATABASE IF EXISTS {connection.ops.quote_name(name)}")
                _lock_path(name).unlink(missing_ok=True)


def _use(connection, name: str) -> None:
    from django.conf import settings

    connection.close()
    settings.DATABASES[connection.alias]["NAME"] = name
    connection.settings_dict["NAME"] = name


def _exists(creation, name: str) -> bool:
    with creation._nodb_cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
        return cursor.fetchone() is not None


def _lock_path(template: str) -> Path:
    return Path(tempfile.gettempdir()) / f"agentsys-{template}.lock"
