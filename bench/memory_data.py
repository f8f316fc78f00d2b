"""A synthetic memory table for benchmarks and the index tests: `n` entries spread over many
projects, sessions, sweeps and runs the way agents write them (mostly metrics rows of run-level
executors; plans, context and reflections of sweep-level research agents; messages; a few
session- and project-level entries), generated inside PostgreSQL in one statement."""

from __future__ import annotations

import random
from dataclasses import dataclass

ENTRIES_PER_RUN = 50
RUNS_PER_SWEEP = 4
SWEEPS_PER_SESSION = 5
SESSIONS_PER_PROJECT = 10

_POPULATE = """
INSERT INTO memory_app_memoryentry
    (key, type, agent_id, target_id, project, session, sweep, run, role, tags, data,
     active, acked_at, created_at, updated_at)
SELECT
    %(prefix)s || lpad(to_hex(i), 12 - length(%(prefix)s), '0'),
    CASE
        WHEN k < 10 THEN 'metrics' WHEN k = 10 THEN 'alert' WHEN k = 11 THEN 'result'
        WHEN k = 12 THEN 'raw_file' WHEN k IN (13, 15, 18) THEN 'context' WHEN k = 14 THEN 'plan'
        WHEN k IN (16, 19) THEN 'reflection' ELSE 'message' END,
    CASE
        WHEN k <= 13 THEN 'executor-r' || r WHEN k <= 17 THEN 'research-w' || w
        WHEN k = 18 THEN 'research-s' || s ELSE 'session-p' || p END,
    CASE WHEN k = 17 THEN 'executor-r' || r ELSE '' END,
    'proj-' || p,
    CASE WHEN k = 19 THEN '' ELSE 'sess-' || s END,
    CASE WHEN k >= 18 THEN '' ELSE 'sweep-' || w END,
    CASE WHEN k <= 13 THEN 'run-' || r ELSE '' END,
    CASE WHEN k <= 13 THEN 'executor' ELSE 'orchestrator' END,
    CASE WHEN i %% 3 = 0
        THEN ARRAY[tag, (ARRAY['lr', 'reward', 'loss', 'batch', 'arch', 'data'])[1 + i %% 6]]
        ELSE ARRAY[tag] END,
    CASE WHEN k < 10 THEN jsonb_build_object('_step', i, 'loss', round((1 + (i %% 97) / 50.0), 4))
        ELSE jsonb_build_object('text', 'entry ' || i || ' of ' || 'run-' || r) END,
    i %% 53 <> 0,
    CASE WHEN k = 17 AND i %% 2 = 0 THEN now() ELSE NULL END,
    now() - make_interval(secs => (%(n)s::int - i)),
    now()
FROM (
    SELECT i, i %% 20 AS k, r, r / %(rps)s::int AS w, r / %(rps)s::int / %(sps)s::int AS s,
           r / %(rps)s::int / %(sps)s::int / %(spp)s::int AS p,
           (ARRAY['lr', 'reward', 'loss', 'batch', 'arch', 'data', 'opt', 'sched'])[1 + i %% 8]
               AS tag
    FROM (SELECT i, ((i::bigint * 7919) %% %(runs)s::int)::int AS r
          FROM generate_series(1, %(n)s::int) AS i) AS g
) AS spread
"""


@dataclass(frozen=True)
class World:
    entries: int
    sessions_per_project: int = SESSIONS_PER_PROJECT  # a huge value: one busy project

    @property
    def runs(self) -> int:
        return max(1, self.entries // ENTRIES_PER_RUN)

    def populate(self, cursor, prefix: str = "") -> None:
        cursor.execute(
            _POPULATE,
            {
                "n": self.entries,
                "runs": self.runs,
                "prefix": prefix,
                "rps": RUNS_PER_SWEEP,
                "sps": SWEEPS_PER_SESSION,
                "spp": self.sessions_per_project,
            },
        )
        cursor.execute("ANALYZE memory_app_memoryentry")

    def run_agent(self, rng: random.Random) -> tuple[str, dict]:
        """A run-level executor that has entries: its id and scope."""
        r = rng.randrange(self.runs)
        w = r // RUNS_PER_SWEEP
        s = w // SWEEPS_PER_SESSION
        p = s // self.sessions_per_project
        scope = {"project": f"proj-{p}", "session": f"sess-{s}", "sweep": f"sweep-{w}"}
        return f"executor-r{r}", {**scope, "run": f"run-{r}"}

    def sweep_agent(self, rng: random.Random) -> tuple[str, dict]:
        _, scope = self.run_agent(rng)
        w = scope["sweep"].removeprefix("sweep-")
        return f"research-w{w}", {k: scope[k] for k in ("project", "session", "sweep")}
