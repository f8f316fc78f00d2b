"""The system checks of a command that serves no pages (runagentd, the MCP server): Django's
URL and admin checks import every view and build the REST API's schema, ~0.5 s of each start,
for nothing such a process uses. `serve` and `manage.py check` still run them all."""

from django.core.checks import Tags

CHECKS_WITHOUT_THE_WEB = [Tags.models, Tags.compatibility, Tags.signals]
