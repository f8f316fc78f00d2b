"""SLURM, in one package: runs as batch jobs (backend "slurm"; docs/architecture.md, "The GPU
queue").

- agentsys.slurm.client: SLURM's own commands (sbatch, squeue, sacct, scancel, scontrol,
  sinfo) as argument lists with timeouts, SlurmError in SLURM's words, and the one parser of
  their output (`|`-separated fields, scontrol's Key=value records).
- agentsys.slurm.poller: runagentd's one squeue (plus at most one sacct) per tick for all its
  SLURM runs, handed to each executor.
- agentsys.slurm.job: an executor's run as a batch job (SlurmRun, Outcome, cancel_leftover).

The SLURM MCP server (agentsys.mcp.slurm_tools) offers the same commands to a model as tools,
parsing their output with the client's parser. Import from the modules; nothing is re-exported
here.
"""
