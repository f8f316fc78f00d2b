"""MCP servers AgentSys gives the LLM and any MCP client."""
