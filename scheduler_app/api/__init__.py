"""REST for the scheduler (django-ninja routers, mounted by researchagent.api): hosts and the
queue (queue), runs and alerts (runs), what a new run must say (run_input), many runs at once
(run_batch), sweeps, metrics. Above services and the concept folders: a router inside runs/
would circle with services."""
