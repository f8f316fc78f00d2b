from django.apps import AppConfig


class McpAppConfig(AppConfig):
    """MCP's Django side: `manage.py mcp` (AgentSys's MCP tools over stdio) and
    `manage.py mcp_config`, the same tools at /mcp on the web server, and serve's wiring of
    the workdir's MCP servers into OpenCode. The servers themselves are plain Python
    (agentsys/mcp/); their REST calls reach the API in process, through the ASGI app the
    settings name, so this app sits just below the project package, which imports it."""

    name = "mcp_app"
    verbose_name = "MCP"
