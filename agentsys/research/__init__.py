"""The research loop's parts: its state, workspace, prompts' inputs and the
parsing of the model's replies. The agent that drives them is agentsys.agents.research."""
