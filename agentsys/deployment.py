"""What the deployment configures for every agent: its model, the OpenCode server and its
credentials, the model timeouts, the default workdir, where AgentSys's REST API answers, and
this host's name and folders for the runs it checks out.

agentsys reads no environment: the host reads it once (common/environment.py, Django's
settings.AGENTSYS) and runagentd passes this in, through the daemon and its supervisor, to
each agent (`agent.deployment`), in the agent's own worker process too. An agent's config
overrides these values per agent; what neither sets takes the defaults below.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agentsys.opencode import Timeouts


@dataclass(frozen=True)
class Deployment:
    workdir: str = ""  # empty: the agent's own working directory
    model_provider: str = ""
    model_id: str = ""
    opencode_url: str = ""
    opencode_username: str = ""
    opencode_password: str = field(default="", repr=False)
    timeouts: Timeouts = field(default_factory=Timeouts)
    # sbatch defaults for SLURM runs (partition, account, time_limit, qos, constraint); a
    # run's own `slurm` options win.
    slurm_options: dict = field(default_factory=dict)
    # The web server's address (http://host:port), for what an agent hands its MCP tools;
    # empty: none known, and a research loop's run tools answer that no loop runs there.
    api_url: str = ""
    # How much of each run's log its executor ships to the database (agentsys.log_shipping)
    # for a web that cannot read this host's disk; past it, a note says where the rest is.
    log_db_cap_bytes: int = 64 * 2**20
    # This host's name (AGENTSYS_HOST_NAME), and where its executors check out the code of runs
    # whose workdir is on another host (agentsys.agents.run_checkout): one folder per run, and
    # a bare git repository that caches the commits. Empty: under the workdir's .agents/.
    host_name: str = ""
    checkouts_dir: str = ""
    code_cache_dir: str = ""
