"""AgentSys agent runtime: plain Python, no web. Django reaches it only through services."""
