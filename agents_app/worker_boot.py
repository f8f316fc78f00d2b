"""Forkserver preload for runagentd's workers: import Django once, in the forkserver, so each
forked worker starts in milliseconds. Connections are closed here so that no child inherits
(and corrupts) a socket of the forkserver's."""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "researchagent.settings")
django.setup()

from django.db import connections  # noqa: E402

connections.close_all()
