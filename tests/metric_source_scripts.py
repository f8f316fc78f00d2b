"""One small training script per metric source (issue 20), written as researchers write them:
nothing of AgentSys in them but the jsonl one's file, which is that source's contract.

Each logs `loss` = 1/step and `acc` = step/steps for steps 1..steps, then a NaN loss at
step steps + 1, so a run of any of them has the same curve, the same summary and the same
NaN alert whichever source it came through. `python train_<source>.py [steps]`."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

PY = sys.executable
SOURCES = ("jsonl", "tensorboard", "mlflow", "wandb", "stdout")
# The run page's words for each source (static/js/run_page.js SOURCE_WORDS, the template).
CAPTIONS = {
    "jsonl": "from agent_metrics.jsonl",
    "tensorboard": "from TensorBoard",
    "mlflow": "from MLflow",
    "wandb": "from W&B",
    "stdout": "from printed lines",
}

_HEAD = """
import math, sys
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 10
points = [(s, 1.0 / s, s / steps) for s in range(1, steps + 1)] + [(steps + 1, math.nan, 1.0)]
"""

_BODIES = {
    "jsonl": """
    import json, os
    with open(os.path.join(os.environ["AGENTSYS_RUN_DIR"], "agent_metrics.jsonl"), "a") as out:
        for step, loss, acc in points:
            out.write(json.dumps({"_step": step, "loss": loss, "acc": acc}) + "\\n")
    """,
    # tensorboardX keeps a NaN as it is (it only prints "NaN or Inf found in input tensor.").
    "tensorboard": """
    from tensorboardX import SummaryWriter
    with SummaryWriter("runs/demo", flush_secs=1) as writer:
        for step, loss, acc in points:
            writer.add_scalar("loss", loss, step)
            writer.add_scalar("acc", acc, step)
    """,
    "mlflow": """
    import mlflow
    with mlflow.start_run():
        mlflow.log_params({"lr": 0.1})
        for step, loss, acc in points:
            mlflow.log_metrics({"loss": loss, "acc": acc}, step=step)
    """,
    "wandb": """
    import wandb
    run = wandb.init(project="demo", config={"lr": 0.1})
    for step, loss, acc in points:
        wandb.log({"loss": loss, "acc": acc}, step=step)
    run.finish()
    """,
    "stdout": """
    for step, loss, acc in points:
        print(f"step {step} | loss {loss} | acc {acc}", flush=True)
    """,
}


def write_scripts(folder: Path) -> None:
    """train_<source>.py for every source into folder."""
    for source, body in _BODIES.items():
        text = textwrap.dedent(_HEAD) + textwrap.dedent(body)
        (folder / f"train_{source}.py").write_text(text)


def command(source: str, steps: int = 10) -> str:
    return f"{PY} train_{source}.py {steps}"


def run_env(source: str) -> dict:
    """executor_options for the run: wandb's banner and summary kept out of the log."""
    return {"env": {"WANDB_SILENT": "true"}} if source == "wandb" else {}
